/* db/schedule: the schedule table (README "Schedules"; migrations/0009,
 * db/engine/15_schedules.sql). Fire times are computed by the caller
 * (base/cron.h); these functions keep the state and start the runs. */
#ifndef HOOKFLOW_DB_SCHEDULE_H
#define HOOKFLOW_DB_SCHEDULE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "db/db.h"

/* A due schedule as a firing pass reads it. Strings are owned (free with
 * db_due_schedule_cleanup). */
struct due_schedule {
	char *id;
	char *cron; /* NULL with every_ms */
	int64_t every_ms;
	char *timezone;
	int64_t next_fire_ms; /* the first fire time not handled yet */
	int64_t catchup_window_ms;
	int64_t jitter_ms;
	int64_t start_ms; /* 0: none */
	int64_t end_ms;   /* 0: none */
};

/* Frees what `s` owns and zeroes it. */
void db_due_schedule_cleanup(struct due_schedule *s);

/* Creates or replaces schedule `id` from `def_json` (borrowed: the
 * validated body as hf_schedule_put reads it) with first fire time
 * `next_ms` (0: none). *created tells which; *out the schedule's JSON
 * without next_fire_times (new reference). ERR_NOT_FOUND when its workflow
 * does not exist. */
enum err_code db_schedule_put(struct db_conn *c, const char *id, const char *def_json,
			      int64_t next_ms, bool *created, json_t **out, struct err *e);

/* Schedule `id`'s JSON without next_fire_times (new reference), or
 * ERR_NOT_FOUND. */
enum err_code db_schedule_get(struct db_conn *c, const char *id, json_t **out, struct err *e);

/* Deletes schedule `id`; ERR_NOT_FOUND when there is none. */
enum err_code db_schedule_delete(struct db_conn *c, const char *id, struct err *e);

/* Inside a transaction (db_tx_run): the schedules due now on the
 * schedules' clock (the database's plus `offset_ms`, a test knob), at most
 * `limit`, locked until it ends. *out is a malloc'd array of *n (free each
 * with db_due_schedule_cleanup, then the array); *now_ms receives the
 * schedules' clock they were due by (set when *n > 0). */
enum err_code db_schedule_due(struct db_conn *c, int64_t offset_ms, int limit,
			      struct due_schedule **out, int *n, int64_t *now_ms, struct err *e);

/* In the same transaction: handles the fire times `fires_json` (borrowed:
 * [{"fire_time", "missed", "delay_ms"}]) of schedule `id` and sets its next
 * fire time to `next_ms` (0: none left). *fired, *skipped, *missed receive
 * the counts. */
enum err_code db_schedule_fire(struct db_conn *c, const char *id, const char *fires_json,
			       int64_t next_ms, int *fired, int *skipped, int *missed,
			       struct err *e);

#endif
