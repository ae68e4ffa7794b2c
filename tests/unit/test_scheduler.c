/* test_scheduler: a schedule's fire times (every_ms anchored at start_at,
 * cron in a zone, within [start_at, end_at)) and its jitter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "base/timefmt.h"
#include "service/scheduler.h"

static int64_t at(const char *rfc3339)
{
	int64_t ms = 0;
	assert_true(timefmt_parse_rfc3339(rfc3339, &ms));
	return ms;
}

static void assert_next(const struct fire_rule *r, const char *after, const char *want)
{
	int64_t n = 0;
	bool has = scheduler_next_fire(r, at(after), &n);
	if (want == NULL) {
		assert_false(has);
		return;
	}
	assert_true(has);
	char got[TIMEFMT_RFC3339_LEN + 1];
	timefmt_rfc3339(n, got);
	assert_string_equal(got, want);
}

static void test_every_ms_is_anchored_at_the_epoch_or_start_at(void **state)
{
	(void)state;
	struct fire_rule r = {.every_ms = 15 * 60 * 1000};
	assert_next(&r, "2026-12-02T10:07:00Z", "2026-12-02T10:15:00.000Z");
	assert_next(&r, "2026-12-02T10:15:00Z", "2026-12-02T10:30:00.000Z"); /* strictly after */
	assert_next(&r, "2026-12-02T10:14:59.999Z", "2026-12-02T10:15:00.000Z");
	/* with start_at, the intervals count from it */
	r.start_ms = r.anchor_ms = at("2026-12-02T10:07:00Z");
	assert_next(&r, "2026-12-01T00:00:00Z", "2026-12-02T10:07:00.000Z");
	assert_next(&r, "2026-12-02T10:07:00Z", "2026-12-02T10:22:00.000Z");
	assert_next(&r, "2026-12-02T11:00:00Z", "2026-12-02T11:07:00.000Z");
}

static void test_end_at_ends_the_fire_times(void **state)
{
	(void)state;
	struct fire_rule r = {.every_ms = 60000, .end_ms = at("2026-12-02T10:03:00Z")};
	assert_next(&r, "2026-12-02T10:01:00Z", "2026-12-02T10:02:00.000Z");
	assert_next(&r, "2026-12-02T10:02:00Z", NULL); /* 10:03 is not before end_at */
}

static void test_cron_in_a_zone_within_start_and_end(void **state)
{
	(void)state;
	struct cron_spec spec;
	struct err e = {0};
	const char *expr = "*/15 9-17 * * MON-FRI";
	assert_int_equal(cron_parse(expr, strlen(expr), &spec, &e), ERR_OK);
	struct tz *paris = NULL;
	assert_int_equal(tz_load("Europe/Paris", &paris, &e), ERR_OK);
	struct fire_rule r = {.cron = &spec, .zone = paris};
	/* Wednesday 2026-12-02, 17:50 in Paris (UTC+1): next is Thursday 09:00 */
	assert_next(&r, "2026-12-02T16:50:00Z", "2026-12-03T08:00:00.000Z");
	/* Friday evening: next is Monday 09:00 */
	assert_next(&r, "2026-12-04T17:00:00Z", "2026-12-07T08:00:00.000Z");
	r.start_ms = at("2026-12-10T00:00:00Z");
	assert_next(&r, "2026-12-02T16:50:00Z", "2026-12-10T08:00:00.000Z");
	r.end_ms = at("2026-12-10T08:15:00Z");
	assert_next(&r, "2026-12-10T08:00:00Z", NULL);
	tz_free(paris);
}

static void test_jitter_is_deterministic_and_below_its_bound(void **state)
{
	(void)state;
	int64_t t = at("2026-12-02T10:15:00Z");
	assert_int_equal(scheduler_jitter_ms("nightly", t, 0), 0);
	int64_t a = scheduler_jitter_ms("nightly", t, 30000);
	assert_int_equal(scheduler_jitter_ms("nightly", t, 30000), a);
	bool differs = false;
	for (int i = 0; i < 100; i++) {
		int64_t j = scheduler_jitter_ms("nightly", t + i * 60000LL, 30000);
		assert_true(j >= 0 && j < 30000);
		differs |= j != a;
	}
	assert_true(differs); /* spread over fire times, not one constant */
	assert_int_not_equal(scheduler_jitter_ms("other", t, 1000000007LL),
			     scheduler_jitter_ms("nightly", t, 1000000007LL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_ms_is_anchored_at_the_epoch_or_start_at),
		cmocka_unit_test(test_end_at_ends_the_fire_times),
		cmocka_unit_test(test_cron_in_a_zone_within_start_and_end),
		cmocka_unit_test(test_jitter_is_deterministic_and_below_its_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
