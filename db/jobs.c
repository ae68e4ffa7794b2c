/* db/jobs: SQL of claims, settlements, leases, promotion and reaping. */
#include "db/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/internal.h"

static const struct db_stmt q_cycle = {
	"jobs_cycle",
	"SELECT kind, id, run_id, workflow, step, attempt, max_attempts, generation, payload,"
	" headers, signal, group_id, group_key, claim_token, cancel_requested, url, timeout_ms,"
	" secret, backoff_base_ms, backoff_max_ms, replay, now_ms, replayed"
	" FROM hf_cycle($1::jsonb, $2::jsonb, $3, $4, $5)",
	5};
static const struct db_stmt q_settle_steps = {
	"jobs_settle_steps", "SELECT run_id, outcome FROM hf_settle_steps($1::jsonb)", 1};
static const struct db_stmt q_settle_callbacks = {
	"jobs_settle_callbacks", "SELECT id, outcome FROM hf_settle_callbacks($1::jsonb)", 1};
static const struct db_stmt q_store_outputs = {"jobs_store_outputs",
					       "SELECT hf_store_outputs($1::jsonb)", 1};
static const struct db_stmt q_sweep = {"jobs_sweep", "SELECT hf_sweep($1, $2, $3)", 3};
static const struct db_stmt q_renew = {
	"jobs_renew", "SELECT kind, id, cancel_requested FROM hf_renew($1, $2)", 2};
static const struct db_stmt q_promote = {"jobs_promote", "SELECT hf_promote($1)", 1};
static const struct db_stmt q_next_due = {"jobs_next_due", "SELECT hf_next_due(), hf_ms(now())", 0};
static const struct db_stmt q_reap = {"jobs_reap", "SELECT hf_reap($1, $2)", 2};
static const struct db_stmt q_memo_key = {"jobs_memo_key",
					  "SELECT value FROM hf_meta WHERE key = 'memo_key'", 0};

static char *dup_col(const PGresult *r, int row, int col)
{
	const char *s = db_str(r, row, col);
	return s ? strdup(s) : NULL;
}

void db_claimed_job_cleanup(struct claimed_job *j)
{
	free(j->id);
	free(j->run_id);
	free(j->workflow);
	free(j->payload);
	free(j->headers);
	free(j->signal);
	free(j->group_id);
	free(j->group_key);
	free(j->url);
	free(j->secret);
	free(j->replayed);
	memset(j, 0, sizeof *j);
}

enum err_code db_jobs_cycle(struct db_conn *c, const json_t *steps, const json_t *callbacks,
			    const char *owner, int limit, int lease_ms, struct claimed_job **jobs,
			    int *n, int *lost, struct err *e)
{
	*jobs = NULL;
	*n = 0;
	*lost = 0;
	char *st = json_dumps(steps, JSON_COMPACT);
	char *cb = json_dumps(callbacks, JSON_COMPACT);
	if (st == NULL || cb == NULL) {
		free(st);
		free(cb);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	char lim[16], lease[16];
	snprintf(lim, sizeof lim, "%d", limit);
	snprintf(lease, sizeof lease, "%d", lease_ms);
	const char *p[5] = {st, cb, owner, lim, lease};
	PGresult *r = db_exec(c, &q_cycle, p, e);
	free(st);
	free(cb);
	if (r == NULL)
		return e->code;
	/* Claimed jobs come first, then the lost settlements. */
	int rows = PQntuples(r);
	while (rows > 0 && strncmp(PQgetvalue(r, rows - 1, 0), "lost_", 5) == 0) {
		rows--;
		(*lost)++;
	}
	if (rows == 0) {
		PQclear(r);
		return ERR_OK;
	}
	struct claimed_job *a = calloc((size_t)rows, sizeof *a);
	if (a == NULL) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	for (int i = 0; i < rows; i++) {
		struct claimed_job *j = &a[i];
		j->kind = strcmp(PQgetvalue(r, i, 0), "step") == 0 ? JOB_STEP : JOB_CALLBACK;
		j->id = dup_col(r, i, 1);
		j->run_id = dup_col(r, i, 2);
		j->workflow = dup_col(r, i, 3);
		j->step = (int)db_i64(r, i, 4);
		j->attempt = (int)db_i64(r, i, 5);
		j->max_attempts = (int)db_i64(r, i, 6);
		j->generation = (int)db_i64(r, i, 7);
		j->payload = dup_col(r, i, 8);
		j->headers = dup_col(r, i, 9);
		j->signal = dup_col(r, i, 10);
		j->group_id = dup_col(r, i, 11);
		j->group_key = dup_col(r, i, 12);
		j->claim_token = db_i64(r, i, 13);
		j->cancel_requested = strcmp(PQgetvalue(r, i, 14), "t") == 0;
		j->url = dup_col(r, i, 15);
		j->timeout_ms = (int)db_i64(r, i, 16);
		j->secret = dup_col(r, i, 17);
		j->backoff_base_ms = db_i64(r, i, 18);
		j->backoff_max_ms = db_i64(r, i, 19);
		j->replay = strcmp(PQgetvalue(r, i, 20), "t") == 0;
		j->now_ms = db_i64(r, i, 21);
		j->replayed = dup_col(r, i, 22);
	}
	PQclear(r);
	*jobs = a;
	*n = rows;
	return ERR_OK;
}

enum err_code db_jobs_settle(struct db_conn *c, enum job_kind kind, const json_t *items, int *lost,
			     struct err *e)
{
	if (lost)
		*lost = 0;
	char *text = json_dumps(items, JSON_COMPACT);
	if (text == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	const char *p[1] = {text};
	PGresult *r = db_exec(c, kind == JOB_STEP ? &q_settle_steps : &q_settle_callbacks, p, e);
	free(text);
	if (r == NULL)
		return e->code;
	if (lost) {
		for (int i = 0; i < PQntuples(r); i++)
			if (strcmp(PQgetvalue(r, i, 1), "claim_lost") == 0)
				(*lost)++;
	}
	PQclear(r);
	return ERR_OK;
}

static enum err_code one_int(struct db_conn *c, const struct db_stmt *st, const char *const *p,
			     int *n, struct err *e)
{
	PGresult *r = db_exec(c, st, p, e);
	if (r == NULL)
		return e->code;
	*n = (int)db_i64(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_jobs_store_outputs(struct db_conn *c, const json_t *items, struct err *e)
{
	char *text = json_dumps(items, JSON_COMPACT);
	if (text == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	const char *p[1] = {text};
	PGresult *r = db_exec(c, &q_store_outputs, p, e);
	free(text);
	if (r == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

enum err_code db_jobs_sweep(struct db_conn *c, int64_t retention_ms, int64_t dead_retention_ms,
			    int limit, int *n, struct err *e)
{
	char ret[24], dead[24], lim[16];
	snprintf(ret, sizeof ret, "%lld", (long long)retention_ms);
	snprintf(dead, sizeof dead, "%lld", (long long)dead_retention_ms);
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[3] = {ret, dead, lim};
	return one_int(c, &q_sweep, p, n, e);
}

enum err_code db_jobs_renew(struct db_conn *c, const char *owner, int lease_ms,
			    void (*fn)(void *arg, enum job_kind kind, const char *id,
				       bool cancel_requested),
			    void *arg, struct err *e)
{
	char lease[16];
	snprintf(lease, sizeof lease, "%d", lease_ms);
	const char *p[2] = {owner, lease};
	PGresult *r = db_exec(c, &q_renew, p, e);
	if (r == NULL)
		return e->code;
	for (int i = 0; i < PQntuples(r); i++)
		fn(arg, strcmp(PQgetvalue(r, i, 0), "step") == 0 ? JOB_STEP : JOB_CALLBACK,
		   PQgetvalue(r, i, 1), strcmp(PQgetvalue(r, i, 2), "t") == 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_jobs_promote(struct db_conn *c, int limit, int *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[1] = {lim};
	return one_int(c, &q_promote, p, n, e);
}

enum err_code db_jobs_next_due(struct db_conn *c, int64_t *due_ms, bool *has, int64_t *db_now_ms,
			       struct err *e)
{
	PGresult *r = db_exec(c, &q_next_due, NULL, e);
	if (r == NULL)
		return e->code;
	*has = !PQgetisnull(r, 0, 0);
	*due_ms = db_i64(r, 0, 0);
	*db_now_ms = db_i64(r, 0, 1);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_jobs_reap(struct db_conn *c, const char *owner, int limit, int *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[2] = {owner, lim};
	return one_int(c, &q_reap, p, n, e);
}

enum err_code db_jobs_memo_key(struct db_conn *c, unsigned char *out, size_t cap, size_t *len,
			       struct err *e)
{
	PGresult *r = db_exec(c, &q_memo_key, NULL, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "memo key missing: run migrations");
	}
	size_t n = 0;
	unsigned char *raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &n);
	PQclear(r);
	if (raw == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	*len = n < cap ? n : cap;
	memcpy(out, raw, *len);
	PQfreemem(raw);
	return ERR_OK;
}
