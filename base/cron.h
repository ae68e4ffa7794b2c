/* cron: five-field cron expressions and their fire times in a time zone.
 *
 * Syntax (Vixie cron's): minute (0-59), hour (0-23), day of month (1-31),
 * month (1-12 or JAN-DEC), day of week (0-7, 0 and 7 = Sunday, or SUN-SAT;
 * SUN ending a range is 7, so MON-SUN works); names match case-insensitively.
 * Each field is a list of `*`, `n` and `a-b`, each optionally followed by a
 * step `/s` (1 up to the field's span); `a/s` is a to the field's maximum, as
 * in Vixie cron. Macros:
 * @yearly (= @annually), @monthly, @weekly, @daily (= @midnight), @hourly.
 * Not supported: L, W, #, ?, seconds and years.
 *
 * Day of month and day of week: when both fields are restricted (neither
 * starts with `*`), a day matches if EITHER does ("0 0 13 * FRI" is every
 * 13th and every Friday); otherwise both must.
 *
 * Daylight saving, in the zone's local time: a local fire time that does not
 * exist (a spring-forward gap) fires at the instant the gap ends, and several
 * in one gap fire once there; a local fire time that occurs twice (fall back)
 * fires once, at its first occurrence.
 *
 * Pure: no globals; every function is thread-safe. */
#ifndef HOOKFLOW_CRON_H
#define HOOKFLOW_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/tz.h"

#define CRON_MAX_EXPR 256
/* How far cron_next looks ahead: 8 years, so that a leap-day expression has a
 * fire time from any date (2096-03-01 to 2104-02-29 is the longest wait). */
#define CRON_HORIZON_DAYS (8 * 366)

/* A parsed expression: the set of each field's values as bits. A plain value
 * the caller may copy; it owns nothing. */
struct cron_spec {
	uint64_t minutes;    /* bit m: minute m, 0..59 */
	uint32_t hours;      /* bit h: hour h, 0..23 */
	uint32_t days;       /* bit d: day of month d, 1..31 */
	uint16_t months;     /* bit m: month m, 1..12 */
	uint8_t weekdays;    /* bit d: day of week d, 0..6, 0 = Sunday */
	bool dom_restricted; /* the day-of-month field does not start with '*' */
	bool dow_restricted; /* the day-of-week field does not start with '*' */
};

/* Parses the cron expression `expr[0..len)` (borrowed; need not be
 * NUL-terminated; at most CRON_MAX_EXPR bytes) into *out. Fields are
 * separated by spaces or tabs; blanks before and after are ignored. On error
 * sets ERR_INVALID with a message that names the field and the 1-based
 * position of the offending text, e.g. "cron: hour field at position 5: 24 is
 * out of range 0-23" or "cron: expected 5 fields, found 4", and leaves *out
 * unchanged. *out is the caller's; nothing is allocated. */
enum err_code cron_parse(const char *expr, size_t len, struct cron_spec *out, struct err *e);

/* The first fire time of `spec` strictly after `after_ms` (milliseconds since
 * the epoch), the expression read in the local time of `zone` (borrowed; NULL
 * means UTC), into *next_ms: a whole minute of local time (so of UTC too, as
 * every offset in use since 1972 is whole minutes). Returns false when there
 * is none within CRON_HORIZON_DAYS ("0 0 30 2 *") or `after_ms` is outside
 * the years 1..9999 (*next_ms then untouched). `spec` and `zone` are
 * borrowed; nothing is allocated. Skips whole months, days and hours that
 * cannot match. */
bool cron_next(const struct cron_spec *spec, const struct tz *zone, int64_t after_ms,
	       int64_t *next_ms);

#endif
