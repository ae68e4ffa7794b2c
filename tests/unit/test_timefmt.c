/* test_timefmt: RFC 3339 formatting and parsing, HTTP dates, clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <time.h>

#include "base/timefmt.h"

static void test_rfc3339_format_table(void **state)
{
	static const struct {
		int64_t ms;
		const char *want;
	} cases[] = {
		{0, "1970-01-01T00:00:00.000Z"},
		{1, "1970-01-01T00:00:00.001Z"},
		{-1, "1969-12-31T23:59:59.999Z"},
		{-1000, "1969-12-31T23:59:59.000Z"},
		{1796205600123, "2026-12-02T10:00:00.123Z"},
		{1709251199999, "2024-02-29T23:59:59.999Z"},
		{253402300799999, "9999-12-31T23:59:59.999Z"},
		{INT64_MAX, "9999-12-31T23:59:59.999Z"}, /* clamped */
		{INT64_MIN, "0000-01-01T00:00:00.000Z"}, /* clamped */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[TIMEFMT_RFC3339_LEN + 1];
		timefmt_rfc3339(cases[i].ms, out);
		assert_string_equal(out, cases[i].want);
	}
}

static void test_rfc3339_parse_accepts_table(void **state)
{
	static const struct {
		const char *s;
		int64_t ms;
	} cases[] = {
		{"2026-12-02T10:00:00Z", 1796205600000},
		{"2026-12-02T10:00:00.123Z", 1796205600123},
		{"2026-12-02T10:00:00.1Z", 1796205600100},
		{"2026-12-02T10:00:00.123456789Z", 1796205600123},
		{"2026-12-02T11:00:00.5+01:00", 1796205600500},
		{"2026-12-02T05:30:00-04:30", 1796205600000},
		{"2026-12-02t10:00:00z", 1796205600000},
		{"2026-12-02T10:00:00+00:00", 1796205600000},
		{"2024-02-29T23:59:59.999Z", 1709251199999},
		{"1970-01-01T00:00:00.000Z", 0},
		{"1969-12-31T23:59:59.999Z", -1},
		{"2016-12-31T23:59:60Z", 1483228800000}, /* leap second: next second */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t ms = 42;
		if (!timefmt_parse_rfc3339(cases[i].s, &ms))
			fail_msg("rejected %s", cases[i].s);
		if (ms != cases[i].ms)
			fail_msg("%s gave %lld, want %lld", cases[i].s, (long long)ms,
				 (long long)cases[i].ms);
	}
}

static void test_rfc3339_parse_rejects_table(void **state)
{
	static const char *bad[] = {
		"",
		"2026-12-02",
		"2026-12-02T10:00:00",  /* no zone */
		"2026-12-02 10:00:00Z", /* space separator */
		"2026-12-02T10:00Z",    /* no seconds */
		"2026-13-02T10:00:00Z", /* month */
		"2026-00-02T10:00:00Z",
		"2026-02-29T10:00:00Z", /* not a leap year */
		"2026-04-31T10:00:00Z",
		"2026-12-00T10:00:00Z",
		"2026-12-02T24:00:00Z",
		"2026-12-02T10:60:00Z",
		"2026-12-02T10:00:61Z",
		"2026-12-02T10:00:00.Z",    /* empty fraction */
		"2026-12-02T10:00:00+0100", /* offset without colon */
		"2026-12-02T10:00:00+24:00",
		"2026-12-02T10:00:00Zjunk",
		"26-12-02T10:00:00Z",
		"2026-1-02T10:00:00Z",
		"+2026-12-02T10:00:00Z",
		"2026-12-02T10:00:00.123 Z",
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t ms;
		if (timefmt_parse_rfc3339(bad[i], &ms))
			fail_msg("accepted %s", bad[i]);
	}
	assert_false(timefmt_parse_rfc3339(NULL, &(int64_t){0}));
}

static void test_rfc3339_round_trips(void **state)
{
	static const int64_t values[] = {0, 1, 999, 1796205600123, -86400001, 951782400000};
	(void)state;
	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		char out[TIMEFMT_RFC3339_LEN + 1];
		int64_t back;
		timefmt_rfc3339(values[i], out);
		assert_true(timefmt_parse_rfc3339(out, &back));
		assert_int_equal(back, values[i]);
	}
}

static void test_http_date_accepts_three_forms(void **state)
{
	static const struct {
		const char *s;
		int64_t secs;
	} cases[] = {
		{"Sun, 06 Nov 1994 08:49:37 GMT", 784111777},  /* IMF-fixdate */
		{"Sunday, 06-Nov-94 08:49:37 GMT", 784111777}, /* RFC 850 */
		{"Sun Nov  6 08:49:37 1994", 784111777},       /* asctime */
		{"Sun Nov 06 08:49:37 1994", 784111777},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 1445412480},
		{"Wednesday, 21-Oct-15 07:28:00 GMT", 1445412480},
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0},
		{"Tue, 29 Feb 2000 00:00:00 GMT", 951782400},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t secs = -7;
		if (!timefmt_parse_http_date(cases[i].s, &secs))
			fail_msg("rejected %s", cases[i].s);
		if (secs != cases[i].secs)
			fail_msg("%s gave %lld, want %lld", cases[i].s, (long long)secs,
				 (long long)cases[i].secs);
	}
}

static void test_http_date_rejects_garbage(void **state)
{
	static const char *bad[] = {
		"",
		"120",
		"soon",
		"Sun, 06 Nov 1994 08:49:37", /* no GMT */
		"Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 6 Nov 1994 08:49:37 GMT", /* one-digit day */
		"Sun, 06 Foo 1994 08:49:37 GMT",
		"Sun, 31 Nov 1994 08:49:37 GMT", /* no such day */
		"Sun, 06 Nov 1994 25:49:37 GMT",
		"Xyz, 06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT x",
		"Sunday, 06-Nov-1994 08:49:37 GMT",
		"Sun Nov  6 08:49:37 94",
		"2026-12-02T10:00:00Z",
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t secs;
		if (timefmt_parse_http_date(bad[i], &secs))
			fail_msg("accepted %s", bad[i]);
	}
	assert_false(timefmt_parse_http_date(NULL, &(int64_t){0}));
}

static void test_clocks_tick_and_agree_with_time(void **state)
{
	int64_t now = timefmt_now_ms();
	int64_t m1 = timefmt_mono_ms(), m2;
	int64_t t = (int64_t)time(NULL) * 1000;
	(void)state;

	assert_true(now >= t - 2000 && now <= t + 2000);
	m2 = timefmt_mono_ms();
	assert_true(m2 >= m1);
	assert_true(m1 >= 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc3339_format_table),
		cmocka_unit_test(test_rfc3339_parse_accepts_table),
		cmocka_unit_test(test_rfc3339_parse_rejects_table),
		cmocka_unit_test(test_rfc3339_round_trips),
		cmocka_unit_test(test_http_date_accepts_three_forms),
		cmocka_unit_test(test_http_date_rejects_garbage),
		cmocka_unit_test(test_clocks_tick_and_agree_with_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
