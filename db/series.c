/* db/series: the workflow figures, the chart series and a run's callbacks,
 * each one statement that builds its JSON answer (db/series.h). */
#include "db/series.h"

#include <stdio.h>
#include <string.h>

#include "db/internal.h"

/* The sample of step attempts: the newest 1000 by id (DB_SERIES_SAMPLE; an
 * index range scan of step_attempt's primary key, whatever the table holds),
 * and whether attempts older than the sample fall inside the window that
 * starts at `since` (then the sample is cut short). */
#define SAMPLE_ATTEMPTS                                                                     \
	"raw AS (SELECT a.id, a.run_id, a.started_at, a.finished_at, a.result"              \
	" FROM step_attempt a"                                                              \
	" WHERE a.id > (SELECT coalesce(max(x.id), 0) FROM step_attempt x) - 1000),"        \
	" cut AS (SELECT NOT EXISTS (SELECT 1 FROM raw WHERE raw.finished_at < (SELECT"     \
	" since FROM win))"                                                                 \
	" AND coalesce((SELECT min(raw.id) FROM raw) > (SELECT min(y.id) FROM step_attempt" \
	" y), false) AS truncated)"

/* The figures of a set of attempts `att` (result, ms). */
#define STEP_FIGURES(from)                                                                   \
	"(SELECT jsonb_build_object('attempts', count(*),"                                   \
	" 'errors', count(*) FILTER (WHERE result IN ('transient_error', 'permanent_error'," \
	" 'lease_expired')),"                                                                \
	" 'error_rate', CASE WHEN count(*) > 0 THEN round((count(*) FILTER (WHERE result IN" \
	" ('transient_error', 'permanent_error', 'lease_expired')))::numeric / count(*), 4)" \
	" END,"                                                                              \
	" 'p50_ms', round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 1),"   \
	" 'p95_ms', round((percentile_cont(0.95) WITHIN GROUP (ORDER BY ms))::numeric, 1))"  \
	" FROM " from ")"

/* The count of the rows of status `s`, as a jsonb_build_object key and value. */
#define COUNT(s) "'" s "', count(*) FILTER (WHERE status = '" s "')"
#define QUEUED_COUNTS COUNT("pending") ", " COUNT("scheduled") ", " COUNT("waiting")
#define ACTIVE_COUNTS QUEUED_COUNTS ", " COUNT("running") ", " COUNT("cancelling")
#define ENDED_COUNTS COUNT("succeeded") ", " COUNT("failed") ", " COUNT("cancelled")
#define WF_ACTIVE "(SELECT jsonb_build_object(" ACTIVE_COUNTS ") FROM act)"
#define WF_LAST_HOUR "(SELECT jsonb_build_object(" ACTIVE_COUNTS ", " ENDED_COUNTS ") FROM rec)"
#define WF_STEPS STEP_FIGURES("att")
#define POINT_RUNS "(SELECT jsonb_build_object(" ENDED_COUNTS ") FROM fin WHERE fin.i = g.i)"
#define POINT_STEPS STEP_FIGURES("att WHERE att.i = g.i")

/* A sampled attempt's workflow is read by a scalar subquery, one primary-key
 * lookup per attempt: an EXISTS would be planned as a semi-join, which may
 * hash every run of the workflow (tests/integration/test_size_plans.py). */
static const struct db_stmt q_workflow_stats = {
	"workflow_stats",
	"WITH w AS (SELECT w.name, w.paused FROM workflow w WHERE w.name = $1),"
	" win AS (SELECT now() - interval '1 hour' AS since),"
	" " SAMPLE_ATTEMPTS ","
	" att AS (SELECT raw.result,"
	" extract(epoch FROM raw.finished_at - raw.started_at) * 1000 AS ms FROM raw"
	" WHERE raw.finished_at >= (SELECT since FROM win)"
	" AND (SELECT r.workflow FROM run r WHERE r.run_id = raw.run_id) = $1),"
	" act AS (SELECT r.status FROM run r WHERE r.workflow = $1"
	" AND r.status NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 1000),"
	" rec AS (SELECT r.status FROM run r WHERE r.workflow = $1"
	" AND r.created_at >= (SELECT since FROM win) ORDER BY r.created_at DESC LIMIT 1000)"
	" SELECT jsonb_build_object('workflow', w.name, 'paused', w.paused, 'window_minutes', 60,"
	" 'from', hf_ts((SELECT since FROM win)), 'to', hf_ts(now()),"
	" 'active', " WF_ACTIVE ","
	" 'active_capped', (SELECT count(*) >= 1000 FROM act),"
	" 'last_hour', " WF_LAST_HOUR ","
	" 'last_hour_capped', (SELECT count(*) >= 1000 FROM rec),"
	" 'steps', " WF_STEPS ","
	" 'sample', jsonb_build_object('limit', 1000, 'truncated', (SELECT truncated FROM cut)))"
	"::text FROM w",
	1};

/* 60 points (DB_SERIES_POINTS) of $1 seconds each, aligned on multiples of
 * $1 seconds, the last one holding now. */
static const struct db_stmt q_series = {
	"stats_series",
	"WITH win AS (SELECT to_timestamp((floor(extract(epoch FROM now()) / $1) - 59) * $1)"
	" AS since),"
	" " SAMPLE_ATTEMPTS ","
	" att AS (SELECT raw.result, extract(epoch FROM raw.finished_at - raw.started_at) * 1000"
	" AS ms, floor((extract(epoch FROM raw.finished_at) - extract(epoch FROM (SELECT since"
	" FROM win))) / $1)::int AS i FROM raw WHERE raw.finished_at >= (SELECT since FROM win)"
	" AND ($2::text IS NULL OR (SELECT r.workflow FROM run r WHERE r.run_id = raw.run_id)"
	" = $2)),"
	" fin_raw AS (SELECT r.finished_at, r.status, r.workflow FROM run r"
	" WHERE r.finished_at >= (SELECT since FROM win) ORDER BY r.finished_at DESC LIMIT 1000),"
	" fin AS (SELECT f.status, floor((extract(epoch FROM f.finished_at) - extract(epoch FROM"
	" (SELECT since FROM win))) / $1)::int AS i FROM fin_raw f"
	" WHERE $2::text IS NULL OR f.workflow = $2),"
	" pts AS (SELECT g.i, jsonb_build_object('at', hf_ts((SELECT since FROM win)"
	" + make_interval(secs => g.i * $1)),"
	" 'runs', " POINT_RUNS ","
	" 'steps', " POINT_STEPS ") AS p"
	" FROM generate_series(0, 59) AS g(i))"
	" SELECT jsonb_build_object('workflow', $2::text, 'minutes', $1::int,"
	" 'bucket_seconds', $1::int, 'from', hf_ts((SELECT since FROM win)),"
	" 'to', hf_ts((SELECT since FROM win) + make_interval(secs => 60 * $1)),"
	" 'points', (SELECT jsonb_agg(p ORDER BY i) FROM pts),"
	" 'sample', jsonb_build_object('limit', 1000, 'steps_truncated', (SELECT truncated FROM"
	" cut), 'runs_truncated', (SELECT count(*) >= 1000 FROM fin_raw)))::text",
	2};

static const struct db_stmt q_callbacks = {
	"run_callbacks",
	"SELECT CASE WHEN EXISTS (SELECT 1 FROM run WHERE run_id = $1) THEN"
	" jsonb_build_object('run_id', $1::text, 'callbacks', coalesce((SELECT jsonb_agg("
	" jsonb_build_object('generation', c.generation, 'url', c.url, 'status', c.status,"
	" 'attempts', c.attempt, 'max_attempts', c.max_attempts, 'last_error', c.last_error,"
	" 'last_http_status', c.last_http_status,"
	" 'next_attempt_at', CASE WHEN c.status IN ('pending', 'scheduled') THEN hf_ts(c.next_at)"
	" END, 'created_at', hf_ts(c.created_at), 'updated_at', hf_ts(c.updated_at),"
	" 'finished_at', hf_ts(c.finished_at)) ORDER BY c.generation DESC)"
	" FROM (SELECT * FROM callback WHERE run_id = $1 ORDER BY generation DESC LIMIT 100) c),"
	" '[]'::jsonb))::text END",
	1};

static enum err_code one_json(struct db_conn *c, const struct db_stmt *st, const char *const *p,
			      const char *what, const char *id, json_t **out, struct err *e)
{
	*out = NULL;
	PGresult *r = db_exec(c, st, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "%s %s not found", what, id);
	}
	*out = db_json(r, 0, 0);
	PQclear(r);
	if (*out == NULL)
		return err_set(e, ERR_INTERNAL, "%s %s: the database answered no JSON", what, id);
	return ERR_OK;
}

enum err_code db_workflow_stats(struct db_conn *c, const char *name, json_t **out, struct err *e)
{
	const char *p[1] = {name};
	return one_json(c, &q_workflow_stats, p, "workflow", name, out, e);
}

enum err_code db_stats_series(struct db_conn *c, int minutes, const char *workflow, json_t **out,
			      struct err *e)
{
	char m[16];
	snprintf(m, sizeof m, "%d", minutes);
	const char *p[2] = {m, workflow};
	return one_json(c, &q_series, p, "series of", workflow ? workflow : "all", out, e);
}

enum err_code db_run_callbacks(struct db_conn *c, const char *run_id, json_t **out, struct err *e)
{
	const char *p[1] = {run_id};
	return one_json(c, &q_callbacks, p, "run", run_id, out, e);
}
