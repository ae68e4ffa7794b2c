/* db/series: what the dashboard charts and the workflow page summarise,
 * computed from hookflow's own tables (openapi.yaml: getWorkflowStats,
 * getStatsSeries, listRunCallbacks).
 *
 * The step and run figures are read from step_stats, which every
 * settlement adds to (migrations/0011_step_stats.sql): exact counts by
 * minute, durations by bucket (percentiles within 9%), whatever the load. */
#ifndef HOOKFLOW_DB_SERIES_H
#define HOOKFLOW_DB_SERIES_H

#include <jansson.h>

#include "base/err.h"
#include "db/db.h"

#define DB_SERIES_POINTS 60

/* Workflow `name`'s figures over the last hour into *out (a new reference
 * the caller owns; NULL on failure): its active runs by status (at most
 * 10,000 counted), the runs that ended in the last hour by status, the step
 * attempts' count, error rate and duration percentiles. Errors: ERR_NOT_FOUND when no such workflow. */
enum err_code db_workflow_stats(struct db_conn *c, const char *name, json_t **out, struct err *e);

/* DB_SERIES_POINTS points covering the last `minutes` minutes, each
 * `minutes` seconds long (`minutes`: a multiple of 60), of runs ended by status and of step attempts
 * (count, errors, p50 and p95 duration), of workflow `workflow` (borrowed;
 * NULL: all) into *out (a new reference the caller owns; NULL on failure). */
enum err_code db_stats_series(struct db_conn *c, int minutes, const char *workflow, json_t **out,
			      struct err *e);

/* The terminal callbacks of run `run_id` (borrowed; one per generation that
 * ended with a callback URL, newest first, at most 100) and their delivery
 * state into *out (a new reference the caller owns; NULL on failure).
 * Errors: ERR_NOT_FOUND when no such run. */
enum err_code db_run_callbacks(struct db_conn *c, const char *run_id, json_t **out, struct err *e);

#endif
