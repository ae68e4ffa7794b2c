/* test_cron: the cron parser (every syntax form, every error with its message
 * and position) and next fire times (daylight saving in several zones, leap
 * days, weekday names, steps and lists, the day-of-month/day-of-week rule,
 * macros, UTC, the horizon). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/timefmt.h"
#include "base/tz.h"

static int64_t ms_at(const char *rfc3339)
{
	int64_t ms = 0;
	if (!timefmt_parse_rfc3339(rfc3339, &ms))
		fail_msg("bad timestamp in test: %s", rfc3339);
	return ms;
}

/* "YYYY-MM-DDTHH:MM:SSZ" */
static void show(int64_t ms, char out[TIMEFMT_RFC3339_LEN + 1])
{
	timefmt_rfc3339(ms, out);
	out[19] = 'Z';
	out[20] = '\0';
}

static struct tz *load(const char *name)
{
	struct tz *z = NULL;
	struct err e = {0};
	if (tz_load(name, &z, &e) != ERR_OK)
		fail_msg("tz_load(%s): %s", name, e.msg);
	return z;
}

static struct cron_spec parse(const char *expr)
{
	struct cron_spec s;
	struct err e = {0};
	if (cron_parse(expr, strlen(expr), &s, &e) != ERR_OK)
		fail_msg("cron_parse(%s): %s", expr, e.msg);
	return s;
}

/* The bits of a set written "a,b-c,..." (plain numbers and ranges only). */
static uint64_t bits(const char *set)
{
	uint64_t m = 0;
	const char *p = set;

	while (*p != '\0') {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		for (long v = lo; v <= hi; v++)
			m |= 1ULL << v;
		p = *end == ',' ? end + 1 : end;
	}
	return m;
}

/* ---- the parser: accepted ------------------------------------------------ */

static void test_parse_accepts_every_form(void **state)
{
	static const struct {
		const char *expr;
		const char *min, *hour, *dom, *mon, *dow;
		bool dom_r, dow_r;
	} cases[] = {
		{"* * * * *", "0-59", "0-23", "1-31", "1-12", "0-6", false, false},
		{"0 0 1 1 *", "0", "0", "1", "1", "0-6", true, false},
		{"*/15 9-17 * * MON-FRI", "0,15,30,45", "9-17", "1-31", "1-12", "1-5", false, true},
		{"5,10-12,*/20 * * * *", "0,5,10-12,20,40", "0-23", "1-31", "1-12", "0-6", false,
		 false},
		{"10/20 * * * *", "10,30,50", "0-23", "1-31", "1-12", "0-6", false, false},
		{"0-30/10 1-23/11 * * *", "0,10,20,30", "1,12,23", "1-31", "1-12", "0-6", false,
		 false},
		{"*/60 */24 * * *", "0", "0", "1-31", "1-12", "0-6", false, false},
		{"59 23 31 12 6", "59", "23", "31", "12", "6", true, true},
		{"00 09 07 03 *", "0", "9", "7", "3", "0-6", true, false},
		{"0 0 * jan,Mar,DEC *", "0", "0", "1-31", "1,3,12", "0-6", false, false},
		{"0 0 * JAN-MAR/2 *", "0", "0", "1-31", "1,3", "0-6", false, false},
		{"0 0 * feb-nov *", "0", "0", "1-31", "2-11", "0-6", false, false},
		{"0 0 */2 * *", "0", "0", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31", "1-12",
		 "0-6", false, false},
		{"0 0 1,15 * *", "0", "0", "1,15", "1-12", "0-6", true, false},
		/* Day of week: 7 is Sunday, as 0; SUN ending a range is 7. */
		{"0 0 * * 7", "0", "0", "1-31", "1-12", "0", false, true},
		{"0 0 * * 0,7", "0", "0", "1-31", "1-12", "0", false, true},
		{"0 0 * * SUN", "0", "0", "1-31", "1-12", "0", false, true},
		{"0 0 * * sun", "0", "0", "1-31", "1-12", "0", false, true},
		{"0 0 * * 5-7", "0", "0", "1-31", "1-12", "0,5,6", false, true},
		{"0 0 * * FRI-SUN", "0", "0", "1-31", "1-12", "0,5,6", false, true},
		{"0 0 * * MON-SUN", "0", "0", "1-31", "1-12", "0-6", false, true},
		{"0 0 * * SUN-SAT", "0", "0", "1-31", "1-12", "0-6", false, true},
		{"0 0 * * */2", "0", "0", "1-31", "1-12", "0,2,4,6", false, false},
		{"0 0 * * 1/2", "0", "0", "1-31", "1-12", "0,1,3,5", false, true}, /* 1,3,5,7 */
		{"0 0 * * Tue,thu", "0", "0", "1-31", "1-12", "2,4", false, true},
		{"0 0 * * MON-FRI/2", "0", "0", "1-31", "1-12", "1,3,5", false, true},
		/* Blanks: spaces and tabs, several, before and after. */
		{"  0\t0  1 *\t\t*  ", "0", "0", "1", "1-12", "0-6", true, false},
		/* Macros, case-insensitive, with blanks around. */
		{"@yearly", "0", "0", "1", "1", "0-6", true, false},
		{"@annually", "0", "0", "1", "1", "0-6", true, false},
		{"@monthly", "0", "0", "1", "1-12", "0-6", true, false},
		{"@weekly", "0", "0", "1-31", "1-12", "0", false, true},
		{"@daily", "0", "0", "1-31", "1-12", "0-6", false, false},
		{"@midnight", "0", "0", "1-31", "1-12", "0-6", false, false},
		{"@hourly", "0", "0-23", "1-31", "1-12", "0-6", false, false},
		{"@DAILY", "0", "0", "1-31", "1-12", "0-6", false, false},
		{" \t@Hourly  ", "0", "0-23", "1-31", "1-12", "0-6", false, false},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct cron_spec s = parse(cases[i].expr);
		if (s.minutes != bits(cases[i].min) || s.hours != bits(cases[i].hour) ||
		    s.days != bits(cases[i].dom) || s.months != bits(cases[i].mon) ||
		    s.weekdays != bits(cases[i].dow) || s.dom_restricted != cases[i].dom_r ||
		    s.dow_restricted != cases[i].dow_r)
			fail_msg("%s: minutes %llx hours %x days %x months %x weekdays %x dom_r %d "
				 "dow_r %d",
				 cases[i].expr, (unsigned long long)s.minutes, s.hours, s.days,
				 s.months, s.weekdays, s.dom_restricted, s.dow_restricted);
	}
}

static void test_parse_is_bounded_by_len(void **state)
{
	/* Only the first len bytes are read: no NUL needed after them. */
	static const char buf[] = "0 12 * * *99999";
	struct cron_spec s;
	(void)state;
	assert_int_equal(cron_parse(buf, 10, &s, NULL), ERR_OK);
	assert_int_equal(s.hours, bits("12"));
}

/* ---- the parser: refused ------------------------------------------------- */

static void test_parse_rejects_with_field_and_position(void **state)
{
	static const struct {
		const char *expr;
		const char *msg;
	} cases[] = {
		{"", "cron: must not be empty"},
		{" \t ", "cron: must not be empty"},
		{"* * * *", "cron: expected 5 fields, found 4"},
		{"*", "cron: expected 5 fields, found 1"},
		{"0 * * * * *",
		 "cron: expected 5 fields, found 6 (seconds and years are not supported)"},
		{"0 0 * * * * 2026",
		 "cron: expected 5 fields, found 7 (seconds and years are not supported)"},
		{"0 0 1 1 * * * *", "cron: expected 5 fields, found 8"},
		/* Out of range, in every field. */
		{"60 * * * *", "cron: minute field at position 1: 60 is out of range 0-59"},
		{"*/5 24 * * *", "cron: hour field at position 5: 24 is out of range 0-23"},
		{"0 0 0 * *", "cron: day-of-month field at position 5: 0 is out of range 1-31"},
		{"0 0 1-32 * *", "cron: day-of-month field at position 7: 32 is out of range 1-31"},
		{"0 0 * 13 *", "cron: month field at position 7: 13 is out of range 1-12"},
		{"0 0 * 0 *", "cron: month field at position 7: 0 is out of range 1-12"},
		{"0 0 * * 8", "cron: day-of-week field at position 9: 8 is out of range 0-7"},
		{"1,2,99 * * * *", "cron: minute field at position 5: 99 is out of range 0-59"},
		{"99999999999 * * * *",
		 "cron: minute field at position 1: 99999999999 is out of range 0-59"},
		{"12345678901234567890 * * * *",
		 "cron: minute field at position 1: 1234567890123456... is out of range 0-59"},
		/* Names. */
		{"0 0 * JAN MOX", "cron: day-of-week field at position 11: unknown name \"MOX\""},
		{"0 0 * January *", "cron: month field at position 7: unknown name \"January\""},
		{"0 0 * * MON-FRX", "cron: day-of-week field at position 13: unknown name \"FRX\""},
		{"MON * * * *",
		 "cron: minute field at position 1: unexpected name \"MON\" (only numbers are "
		 "allowed)"},
		{"0 0 JAN * *", "cron: day-of-month field at position 5: unexpected name \"JAN\" "
				"(only numbers are "
				"allowed)"},
		{"0 0 * * MONDAY",
		 "cron: day-of-week field at position 9: unknown name \"MONDAY\""},
		/* Steps. */
		{"*/0 * * * *", "cron: minute field at position 3: step 0 must be at least 1"},
		{"0 1-5/00 * * *", "cron: hour field at position 7: step 0 must be at least 1"},
		{"*/61 * * * *", "cron: minute field at position 3: step 61 is out of range 1-60"},
		{"0 */25 * * *", "cron: hour field at position 5: step 25 is out of range 1-24"},
		{"0 0 * */13 *", "cron: month field at position 9: step 13 is out of range 1-12"},
		{"*/ * * * *",
		 "cron: minute field at position 2: expected a step number after \"/\""},
		{"*/x * * * *",
		 "cron: minute field at position 3: expected a step number after \"/\""},
		{"*/-1 * * * *",
		 "cron: minute field at position 3: expected a step number after \"/\""},
		{"0 0 * * */MON",
		 "cron: day-of-week field at position 11: expected a step number after \"/\""},
		{"*/5/2 * * * *", "cron: minute field at position 4: unexpected character \"/\""},
		/* Ranges. */
		{"*/5 1 * 12-1 *", "cron: month field at position 9: range 12-1 is reversed"},
		{"30-10 * * * *", "cron: minute field at position 1: range 30-10 is reversed"},
		{"0 0 * * FRI-MON",
		 "cron: day-of-week field at position 9: range FRI-MON is reversed"},
		{"0 0 * * 7-1", "cron: day-of-week field at position 9: range 7-1 is reversed"},
		{"1- * * * *",
		 "cron: minute field at position 2: missing end of range after \"-\""},
		{"1-/2 * * * *",
		 "cron: minute field at position 2: missing end of range after \"-\""},
		{"1-5-7 * * * *", "cron: minute field at position 4: unexpected character \"-\""},
		{"*-5 * * * *", "cron: minute field at position 2: unexpected character \"-\""},
		/* Lists. */
		{"1,,2 * * * *", "cron: minute field at position 3: empty list element"},
		{"1, * * * *", "cron: minute field at position 2: empty list element"},
		{",1 * * * *", "cron: minute field at position 1: empty list element"},
		{"0 0 1,2, * *", "cron: day-of-month field at position 8: empty list element"},
		/* Not standard cron. */
		{"0 0 L * *", "cron: day-of-month field at position 5: \"L\" is not supported"},
		{"0 0 LW * *", "cron: day-of-month field at position 5: \"LW\" is not supported"},
		{"0 0 15W * *", "cron: day-of-month field at position 7: \"W\" is not supported"},
		{"0 0 ? * MON", "cron: day-of-month field at position 5: \"?\" is not supported"},
		{"0 0 * * 5L", "cron: day-of-week field at position 10: \"L\" is not supported"},
		{"0 0 * * FRI#2", "cron: day-of-week field at position 12: \"#\" is not supported"},
		{"0 0 * * 5#3", "cron: day-of-week field at position 10: \"#\" is not supported"},
		{"0 0 * * ?", "cron: day-of-week field at position 9: \"?\" is not supported"},
		/* Other characters. */
		{"0 0 * * *\n",
		 "cron: day-of-week field at position 10: unexpected character \"\\x0a\""},
		{"0 0 * * \xc3\xa9",
		 "cron: day-of-week field at position 9: unexpected character \"\\xc3\""},
		{"0 +1 * * *", "cron: hour field at position 3: unexpected character \"+\""},
		{"0 0 * * 1.5",
		 "cron: day-of-week field at position 10: unexpected character \".\""},
		/* Macros. */
		{"@reboot",
		 "cron: unknown macro \"@reboot\" at position 1 (expected @yearly, @annually, "
		 "@monthly, @weekly, @daily, @midnight or @hourly)"},
		{"  @every_5m",
		 "cron: unknown macro \"@every_5m\" at position 3 (expected @yearly, @annually, "
		 "@monthly, @weekly, @daily, @midnight or @hourly)"},
		{"@daily 0", "cron: unexpected text after \"@daily\" at position 8"},
		{"0 @daily * * *", "cron: hour field at position 3: unexpected character \"@\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct cron_spec s, before;
		struct err e = {0};
		memset(&s, 0xAB, sizeof s);
		before = s;
		if (cron_parse(cases[i].expr, strlen(cases[i].expr), &s, &e) != ERR_INVALID)
			fail_msg("accepted: %s", cases[i].expr);
		if (strcmp(e.msg, cases[i].msg) != 0)
			fail_msg("%s:\n got: %s\nwant: %s", cases[i].expr, e.msg, cases[i].msg);
		/* Bad input changes nothing. */
		assert_memory_equal(&s, &before, sizeof s);
	}
}

static void test_parse_length_cap_and_nul(void **state)
{
	char buf[CRON_MAX_EXPR + 2];
	struct cron_spec s;
	struct err e = {0};
	(void)state;

	/* Exactly the cap is fine (blanks pad it), one byte more is not. */
	memset(buf, ' ', sizeof buf);
	memcpy(buf, "0 0 * * *", 9);
	assert_int_equal(cron_parse(buf, CRON_MAX_EXPR, &s, &e), ERR_OK);
	assert_int_equal(cron_parse(buf, CRON_MAX_EXPR + 1, &s, &e), ERR_INVALID);
	assert_string_equal(e.msg, "cron: exceeds maximum length of 256 bytes");

	/* An embedded NUL is a character like any other, not an end. */
	err_clear(&e);
	assert_int_equal(cron_parse("0\0 * * * *", 10, &s, &e), ERR_INVALID);
	assert_string_equal(e.msg,
			    "cron: minute field at position 2: unexpected character \"\\x00\"");
}

/* ---- next fire times ----------------------------------------------------- */

struct next_case {
	const char *zone;
	const char *expr;
	const char *after;
	const char *want[8]; /* the successive fire times, NULL-terminated */
};

static void check_next(const struct next_case *c)
{
	struct tz *z = strcmp(c->zone, "-") == 0 ? NULL : load(c->zone);
	struct cron_spec s = parse(c->expr);
	int64_t t = ms_at(c->after), next;

	for (int k = 0; k < 8 && c->want[k] != NULL; k++) {
		char got[TIMEFMT_RFC3339_LEN + 1];
		if (!cron_next(&s, z, t, &next))
			fail_msg("%s \"%s\" after %s: no fire time #%d, want %s", c->zone, c->expr,
				 c->after, k + 1, c->want[k]);
		show(next, got);
		if (strcmp(got, c->want[k]) != 0)
			fail_msg("%s \"%s\" after %s: fire time #%d is %s, want %s", c->zone,
				 c->expr, c->after, k + 1, got, c->want[k]);
		t = next;
	}
	tz_free(z);
}

static void run_next_cases(const struct next_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check_next(&cases[i]);
}

#define RUN(cases) run_next_cases(cases, sizeof cases / sizeof cases[0])

static void test_next_spring_forward_fires_once_at_the_transition(void **state)
{
	static const struct next_case cases[] = {
		/* Paris 2026-03-29: 02:00 CET -> 03:00 CEST at 01:00Z. 02:30 does not
		 * exist: it fires at 03:00 CEST, the transition, once. */
		{"Europe/Paris",
		 "30 2 * * *",
		 "2026-03-27T12:00:00Z",
		 {"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		/* New York 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z. */
		{"America/New_York",
		 "30 2 * * *",
		 "2026-03-07T12:00:00Z",
		 {"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		/* Several fire times in the gap (02:00, 02:15, 02:30, 02:45) and 03:00
		 * itself: one fire at the transition, no 02:xx. */
		{"Europe/Paris",
		 "*/15 * * * *",
		 "2026-03-29T00:40:00Z",
		 {"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z",
		  "2026-03-29T01:30:00Z"}},
		{"America/New_York",
		 "*/20 * * * *",
		 "2026-03-08T06:30:00Z",
		 {"2026-03-08T06:40:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:20:00Z",
		  "2026-03-08T07:40:00Z"}},
		/* Only gap times: 02:05 and 02:50 both fire at 03:00, once. */
		{"Europe/Paris",
		 "5,50 2 * * *",
		 "2026-03-28T12:00:00Z",
		 {"2026-03-29T01:00:00Z", "2026-03-30T00:05:00Z", "2026-03-30T00:50:00Z"}},
		/* From exactly the transition: the next day. */
		{"Europe/Paris", "30 2 * * *", "2026-03-29T01:00:00Z", {"2026-03-30T00:30:00Z"}},
		/* Santiago 2026-09-06: midnight does not exist (00:00 -> 01:00). */
		{"America/Santiago",
		 "0 0 * * *",
		 "2026-09-05T00:00:00Z",
		 {"2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_fall_back_fires_once_at_the_first_occurrence(void **state)
{
	static const struct next_case cases[] = {
		/* New York 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z; 01:30 is first
		 * 05:30Z (EDT), then 06:30Z (EST): it fires at 05:30Z only. */
		{"America/New_York",
		 "30 1 * * *",
		 "2026-10-31T12:00:00Z",
		 {"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"America/New_York",
		 "30 1 * * *",
		 "2026-11-01T05:30:00Z",
		 {"2026-11-02T06:30:00Z"}},
		/* From inside the repeated hour (01:10 EST): not again. */
		{"America/New_York",
		 "30 1 * * *",
		 "2026-11-01T06:10:00Z",
		 {"2026-11-02T06:30:00Z"}},
		/* Hourly: 01:00 EDT, then 02:00 EST; the second 01:00 does not fire. */
		{"America/New_York",
		 "0 * * * *",
		 "2026-11-01T04:30:00Z",
		 {"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		/* Paris 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00Z. */
		{"Europe/Paris",
		 "*/15 * * * *",
		 "2026-10-25T00:40:00Z",
		 {"2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:15:00Z"}},
		{"Europe/Paris",
		 "30 2 * * *",
		 "2026-10-24T12:00:00Z",
		 {"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_half_hour_and_odd_offsets(void **state)
{
	static const struct next_case cases[] = {
		/* Lord Howe: +10:30, +11 in summer; 02:00 -> 02:30 on 2026-10-04. */
		{"Australia/Lord_Howe",
		 "0 2 * * *",
		 "2026-10-03T00:00:00Z",
		 {"2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"}},
		{"Australia/Lord_Howe",
		 "30 2 * * *",
		 "2026-10-03T00:00:00Z",
		 {"2026-10-03T15:30:00Z"}},
		/* 2026-04-05: 02:00 -> 01:30; 01:45 fires at its first occurrence. */
		{"Australia/Lord_Howe",
		 "45 1 * * *",
		 "2026-04-04T00:00:00Z",
		 {"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
		{"Australia/Lord_Howe",
		 "*/10 1-2 * * *",
		 "2026-04-04T14:20:00Z",
		 {"2026-04-04T14:30:00Z", "2026-04-04T14:40:00Z", "2026-04-04T14:50:00Z",
		  "2026-04-04T15:30:00Z", "2026-04-04T15:40:00Z"}},
		/* Kolkata +05:30, Chatham +12:45 in winter. */
		{"Asia/Kolkata",
		 "0 9 * * MON-FRI",
		 "2026-06-05T00:00:00Z",
		 {"2026-06-05T03:30:00Z", "2026-06-08T03:30:00Z"}},
		{"Pacific/Chatham", "0 12 * * *", "2026-06-01T00:00:00Z", {"2026-06-01T23:15:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_leap_days(void **state)
{
	static const struct next_case cases[] = {
		{"UTC",
		 "0 0 29 2 *",
		 "2025-01-01T00:00:00Z",
		 {"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"Europe/Paris",
		 "0 0 29 2 *",
		 "2025-01-01T00:00:00Z",
		 {"2028-02-28T23:00:00Z", "2032-02-28T23:00:00Z"}},
		/* 2100 is not a leap year: the longest wait, within the horizon. */
		{"UTC", "0 0 29 2 *", "2096-03-01T00:00:00Z", {"2104-02-29T00:00:00Z"}},
		{"UTC",
		 "0 12 28-29 2 *",
		 "2027-02-28T12:00:00Z",
		 {"2028-02-28T12:00:00Z", "2028-02-29T12:00:00Z", "2029-02-28T12:00:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_weekdays_steps_and_lists(void **state)
{
	static const struct next_case cases[] = {
		/* Friday 09:00 CEST (07:00Z) fired: next Monday. */
		{"Europe/Paris",
		 "0 9 * * MON-FRI",
		 "2026-06-05T07:00:00Z",
		 {"2026-06-08T07:00:00Z", "2026-06-09T07:00:00Z"}},
		{"UTC",
		 "*/15 9-17 * * MON-FRI",
		 "2026-06-05T17:40:00Z",
		 {"2026-06-05T17:45:00Z", "2026-06-08T09:00:00Z", "2026-06-08T09:15:00Z"}},
		{"UTC",
		 "5,10-12,*/20 * * * *",
		 "2026-01-01T00:00:00Z",
		 {"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:11:00Z",
		  "2026-01-01T00:12:00Z", "2026-01-01T00:20:00Z", "2026-01-01T00:40:00Z",
		  "2026-01-01T01:00:00Z"}},
		{"UTC",
		 "10/20 * * * *",
		 "2026-01-01T00:00:00Z",
		 {"2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:50:00Z",
		  "2026-01-01T01:10:00Z"}},
		/* 7 is Sunday (2026-06-07 is one). */
		{"UTC",
		 "0 12 * * 7",
		 "2026-06-01T00:00:00Z",
		 {"2026-06-07T12:00:00Z", "2026-06-14T12:00:00Z"}},
		{"UTC",
		 "0 12 * * FRI-SUN",
		 "2026-06-01T00:00:00Z",
		 {"2026-06-05T12:00:00Z", "2026-06-06T12:00:00Z", "2026-06-07T12:00:00Z",
		  "2026-06-12T12:00:00Z"}},
		/* Months by name, the year wrapping. */
		{"UTC",
		 "0 0 1 JAN,JUL *",
		 "2026-07-01T00:00:00Z",
		 {"2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z"}},
		{"UTC", "59 23 31 12 *", "2026-12-31T23:59:00Z", {"2027-12-31T23:59:00Z"}},
		/* The 31st, only in months that have one. */
		{"UTC",
		 "0 0 31 * *",
		 "2026-01-31T00:00:00Z",
		 {"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_day_of_month_or_day_of_week(void **state)
{
	static const struct next_case cases[] = {
		/* Both restricted: the 13th OR a Friday (2026-04-13 is a Monday). */
		{"UTC",
		 "0 0 13 * FRI",
		 "2026-03-28T00:00:00Z",
		 {"2026-04-03T00:00:00Z", "2026-04-10T00:00:00Z", "2026-04-13T00:00:00Z",
		  "2026-04-17T00:00:00Z"}},
		/* Day of month starts with '*': the 1st, 11th, 21st or 31st AND a Monday. */
		{"UTC",
		 "0 0 */10 * MON",
		 "2026-01-01T00:00:00Z",
		 {"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z", "2026-08-31T00:00:00Z"}},
		/* Day of week starts with '*': only the day of month. */
		{"UTC",
		 "0 0 13 * *",
		 "2026-03-28T00:00:00Z",
		 {"2026-04-13T00:00:00Z", "2026-05-13T00:00:00Z"}},
		{"UTC",
		 "0 0 1,15 * 1-5/4",
		 "2026-06-02T00:00:00Z",
		 {"2026-06-05T00:00:00Z", "2026-06-08T00:00:00Z", "2026-06-12T00:00:00Z",
		  "2026-06-15T00:00:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_macros(void **state)
{
	static const struct next_case cases[] = {
		{"Europe/Paris", "@yearly", "2026-06-01T00:00:00Z", {"2026-12-31T23:00:00Z"}},
		{"Europe/Paris", "@annually", "2026-06-01T00:00:00Z", {"2026-12-31T23:00:00Z"}},
		{"Europe/Paris", "@monthly", "2026-06-01T00:00:00Z", {"2026-06-30T22:00:00Z"}},
		{"Europe/Paris", "@weekly", "2026-06-01T00:00:00Z", {"2026-06-06T22:00:00Z"}},
		{"Europe/Paris", "@daily", "2026-06-01T00:00:00Z", {"2026-06-01T22:00:00Z"}},
		{"Europe/Paris", "@midnight", "2026-06-01T00:00:00Z", {"2026-06-01T22:00:00Z"}},
		{"Europe/Paris",
		 "@hourly",
		 "2026-06-01T00:00:00Z",
		 {"2026-06-01T01:00:00Z", "2026-06-01T02:00:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_utc_and_instants(void **state)
{
	static const struct next_case cases[] = {
		/* "-": a NULL zone is UTC. */
		{"-", "0 9 * * *", "2026-06-01T08:59:59.999Z", {"2026-06-01T09:00:00Z"}},
		{"UTC", "0 9 * * *", "2026-06-01T09:00:00Z", {"2026-06-02T09:00:00Z"}},
		/* Strictly after, whole minutes. */
		{"UTC",
		 "* * * * *",
		 "2026-06-01T00:00:00.500Z",
		 {"2026-06-01T00:01:00Z", "2026-06-01T00:02:00Z"}},
		{"UTC", "* * * * *", "2026-06-01T00:00:00Z", {"2026-06-01T00:01:00Z"}},
		{"UTC", "* * * * *", "2026-06-01T23:59:59.999Z", {"2026-06-02T00:00:00Z"}},
		{"Etc/UTC", "@yearly", "2026-12-31T23:59:59Z", {"2027-01-01T00:00:00Z"}},
		/* Before 1970. */
		{"UTC", "0 0 1 1 *", "1960-06-01T00:00:00Z", {"1961-01-01T00:00:00Z"}},
		{"UTC", "30 * * * *", "1969-12-31T23:45:00Z", {"1970-01-01T00:30:00Z"}},
	};
	(void)state;
	RUN(cases);
}

static void test_next_none_within_the_horizon(void **state)
{
	static const char *never[] = {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"};
	int64_t next = 42;
	struct cron_spec s = parse("* * * * *");
	struct tz *paris = load("Europe/Paris");
	(void)state;
	for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
		struct cron_spec n = parse(never[i]);
		assert_false(cron_next(&n, NULL, ms_at("2026-01-01T00:00:00Z"), &next));
		assert_false(cron_next(&n, paris, ms_at("2026-01-01T00:00:00Z"), &next));
	}
	/* Out of the years 1..9999. */
	assert_false(cron_next(&s, NULL, INT64_MAX, &next));
	assert_false(cron_next(&s, NULL, INT64_MIN, &next));
	assert_false(cron_next(&s, NULL, ms_at("9999-12-31T23:59:59Z") + 1000, &next));
	assert_int_equal(next, 42);
	assert_true(cron_next(&s, NULL, ms_at("9999-12-31T23:58:00Z"), &next));
	assert_int_equal(next, ms_at("9999-12-31T23:59:00Z"));
	tz_free(paris);
}

/* ---- a whole year of fire times ------------------------------------------ */

/* Fires of `expr` in `zone` in the local year 2026 (from local 2026-01-01
 * 00:00 included to 2027-01-01 00:00 excluded); checks they increase, fall on
 * whole minutes and match the expression's minute in local time, unless they
 * are at a transition (where a time of the gap fires). Returns the count;
 * *gap_hour2 counts fires at local 02:xx on `gap_day` (YYYY-MM-DD). */
static int year_of_fires(const char *zone, const char *expr, const char *gap_day, int *gap_hour2)
{
	struct tz *z = load(zone);
	struct cron_spec s = parse(expr);
	int64_t start = ms_at("2026-01-01T00:00:00Z") / 1000;
	int64_t end = ms_at("2027-01-01T00:00:00Z") / 1000;
	int64_t t, prev, next;
	int count = 0;

	start -= tz_offset(z, start - 86400);
	end -= tz_offset(z, end - 86400);
	*gap_hour2 = 0;
	t = (start - 1) * 1000;
	prev = t;
	while (cron_next(&s, z, t, &next) && next < end * 1000) {
		int64_t local = next / 1000 + tz_offset(z, next / 1000);
		char day[TIMEFMT_RFC3339_LEN + 1];
		assert_true(next > prev);
		assert_int_equal(next % 60000, 0);
		if (!((s.minutes >> (local / 60 % 60)) & 1) &&
		    tz_offset(z, next / 1000 - 1) == tz_offset(z, next / 1000))
			fail_msg("%s \"%s\": fire at %lld, local minute %lld", zone, expr,
				 (long long)next, (long long)(local / 60 % 60));
		timefmt_rfc3339(local * 1000, day);
		if (strncmp(day, gap_day, 10) == 0 && local / 3600 % 24 == 2)
			(*gap_hour2)++;
		prev = t = next;
		count++;
	}
	tz_free(z);
	return count;
}

static void test_year_of_quarter_hours_has_no_duplicates(void **state)
{
	int h2;
	(void)state;
	/* Every local quarter hour of the year fires once; the four of the
	 * spring gap coincide with 03:00 (one fire); the repeated hour fires once. */
	assert_int_equal(year_of_fires("UTC", "*/15 * * * *", "2026-03-29", &h2), 365 * 96);
	assert_int_equal(year_of_fires("Europe/Paris", "*/15 * * * *", "2026-03-29", &h2),
			 365 * 96 - 4);
	assert_int_equal(h2, 0);
	assert_int_equal(year_of_fires("America/New_York", "*/15 * * * *", "2026-03-08", &h2),
			 365 * 96 - 4);
	assert_int_equal(h2, 0);
	/* Lord Howe's gap is half an hour: 02:00 and 02:15 coincide with 02:30. */
	assert_int_equal(year_of_fires("Australia/Lord_Howe", "*/15 * * * *", "2026-10-04", &h2),
			 365 * 96 - 2);
	/* A daily time in the gap: once a day, every day. */
	assert_int_equal(year_of_fires("Europe/Paris", "30 2 * * *", "2026-03-29", &h2), 365);
	assert_int_equal(h2, 0);
	assert_int_equal(year_of_fires("America/New_York", "30 1 * * *", "2026-03-08", &h2), 365);
	assert_int_equal(year_of_fires("Europe/Paris", "0 9 * * MON-FRI", "2026-03-29", &h2), 261);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_accepts_every_form),
		cmocka_unit_test(test_parse_is_bounded_by_len),
		cmocka_unit_test(test_parse_rejects_with_field_and_position),
		cmocka_unit_test(test_parse_length_cap_and_nul),
		cmocka_unit_test(test_next_spring_forward_fires_once_at_the_transition),
		cmocka_unit_test(test_next_fall_back_fires_once_at_the_first_occurrence),
		cmocka_unit_test(test_next_half_hour_and_odd_offsets),
		cmocka_unit_test(test_next_leap_days),
		cmocka_unit_test(test_next_weekdays_steps_and_lists),
		cmocka_unit_test(test_next_day_of_month_or_day_of_week),
		cmocka_unit_test(test_next_macros),
		cmocka_unit_test(test_next_utc_and_instants),
		cmocka_unit_test(test_next_none_within_the_horizon),
		cmocka_unit_test(test_year_of_quarter_hours_has_no_duplicates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
