/* db/schedule: SQL of schedules. */
#include "db/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timefmt.h"
#include "db/internal.h"

static const struct db_stmt q_put = {
	"schedule_put",
	"SELECT outcome, schedule FROM hf_schedule_put($1, $2::jsonb, $3::timestamptz)", 3};
static const struct db_stmt q_get = {
	"schedule_get", "SELECT hf_schedule_json(s) FROM schedule s WHERE s.id = $1", 1};
static const struct db_stmt q_delete = {"schedule_delete",
					"DELETE FROM schedule WHERE id = $1 RETURNING 1", 1};
static const struct db_stmt q_due = {
	"schedule_due",
	"SELECT id, cron, coalesce(every_ms, 0), timezone, hf_ms(next_fire_at),"
	" catchup_window_ms, jitter_ms, coalesce(hf_ms(start_at), 0), coalesce(hf_ms(end_at), 0),"
	" hf_ms(now()) + $1::bigint"
	" FROM hf_schedule_due(now() + make_interval(secs => $1::bigint / 1000.0), $2::integer)",
	2};
static const struct db_stmt q_list = {
	"schedule_list",
	DB_PAGE_SQL("SELECT hf_schedule_json(s)::text AS item, 0::bigint AS ms, s.id AS id"
		    " FROM schedule s WHERE $1::text IS NULL OR s.id > $1 ORDER BY s.id",
		    "id", "$2", "$3"),
	3};
static const struct db_stmt q_pause = {
	"schedule_pause", "SELECT hf_schedule_pause($1, $2::boolean, $3, $4::timestamptz)", 4};
static const struct db_stmt q_trigger = {"schedule_trigger", "SELECT hf_schedule_trigger($1, $2)",
					 2};
static const struct db_stmt q_backfill = {"schedule_backfill",
					  "SELECT hf_schedule_backfill($1, $2::jsonb, $3)", 3};
static const struct db_stmt q_fire = {"schedule_fire",
				      "SELECT hf_schedule_fire($1, $2::jsonb, $3::timestamptz)", 3};

void db_due_schedule_cleanup(struct due_schedule *s)
{
	free(s->id);
	free(s->cron);
	free(s->timezone);
	memset(s, 0, sizeof *s);
}

/* `ms` as an RFC 3339 parameter in `buf`, or NULL for 0 (none). */
static const char *time_param(int64_t ms, char buf[TIMEFMT_RFC3339_LEN + 1])
{
	if (ms == 0)
		return NULL;
	timefmt_rfc3339(ms, buf);
	return buf;
}

/* The one JSON value of row 0, column `col` of `r` (cleared) into *out. */
static enum err_code one_json(PGresult *r, int col, json_t **out, struct err *e)
{
	*out = db_json(r, 0, col);
	PQclear(r);
	return *out != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

enum err_code db_schedule_put(struct db_conn *c, const char *id, const char *def_json,
			      int64_t next_ms, bool *created, json_t **out, struct err *e)
{
	char next[TIMEFMT_RFC3339_LEN + 1];
	const char *p[3] = {id, def_json, time_param(next_ms, next)};
	*out = NULL;
	PGresult *r = db_exec(c, &q_put, p, e);
	if (r == NULL)
		return e->code;
	const char *o = PQgetvalue(r, 0, 0);
	if (strcmp(o, "workflow_not_found") == 0) {
		PQclear(r);
		return err_set(e, ERR_INVALID, "workflow: no workflow is named so");
	}
	*created = strcmp(o, "created") == 0;
	return one_json(r, 1, out, e);
}

enum err_code db_schedule_get(struct db_conn *c, const char *id, json_t **out, struct err *e)
{
	const char *p[1] = {id};
	*out = NULL;
	PGresult *r = db_exec(c, &q_get, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "schedule %s not found", id);
	}
	return one_json(r, 0, out, e);
}

enum err_code db_schedule_delete(struct db_conn *c, const char *id, struct err *e)
{
	const char *p[1] = {id};
	PGresult *r = db_exec(c, &q_delete, p, e);
	if (r == NULL)
		return e->code;
	int n = PQntuples(r);
	PQclear(r);
	return n > 0 ? ERR_OK : err_set(e, ERR_NOT_FOUND, "schedule %s not found", id);
}

static char *dup_or_null(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : strdup(PQgetvalue(r, row, col));
}

enum err_code db_schedule_due(struct db_conn *c, int64_t offset_ms, int limit,
			      struct due_schedule **out, int *n, int64_t *now_ms, struct err *e)
{
	char off[24], lim[16];
	snprintf(off, sizeof off, "%lld", (long long)offset_ms);
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[2] = {off, lim};
	*out = NULL;
	*n = 0;
	PGresult *r = db_exec(c, &q_due, p, e);
	if (r == NULL)
		return e->code;
	int rows = PQntuples(r);
	struct due_schedule *a = rows > 0 ? calloc((size_t)rows, sizeof *a) : NULL;
	if (rows > 0 && a == NULL) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	bool oom = false;
	for (int i = 0; i < rows; i++) {
		a[i].id = dup_or_null(r, i, 0);
		a[i].cron = dup_or_null(r, i, 1);
		a[i].every_ms = db_i64(r, i, 2);
		a[i].timezone = dup_or_null(r, i, 3);
		a[i].next_fire_ms = db_i64(r, i, 4);
		a[i].catchup_window_ms = db_i64(r, i, 5);
		a[i].jitter_ms = db_i64(r, i, 6);
		a[i].start_ms = db_i64(r, i, 7);
		a[i].end_ms = db_i64(r, i, 8);
		*now_ms = db_i64(r, i, 9);
		oom |= a[i].id == NULL || a[i].timezone == NULL ||
		       (a[i].cron == NULL && !PQgetisnull(r, i, 1));
	}
	PQclear(r);
	if (oom) {
		for (int i = 0; i < rows; i++)
			db_due_schedule_cleanup(&a[i]);
		free(a);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	*out = a;
	*n = rows;
	return ERR_OK;
}

enum err_code db_schedule_fire(struct db_conn *c, const char *id, const char *fires_json,
			       int64_t next_ms, int *fired, int *skipped, int *missed,
			       struct err *e)
{
	char next[TIMEFMT_RFC3339_LEN + 1];
	const char *p[3] = {id, fires_json, time_param(next_ms, next)};
	PGresult *r = db_exec(c, &q_fire, p, e);
	if (r == NULL)
		return e->code;
	json_t *counts = db_json(r, 0, 0);
	PQclear(r);
	if (counts == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	*fired = (int)json_integer_value(json_object_get(counts, "fired"));
	*skipped = (int)json_integer_value(json_object_get(counts, "skipped"));
	*missed = (int)json_integer_value(json_object_get(counts, "missed"));
	json_decref(counts);
	return ERR_OK;
}

enum err_code db_schedule_list(struct db_conn *c, const struct db_page_req *pg, struct db_page *out,
			       struct err *e)
{
	struct db_page_params pp;
	db_page_params(pg, &pp);
	char *after = NULL;
	int64_t ms = 0;
	memset(out, 0, sizeof *out);
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &ms, &after, e))
		return e->code;
	const char *p[3] = {after, pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_list, p, e);
	free(after);
	if (r == NULL)
		return e->code;
	return db_page_read(r, out, e);
}

/* A statement whose one value is a schedule's JSON, or NULL when there is
 * none (ERR_NOT_FOUND). */
static enum err_code schedule_of(struct db_conn *c, const struct db_stmt *q, const char *const *p,
				 const char *id, json_t **out, struct err *e)
{
	*out = NULL;
	PGresult *r = db_exec(c, q, p, e);
	if (r == NULL)
		return e->code;
	if (PQgetisnull(r, 0, 0)) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "schedule %s not found", id);
	}
	return one_json(r, 0, out, e);
}

enum err_code db_schedule_pause(struct db_conn *c, const char *id, bool paused, const char *note,
				int64_t next_ms, json_t **out, struct err *e)
{
	char next[TIMEFMT_RFC3339_LEN + 1];
	const char *p[4] = {id, paused ? "true" : "false", note, time_param(next_ms, next)};
	return schedule_of(c, &q_pause, p, id, out, e);
}

enum err_code db_schedule_trigger(struct db_conn *c, const char *id, const char *run_id,
				  char outcome[16], struct err *e)
{
	const char *p[2] = {id, run_id};
	PGresult *r = db_exec(c, &q_trigger, p, e);
	if (r == NULL)
		return e->code;
	snprintf(outcome, 16, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (strcmp(outcome, "not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "schedule %s not found", id);
	return ERR_OK;
}

enum err_code db_schedule_backfill(struct db_conn *c, const char *id, const char *fires_json,
				   const char *overlap, json_t **out, struct err *e)
{
	const char *p[3] = {id, fires_json, overlap};
	return schedule_of(c, &q_backfill, p, id, out, e);
}
