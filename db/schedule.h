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
 * without next_fire_times (new reference). ERR_INVALID ("workflow: ...") when its
 * workflow does not exist. */
enum err_code db_schedule_put(struct db_conn *c, const char *id, const char *def_json,
			      int64_t next_ms, bool *created, json_t **out, struct err *e);

/* Schedule `id`'s JSON without next_fire_times (new reference), or
 * ERR_NOT_FOUND. */
enum err_code db_schedule_get(struct db_conn *c, const char *id, json_t **out, struct err *e);

/* Deletes schedule `id`; ERR_NOT_FOUND when there is none. */
enum err_code db_schedule_delete(struct db_conn *c, const char *id, struct err *e);

/* A page (`pg`, borrowed) of the schedules by id, each as db_schedule_get
 * gives it, into *out (the caller owns it: db_page_cleanup). */
enum err_code db_schedule_list(struct db_conn *c, const struct db_page_req *pg, struct db_page *out,
			       struct err *e);

/* Pauses (`paused`) or resumes schedule `id`, setting its note when `note`
 * (borrowed) is not NULL; resuming sets its next fire time to `next_ms`
 * (0: none). *out: the schedule (new reference). ERR_NOT_FOUND. */
enum err_code db_schedule_pause(struct db_conn *c, const char *id, bool paused, const char *note,
				int64_t next_ms, json_t **out, struct err *e);

/* Starts run `run_id` of schedule `id` now under its overlap policy, paused
 * or not: `outcome` receives started, skipped or buffered. ERR_NOT_FOUND. */
enum err_code db_schedule_trigger(struct db_conn *c, const char *id, const char *run_id,
				  char outcome[16], struct err *e);

/* A run per fire time of `fires_json` (borrowed: a JSON array of RFC 3339
 * times) of schedule `id` under policy `overlap`; *out: {"fire_times",
 * "started", "skipped", "buffered"} (new reference). ERR_NOT_FOUND. */
enum err_code db_schedule_backfill(struct db_conn *c, const char *id, const char *fires_json,
				   const char *overlap, json_t **out, struct err *e);

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
