/* timefmt: RFC 3339 millisecond timestamps, HTTP dates and the two clocks. */
#include "base/timefmt.h"

#include <string.h>
#include <strings.h>
#include <time.h>

/* The range a four-digit year can show: 0000-01-01 to 9999-12-31T23:59:59.999. */
#define MIN_MS (-62167219200000LL)
#define MAX_MS (253402300799999LL)

static const char *const months[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const wkdays[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const weekdays[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
					"Friday", "Saturday", "Sunday"};

/* Writes `v` (0 <= v < 10^n) as exactly `n` decimal digits at `p`. */
static void put_digits(char *p, int v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (char)('0' + v % 10);
		v /= 10;
	}
}

void timefmt_rfc3339(int64_t ms, char out[TIMEFMT_RFC3339_LEN + 1])
{
	struct tm tm;
	int64_t secs, frac;
	time_t t;

	if (ms < MIN_MS)
		ms = MIN_MS;
	if (ms > MAX_MS)
		ms = MAX_MS;
	secs = ms / 1000;
	frac = ms % 1000;
	if (frac < 0) {
		frac += 1000;
		secs--;
	}
	t = (time_t)secs;
	gmtime_r(&t, &tm);
	/* Fixed-width fields written by hand: every one is in range after the
	 * clamp above, and snprintf cannot be told so. */
	memcpy(out, "0000-00-00T00:00:00.000Z", TIMEFMT_RFC3339_LEN + 1);
	put_digits(out, tm.tm_year + 1900, 4);
	put_digits(out + 5, tm.tm_mon + 1, 2);
	put_digits(out + 8, tm.tm_mday, 2);
	put_digits(out + 11, tm.tm_hour, 2);
	put_digits(out + 14, tm.tm_min, 2);
	put_digits(out + 17, tm.tm_sec, 2);
	put_digits(out + 20, (int)frac, 3);
}

/* Reads exactly `n` decimal digits at *p into *v and advances *p. */
static bool digits(const char **p, int n, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return false;
		x = x * 10 + (c - '0');
	}
	*p += n;
	*v = x;
	return true;
}

static bool lit(const char **p, const char *s)
{
	size_t n = strlen(s);

	if (strncmp(*p, s, n) != 0)
		return false;
	*p += n;
	return true;
}

static bool is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Seconds since the epoch of a validated UTC calendar time. A second of 60 (a
 * leap second) is the first second of the next minute. */
static int64_t to_epoch(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm;

	memset(&tm, 0, sizeof tm);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	return (int64_t)timegm(&tm);
}

static bool valid_fields(int y, int mo, int d, int h, int mi, int s)
{
	return y >= 0 && mo >= 1 && mo <= 12 && d >= 1 && d <= days_in_month(y, mo) && h <= 23 &&
	       mi <= 59 && s <= 60;
}

bool timefmt_parse_rfc3339(const char *s, int64_t *ms)
{
	const char *p = s;
	int y, mo, d, h, mi, sec, frac = 0;
	int64_t offset_s = 0;

	if (s == NULL)
		return false;
	if (!digits(&p, 4, &y) || !lit(&p, "-") || !digits(&p, 2, &mo) || !lit(&p, "-") ||
	    !digits(&p, 2, &d))
		return false;
	if (*p != 'T' && *p != 't')
		return false;
	p++;
	if (!digits(&p, 2, &h) || !lit(&p, ":") || !digits(&p, 2, &mi) || !lit(&p, ":") ||
	    !digits(&p, 2, &sec))
		return false;
	if (*p == '.') {
		int n = 0;
		p++;
		if (*p < '0' || *p > '9')
			return false;
		for (; *p >= '0' && *p <= '9'; p++, n++) {
			if (n < 3)
				frac = frac * 10 + (*p - '0');
		}
		for (; n < 3; n++)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;
		int oh, om;
		p++;
		if (!digits(&p, 2, &oh) || !lit(&p, ":") || !digits(&p, 2, &om) || oh > 23 ||
		    om > 59)
			return false;
		offset_s = sign * (oh * 3600 + om * 60);
	} else {
		return false;
	}
	if (*p != '\0' || !valid_fields(y, mo, d, h, mi, sec))
		return false;
	*ms = (to_epoch(y, mo, d, h, mi, sec) - offset_s) * 1000 + frac;
	return true;
}

/* Matches one of `names` (case-insensitively, as HTTP recipients should) at *p;
 * returns its index or -1. */
static int match_name(const char **p, const char *const *names, int count)
{
	for (int i = 0; i < count; i++) {
		size_t n = strlen(names[i]);
		if (strncasecmp(*p, names[i], n) == 0) {
			*p += n;
			return i;
		}
	}
	return -1;
}

/* "HH:MM:SS" */
static bool clock_time(const char **p, int *h, int *mi, int *s)
{
	return digits(p, 2, h) && lit(p, ":") && digits(p, 2, mi) && lit(p, ":") && digits(p, 2, s);
}

bool timefmt_parse_http_date(const char *s, int64_t *secs)
{
	const char *p = s;
	int y, mo, d, h, mi, sec;

	if (s == NULL)
		return false;
	if (match_name(&p, weekdays, 7) >= 0) {
		/* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year below
		 * 70 is 20yy, otherwise 19yy. */
		if (!lit(&p, ", ") || !digits(&p, 2, &d) || !lit(&p, "-") ||
		    (mo = match_name(&p, months, 12)) < 0 || !lit(&p, "-") || !digits(&p, 2, &y) ||
		    !lit(&p, " ") || !clock_time(&p, &h, &mi, &sec) || !lit(&p, " GMT"))
			return false;
		y += y < 70 ? 2000 : 1900;
	} else if (match_name(&p, wkdays, 7) >= 0) {
		if (*p == ',') {
			/* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
			if (!lit(&p, ", ") || !digits(&p, 2, &d) || !lit(&p, " ") ||
			    (mo = match_name(&p, months, 12)) < 0 || !lit(&p, " ") ||
			    !digits(&p, 4, &y) || !lit(&p, " ") || !clock_time(&p, &h, &mi, &sec) ||
			    !lit(&p, " GMT"))
				return false;
		} else {
			/* asctime: "Sun Nov  6 08:49:37 1994" */
			if (!lit(&p, " ") || (mo = match_name(&p, months, 12)) < 0 || !lit(&p, " "))
				return false;
			if (*p == ' ') {
				p++;
				if (!digits(&p, 1, &d))
					return false;
			} else if (!digits(&p, 2, &d)) {
				return false;
			}
			if (!lit(&p, " ") || !clock_time(&p, &h, &mi, &sec) || !lit(&p, " ") ||
			    !digits(&p, 4, &y))
				return false;
		}
	} else {
		return false;
	}
	mo += 1;
	if (*p != '\0' || !valid_fields(y, mo, d, h, mi, sec))
		return false;
	*secs = to_epoch(y, mo, d, h, mi, sec);
	return true;
}

int64_t timefmt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t timefmt_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void timefmt_mono_deadline(int64_t ms, struct timespec *out)
{
	clock_gettime(CLOCK_MONOTONIC, out);
	out->tv_sec += ms / 1000;
	out->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}
