/* db/workflow: SQL of the workflow table. */
#include "db/workflow.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypt.h"
#include "db/internal.h"

/* The signing secret ($4) when $12 (keep) is false: the new value, which
 * drops the previous secret of a rotation unless it is the current secret
 * again. With keep, the stored secrets stay (an expired previous one is
 * dropped on the way). The secrets are written here and in
 * hf_workflow_rotate (db_workflow_rotate) only, sealed here when
 * HOOKFLOW_ENCRYPTION_KEY is set. `paused` is state, not configuration:
 * written by hf_workflow_pause only, never here. */
static const struct db_stmt q_put = {
	"workflow_put",
	"INSERT INTO workflow AS w (name, url, callback_url, secret, timeout_ms, max_attempts,"
	" priority, backoff_base_ms, backoff_max_ms, max_concurrency, step_output_replay,"
	" key_concurrency, key_mode, debounce_ms, debounce_max_ms, rate_limit, rate_period_ms,"
	" rate_per_key, endpoint_control, max_pending_ms, on_parent_cancel)"
	" SELECT $1, $2, $3, CASE WHEN $12::boolean THEN NULL ELSE $4 END, $5, $6, $7, $8, $9,"
	" $10, $11, $13, f.key_mode, f.debounce_ms, f.debounce_max_ms, f.rate_limit,"
	" f.rate_period_ms, f.rate_per_key, f.endpoint_control, f.max_pending_ms,"
	" f.on_parent_cancel"
	" FROM jsonb_to_record($14::jsonb) AS f(key_mode text, debounce_ms integer,"
	" debounce_max_ms integer, rate_limit integer, rate_period_ms integer, rate_per_key "
	"boolean,"
	" endpoint_control boolean, max_pending_ms bigint, on_parent_cancel text)"
	" ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, callback_url = "
	"EXCLUDED.callback_url,"
	" secret = CASE WHEN $12::boolean THEN w.secret ELSE EXCLUDED.secret END,"
	" secret_previous = CASE WHEN ($12::boolean OR EXCLUDED.secret = w.secret)"
	" AND w.secret_previous_until > now() THEN w.secret_previous END,"
	" secret_previous_until = CASE WHEN ($12::boolean OR EXCLUDED.secret = w.secret)"
	" AND w.secret_previous_until > now() THEN w.secret_previous_until END,"
	" timeout_ms = EXCLUDED.timeout_ms,"
	" max_attempts = EXCLUDED.max_attempts, priority = EXCLUDED.priority,"
	" backoff_base_ms = EXCLUDED.backoff_base_ms, backoff_max_ms = EXCLUDED.backoff_max_ms,"
	" max_concurrency = EXCLUDED.max_concurrency, key_concurrency = EXCLUDED.key_concurrency,"
	" key_mode = EXCLUDED.key_mode, debounce_ms = EXCLUDED.debounce_ms,"
	" debounce_max_ms = EXCLUDED.debounce_max_ms, rate_limit = EXCLUDED.rate_limit,"
	" rate_period_ms = EXCLUDED.rate_period_ms, rate_per_key = EXCLUDED.rate_per_key,"
	" endpoint_control = EXCLUDED.endpoint_control, max_pending_ms = EXCLUDED.max_pending_ms,"
	" on_parent_cancel = EXCLUDED.on_parent_cancel,"
	" step_output_replay = EXCLUDED.step_output_replay, updated_at = now()"
	" RETURNING (xmax = 0), hf_workflow_json(w)",
	14};
static const struct db_stmt q_get = {
	"workflow_get", "SELECT hf_workflow_json(w) FROM workflow w WHERE name = $1", 1};
static const struct db_stmt q_list = {
	"workflow_list",
	DB_PAGE_SQL("SELECT hf_workflow_json(w)::text AS item, 0::bigint AS ms, w.name AS id"
		    " FROM workflow w WHERE $1::text IS NULL OR w.name > $1 ORDER BY w.name",
		    "id", "$2", "$3"),
	3};
static const struct db_stmt q_delete = {"workflow_delete", "SELECT hf_workflow_delete($1)", 1};
static const struct db_stmt q_current_secret = {
	"workflow_current_secret", "SELECT secret FROM workflow WHERE name = $1 FOR UPDATE", 1};
static const struct db_stmt q_rotate = {"workflow_rotate", "SELECT hf_workflow_rotate($1, $2, $3)",
					3};
static const struct db_stmt q_pause = {"workflow_pause",
				       "SELECT hf_workflow_pause($1, $2::boolean)", 2};

/* Runs `q` (parameters `p`), whose one value is the JSON of workflow `name`
 * or NULL when there is none: *out (new reference, NULL on failure), or
 * ERR_NOT_FOUND. */
static enum err_code json_of(struct db_conn *c, const struct db_stmt *q, const char *const *p,
			     const char *name, json_t **out, struct err *e)
{
	*out = NULL;
	PGresult *r = db_exec(c, q, p, e);
	if (r == NULL)
		return e->code;
	if (PQgetisnull(r, 0, 0)) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "workflow %s not found", name);
	}
	*out = db_json(r, 0, 0);
	PQclear(r);
	return *out != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

/* The upsert, with the secret to store (`secret`, maybe sealed) or `keep`. */
static enum err_code put(struct db_conn *c, const struct workflow_def *w, const char *secret,
			 bool keep, bool *created, json_t **out, struct err *e)
{
	*out = NULL;
	char timeout[16], attempts[16], prio[16], base[24], max[24], conc[16], kconc[16];
	snprintf(timeout, sizeof timeout, "%d", w->timeout_ms);
	snprintf(attempts, sizeof attempts, "%d", w->max_attempts);
	snprintf(prio, sizeof prio, "%d", w->priority);
	snprintf(base, sizeof base, "%lld", (long long)w->backoff_base_ms);
	snprintf(max, sizeof max, "%lld", (long long)w->backoff_max_ms);
	snprintf(conc, sizeof conc, "%d", w->max_concurrency);
	snprintf(kconc, sizeof kconc, "%d", w->key_concurrency);
	char flow[256];
	snprintf(flow, sizeof flow,
		 "{\"key_mode\":\"%s\",\"debounce_ms\":%d,\"debounce_max_ms\":%d,"
		 "\"rate_limit\":%d,\"rate_period_ms\":%d,\"rate_per_key\":%s,"
		 "\"endpoint_control\":%s,\"max_pending_ms\":%lld,\"on_parent_cancel\":\"%s\"}",
		 w->key_mode ? w->key_mode : "queue", w->debounce_ms, w->debounce_max_ms,
		 w->rate_limit, w->rate_period_ms, w->rate_per_key ? "true" : "false",
		 w->endpoint_control ? "true" : "false", (long long)w->max_pending_ms,
		 w->on_parent_cancel ? w->on_parent_cancel : "cancel");
	const char *p[14] = {w->name,
			     w->url,
			     w->callback_url,
			     keep ? NULL : secret,
			     timeout,
			     attempts,
			     prio,
			     base,
			     max,
			     conc,
			     w->step_output_replay ? "true" : "false",
			     keep ? "true" : "false",
			     kconc,
			     flow};
	PGresult *r = db_exec(c, &q_put, p, e);
	if (r == NULL)
		return e->code;
	*created = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	*out = db_json(r, 0, 1);
	PQclear(r);
	return ERR_OK;
}

struct sealed_put {
	const struct workflow_def *w;
	const unsigned char *enc_key;
	bool *created;
	json_t **out;
};

/* With secrets sealed at rest, "the same secret again" is told by opening
 * the stored one (two seals of one secret differ): then it is kept, with a
 * rotation's previous secret; else the new secret is sealed. One
 * transaction, the row locked meanwhile. */
static enum err_code put_sealed(struct db_conn *c, void *arg, struct err *e)
{
	struct sealed_put *sp = arg;
	const char *p[1] = {sp->w->name};
	PGresult *r = db_exec(c, &q_current_secret, p, e);
	if (r == NULL)
		return e->code;
	bool same = false;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
		char *current = NULL;
		if (crypt_reveal(sp->enc_key, PQgetvalue(r, 0, 0), &current, e) == ERR_OK)
			same = strcmp(current, sp->w->secret) == 0;
		if (current != NULL)
			OPENSSL_cleanse(current, strlen(current));
		free(current);
	}
	PQclear(r);
	if (e->code)
		return e->code;
	if (same)
		return put(c, sp->w, NULL, true, sp->created, sp->out, e);
	char *sealed = NULL;
	if (crypt_seal(sp->enc_key, sp->w->secret, strlen(sp->w->secret), &sealed, e))
		return e->code;
	put(c, sp->w, sealed, false, sp->created, sp->out, e);
	free(sealed);
	return e->code;
}

enum err_code db_workflow_put(struct db_conn *c, const struct workflow_def *w,
			      const unsigned char *enc_key, bool *created, json_t **out,
			      struct err *e)
{
	if (enc_key == NULL || w->keep_secret || w->secret == NULL)
		return put(c, w, w->secret, w->keep_secret, created, out, e);
	struct sealed_put sp = {w, enc_key, created, out};
	return db_tx_run(c, put_sealed, &sp, e);
}

enum err_code db_workflow_rotate(struct db_conn *c, const char *name, const char *secret,
				 int64_t grace_ms, const unsigned char *enc_key, json_t **out,
				 struct err *e)
{
	*out = NULL;
	char grace[24];
	char *sealed = NULL;
	if (enc_key != NULL && crypt_seal(enc_key, secret, strlen(secret), &sealed, e))
		return e->code;
	snprintf(grace, sizeof grace, "%lld", (long long)grace_ms);
	const char *p[3] = {name, sealed ? sealed : secret, grace};
	json_of(c, &q_rotate, p, name, out, e);
	free(sealed);
	return e->code;
}

enum err_code db_workflow_pause(struct db_conn *c, const char *name, bool paused, json_t **out,
				struct err *e)
{
	const char *p[2] = {name, paused ? "true" : "false"};
	return json_of(c, &q_pause, p, name, out, e);
}

enum err_code db_workflow_get(struct db_conn *c, const char *name, json_t **out, struct err *e)
{
	*out = NULL;
	const char *p[1] = {name};
	PGresult *r = db_exec(c, &q_get, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "workflow %s not found", name);
	}
	*out = db_json(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_workflow_list(struct db_conn *c, const struct db_page_req *pg, struct db_page *out,
			       struct err *e)
{
	memset(out, 0, sizeof *out);
	char *after = NULL;
	int64_t ignored;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &ignored, &after, e))
		return e->code;
	struct db_page_params pp;
	db_page_params(pg, &pp);
	const char *p[3] = {after, pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_list, p, e);
	free(after);
	if (r == NULL)
		return e->code;
	return db_page_read(r, out, e);
}

enum err_code db_workflow_delete(struct db_conn *c, const char *name, struct err *e)
{
	const char *p[1] = {name};
	PGresult *r = db_exec(c, &q_delete, p, e);
	if (r == NULL)
		return e->code;
	const char *res = PQgetvalue(r, 0, 0);
	enum err_code rc = ERR_OK;
	if (strcmp(res, "not_found") == 0)
		rc = err_set(e, ERR_NOT_FOUND, "workflow %s not found", name);
	else if (strcmp(res, "in_use") == 0)
		rc = err_set(e, ERR_WORKFLOW_IN_USE,
			     "workflow %s has active runs or a schedule names it", name);
	PQclear(r);
	return rc;
}
