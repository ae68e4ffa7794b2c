/* cron: the five-field parser and the next-fire-time search. */
#include "base/cron.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/ids.h"

/* How much of a number or a range the error messages show. */
#define SHOWN 16

struct field {
	const char *name;
	int min, max;
	const char *const *names; /* NULL: numbers only */
	int count;                /* how many names */
	int first;                /* the value of names[0] */
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
					  "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

static const struct field fields[5] = {
	{"minute", 0, 59, NULL, 0, 0},          {"hour", 0, 23, NULL, 0, 0},
	{"day-of-month", 1, 31, NULL, 0, 1},    {"month", 1, 12, month_names, 12, 1},
	{"day-of-week", 0, 7, day_names, 7, 0},
};

static const struct {
	const char *name;
	const char *expansion;
} macros[] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

/* One field being parsed: the whole expression (for positions), the field's
 * end, the cursor. */
struct parser {
	const char *s;
	size_t end;
	size_t p;
	const struct field *f;
	struct err *e;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Sets ERR_INVALID: "cron: <field> field at position <pos + 1>: <message>". */
static enum err_code fail(const struct parser *ps, size_t pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum err_code fail(const struct parser *ps, size_t pos, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return err_set(ps->e, ERR_INVALID, "cron: %s field at position %zu: %s", ps->f->name,
		       pos + 1, msg);
}

/* The error for the character at `pos` that has no place there. */
static enum err_code unexpected(const struct parser *ps, size_t pos)
{
	char c = ps->s[pos], shown[16];

	if (c == '#' || c == '?' || c == 'L' || c == 'l' || c == 'W' || c == 'w')
		return fail(ps, pos, "\"%c\" is not supported", c);
	ids_quote(&ps->s[pos], 1, shown, sizeof shown);
	return fail(ps, pos, "unexpected character %s", shown);
}

/* Reads the digits at the cursor (there is at least one); the value saturates
 * at 1000000, which no field accepts. */
static int digits(struct parser *ps)
{
	int x = 0;

	while (ps->p < ps->end && is_digit(ps->s[ps->p])) {
		if (x < 1000000)
			x = x * 10 + (ps->s[ps->p] - '0');
		ps->p++;
	}
	return x;
}

/* Reads a value at the cursor: a number in the field's range or, in the month
 * and day-of-week fields, a three-letter name. `range_end`: the value ends a
 * range, where SUN is 7 (so MON-SUN is Monday to Sunday). */
static enum err_code value(struct parser *ps, bool range_end, int *v)
{
	const struct field *f = ps->f;
	const char *s = ps->s;
	size_t start = ps->p, n;
	char shown[SHOWN + 8];

	if (ps->p >= ps->end)
		return fail(ps, start, "missing value");
	if (is_digit(s[start])) {
		int x = digits(ps);
		n = ps->p - start;
		if (x < f->min || x > f->max)
			return fail(ps, start, "%.*s%s is out of range %d-%d",
				    (int)(n < SHOWN ? n : SHOWN), s + start, n > SHOWN ? "..." : "",
				    f->min, f->max);
		*v = x;
		return ERR_OK;
	}
	if (!is_alpha(s[start]))
		return unexpected(ps, start);
	while (ps->p < ps->end && is_alpha(s[ps->p]))
		ps->p++;
	n = ps->p - start;
	for (int i = 0; n == 3 && i < f->count; i++) {
		if (strncasecmp(s + start, f->names[i], 3) == 0) {
			*v = f->first + i;
			if (f->names == day_names && *v == 0 && range_end)
				*v = 7;
			return ERR_OK;
		}
	}
	if ((n == 1 && strchr("LlWw", s[start]) != NULL) ||
	    (n == 2 && strncasecmp(s + start, "LW", 2) == 0))
		return fail(ps, start, "\"%.*s\" is not supported", (int)n, s + start);
	ids_quote(s + start, n, shown, sizeof shown);
	if (f->names == NULL)
		return fail(ps, start, "unexpected name %s (only numbers are allowed)", shown);
	return fail(ps, start, "unknown name %s", shown);
}

/* One list element: `*`, `n`, `a-b`, each with an optional `/step`. */
static enum err_code element(struct parser *ps, uint64_t *mask)
{
	const struct field *f = ps->f;
	const char *s = ps->s;
	size_t start = ps->p;
	int lo, hi, step = 1;
	bool single = false;
	enum err_code rc;

	if (s[ps->p] == '*') {
		lo = f->min;
		hi = f->max;
		ps->p++;
	} else {
		rc = value(ps, false, &lo);
		if (rc != ERR_OK)
			return rc;
		if (ps->p < ps->end && s[ps->p] == '-') {
			size_t dash = ps->p++;
			if (ps->p >= ps->end || s[ps->p] == ',' || s[ps->p] == '/')
				return fail(ps, dash, "missing end of range after \"-\"");
			rc = value(ps, true, &hi);
			if (rc != ERR_OK)
				return rc;
			if (hi < lo) {
				size_t n = ps->p - start;
				return fail(ps, start, "range %.*s%s is reversed",
					    (int)(n < SHOWN ? n : SHOWN), s + start,
					    n > SHOWN ? "..." : "");
			}
		} else {
			hi = lo;
			single = true;
		}
	}
	if (ps->p < ps->end && s[ps->p] == '/') {
		size_t slash = ps->p++, at = ps->p, n;
		int span = f->max - f->min + 1;
		if (ps->p >= ps->end || !is_digit(s[ps->p]))
			return fail(ps, ps->p < ps->end ? ps->p : slash,
				    "expected a step number after \"/\"");
		step = digits(ps);
		n = ps->p - at;
		if (step == 0)
			return fail(ps, at, "step 0 must be at least 1");
		if (step > span)
			return fail(ps, at, "step %.*s%s is out of range 1-%d",
				    (int)(n < SHOWN ? n : SHOWN), s + at, n > SHOWN ? "..." : "",
				    span);
		/* "a/s" is a to the maximum, as Vixie cron reads it. */
		if (single)
			hi = f->max;
	}
	if (ps->p < ps->end && s[ps->p] != ',')
		return unexpected(ps, ps->p);
	for (int v = lo; v <= hi; v += step)
		*mask |= 1ULL << v;
	return ERR_OK;
}

/* A whole field `s[start..end)`: a comma-separated list of elements. */
static enum err_code field(const char *s, size_t start, size_t end, const struct field *f,
			   uint64_t *mask, struct err *e)
{
	struct parser ps = {s, end, start, f, e};
	enum err_code rc;

	*mask = 0;
	for (;;) {
		if (ps.p >= end || s[ps.p] == ',')
			/* An empty element: at the comma that ends it or, at the end
			 * of the field, at the comma before it. */
			return fail(&ps, ps.p < end ? ps.p : ps.p - 1, "empty list element");
		rc = element(&ps, mask);
		if (rc != ERR_OK)
			return rc;
		if (ps.p >= end)
			return ERR_OK;
		ps.p++; /* the comma */
	}
}

static enum err_code macro(const char *s, size_t len, size_t start, struct cron_spec *out,
			   struct err *e)
{
	size_t p = start, end;
	char shown[48];

	while (p < len && !is_blank(s[p]))
		p++;
	end = p;
	while (p < len && is_blank(s[p]))
		p++;
	ids_quote(s + start, end - start, shown, sizeof shown);
	if (p < len)
		return err_set(e, ERR_INVALID, "cron: unexpected text after %s at position %zu",
			       shown, p + 1);
	for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++) {
		const char *m = macros[i].name;
		if (strlen(m) == end - start && strncasecmp(s + start, m, end - start) == 0)
			return cron_parse(macros[i].expansion, strlen(macros[i].expansion), out, e);
	}
	return err_set(e, ERR_INVALID,
		       "cron: unknown macro %s at position %zu (expected @yearly, @annually, "
		       "@monthly, @weekly, @daily, @midnight or @hourly)",
		       shown, start + 1);
}

enum err_code cron_parse(const char *expr, size_t len, struct cron_spec *out, struct err *e)
{
	size_t starts[5], ends[5], p = 0;
	uint64_t masks[5];
	int count = 0;
	struct cron_spec spec;
	enum err_code rc;

	if (len > CRON_MAX_EXPR)
		return err_set(e, ERR_INVALID, "cron: exceeds maximum length of %d bytes",
			       CRON_MAX_EXPR);
	while (p < len && is_blank(expr[p]))
		p++;
	if (p == len)
		return err_set(e, ERR_INVALID, "cron: must not be empty");
	if (expr[p] == '@')
		return macro(expr, len, p, out, e);
	while (p < len) {
		size_t start = p;
		while (p < len && !is_blank(expr[p]))
			p++;
		if (count < 5) {
			starts[count] = start;
			ends[count] = p;
		}
		count++;
		while (p < len && is_blank(expr[p]))
			p++;
	}
	if (count != 5)
		return err_set(e, ERR_INVALID, "cron: expected 5 fields, found %d%s", count,
			       count == 6 || count == 7 ? " (seconds and years are not supported)"
							: "");
	for (int i = 0; i < 5; i++) {
		rc = field(expr, starts[i], ends[i], &fields[i], &masks[i], e);
		if (rc != ERR_OK)
			return rc;
	}
	spec.minutes = masks[0];
	spec.hours = (uint32_t)masks[1];
	spec.days = (uint32_t)masks[2];
	spec.months = (uint16_t)masks[3];
	/* 7 is Sunday, as 0 is. */
	spec.weekdays = (uint8_t)((masks[4] | masks[4] >> 7) & 0x7F);
	spec.dom_restricted = expr[starts[2]] != '*';
	spec.dow_restricted = expr[starts[4]] != '*';
	*out = spec;
	return ERR_OK;
}

/* ---- next fire time ------------------------------------------------------ */

#define DAY 86400

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The lowest set bit of `mask` at or above `from`, or -1. */
static int next_bit(uint64_t mask, int from)
{
	if (from < 0)
		from = 0;
	if (from > 63)
		return -1;
	mask &= ~0ULL << from;
	return mask == 0 ? -1 : __builtin_ctzll(mask);
}

static bool day_matches(const struct cron_spec *s, int64_t days, int d)
{
	bool dom = (s->days >> d) & 1u;
	bool dow = (s->weekdays >> tz_weekday(days)) & 1u;

	if (s->dom_restricted && s->dow_restricted)
		return dom || dow;
	return dom && dow;
}

/* The first local minute at or after `from` (local seconds, a whole minute)
 * that `s` matches, on a day before `limit_days`: whole months, days and hours
 * that cannot match are skipped. */
static bool next_local(const struct cron_spec *s, int64_t from, int64_t limit_days, int64_t *out)
{
	int64_t days = floor_div(from, DAY), y;
	int sod = (int)(from - days * DAY);
	int h = sod / 3600, mi = sod % 3600 / 60, mo, d;

	tz_civil_from_days(days, &y, &mo, &d);
	while (days < limit_days) {
		int hh, mm;
		if (!((s->months >> mo) & 1u)) {
			int m = next_bit(s->months, mo + 1);
			if (m < 1 || m > 12) {
				m = next_bit(s->months, 1);
				if (m < 1 || m > 12)
					return false;
				y++;
			}
			mo = m;
			d = 1;
			h = mi = 0;
			days = tz_days_from_civil(y, mo, d);
			continue;
		}
		if (!day_matches(s, days, d) || (hh = next_bit(s->hours, h)) < 0 || hh > 23) {
			/* The next day. */
			days++;
			h = mi = 0;
			if (++d > tz_days_in_month(y, mo)) {
				d = 1;
				if (++mo > 12) {
					mo = 1;
					y++;
				}
			}
			continue;
		}
		if (hh != h) {
			h = hh;
			mi = 0;
		}
		mm = next_bit(s->minutes, mi);
		if (mm < 0 || mm > 59) {
			/* The next hour: past 23, the day test above moves on. */
			h++;
			mi = 0;
			continue;
		}
		*out = days * DAY + h * 3600 + mm * 60;
		return true;
	}
	return false;
}

bool cron_next(const struct cron_spec *spec, const struct tz *zone, int64_t after_ms,
	       int64_t *next_ms)
{
	int64_t after_s, local, from, limit_days, l, u;

	if (after_ms < tz_days_from_civil(1, 1, 1) * DAY * 1000 ||
	    after_ms >= tz_days_from_civil(10000, 1, 1) * DAY * 1000)
		return false;
	after_s = floor_div(after_ms, 1000);
	/* A fire time is the earliest instant whose local time reaches a matching
	 * local minute (tz_local_to_utc), which is non-decreasing in the local
	 * minute. Every local minute up to the local time of after_s fires at or
	 * before it; from the next one on, the first matching minute that fires
	 * after after_s is the answer. Only minutes repeated by a fall back fire
	 * at or before after_s (at their first occurrence) and are passed over. */
	local = after_s + tz_offset(zone, after_s);
	from = floor_div(local, 60) * 60 + 60;
	limit_days = floor_div(from, DAY) + CRON_HORIZON_DAYS;
	while (next_local(spec, from, limit_days, &l)) {
		u = tz_local_to_utc(zone, l);
		if (u > after_s) {
			*next_ms = u * 1000;
			return true;
		}
		from = l + 60;
	}
	return false;
}
