/* db/series: the workflow figures, the chart series and a run's callbacks,
 * each one statement that builds its JSON answer (db/series.h). */
#include "db/series.h"

#include <stdio.h>
#include <string.h>

#include "db/internal.h"

/* The figures of a set of step_stats rows `from` (bucket, attempts,
 * errors): count, errors, error rate, and the median and 95th percentile
 * read from the duration buckets (hf_stats_bucket_ms: within 9%). */
#define PCT(p, from)                                                                          \
	"(SELECT hf_stats_bucket_ms(y.bucket) FROM (SELECT f.bucket, sum(f.attempts) OVER"    \
	" (ORDER BY f.bucket) AS cum, sum(f.attempts) OVER () AS tot FROM " from " AND"       \
	" f.bucket >= 0 AND f.attempts > 0) y WHERE y.cum >= " p " * y.tot ORDER BY y.bucket" \
	" LIMIT 1)"
#define STEP_FIGURES(from)                                                         \
	"(SELECT jsonb_build_object('attempts', coalesce(sum(f.attempts), 0),"     \
	" 'errors', coalesce(sum(f.errors), 0),"                                   \
	" 'error_rate', CASE WHEN sum(f.attempts) > 0 THEN round(sum(f.errors) / " \
	" sum(f.attempts), 4) END,"                                                \
	" 'p50_ms', " PCT("0.5", from) ", 'p95_ms', " PCT("0.95", from) ") FROM " from ")"
#define RUN_FIGURES(from)                                                                    \
	"(SELECT jsonb_build_object('succeeded', coalesce(sum(f.succeeded), 0),"             \
	" 'failed', coalesce(sum(f.failed), 0), 'cancelled', coalesce(sum(f.cancelled), 0))" \
	" FROM " from ")"

/* The count of the rows of status `s`, as a jsonb_build_object key and value. */
#define COUNT(s) "'" s "', count(*) FILTER (WHERE status = '" s "')"
#define QUEUED_COUNTS COUNT("pending") ", " COUNT("scheduled") ", " COUNT("waiting")
#define ACTIVE_COUNTS QUEUED_COUNTS ", " COUNT("running") ", " COUNT("cancelling")

/* The active runs are counted through run_active_workflow, at most 10,000. */
static const struct db_stmt q_workflow_stats = {
	"workflow_stats",
	"WITH w AS (SELECT w.name, w.paused FROM workflow w WHERE w.name = $1),"
	" win AS (SELECT date_trunc('minute', now()) - interval '59 minutes' AS since),"
	" ss AS (SELECT s.bucket, sum(s.attempts) AS attempts, sum(s.errors) AS errors,"
	" sum(s.succeeded) AS succeeded, sum(s.failed) AS failed, sum(s.cancelled) AS cancelled"
	" FROM step_stats s WHERE s.workflow = $1 AND s.minute >= (SELECT since FROM win)"
	" GROUP BY s.bucket),"
	" act AS (SELECT r.status FROM run r WHERE r.workflow = $1"
	" AND r.status NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 10000)"
	" SELECT jsonb_build_object('workflow', w.name, 'paused', w.paused, 'window_minutes', 60,"
	" 'from', hf_ts((SELECT since FROM win)), 'to', hf_ts(now()),"
	" 'active', (SELECT jsonb_build_object(" ACTIVE_COUNTS ") FROM act),"
	" 'active_capped', (SELECT count(*) >= 10000 FROM act),"
	" 'last_hour', " RUN_FIGURES("ss f WHERE true") ","
							" 'steps', " STEP_FIGURES(
								"ss f WHERE true") ")::text FROM w",
	1};

/* 60 points (DB_SERIES_POINTS) of $1 seconds each ($1 minutes: a multiple of
 * 60), aligned on multiples of $1 seconds, the last one holding now; of
 * every workflow or of workflow $2 (through step_stats_workflow). */
#define SERIES(name, filter, wf, nparams)                                                          \
	{                                                                                          \
		name,                                                                              \
			"WITH win AS (SELECT to_timestamp((floor(extract(epoch FROM now()) / $1) " \
			"- 59) * $1)"                                                              \
			" AS since),"                                                              \
			" ss AS (SELECT floor((extract(epoch FROM s.minute) - extract(epoch FROM " \
			"(SELECT"                                                                  \
			" since FROM win))) / $1)::int AS i, s.bucket, sum(s.attempts) AS "        \
			"attempts,"                                                                \
			" sum(s.errors) AS errors, sum(s.succeeded) AS succeeded, sum(s.failed) "  \
			"AS failed,"                                                               \
			" sum(s.cancelled) AS cancelled FROM step_stats s"                         \
			" WHERE s.minute >= (SELECT since FROM win)" filter " GROUP BY 1, 2),"     \
			" pts AS (SELECT g.i, jsonb_build_object('at', hf_ts((SELECT since FROM "  \
			"win)"                                                                     \
			" + make_interval(secs => g.i * $1)),"                                     \
			" 'runs', " RUN_FIGURES(                                                   \
				"ss f WHERE f.i = g.i") ","                                        \
							" 'steps', " STEP_FIGURES(                 \
								"ss f WHERE f.i = g.i") ") AS p"   \
											" FROM "   \
											"generate" \
											"_series(" \
											"0, 59) "  \
											"AS g(i))" \
											" SELECT " \
											"jsonb_"   \
											"build_"   \
											"object('" \
											"workflow" \
											"', " wf   \
											","        \
											" '"       \
											"minutes'" \
											", "       \
											"$1::int," \
											" '"       \
											"bucket_"  \
											"seconds'" \
											", "       \
											"$1::int," \
											" 'from'," \
											" hf_ts((" \
											"SELECT "  \
											"since "   \
											"FROM "    \
											"win)),"   \
											" 'to', "  \
											"hf_ts(("  \
											"SELECT "  \
											"since "   \
											"FROM "    \
											"win) + "  \
											"make_"    \
											"interval" \
											"(secs "   \
											"=> 60 * " \
											"$1)),"    \
											" '"       \
											"points'," \
											" ("       \
											"SELECT "  \
											"jsonb_"   \
											"agg(p "   \
											"ORDER "   \
											"BY i) "   \
											"FROM "    \
											"pts))::"  \
											"text",    \
			nparams                                                                    \
	}
static const struct db_stmt q_series_all = SERIES("stats_series_all", "", "NULL::text", 1);
static const struct db_stmt q_series_workflow =
	SERIES("stats_series_workflow", " AND s.workflow = $2", "$2::text", 2);

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
	return one_json(c, workflow ? &q_series_workflow : &q_series_all, p, "series of",
			workflow ? workflow : "all", out, e);
}

enum err_code db_run_callbacks(struct db_conn *c, const char *run_id, json_t **out, struct err *e)
{
	const char *p[1] = {run_id};
	return one_json(c, &q_callbacks, p, "run", run_id, out, e);
}
