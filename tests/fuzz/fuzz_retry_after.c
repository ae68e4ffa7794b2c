/* fuzz_retry_after: Retry-After header values (verdict_parse_retry_after). */
#include "tests/fuzz/fuzz.h"

#include "base/timefmt.h"
#include "service/verdict.h"

#define NOW_MS 1764669600000LL /* 2025-12-02T10:00:00Z */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size);
	const int64_t nows[] = {0, NOW_MS, 253402300799999LL};
	for (size_t i = 0; i < sizeof nows / sizeof nows[0]; i++) {
		int64_t d = -7;
		if (verdict_parse_retry_after(s, nows[i], &d)) {
			FUZZ_CHECK(d >= 0);
			/* A usable delay gives a retry delay within the cap. */
			struct verdict v = {.retry_after_ms = d};
			int64_t r = verdict_retry_delay_ms(&v, 1000, 300000, 3);
			FUZZ_CHECK(r >= 0 && r <= 300000);
		} else {
			FUZZ_CHECK(d == -7);
		}
	}
	free(s);
	return 0;
}
