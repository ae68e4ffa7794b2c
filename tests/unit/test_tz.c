/* test_tz: zone names, TZif loading (real tzdata and hand-built files), offsets,
 * transitions, local-to-UTC conversion and the POSIX TZ footer, checked
 * against tables and against glibc's own reading of the same zones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/timefmt.h"
#include "base/tz.h"

/* The temporary zoneinfo directory of the hand-built files. */
static char dir[64];

static int64_t at(const char *rfc3339)
{
	int64_t ms = 0;
	if (!timefmt_parse_rfc3339(rfc3339, &ms))
		fail_msg("bad timestamp in test: %s", rfc3339);
	return ms / 1000;
}

static struct tz *load(const char *name)
{
	struct tz *z = NULL;
	struct err e = {0};
	if (tz_load(name, &z, &e) != ERR_OK)
		fail_msg("tz_load(%s): %s", name, e.msg);
	return z;
}

/* ---- hand-built TZif files ----------------------------------------------- */

struct ttype {
	int32_t off;
	int dst;
};

struct tzif {
	char version; /* '\0' (1), '2', '3', '4' */
	size_t n;     /* transitions */
	const int64_t *times;
	const unsigned char *idx;
	size_t ntypes;
	const struct ttype *types;
	const char *footer; /* version 2+: the TZ string */
	uint32_t leapcnt;
};

static unsigned char *put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
	return p + 4;
}

static unsigned char *put64(unsigned char *p, int64_t v)
{
	p = put32(p, (uint32_t)((uint64_t)v >> 32));
	return put32(p, (uint32_t)v);
}

static unsigned char *header(unsigned char *p, char version, uint32_t leapcnt, uint32_t timecnt,
			     uint32_t typecnt, uint32_t charcnt)
{
	memcpy(p, "TZif", 4);
	p[4] = (unsigned char)version;
	memset(p + 5, 0, 15);
	p = put32(p + 20, 0); /* isutcnt */
	p = put32(p, 0);      /* isstdcnt */
	p = put32(p, leapcnt);
	p = put32(p, timecnt);
	p = put32(p, typecnt);
	return put32(p, charcnt);
}

/* Writes `f` in TZif form into buf (large enough); returns its length. Version
 * 2+ files carry a minimal 32-bit block (one type), as "slim" zic output does. */
static size_t build(const struct tzif *f, unsigned char *buf)
{
	unsigned char *p = buf;
	size_t tsize = f->version == '\0' ? 4 : 8;

	if (f->version != '\0') {
		p = header(p, f->version, 0, 0, 1, 4);
		p = put32(p, 0);
		*p++ = 0;
		*p++ = 0;
		memcpy(p, "XXX", 4);
		p += 4;
	}
	p = header(p, f->version, f->leapcnt, (uint32_t)f->n, (uint32_t)f->ntypes, 4);
	for (size_t i = 0; i < f->n; i++)
		p = tsize == 8 ? put64(p, f->times[i]) : put32(p, (uint32_t)f->times[i]);
	for (size_t i = 0; i < f->n; i++)
		*p++ = f->idx[i];
	for (size_t i = 0; i < f->ntypes; i++) {
		p = put32(p, (uint32_t)f->types[i].off);
		*p++ = (unsigned char)f->types[i].dst;
		*p++ = 0;
	}
	memcpy(p, "XXX", 4);
	p += 4;
	for (uint32_t i = 0; i < f->leapcnt; i++) {
		p = tsize == 8 ? put64(p, 78796800 + i) : put32(p, 78796800 + i);
		p = put32(p, i + 1);
	}
	if (f->version != '\0') {
		size_t n = strlen(f->footer);
		*p++ = '\n';
		memcpy(p, f->footer, n);
		p += n;
		*p++ = '\n';
	}
	return (size_t)(p - buf);
}

static void write_file(const char *name, const void *data, size_t len)
{
	char path[256];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

static struct tz *load_built(const char *name, const struct tzif *f)
{
	unsigned char buf[8192];
	struct tz *z = NULL;
	struct err e = {0};

	write_file(name, buf, build(f, buf));
	if (tz_load_from(dir, name, &z, &e) != ERR_OK)
		fail_msg("tz_load_from(%s): %s", name, e.msg);
	return z;
}

/* A zone of no transitions whose time is the TZ string `footer`. */
static struct tz *load_footer_zone(const char *name, const char *footer, int32_t off)
{
	const struct ttype types[] = {{off, 0}};
	const struct tzif f = {'2', 0, NULL, NULL, 1, types, footer, 0};
	return load_built(name, &f);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/hookflow-test-tz-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* glibc's offset at `t` for the TZ value `tzval` (a POSIX string, or ":Zone"). */
static long glibc_offset(const char *tzval, int64_t t)
{
	static char current[128];
	time_t tt = (time_t)t;
	struct tm tm;

	if (strcmp(current, tzval) != 0) {
		size_t n = strlen(tzval);
		assert_true(n < sizeof current);
		memcpy(current, tzval, n + 1);
		setenv("TZ", tzval, 1);
		tzset();
	}
	localtime_r(&tt, &tm);
	return tm.tm_gmtoff;
}

/* Checks z against glibc reading `tzval` over [from, to): at both sides of
 * every transition z reports, and every `step` seconds. Returns the number of
 * transitions seen. */
static int agree_with_glibc(const struct tz *z, const char *tzval, int64_t from, int64_t to,
			    int64_t step)
{
	int64_t t = from, next;
	int count = 0;

	while (tz_next_transition(z, t, &next) && next < to) {
		assert_true(next > t);
		if (tz_offset(z, next) != glibc_offset(tzval, next) ||
		    tz_offset(z, next - 1) != glibc_offset(tzval, next - 1))
			fail_msg("%s: transition at %lld: %d -> %d, glibc %ld -> %ld", tzval,
				 (long long)next, tz_offset(z, next - 1), tz_offset(z, next),
				 glibc_offset(tzval, next - 1), glibc_offset(tzval, next));
		assert_int_not_equal(tz_offset(z, next - 1), tz_offset(z, next));
		count++;
		t = next;
	}
	for (t = from; t < to; t += step)
		if (tz_offset(z, t) != glibc_offset(tzval, t))
			fail_msg("%s: at %lld: %d, glibc %ld", tzval, (long long)t, tz_offset(z, t),
				 glibc_offset(tzval, t));
	return count;
}

/* ---- names --------------------------------------------------------------- */

static void test_check_name_accepts_zone_names(void **state)
{
	static const char *good[] = {
		"Europe/Paris",
		"America/Argentina/Buenos_Aires",
		"Etc/GMT+5",
		"Etc/GMT-14",
		"UTC",
		"America/Port-au-Prince",
		"EST5EDT",
		"a",
		/* 64 bytes */
		"Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	(void)state;
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		struct err e = {0};
		if (tz_check_name(good[i], &e) != ERR_OK)
			fail_msg("%s: %s", good[i], e.msg);
	}
}

static void test_check_name_rejects_with_message(void **state)
{
	static const struct {
		const char *name;
		const char *msg;
	} cases[] = {
		{"", "timezone: must not be empty"},
		{"Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		 "timezone: exceeds maximum length of 64 bytes"},
		{"../etc/passwd",
		 "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
		{"Europe/../../etc/passwd",
		 "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
		{"Europe/Pa ris",
		 "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
		{"Europe/Paris\n",
		 "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
		{"zone.tab",
		 "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
		{"/etc/passwd", "timezone: \"/etc/passwd\" is not a zone name"},
		{"Europe//Paris", "timezone: \"Europe//Paris\" is not a zone name"},
		{"Europe/", "timezone: \"Europe/\" is not a zone name"},
		{"/", "timezone: \"/\" is not a zone name"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct err e = {0};
		assert_int_equal(tz_check_name(cases[i].name, &e), ERR_INVALID);
		assert_string_equal(e.msg, cases[i].msg);
	}
}

/* ---- loading ------------------------------------------------------------- */

static void test_load_unknown_zone_is_invalid(void **state)
{
	static const struct {
		const char *name;
		const char *msg;
	} cases[] = {
		{"Mars/Base", "timezone: unknown zone \"Mars/Base\""},
		{"Europe", "timezone: unknown zone \"Europe\""}, /* a directory */
		{"Europe/Paris/x", "timezone: unknown zone \"Europe/Paris/x\""},
		{"../x", "timezone: must contain only [A-Za-z0-9_+-] in parts separated by \"/\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tz *z = (struct tz *)&z;
		struct err e = {0};
		assert_int_equal(tz_load(cases[i].name, &z, &e), ERR_INVALID);
		assert_null(z);
		assert_string_equal(e.msg, cases[i].msg);
	}
}

static void test_utc_is_built_in(void **state)
{
	static const char *names[] = {"UTC", "Etc/UTC"};
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct tz *z = NULL;
		struct err e = {0};
		int64_t next;
		/* No file needed: the directory does not exist. */
		assert_int_equal(tz_load_from("/nonexistent-zoneinfo", names[i], &z, &e), ERR_OK);
		assert_string_equal(tz_name(z), names[i]);
		assert_int_equal(tz_offset(z, at("2026-07-01T12:00:00Z")), 0);
		assert_false(tz_next_transition(z, 0, &next));
		assert_int_equal(tz_local_to_utc(z, 1796205600), 1796205600);
		tz_free(z);
	}
	/* NULL is UTC too. */
	assert_string_equal(tz_name(NULL), "UTC");
	assert_int_equal(tz_offset(NULL, 12345), 0);
	assert_int_equal(tz_local_to_utc(NULL, 12345), 12345);
	tz_free(NULL);
}

/* ---- real tzdata --------------------------------------------------------- */

static void test_offsets_of_real_zones(void **state)
{
	static const struct {
		const char *zone;
		const char *when;
		int32_t off;
	} cases[] = {
		{"Europe/Paris", "2026-01-15T12:00:00Z", 3600},
		{"Europe/Paris", "2026-07-15T12:00:00Z", 7200},
		{"Europe/Paris", "2026-03-29T00:59:59Z", 3600},
		{"Europe/Paris", "2026-03-29T01:00:00Z", 7200},
		{"Europe/Paris", "2026-10-25T00:59:59Z", 7200},
		{"Europe/Paris", "2026-10-25T01:00:00Z", 3600},
		{"Europe/Paris", "2095-07-01T00:00:00Z", 7200}, /* past the table: the footer */
		{"Europe/Paris", "1900-01-01T00:00:00Z", 561},  /* Paris Mean Time */
		{"Europe/Paris", "1800-01-01T00:00:00Z", 561},  /* before the first transition */
		{"America/New_York", "2026-01-15T12:00:00Z", -18000},
		{"America/New_York", "2026-07-15T12:00:00Z", -14400},
		{"America/New_York", "2090-07-01T00:00:00Z", -14400},
		{"Asia/Kolkata", "2026-06-01T00:00:00Z", 19800},
		{"Asia/Kathmandu", "2026-06-01T00:00:00Z", 20700},
		{"America/St_Johns", "2026-01-15T00:00:00Z", -12600},
		{"Australia/Lord_Howe", "2026-01-15T00:00:00Z", 39600},
		{"Australia/Lord_Howe", "2026-07-15T00:00:00Z", 37800},
		{"Europe/Dublin", "2026-01-15T00:00:00Z", 0},
		{"Europe/Dublin", "2026-07-15T00:00:00Z", 3600},
		{"UTC", "2026-07-15T00:00:00Z", 0},
		{"Etc/GMT+5", "2026-07-15T00:00:00Z", -18000},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tz *z = load(cases[i].zone);
		int32_t off = tz_offset(z, at(cases[i].when));
		if (off != cases[i].off)
			fail_msg("%s at %s: %d, want %d", cases[i].zone, cases[i].when, off,
				 cases[i].off);
		tz_free(z);
	}
}

static void test_next_transition_of_real_zones(void **state)
{
	static const struct {
		const char *zone;
		const char *from;
		const char *next[2];
	} cases[] = {
		{"Europe/Paris",
		 "2026-01-01T00:00:00Z",
		 {"2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z"}},
		{"Europe/Paris",
		 "2095-01-01T00:00:00Z",
		 {"2095-03-27T01:00:00Z", "2095-10-30T01:00:00Z"}},
		{"America/New_York",
		 "2026-01-01T00:00:00Z",
		 {"2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z"}},
		{"Australia/Lord_Howe",
		 "2026-01-01T00:00:00Z",
		 {"2026-04-04T15:00:00Z", "2026-10-03T15:30:00Z"}},
		{"America/Santiago",
		 "2026-01-01T00:00:00Z",
		 {"2026-04-05T03:00:00Z", "2026-09-06T04:00:00Z"}},
		{"Pacific/Chatham",
		 "2026-01-01T00:00:00Z",
		 {"2026-04-04T14:00:00Z", "2026-09-26T14:00:00Z"}},
		/* From exactly a transition: the next one. */
		{"Europe/Paris",
		 "2026-03-29T01:00:00Z",
		 {"2026-10-25T01:00:00Z", "2027-03-28T01:00:00Z"}},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tz *z = load(cases[i].zone);
		int64_t t = at(cases[i].from), next;
		for (int k = 0; k < 2; k++) {
			char got[TIMEFMT_RFC3339_LEN + 1];
			assert_true(tz_next_transition(z, t, &next));
			timefmt_rfc3339(next * 1000, got);
			got[19] = 'Z';
			got[20] = '\0';
			if (strcmp(got, cases[i].next[k]) != 0)
				fail_msg("%s after %s: %s, want %s", cases[i].zone, cases[i].from,
					 got, cases[i].next[k]);
			t = next;
		}
		tz_free(z);
	}
	/* Zones that no longer change. */
	static const char *fixed[] = {"Asia/Kolkata", "Asia/Tehran", "Etc/GMT-14"};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
		struct tz *z = load(fixed[i]);
		int64_t next;
		assert_false(tz_next_transition(z, at("2026-01-01T00:00:00Z"), &next));
		tz_free(z);
	}
}

static void test_local_to_utc_gaps_and_overlaps(void **state)
{
	static const struct {
		const char *zone;
		const char *local; /* the wall clock, written as if UTC */
		const char *utc;
	} cases[] = {
		/* Paris, spring forward 2026-03-29: 02:00 -> 03:00. */
		{"Europe/Paris", "2026-03-29T01:59:00Z", "2026-03-29T00:59:00Z"},
		{"Europe/Paris", "2026-03-29T02:00:00Z", "2026-03-29T01:00:00Z"}, /* gap: its end */
		{"Europe/Paris", "2026-03-29T02:30:00Z", "2026-03-29T01:00:00Z"},
		{"Europe/Paris", "2026-03-29T02:59:59Z", "2026-03-29T01:00:00Z"},
		{"Europe/Paris", "2026-03-29T03:00:00Z", "2026-03-29T01:00:00Z"},
		{"Europe/Paris", "2026-03-29T03:01:00Z", "2026-03-29T01:01:00Z"},
		/* Paris, fall back 2026-10-25: 03:00 -> 02:00; 02:xx twice. */
		{"Europe/Paris", "2026-10-25T01:59:00Z", "2026-10-24T23:59:00Z"},
		{"Europe/Paris", "2026-10-25T02:00:00Z", "2026-10-25T00:00:00Z"}, /* the first */
		{"Europe/Paris", "2026-10-25T02:30:00Z", "2026-10-25T00:30:00Z"},
		{"Europe/Paris", "2026-10-25T03:00:00Z", "2026-10-25T02:00:00Z"},
		/* New York, 2026-03-08 02:00 -> 03:00 and 2026-11-01 02:00 -> 01:00. */
		{"America/New_York", "2026-03-08T02:30:00Z", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-03-08T03:00:00Z", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T01:30:00Z", "2026-11-01T05:30:00Z"},
		{"America/New_York", "2026-11-01T02:00:00Z", "2026-11-01T07:00:00Z"},
		/* Lord Howe: half-hour changes, 02:00 -> 02:30 and 02:00 -> 01:30. */
		{"Australia/Lord_Howe", "2026-10-04T02:15:00Z", "2026-10-03T15:30:00Z"},
		{"Australia/Lord_Howe", "2026-10-04T02:30:00Z", "2026-10-03T15:30:00Z"},
		{"Australia/Lord_Howe", "2026-04-05T01:45:00Z", "2026-04-04T14:45:00Z"},
		/* Santiago: the gap is at midnight, 00:00 -> 01:00. */
		{"America/Santiago", "2026-09-06T00:00:00Z", "2026-09-06T04:00:00Z"},
		{"America/Santiago", "2026-09-06T00:30:00Z", "2026-09-06T04:00:00Z"},
		{"Asia/Kolkata", "2026-06-01T05:30:00Z", "2026-06-01T00:00:00Z"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tz *z = load(cases[i].zone);
		int64_t got = tz_local_to_utc(z, at(cases[i].local)), want = at(cases[i].utc);
		if (got != want)
			fail_msg("%s local %s: %lld, want %lld", cases[i].zone, cases[i].local,
				 (long long)got, (long long)want);
		tz_free(z);
	}
}

/* Every transition and a weekly sample from 1900 to 2100, for zones with
 * unusual rules, against glibc reading the same files. */
static void test_real_zones_agree_with_glibc(void **state)
{
	static const char *zones[] = {
		"Europe/Paris",     "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata",
		"America/Santiago", "Europe/Dublin",    "Africa/Casablanca",   "Antarctica/Troll",
		"Pacific/Apia",     "Pacific/Chatham",  "Asia/Tehran",         "America/Nuuk",
		"Asia/Jerusalem",   "Europe/London",    "Pacific/Kiritimati",  "America/St_Johns",
		"Asia/Gaza",        "Europe/Moscow",
	};
	(void)state;
	for (size_t i = 0; i < sizeof zones / sizeof zones[0]; i++) {
		char tzval[80];
		struct tz *z = load(zones[i]);
		snprintf(tzval, sizeof tzval, ":%s", zones[i]);
		agree_with_glibc(z, tzval, at("1900-01-01T00:00:00Z"), at("2100-01-01T00:00:00Z"),
				 7 * 86400 + 3607);
		tz_free(z);
	}
	unsetenv("TZ");
	tzset();
}

/* ---- hand-built files: the footer ---------------------------------------- */

/* Zones of only a footer, against glibc reading the same TZ string. */
static void test_footer_rules_agree_with_glibc(void **state)
{
	static const struct {
		const char *footer;
		int transitions; /* 2020..2060 */
	} cases[] = {
		{"CET-1CEST,M3.5.0,M10.5.0/3", 80},
		{"EST5EDT,M3.2.0,M11.1.0", 80},
		{"EST5EDT", 80}, /* no rule: the US one */
		{"AEST-10AEDT,M10.1.0,M4.1.0/3", 80},
		{"<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", 80},
		{"<+0330>-3:30", 0},
		{"<-02>2<-01>,M3.5.0/-1,M10.5.0/0", 80},  /* negative rule time (v3) */
		{"IST-2IDT,M3.4.4/26,M10.5.0", 80},       /* past 24 hours (v3) */
		{"XXX3YYY,J60/2,J300/2", 80},             /* Jn: March 1 in every year */
		{"XXX3YYY,59/2,299/2", 80},               /* n: Feb 29 or March 1 */
		{"IST-1GMT0,M10.5.0,M3.5.0/1", 80},       /* negative DST: Dublin */
		{"<+00>0<+02>-2,M3.5.0/1,M10.5.0/3", 80}, /* Troll */
		{"NZST-12NZDT,M9.5.0,M4.1.0/3", 80},      /* southern hemisphere */
		{"CST6CDT,M3.2.0/2:00:00,M11.1.0/2:00:00", 80},
		{"<-0330>3:30<-0230>,M3.2.0/0:01,M11.1.0/0:01", 80},
		{"ABC-5:45", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tz *z = load_footer_zone("Footer", cases[i].footer, 0);
		int n = agree_with_glibc(z, cases[i].footer, at("2020-01-01T00:00:00Z"),
					 at("2060-01-01T00:00:00Z"), 86400 + 61);
		if (n != cases[i].transitions)
			fail_msg("%s: %d transitions, want %d", cases[i].footer, n,
				 cases[i].transitions);
		tz_free(z);
	}
	unsetenv("TZ");
	tzset();
}

static void test_footer_jn_and_n_dates(void **state)
{
	struct tz *j, *n;
	(void)state;
	/* J60 is March 1 in every year; 59 is Feb 29 in a leap year, else March 1. */
	j = load_footer_zone("J", "XXX3YYY,J60/2,J300/2", -10800);
	n = load_footer_zone("N", "XXX3YYY,59/2,299/2", -10800);
	/* 02:00 local standard time (-3) is 05:00 UTC. */
	assert_int_equal(tz_offset(j, at("2028-03-01T04:59:59Z")), -10800);
	assert_int_equal(tz_offset(j, at("2028-03-01T05:00:00Z")), -7200);
	assert_int_equal(tz_offset(n, at("2028-02-29T04:59:59Z")), -10800);
	assert_int_equal(tz_offset(n, at("2028-02-29T05:00:00Z")), -7200);
	assert_int_equal(tz_offset(n, at("2027-03-01T04:59:59Z")), -10800);
	assert_int_equal(tz_offset(n, at("2027-03-01T05:00:00Z")), -7200);
	tz_free(j);
	tz_free(n);
}

static void test_footer_all_year_daylight_time(void **state)
{
	/* RFC 8536 3.3.1: daylight time all year, no transition ever. */
	struct tz *z = load_footer_zone("AllYear", "EST5EDT,0/0,J365/25", -18000);
	int64_t next;
	(void)state;
	for (int64_t t = at("2025-12-31T00:00:00Z"); t < at("2027-01-02T00:00:00Z"); t += 3600)
		assert_int_equal(tz_offset(z, t), -14400);
	assert_false(tz_next_transition(z, at("2026-06-01T00:00:00Z"), &next));
	tz_free(z);
}

/* A slim file (no transitions, only the footer) reads as the real, fat one. */
static void test_slim_file_matches_fat_paris(void **state)
{
	struct tz *slim = load_footer_zone("SlimParis", "CET-1CEST,M3.5.0,M10.5.0/3", 3600);
	struct tz *fat = load("Europe/Paris");
	int64_t a = at("1997-01-01T00:00:00Z"), b = a, na, nb;
	(void)state;
	for (int i = 0; i < 2 * 140; i++) {
		assert_true(tz_next_transition(slim, a, &na));
		assert_true(tz_next_transition(fat, b, &nb));
		assert_int_equal(na, nb);
		assert_int_equal(tz_offset(slim, na), tz_offset(fat, nb));
		a = na;
		b = nb;
	}
	tz_free(slim);
	tz_free(fat);
}

/* ---- hand-built files: the table ----------------------------------------- */

static void test_table_then_footer(void **state)
{
	/* LMT, then CET from 1911, the summer of 1996, then the footer's rule
	 * (consistent with the last transition, as RFC 8536 requires). */
	static const int64_t times[] = {-1855958961, 828234000, 846378000};
	static const unsigned char idx[] = {1, 2, 1};
	static const struct ttype types[] = {{561, 0}, {3600, 0}, {7200, 1}};
	const struct tzif f = {'2', 3, times, idx, 3, types, "CET-1CEST,M3.5.0,M10.5.0/3", 0};
	struct tz *z = load_built("Table", &f);
	int64_t next;
	(void)state;
	assert_int_equal(tz_offset(z, -1855958962), 561); /* before the first transition */
	assert_int_equal(tz_offset(z, -1855958961), 3600);
	assert_int_equal(tz_offset(z, 828233999), 3600);
	assert_int_equal(tz_offset(z, 828234000), 7200);
	assert_int_equal(tz_offset(z, 846377999), 7200);
	assert_int_equal(tz_offset(z, 846378000), 3600);
	assert_true(tz_next_transition(z, 0, &next));
	assert_int_equal(next, 828234000);
	/* From the last transition on: the footer. */
	assert_true(tz_next_transition(z, 846378000, &next));
	assert_int_equal(next, 859683600); /* 1997-03-30T01:00:00Z */
	assert_int_equal(tz_offset(z, at("2030-07-01T00:00:00Z")), 7200);
	assert_int_equal(tz_offset(z, at("2030-12-01T00:00:00Z")), 3600);
	tz_free(z);
}

static void test_version_1_file(void **state)
{
	/* 32-bit data only, no footer: the last type holds for ever. */
	static const int64_t times[] = {-1855958961, 638931600, 654656400};
	static const unsigned char idx[] = {1, 2, 1};
	static const struct ttype types[] = {{561, 0}, {3600, 0}, {7200, 1}};
	const struct tzif f = {'\0', 3, times, idx, 3, types, NULL, 0};
	struct tz *z = load_built("V1", &f);
	int64_t next;
	(void)state;
	assert_int_equal(tz_offset(z, -1855958962), 561);
	assert_int_equal(tz_offset(z, 640000000), 7200);
	assert_int_equal(tz_offset(z, at("2030-07-01T00:00:00Z")), 3600);
	assert_false(tz_next_transition(z, 654656400, &next));
	tz_free(z);
}

static void test_version_3_and_4_files_load(void **state)
{
	static const struct ttype types[] = {{-7200, 0}};
	(void)state;
	for (char v = '3'; v <= '4'; v++) {
		const struct tzif f = {
			v, 0, NULL, NULL, 1, types, "<-02>2<-01>,M3.5.0/-1,M10.5.0/0", 0};
		struct tz *z = load_built("V34", &f);
		assert_int_equal(tz_offset(z, at("2026-07-01T00:00:00Z")), -3600);
		/* The last Sunday of March at -1:00, i.e. Saturday 23:00 local (-2). */
		assert_int_equal(tz_offset(z, at("2026-03-29T00:59:59Z")), -7200);
		assert_int_equal(tz_offset(z, at("2026-03-29T01:00:00Z")), -3600);
		tz_free(z);
	}
}

static void test_malformed_files_are_unknown_zones(void **state)
{
	static const int64_t times[] = {100, 50};
	static const unsigned char idx[] = {0, 0};
	static const unsigned char bad_idx[] = {0, 5};
	static const int64_t sorted[] = {50, 100};
	static const struct ttype types[] = {{3600, 0}};
	static const struct ttype huge[] = {{27 * 3600, 0}};
	static const struct ttype bad_dst[] = {{3600, 2}};
	const struct tzif cases[] = {
		{'2', 2, times, idx, 1, types, "CET-1", 0},      /* times not ascending */
		{'2', 2, sorted, bad_idx, 1, types, "CET-1", 0}, /* type index too large */
		{'2', 0, NULL, NULL, 1, huge, "CET-1", 0},       /* offset past 26 h */
		{'2', 0, NULL, NULL, 1, bad_dst, "CET-1", 0},    /* isdst not 0/1 */
		{'2', 0, NULL, NULL, 0, types, "CET-1", 0},      /* no type */
		{'5', 0, NULL, NULL, 1, types, "CET-1", 0},      /* unknown version */
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,M13.5.0,M10.5.0", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,M3.5.0", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,M3.6.0,M10.5.0", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,J0,J300", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,366,300", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1CEST,M3.5.0/168,M10.5.0", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-25", 0},
		{'2', 0, NULL, NULL, 1, types, "CE-1", 0},
		{'2', 0, NULL, NULL, 1, types, "<+1>-1", 0},
		{'2', 0, NULL, NULL, 1, types, "CET", 0},
		{'2', 0, NULL, NULL, 1, types, "CET-1 ", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		unsigned char buf[4096];
		struct tz *z = NULL;
		struct err e = {0};
		write_file("Bad", buf, build(&cases[i], buf));
		if (tz_load_from(dir, "Bad", &z, &e) != ERR_INVALID)
			fail_msg("case %zu loaded", i);
		assert_null(z);
		assert_string_equal(e.msg, "timezone: unknown zone \"Bad\"");
	}
}

static void test_every_truncation_is_refused(void **state)
{
	static const int64_t times[] = {-1855958961, 638931600, 654656400};
	static const unsigned char idx[] = {1, 2, 1};
	static const struct ttype types[] = {{561, 0}, {3600, 0}, {7200, 1}};
	const struct tzif f = {'2', 3, times, idx, 3, types, "CET-1CEST,M3.5.0,M10.5.0/3", 0};
	unsigned char buf[4096];
	size_t len = build(&f, buf);
	(void)state;
	for (size_t cut = 0; cut < len; cut++) {
		struct tz *z = NULL;
		struct err e = {0};
		write_file("Cut", buf, cut);
		if (tz_load_from(dir, "Cut", &z, &e) != ERR_INVALID)
			fail_msg("loaded when cut at %zu of %zu bytes", cut, len);
		assert_string_equal(e.msg, "timezone: unknown zone \"Cut\"");
	}
	write_file("Cut", buf, len);
	struct tz *z = NULL;
	assert_int_equal(tz_load_from(dir, "Cut", &z, NULL), ERR_OK);
	tz_free(z);
}

static void test_not_tzif_files_are_unknown_zones(void **state)
{
	char path[256], big_name[] = "Big";
	struct tz *z = NULL;
	struct err e = {0};
	static const struct ttype types[] = {{3600, 0}};
	const struct tzif f = {'2', 0, NULL, NULL, 1, types, "CET-1", 0};
	unsigned char *big = calloc(1, TZ_MAX_FILE + 1);
	(void)state;

	write_file("Text", "# zone.tab\nFR\t+4852+00220\tEurope/Paris\n", 38);
	assert_int_equal(tz_load_from(dir, "Text", &z, &e), ERR_INVALID);
	assert_string_equal(e.msg, "timezone: unknown zone \"Text\"");

	err_clear(&e);
	write_file("Empty", "", 0);
	assert_int_equal(tz_load_from(dir, "Empty", &z, &e), ERR_INVALID);
	assert_string_equal(e.msg, "timezone: unknown zone \"Empty\"");

	/* Past the size cap, even with a valid start. */
	assert_non_null(big);
	build(&f, big);
	err_clear(&e);
	write_file(big_name, big, TZ_MAX_FILE + 1);
	assert_int_equal(tz_load_from(dir, big_name, &z, &e), ERR_INVALID);
	assert_string_equal(e.msg, "timezone: unknown zone \"Big\"");
	free(big);

	/* A FIFO: refused without blocking on the open. */
	snprintf(path, sizeof path, "%s/Fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	err_clear(&e);
	assert_int_equal(tz_load_from(dir, "Fifo", &z, &e), ERR_INVALID);
	assert_string_equal(e.msg, "timezone: unknown zone \"Fifo\"");

	/* A directory. */
	snprintf(path, sizeof path, "%s/Sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	err_clear(&e);
	assert_int_equal(tz_load_from(dir, "Sub", &z, &e), ERR_INVALID);
	assert_string_equal(e.msg, "timezone: unknown zone \"Sub\"");
	assert_null(z);
}

static void test_leap_second_zones_are_refused(void **state)
{
	static const struct ttype types[] = {{0, 0}};
	const struct tzif f = {'2', 0, NULL, NULL, 1, types, "UTC0", 2};
	unsigned char buf[4096];
	struct tz *z = NULL;
	struct err e = {0};
	(void)state;
	write_file("Right", buf, build(&f, buf));
	assert_int_equal(tz_load_from(dir, "Right", &z, &e), ERR_INVALID);
	assert_null(z);
	assert_string_equal(e.msg,
			    "timezone: zone \"Right\" counts leap seconds, which is not supported");
}

static void test_symlinked_zone_loads(void **state)
{
	char target[256], link[256];
	struct tz *z = NULL;
	(void)state;
	tz_free(load_footer_zone("Target", "CET-1CEST,M3.5.0,M10.5.0/3", 3600));
	snprintf(target, sizeof target, "%s/Target", dir);
	snprintf(link, sizeof link, "%s/Link", dir);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(tz_load_from(dir, "Link", &z, NULL), ERR_OK);
	assert_string_equal(tz_name(z), "Link");
	assert_int_equal(tz_offset(z, at("2026-07-01T00:00:00Z")), 7200);
	tz_free(z);
}

/* Any int64 instant is answered without overflow (UBSan checks it in `make
 * unit`): past the limit the rules read as at the limit. */
static void test_extreme_instants_are_defined(void **state)
{
	static const char *zones[] = {"Europe/Paris", "Australia/Lord_Howe", "Asia/Kolkata"};
	static const int64_t instants[] = {INT64_MIN,       INT64_MIN + 1, -1000000000001LL,
					   1000000000001LL, INT64_MAX - 1, INT64_MAX};
	(void)state;
	for (size_t i = 0; i < sizeof zones / sizeof zones[0]; i++) {
		struct tz *z = load(zones[i]);
		for (size_t k = 0; k < sizeof instants / sizeof instants[0]; k++) {
			int64_t next, u;
			int32_t off = tz_offset(z, instants[k]);
			assert_true(off >= -26 * 3600 && off <= 26 * 3600);
			if (tz_next_transition(z, instants[k], &next))
				assert_true(next > instants[k]);
			u = tz_local_to_utc(z, instants[k]);
			(void)u;
		}
		tz_free(z);
	}
	/* Paris in the year 30000 still follows its rule. */
	struct tz *z = load("Europe/Paris");
	int64_t summer = tz_days_from_civil(30000, 7, 1) * 86400;
	assert_int_equal(tz_offset(z, summer), 7200);
	tz_free(z);
}

/* ---- calendar ------------------------------------------------------------ */

static void test_calendar_round_trips(void **state)
{
	(void)state;
	assert_int_equal(tz_days_from_civil(1970, 1, 1), 0);
	assert_int_equal(tz_days_from_civil(2000, 3, 1), 11017);
	assert_int_equal(tz_days_from_civil(1969, 12, 31), -1);
	assert_int_equal(tz_weekday(0), 4);                               /* Thursday */
	assert_int_equal(tz_weekday(tz_days_from_civil(2026, 3, 29)), 0); /* Sunday */
	assert_int_equal(tz_weekday(tz_days_from_civil(1900, 1, 1)), 1);  /* Monday */
	assert_int_equal(tz_days_in_month(2028, 2), 29);
	assert_int_equal(tz_days_in_month(2100, 2), 28);
	assert_int_equal(tz_days_in_month(2000, 2), 29);
	assert_int_equal(tz_days_in_month(2026, 4), 30);
	for (int64_t days = -800000; days < 3000000; days += 97) {
		int64_t y;
		int m, d;
		tz_civil_from_days(days, &y, &m, &d);
		assert_true(m >= 1 && m <= 12 && d >= 1 && d <= tz_days_in_month(y, m));
		assert_int_equal(tz_days_from_civil(y, m, d), days);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_name_accepts_zone_names),
		cmocka_unit_test(test_check_name_rejects_with_message),
		cmocka_unit_test(test_load_unknown_zone_is_invalid),
		cmocka_unit_test(test_utc_is_built_in),
		cmocka_unit_test(test_offsets_of_real_zones),
		cmocka_unit_test(test_next_transition_of_real_zones),
		cmocka_unit_test(test_local_to_utc_gaps_and_overlaps),
		cmocka_unit_test(test_real_zones_agree_with_glibc),
		cmocka_unit_test(test_footer_rules_agree_with_glibc),
		cmocka_unit_test(test_footer_jn_and_n_dates),
		cmocka_unit_test(test_footer_all_year_daylight_time),
		cmocka_unit_test(test_slim_file_matches_fat_paris),
		cmocka_unit_test(test_table_then_footer),
		cmocka_unit_test(test_version_1_file),
		cmocka_unit_test(test_version_3_and_4_files_load),
		cmocka_unit_test(test_malformed_files_are_unknown_zones),
		cmocka_unit_test(test_every_truncation_is_refused),
		cmocka_unit_test(test_not_tzif_files_are_unknown_zones),
		cmocka_unit_test(test_leap_second_zones_are_refused),
		cmocka_unit_test(test_symlinked_zone_loads),
		cmocka_unit_test(test_extreme_instants_are_defined),
		cmocka_unit_test(test_calendar_round_trips),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
