/* service/scheduler: fires due schedules (README "Schedules"). A pass is one
 * transaction: the due schedules are locked (another instance passes them
 * over), their fire times up to now are computed here (base/cron.h, or
 * every_ms), and each schedule's are handed to the engine, which starts the
 * runs under the overlap policy and advances next_fire_at in that same
 * transaction: one run per fire time, whatever the instances. */
#ifndef HOOKFLOW_SCHEDULER_H
#define HOOKFLOW_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/cron.h"
#include "base/err.h"
#include "base/tz.h"
#include "db/db.h"

#define SCHEDULER_BATCH 100      /* schedules per pass */
#define SCHEDULER_MAX_FIRES 1000 /* fire times run per schedule per pass */
/* A fire time handled this late is on time whatever the catch-up window
 * (the timer and the pass take a few ms; a window of 0 must not miss it). */
#define SCHEDULER_ON_TIME_MS 2000

/* How a schedule's fire times follow each other: a cron expression in a zone
 * (borrowed), or every `every_ms` from `anchor_ms`; within [start_ms, end_ms)
 * (0: unbounded). */
struct fire_rule {
	const struct cron_spec *cron; /* NULL: every_ms */
	const struct tz *zone;        /* NULL: UTC */
	int64_t every_ms;
	int64_t anchor_ms;
	int64_t start_ms;
	int64_t end_ms;
};

/* The first fire time of `r` strictly after `after_ms` into *next_ms; false
 * when there is none (past end_ms, or a cron expression that never fires).
 * Pure. */
bool scheduler_next_fire(const struct fire_rule *r, int64_t after_ms, int64_t *next_ms);

/* The delay in [0, jitter_ms) that fire time `fire_ms` of schedule `id`
 * starts after: the same on every instance and every pass. Pure. */
int64_t scheduler_jitter_ms(const char *id, int64_t fire_ms, int64_t jitter_ms);

/* One pass on the schedules' clock (the database's plus `offset_ms`,
 * HOOKFLOW_CLOCK_OFFSET_MS): fires every due schedule, at most
 * SCHEDULER_BATCH of them. *fired, *skipped, *missed receive the counts;
 * *more is true when the batch was full (call again). */
enum err_code scheduler_pass(struct db_conn *c, int64_t offset_ms, int *fired, int *skipped,
			     int *missed, bool *more, struct err *e);

#endif
