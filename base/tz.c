/* tz: TZif files (RFC 8536), their POSIX TZ footers, and calendar arithmetic. */
#include "base/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ids.h"

/* The largest UT offset accepted, in seconds either way: RFC 8536 asks for
 * -89999..93599; anything past 26 hours is a corrupt file. */
#define MAX_OFFSET (26 * 3600)
/* The footer's rule times may range over -167..167 hours (RFC 8536, 3.3.1). */
#define MAX_RULE_HOURS 167
#define MAX_FOOTER 256
#define DAY 86400
/* Instants further than this (about 31,700 years) from the epoch are read as
 * this far, so that no calendar arithmetic can overflow. */
#define TIME_LIMIT 1000000000000LL

/* One end of a daylight-saving period in a POSIX TZ rule. */
struct rule_date {
	char kind;    /* 'J' (Jn, 1..365, no Feb 29), 'n' (0..365), 'M' (Mm.w.d) */
	int n;        /* the day for 'J' and 'n' */
	int month;    /* 'M': 1..12 */
	int week;     /* 'M': 1..5, 5 = the last */
	int wday;     /* 'M': 0 = Sunday */
	int32_t time; /* seconds after local midnight */
};

/* The footer's TZ string, for instants after the last transition. */
struct footer {
	bool present; /* false: no footer or an empty one */
	int32_t std_off;
	bool has_dst;
	int32_t dst_off;
	struct rule_date start, end; /* start in standard time, end in daylight time */
};

struct tz {
	char name[TZ_MAX_NAME + 1];
	size_t timecnt;
	int64_t *times;     /* strictly ascending transition instants */
	unsigned char *idx; /* the time type from each transition on */
	size_t typecnt;
	int32_t offs[256]; /* each time type's UT offset, seconds east */
	struct footer footer;
};

/* ---- calendar ------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int tz_days_in_month(int64_t y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (m < 1 || m > 12)
		return 0;
	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Howard Hinnant's days_from_civil and civil_from_days (public domain). */
int64_t tz_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = floor_div(y, 400);
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t z = days + 719468;
	int64_t era = floor_div(z, 146097);
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;

	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

int tz_weekday(int64_t days)
{
	/* 1970-01-01 was a Thursday. */
	return (int)(((days + 4) % 7 + 7) % 7);
}

/* ---- zone names ---------------------------------------------------------- */

enum err_code tz_check_name(const char *name, struct err *e)
{
	size_t len = strlen(name);
	char shown[TZ_MAX_NAME * 4 + 8];

	if (len == 0)
		return err_set(e, ERR_INVALID, "timezone: must not be empty");
	if (len > TZ_MAX_NAME)
		return err_set(e, ERR_INVALID, "timezone: exceeds maximum length of %d bytes",
			       TZ_MAX_NAME);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '+' || c == '-' || c == '/')
			continue;
		return err_set(e, ERR_INVALID,
			       "timezone: must contain only [A-Za-z0-9_+-] in parts separated by "
			       "\"/\"");
	}
	/* No part is empty: no leading, trailing or double '/'. As '.' is not
	 * allowed, no part is "." or ".." either: the name stays inside the
	 * zoneinfo directory. */
	if (name[0] == '/' || name[len - 1] == '/' || strstr(name, "//") != NULL) {
		ids_quote(name, len, shown, sizeof shown);
		return err_set(e, ERR_INVALID, "timezone: %s is not a zone name", shown);
	}
	return ERR_OK;
}

/* ---- the footer's POSIX TZ string ---------------------------------------- */

struct cursor {
	const char *p;
	const char *end;
};

static bool at(const struct cursor *c, char ch)
{
	return c->p < c->end && *c->p == ch;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_alpha(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
}

/* Reads 1..3 decimal digits into *v. */
static bool number(struct cursor *c, int *v)
{
	int x = 0, n = 0;

	while (c->p < c->end && is_digit(*c->p) && n < 3) {
		x = x * 10 + (*c->p - '0');
		c->p++;
		n++;
	}
	*v = x;
	return n > 0;
}

/* A zone abbreviation: three or more letters, or <...> of three or more of
 * [A-Za-z0-9+-] ("<+0330>"). Only its syntax matters here. */
static bool abbreviation(struct cursor *c)
{
	const char *start;

	if (at(c, '<')) {
		c->p++;
		start = c->p;
		while (c->p < c->end &&
		       (is_alpha(*c->p) || is_digit(*c->p) || *c->p == '+' || *c->p == '-'))
			c->p++;
		if (c->p - start < 3 || !at(c, '>'))
			return false;
		c->p++;
		return true;
	}
	start = c->p;
	while (c->p < c->end && is_alpha(*c->p))
		c->p++;
	return c->p - start >= 3;
}

/* [+-]hh[:mm[:ss]] with hh at most `max_hours`, into seconds (the sign as
 * written: POSIX offsets count west of Greenwich). */
static bool hms(struct cursor *c, int max_hours, int32_t *out)
{
	int sign = 1, h, m = 0, s = 0;

	if (at(c, '+') || at(c, '-')) {
		sign = *c->p == '-' ? -1 : 1;
		c->p++;
	}
	if (!number(c, &h) || h > max_hours)
		return false;
	if (at(c, ':')) {
		c->p++;
		if (!number(c, &m) || m > 59)
			return false;
		if (at(c, ':')) {
			c->p++;
			if (!number(c, &s) || s > 59)
				return false;
		}
	}
	*out = sign * (h * 3600 + m * 60 + s);
	return true;
}

/* Jn, n or Mm.w.d, then an optional /time (02:00:00 by default). */
static bool rule_date(struct cursor *c, struct rule_date *r)
{
	memset(r, 0, sizeof *r);
	if (at(c, 'J')) {
		c->p++;
		r->kind = 'J';
		if (!number(c, &r->n) || r->n < 1 || r->n > 365)
			return false;
	} else if (at(c, 'M')) {
		c->p++;
		r->kind = 'M';
		if (!number(c, &r->month) || r->month < 1 || r->month > 12 || !at(c, '.'))
			return false;
		c->p++;
		if (!number(c, &r->week) || r->week < 1 || r->week > 5 || !at(c, '.'))
			return false;
		c->p++;
		if (!number(c, &r->wday) || r->wday > 6)
			return false;
	} else {
		r->kind = 'n';
		if (!number(c, &r->n) || r->n > 365)
			return false;
	}
	r->time = 7200;
	if (at(c, '/')) {
		c->p++;
		if (!hms(c, MAX_RULE_HOURS, &r->time))
			return false;
	}
	return true;
}

/* Parses "std offset [dst [offset] [,start[/time],end[/time]]]"; an empty
 * string means no footer. A daylight name without a rule gets the US rule, as
 * POSIX leaves it to the implementation and the tz reference code does. */
static bool parse_footer(const char *s, size_t len, struct footer *f)
{
	struct cursor c = {s, s + len};
	int32_t west;

	memset(f, 0, sizeof *f);
	if (len == 0)
		return true;
	if (!abbreviation(&c) || !hms(&c, 24, &west))
		return false;
	f->present = true;
	f->std_off = -west;
	if (c.p == c.end)
		return true;
	if (!abbreviation(&c))
		return false;
	f->has_dst = true;
	f->dst_off = f->std_off + 3600;
	if (c.p < c.end && *c.p != ',') {
		if (!hms(&c, 24, &west))
			return false;
		f->dst_off = -west;
	}
	if (c.p == c.end) {
		static const char us[] = ",M3.2.0,M11.1.0";
		c.p = us;
		c.end = us + sizeof us - 1;
	}
	if (!at(&c, ','))
		return false;
	c.p++;
	if (!rule_date(&c, &f->start) || !at(&c, ','))
		return false;
	c.p++;
	if (!rule_date(&c, &f->end))
		return false;
	return c.p == c.end;
}

/* The local time (seconds, wall clock read as UTC) at which `r` falls in year `y`. */
static int64_t rule_local(const struct rule_date *r, int64_t y)
{
	int64_t days;

	if (r->kind == 'J') {
		days = tz_days_from_civil(y, 1, 1) + r->n - 1 + (is_leap(y) && r->n >= 60);
	} else if (r->kind == 'n') {
		days = tz_days_from_civil(y, 1, 1) + r->n;
	} else {
		int64_t first = tz_days_from_civil(y, r->month, 1);
		int d = (r->wday - tz_weekday(first) + 7) % 7 + 7 * (r->week - 1);
		while (d >= tz_days_in_month(y, r->month))
			d -= 7;
		days = first + d;
	}
	return days * DAY + r->time;
}

static int64_t clamp(int64_t t)
{
	return t < -TIME_LIMIT ? -TIME_LIMIT : t > TIME_LIMIT ? TIME_LIMIT : t;
}

static int64_t year_of(int64_t local_s)
{
	int64_t y;
	int m, d;

	tz_civil_from_days(floor_div(local_s, DAY), &y, &m, &d);
	return y;
}

/* A change of the footer's rule: daylight time starts (`dst`) or ends at `at`. */
struct change {
	int64_t at;
	bool dst;
};

/* The rule's changes in the years y0..y0+n-1 as UTC instants, into `out`
 * (2n of them). Returns how many were written. */
static size_t footer_changes(const struct footer *f, int64_t y0, int n, struct change *out)
{
	size_t k = 0;

	for (int64_t y = y0; y < y0 + n; y++) {
		out[k++] = (struct change){rule_local(&f->start, y) - f->std_off, true};
		out[k++] = (struct change){rule_local(&f->end, y) - f->dst_off, false};
	}
	return k;
}

static int32_t footer_offset(const struct footer *f, int64_t t)
{
	struct change ch[8];
	size_t n;
	int64_t best = INT64_MIN;
	bool dst = false;

	if (!f->has_dst)
		return f->std_off;
	t = clamp(t);
	n = footer_changes(f, year_of(t + f->std_off) - 2, 4, ch);
	/* The last change at or before t decides; a start and an end at the same
	 * instant (daylight time all year, "EST5EDT,0/0,J365/25") is daylight. */
	for (size_t i = 0; i < n; i++) {
		if (ch[i].at <= t && (ch[i].at > best || (ch[i].at == best && ch[i].dst))) {
			best = ch[i].at;
			dst = ch[i].dst;
		}
	}
	return dst ? f->dst_off : f->std_off;
}

/* The first change of the rule's offset strictly after t. */
static bool footer_next(const struct footer *f, int64_t t, int64_t *next)
{
	struct change ch[8];
	size_t n;
	int32_t cur;
	int64_t from;

	if (!f->has_dst || f->dst_off == f->std_off || t >= TIME_LIMIT)
		return false;
	t = clamp(t);
	from = t;
	cur = footer_offset(f, t);
	n = footer_changes(f, year_of(t + f->std_off) - 1, 4, ch);
	/* Candidates in ascending order; at most 8, so a selection each time. */
	for (;;) {
		int64_t c = INT64_MAX;
		for (size_t i = 0; i < n; i++)
			if (ch[i].at > from && ch[i].at < c)
				c = ch[i].at;
		if (c == INT64_MAX)
			return false; /* two years without a change: never */
		if (footer_offset(f, c) != cur) {
			*next = c;
			return true;
		}
		from = c;
	}
}

/* ---- queries ------------------------------------------------------------- */

const char *tz_name(const struct tz *z)
{
	return z == NULL ? "UTC" : z->name;
}

int32_t tz_offset(const struct tz *z, int64_t utc_s)
{
	size_t lo, hi;

	if (z == NULL)
		return 0;
	if (z->timecnt == 0)
		return z->footer.present ? footer_offset(&z->footer, utc_s) : z->offs[0];
	if (utc_s < z->times[0])
		return z->offs[0];
	if (utc_s >= z->times[z->timecnt - 1])
		return z->footer.present ? footer_offset(&z->footer, utc_s)
					 : z->offs[z->idx[z->timecnt - 1]];
	/* The last transition at or before utc_s: times[lo] <= utc_s < times[hi]. */
	lo = 0;
	hi = z->timecnt - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->times[mid] <= utc_s)
			lo = mid;
		else
			hi = mid;
	}
	return z->offs[z->idx[lo]];
}

/* The next instant after t where the file's table or its footer may change
 * the offset (the offset may also stay the same there). */
static bool raw_next(const struct tz *z, int64_t t, int64_t *next)
{
	size_t lo = 0, hi = z->timecnt;

	if (z->timecnt == 0 || t >= z->times[z->timecnt - 1])
		return z->footer.present && footer_next(&z->footer, t, next);
	/* The first transition after t. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->times[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	*next = z->times[lo];
	return true;
}

bool tz_next_transition(const struct tz *z, int64_t utc_s, int64_t *next_s)
{
	int32_t cur;
	int64_t t = utc_s, c;

	if (z == NULL)
		return false;
	cur = tz_offset(z, utc_s);
	while (raw_next(z, t, &c)) {
		if (tz_offset(z, c) != cur) {
			*next_s = c;
			return true;
		}
		t = c;
	}
	return false;
}

int64_t tz_local_to_utc(const struct tz *z, int64_t local_s)
{
	/* Start where the local time is surely below local_s (offsets are within
	 * MAX_OFFSET) and walk the stretches of constant offset: in the stretch
	 * [t, b) with offset o, the earliest instant whose local time reaches
	 * local_s is max(t, local_s - o), if that is before b. */
	int64_t t;

	if (z == NULL)
		return local_s;
	local_s = clamp(local_s);
	t = local_s - MAX_OFFSET - 3600;
	for (;;) {
		int32_t o = tz_offset(z, t);
		int64_t b, c = local_s - o;
		if (c < t)
			c = t;
		if (!tz_next_transition(z, t, &b) || c < b)
			return c;
		t = b;
	}
}

/* ---- loading ------------------------------------------------------------- */

enum parse_result { PARSE_OK, PARSE_BAD, PARSE_LEAP, PARSE_NOMEM };

struct counts {
	uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Reads a 44-byte header at `p` (`left` bytes available). */
static bool header(const unsigned char *p, size_t left, struct counts *c)
{
	if (left < 44 || memcmp(p, "TZif", 4) != 0)
		return false;
	c->isutcnt = be32(p + 20);
	c->isstdcnt = be32(p + 24);
	c->leapcnt = be32(p + 28);
	c->timecnt = be32(p + 32);
	c->typecnt = be32(p + 36);
	c->charcnt = be32(p + 40);
	/* A count past the file cap is corrupt; below it, the sizes cannot overflow. */
	return c->isutcnt <= TZ_MAX_FILE && c->isstdcnt <= TZ_MAX_FILE &&
	       c->leapcnt <= TZ_MAX_FILE && c->timecnt <= TZ_MAX_FILE &&
	       c->typecnt <= TZ_MAX_FILE && c->charcnt <= TZ_MAX_FILE;
}

/* The size of the data block after a header, with `tsize`-byte times. */
static size_t block_size(const struct counts *c, size_t tsize)
{
	return (size_t)c->timecnt * (tsize + 1) + (size_t)c->typecnt * 6 + c->charcnt +
	       (size_t)c->leapcnt * (tsize + 4) + c->isstdcnt + c->isutcnt;
}

/* Reads a data block into z (its `left` bytes are known to be there). */
static enum parse_result block(const unsigned char *p, const struct counts *c, size_t tsize,
			       struct tz *z)
{
	const unsigned char *idx, *types, *flags;

	if (c->typecnt == 0 || c->typecnt > 256 || c->charcnt == 0 ||
	    (c->isstdcnt != 0 && c->isstdcnt != c->typecnt) ||
	    (c->isutcnt != 0 && c->isutcnt != c->typecnt))
		return PARSE_BAD;
	if (c->leapcnt != 0)
		return PARSE_LEAP;
	z->timecnt = c->timecnt;
	z->typecnt = c->typecnt;
	if (c->timecnt > 0) {
		z->times = malloc(c->timecnt * sizeof *z->times);
		z->idx = malloc(c->timecnt);
		if (z->times == NULL || z->idx == NULL)
			return PARSE_NOMEM;
	}
	for (size_t i = 0; i < c->timecnt; i++) {
		z->times[i] = tsize == 8 ? be64(p + i * 8) : (int64_t)(int32_t)be32(p + i * 4);
		if (i > 0 && z->times[i] <= z->times[i - 1])
			return PARSE_BAD;
	}
	idx = p + (size_t)c->timecnt * tsize;
	for (size_t i = 0; i < c->timecnt; i++) {
		if (idx[i] >= c->typecnt)
			return PARSE_BAD;
		z->idx[i] = idx[i];
	}
	types = idx + c->timecnt;
	for (size_t i = 0; i < c->typecnt; i++) {
		int32_t off = (int32_t)be32(types + i * 6);
		if (off < -MAX_OFFSET || off > MAX_OFFSET || types[i * 6 + 4] > 1 ||
		    types[i * 6 + 5] >= c->charcnt)
			return PARSE_BAD;
		z->offs[i] = off;
	}
	flags = types + (size_t)c->typecnt * 6 + c->charcnt;
	for (size_t i = 0; i < (size_t)c->isstdcnt + c->isutcnt; i++)
		if (flags[i] > 1)
			return PARSE_BAD;
	return PARSE_OK;
}

/* Parses a whole TZif file into z. */
static enum parse_result parse_tzif(const unsigned char *buf, size_t len, struct tz *z)
{
	struct counts c;
	size_t pos, size;
	const unsigned char *nl;
	char version;

	if (!header(buf, len, &c))
		return PARSE_BAD;
	version = (char)buf[4];
	size = block_size(&c, 4);
	if (version == '\0') {
		if (size > len - 44)
			return PARSE_BAD;
		return block(buf + 44, &c, 4, z);
	}
	if (version < '2' || version > '4')
		return PARSE_BAD;
	/* Version 2+: skip the 32-bit data, read the 64-bit header, data and footer. */
	if (size > len - 44)
		return PARSE_BAD;
	pos = 44 + size;
	if (!header(buf + pos, len - pos, &c))
		return PARSE_BAD;
	pos += 44;
	size = block_size(&c, 8);
	if (size > len - pos)
		return PARSE_BAD;
	enum parse_result r = block(buf + pos, &c, 8, z);
	if (r != PARSE_OK)
		return r;
	pos += size;
	/* The footer: "\n" TZ-string "\n". */
	if (pos >= len || buf[pos] != '\n')
		return PARSE_BAD;
	pos++;
	nl = memchr(buf + pos, '\n', len - pos);
	if (nl == NULL || (size_t)(nl - (buf + pos)) > MAX_FOOTER)
		return PARSE_BAD;
	if (!parse_footer((const char *)buf + pos, (size_t)(nl - (buf + pos)), &z->footer))
		return PARSE_BAD;
	return PARSE_OK;
}

/* Reads the regular file at `path` (at most TZ_MAX_FILE bytes) into a new
 * buffer the caller frees. Returns ERR_NOT_FOUND when there is no such file
 * (or it is not a regular file, or too large) and ERR_INTERNAL on a read error,
 * with errno kept. */
static enum err_code read_file(const char *path, unsigned char **out, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	size_t n = 0;
	int fd;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ||
				       errno == ENAMETOOLONG || errno == EISDIR
			       ? ERR_NOT_FOUND
			       : ERR_INTERNAL;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return ERR_INTERNAL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > TZ_MAX_FILE) {
		close(fd);
		return ERR_NOT_FOUND;
	}
	/* One byte more than the cap, to notice a file that grew past it. */
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		close(fd);
		return ERR_INTERNAL;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int saved = errno;
			free(buf);
			close(fd);
			errno = saved;
			return ERR_INTERNAL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > (size_t)st.st_size) {
			free(buf);
			close(fd);
			return ERR_NOT_FOUND;
		}
	}
	close(fd);
	*out = buf;
	*len = n;
	return ERR_OK;
}

void tz_free(struct tz *z)
{
	if (z == NULL)
		return;
	free(z->times);
	free(z->idx);
	free(z);
}

enum err_code tz_load(const char *name, struct tz **out, struct err *e)
{
	return tz_load_from(TZ_ZONEINFO_DIR, name, out, e);
}

enum err_code tz_load_from(const char *dir, const char *name, struct tz **out, struct err *e)
{
	char path[4096];
	unsigned char *buf = NULL;
	size_t len = 0;
	struct tz *z;
	enum err_code rc;
	enum parse_result pr;
	int n;

	*out = NULL;
	rc = tz_check_name(name, e);
	if (rc != ERR_OK)
		return rc;
	z = calloc(1, sizeof *z);
	if (z == NULL)
		return err_set(e, ERR_INTERNAL, "timezone: out of memory");
	memcpy(z->name, name, strlen(name) + 1);
	if (strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0) {
		/* Built in: one time type of offset 0, no transitions. */
		z->typecnt = 1;
		*out = z;
		return ERR_OK;
	}
	n = snprintf(path, sizeof path, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof path) {
		tz_free(z);
		return err_set(e, ERR_INTERNAL, "timezone: zoneinfo directory path is too long");
	}
	rc = read_file(path, &buf, &len);
	if (rc == ERR_NOT_FOUND) {
		tz_free(z);
		return err_set(e, ERR_INVALID, "timezone: unknown zone \"%s\"", name);
	}
	if (rc != ERR_OK) {
		char why[128];
		int saved = errno;
		tz_free(z);
		return err_set(e, ERR_INTERNAL, "timezone: cannot read zone \"%s\": %s", name,
			       strerror_r(saved, why, sizeof why));
	}
	pr = parse_tzif(buf, len, z);
	free(buf);
	if (pr == PARSE_NOMEM) {
		tz_free(z);
		return err_set(e, ERR_INTERNAL, "timezone: out of memory");
	}
	if (pr == PARSE_LEAP) {
		tz_free(z);
		return err_set(e, ERR_INVALID,
			       "timezone: zone \"%s\" counts leap seconds, which is not supported",
			       name);
	}
	if (pr != PARSE_OK) {
		tz_free(z);
		return err_set(e, ERR_INVALID, "timezone: unknown zone \"%s\"", name);
	}
	*out = z;
	return ERR_OK;
}
