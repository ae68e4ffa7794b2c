/* handlers/memo: GET, PUT, DELETE of run-scope (/v1/runs/{id}/memo/{key}) and
 * step-scope (/v1/runs/{id}/steps/{n}/memo/{key}) memos. Authorised by an API
 * token or by the run's delivery token (its signature and expiry checked in
 * service/http, its run's state here). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "db/memo.h"
#include "handlers/common.h"
#include "handlers/handlers.h"

/* Reads the run id, scope and key from the path: a run-scope route has two
 * parameters (run, key), a step-scope route three (run, step, key). */
static enum err_code memo_path(struct http_req *r, const char **run_id, int *scope,
			       const char **key, struct err *e)
{
	*run_id = http_req_param(r, 0);
	if (ids_check_run_id("run_id", *run_id, strlen(*run_id), e))
		return e->code;
	const char *k = http_req_param(r, 2);
	if (k == NULL) {
		*scope = MEMO_RUN_SCOPE;
		k = http_req_param(r, 1);
	} else if (hc_step_param(r, 1, scope, e)) {
		return e->code;
	}
	*key = k;
	return ids_check_key("key", k, strlen(k), e);
}

/* A delivery token works while its run is active in its generation. */
static enum err_code token_still_valid(struct http_req *r, struct db_conn *c, const char *run_id,
				       struct err *e)
{
	struct token_claims claims;
	if (!http_req_delivery_token(r, &claims))
		return ERR_OK;
	return db_memo_token_check(c, run_id, claims.generation, e);
}

void handle_memo_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *run_id, *key;
	int scope;
	json_t *v = NULL;
	if (memo_path(r, &run_id, &scope, &key, &e) || hc_db(r, &c, &e) ||
	    token_still_valid(r, c, run_id, &e) || db_memo_get(c, run_id, scope, key, &v, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:o}", "value", v));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_memo_put(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *run_id, *key;
	int scope;
	char *value = NULL;
	if (memo_path(r, &run_id, &scope, &key, &e) || hc_value_body(r, &value, &e) ||
	    hc_db(r, &c, &e) || token_still_valid(r, c, run_id, &e) ||
	    db_memo_put(c, run_id, scope, key, value, &e))
		goto out;
	http_reply_json(r, 200,
			json_pack("{s:o}", "value", json_loads(value, JSON_DECODE_ANY, NULL)));
out:
	free(value);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_memo_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *run_id, *key;
	int scope;
	bool removed;
	if (memo_path(r, &run_id, &scope, &key, &e) || hc_db(r, &c, &e) ||
	    token_still_valid(r, c, run_id, &e) ||
	    db_memo_delete(c, run_id, scope, key, &removed, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
