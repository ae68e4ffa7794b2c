/* tz: IANA time zones read from the system's tzdata (TZif files, RFC 8536), and
 * the proleptic Gregorian calendar arithmetic that goes with them.
 *
 * A loaded zone answers "what is the UT offset at this instant" from the file's
 * transitions and, past the last one, from the POSIX TZ rule in the file's
 * footer ("CET-1CEST,M3.5.0,M10.5.0/3"), so "slim" files work for any future
 * date. A struct tz is immutable once loaded: every query is pure and may run
 * on any number of threads at once. Wherever a `const struct tz *` is taken,
 * NULL means UTC. Instants are seconds since the epoch; past 10^12 seconds
 * (about 31,700 years) either way, the rules are read as at that limit. */
#ifndef HOOKFLOW_TZ_H
#define HOOKFLOW_TZ_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

#define TZ_MAX_NAME 64
#define TZ_MAX_FILE (1024 * 1024)
#define TZ_ZONEINFO_DIR "/usr/share/zoneinfo"

struct tz;

/* Checks a zone name before any file is touched: 1..64 bytes of
 * [A-Za-z0-9_+-] in parts separated by single '/' (no leading or trailing '/',
 * no empty, "." or ".." part). On failure sets ERR_INVALID with a message that
 * starts with "timezone: ". `name` is borrowed, NUL-terminated. */
enum err_code tz_check_name(const char *name, struct err *e);

/* Loads the zone `name` ("Europe/Paris") from TZ_ZONEINFO_DIR. Same as
 * tz_load_from(TZ_ZONEINFO_DIR, name, out, e), errors and ownership alike:
 * `name` is borrowed; the caller owns *out and frees it with tz_free. */
enum err_code tz_load(const char *name, struct tz **out, struct err *e);

/* Loads the zone `name` from `dir`/`name`, a TZif file of version 1 to 4 (the
 * 64-bit data and the footer of version 2 and later; the 32-bit data of
 * version 1) of at most TZ_MAX_FILE bytes. "UTC" and "Etc/UTC" are built in
 * and need no file. Errors (ERR_INVALID unless said otherwise): the name's
 * (see tz_check_name); `timezone: unknown zone "Mars/Base"` when the file is
 * missing, not a regular file, too large or not a valid TZif file; a zone
 * with leap-second records ("right/...") is refused; ERR_INTERNAL when the
 * file exists but cannot be read. `dir` and `name` are borrowed,
 * NUL-terminated (the caller checks a JSON string has no NUL); on success
 * *out receives a new zone that the caller owns and frees with tz_free; on
 * failure *out is NULL. */
enum err_code tz_load_from(const char *dir, const char *name, struct tz **out, struct err *e);

/* Frees a zone from tz_load or tz_load_from (takes `z`). NULL is a no-op. */
void tz_free(struct tz *z);

/* The zone's name as loaded ("UTC" for NULL). Borrowed from `z`; valid until
 * tz_free. */
const char *tz_name(const struct tz *z);

/* The offset of local time from UTC at the instant `utc_s` (seconds since the
 * epoch), in seconds east of UTC (+3600 for Paris in winter). Before the
 * first transition of the file, its first time type applies (RFC 8536).
 * `z` is borrowed. */
int32_t tz_offset(const struct tz *z, int64_t utc_s);

/* The first instant strictly after `utc_s` at which the offset changes, in
 * *next_s. Returns false when the offset never changes after `utc_s` (UTC,
 * fixed-offset zones, a rule that keeps daylight saving all year). `z` is
 * borrowed; *next_s is written only on true. */
bool tz_next_transition(const struct tz *z, int64_t utc_s, int64_t *next_s);

/* The earliest instant whose local time is at or after the local time
 * `local_s` (seconds since the epoch of the local wall clock, read as if it
 * were UTC). So a local time that exists once gives its instant, one that
 * occurs twice (a fall-back overlap) gives the earlier, and one that does
 * not exist (a spring-forward gap) gives the instant the gap ends, the
 * transition. Non-decreasing in `local_s`. `z` is borrowed. */
int64_t tz_local_to_utc(const struct tz *z, int64_t local_s);

/* Proleptic Gregorian calendar: days since 1970-01-01 of a date (`m` 1..12,
 * `d` 1..31; out-of-range days carry over), and back into the caller's
 * *y, *m, *d. Pure. */
int64_t tz_days_from_civil(int64_t y, int m, int d);
void tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

/* The day of the week of a day since 1970-01-01: 0 = Sunday .. 6 = Saturday.
 * Pure. */
int tz_weekday(int64_t days);

/* The number of days in month `m` (1..12) of year `y`; 0 for another `m`. Pure. */
int tz_days_in_month(int64_t y, int m);

#endif
