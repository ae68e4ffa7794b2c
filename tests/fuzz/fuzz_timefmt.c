/* fuzz_timefmt: RFC 3339 timestamps (run_at, created_before, created_after)
 * and HTTP dates (timefmt_parse_rfc3339, timefmt_parse_http_date), and the
 * formatter on the first eight bytes read as a number of milliseconds. */
#include "tests/fuzz/fuzz.h"

#include "base/timefmt.h"

#define MIN_MS (-62167219200000LL) /* 0000-01-01T00:00:00.000Z */
#define MAX_MS (253402300799999LL) /* 9999-12-31T23:59:59.999Z */
#define DAY_MS (86400000LL)

/* A formatted time parses back to itself (after the clamp). */
static void check_format(int64_t ms)
{
	char out[TIMEFMT_RFC3339_LEN + 1];
	int64_t back;
	timefmt_rfc3339(ms, out);
	FUZZ_CHECK(strlen(out) == TIMEFMT_RFC3339_LEN);
	FUZZ_CHECK(timefmt_parse_rfc3339(out, &back));
	int64_t want = ms < MIN_MS ? MIN_MS : ms > MAX_MS ? MAX_MS : ms;
	FUZZ_CHECK(back == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size);
	int64_t ms = 0, secs = 0;
	if (timefmt_parse_rfc3339(s, &ms)) {
		/* Years 0000..9999, shifted by at most a day of offset and a leap second. */
		FUZZ_CHECK(ms >= MIN_MS - DAY_MS && ms <= MAX_MS + DAY_MS);
		check_format(ms);
	}
	if (timefmt_parse_http_date(s, &secs))
		FUZZ_CHECK(secs >= MIN_MS / 1000 - 1 && secs <= MAX_MS / 1000 + 1);
	if (size >= 8) {
		int64_t v;
		memcpy(&v, data, 8);
		check_format(v);
	}
	free(s);
	return 0;
}
