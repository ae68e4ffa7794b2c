/* timefmt: RFC 3339 timestamps with milliseconds, and HTTP dates. Pure. */
#ifndef HOOKFLOW_TIMEFMT_H
#define HOOKFLOW_TIMEFMT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define TIMEFMT_RFC3339_LEN 24 /* "2026-12-02T10:00:00.000Z" */

/* Formats `ms` (milliseconds since the Unix epoch, UTC) as
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" into `out` (at least 25 bytes). Values outside
 * years 0000..9999 are clamped to that range. */
void timefmt_rfc3339(int64_t ms, char out[TIMEFMT_RFC3339_LEN + 1]);

/* Parses an RFC 3339 timestamp ("2026-12-02T10:00:00Z",
 * "2026-12-02T10:00:00.123Z", "2026-12-02T11:00:00.5+01:00") into milliseconds
 * since the epoch. Fraction digits past the third are dropped; "t" and "z" may
 * be lower case; a leap second (:60) reads as the next second. Returns false
 * on any syntax error or out-of-range field. */
bool timefmt_parse_rfc3339(const char *s, int64_t *ms);

/* Parses an HTTP-date (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT"; also the
 * obsolete RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT", whose two-digit year is
 * 20yy below 70 and 19yy otherwise, and asctime "Sun Nov  6 08:49:37 1994")
 * into seconds since the epoch. Names match case-insensitively; the weekday is
 * not checked against the date. Returns false on a syntax error or an
 * impossible date. */
bool timefmt_parse_http_date(const char *s, int64_t *secs);

/* Milliseconds since the epoch from the realtime clock. */
int64_t timefmt_now_ms(void);

/* Milliseconds from the monotonic clock (for deadlines and intervals). */
int64_t timefmt_mono_ms(void);

/* The CLOCK_MONOTONIC time `ms` milliseconds from now, as a timespec for
 * pthread_cond_timedwait on a condition variable set to that clock. */
void timefmt_mono_deadline(int64_t ms, struct timespec *out);

#endif
