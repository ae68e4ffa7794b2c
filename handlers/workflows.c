/* handlers/workflows: PUT, GET, DELETE /v1/workflows/{name}, GET /v1/workflows,
 * POST /v1/workflows/{name}/secret (rotation of the signing secret) and POST
 * /v1/workflows/{name}/pause and /resume. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/sig.h"
#include "db/workflow.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "handlers/parse.h"

static const char *const workflow_keys[] = {"url",
					    "callback_url",
					    "timeout_ms",
					    "max_attempts",
					    "priority",
					    "retry_backoff",
					    "max_concurrency",
					    "key_concurrency",
					    "key_mode",
					    "debounce_ms",
					    "debounce_max_ms",
					    "rate_limit",
					    "endpoint_control",
					    "secret",
					    "step_output_replay",
					    "max_pending_ms",
					    "on_parent_cancel",
					    "name",
					    NULL};
static const char *const backoff_keys[] = {"base_ms", "max_ms", NULL};
static const char *const rate_keys[] = {"limit", "period_ms", "per_key", NULL};
static const char *const key_modes[] = {"queue", "skip", "cancel_active", "debounce", NULL};

/* key_mode, debounce_ms, debounce_max_ms, rate_limit, endpoint_control
 * (README "Flow control"). */
static enum err_code parse_flow(const json_t *body, struct workflow_def *w, struct err *e)
{
	int64_t n;
	if (hc_str(body, "key_mode", 32, &w->key_mode, e))
		return e->code;
	if (w->key_mode == NULL)
		w->key_mode = "queue";
	bool known = false;
	for (int i = 0; key_modes[i] != NULL; i++)
		known = known || strcmp(w->key_mode, key_modes[i]) == 0;
	if (!known)
		return err_set(e, ERR_INVALID,
			       "key_mode: must be queue, skip, cancel_active or debounce");
	bool debounce = strcmp(w->key_mode, "debounce") == 0;
	if (!debounce && (json_object_get(body, "debounce_ms") != NULL ||
			  json_object_get(body, "debounce_max_ms") != NULL))
		return err_set(e, ERR_INVALID, "%s: only with key_mode debounce",
			       json_object_get(body, "debounce_ms") ? "debounce_ms"
								    : "debounce_max_ms");
	if (debounce && json_object_get(body, "debounce_ms") == NULL)
		return err_set(e, ERR_INVALID, "debounce_ms: required with key_mode debounce");
	if (hc_int(body, "debounce_ms", 1, 86400000, 0, &n, e))
		return e->code;
	w->debounce_ms = (int)n;
	if (hc_int(body, "debounce_max_ms", 0, 86400000, 0, &n, e))
		return e->code;
	w->debounce_max_ms = (int)n;
	if (w->debounce_max_ms > 0 && w->debounce_max_ms < w->debounce_ms)
		return err_set(e, ERR_INVALID,
			       "debounce_max_ms: must be 0 (no bound) or at least debounce_ms");
	w->rate_limit = 0;
	w->rate_period_ms = 0;
	w->rate_per_key = false;
	json_t *rl = json_object_get(body, "rate_limit");
	if (rl != NULL && !json_is_null(rl)) {
		if (!json_is_object(rl))
			return err_set(e, ERR_INVALID, "rate_limit: must be an object or null");
		if (hc_only_keys(rl, rate_keys, e))
			return e->code;
		if (json_object_get(rl, "limit") == NULL ||
		    json_object_get(rl, "period_ms") == NULL)
			return err_set(e, ERR_INVALID, "rate_limit.%s: required",
				       json_object_get(rl, "limit") ? "period_ms" : "limit");
		struct err inner = {0};
		int64_t lim, per;
		if (hc_int(rl, "limit", 1, 100000, 0, &lim, &inner) ||
		    hc_int(rl, "period_ms", 1, 86400000, 0, &per, &inner) ||
		    hc_bool(rl, "per_key", false, &w->rate_per_key, &inner))
			return err_set(e, inner.code, "rate_limit.%.200s", inner.msg);
		w->rate_limit = (int)lim;
		w->rate_period_ms = (int)per;
	}
	return hc_bool(body, "endpoint_control", true, &w->endpoint_control, e);
}

enum err_code workflows_parse_body(const json_t *body, const struct netpolicy *egress,
				   struct workflow_def *w, struct err *e)
{
	int64_t n;
	if (hc_only_keys(body, workflow_keys, e))
		return e->code;
	const char *name_in_body;
	if (hc_str(body, "name", IDS_MAX_NAME, &name_in_body, e))
		return e->code;
	if (name_in_body != NULL && strcmp(name_in_body, w->name) != 0)
		return err_set(e, ERR_INVALID, "name: must match the name in the path");
	if (hc_str(body, "url", HC_MAX_URL, &w->url, e))
		return e->code;
	if (w->url == NULL)
		return err_set(e, ERR_INVALID, "url: required");
	if (hc_check_url(egress, "url", w->url, e))
		return e->code;
	if (hc_str(body, "callback_url", HC_MAX_URL, &w->callback_url, e))
		return e->code;
	if (w->callback_url != NULL && hc_check_url(egress, "callback_url", w->callback_url, e))
		return e->code;
	if (hc_int(body, "timeout_ms", 1, 3600000, 30000, &n, e))
		return e->code;
	w->timeout_ms = (int)n;
	if (hc_int(body, "max_attempts", 1, 1000, 3, &n, e))
		return e->code;
	w->max_attempts = (int)n;
	if (hc_int(body, "priority", 0, 2147483647, 1000, &n, e))
		return e->code;
	w->priority = (int)n;
	if (hc_int(body, "max_concurrency", 0, 1000000, 0, &n, e))
		return e->code;
	w->max_concurrency = (int)n;
	if (hc_int(body, "key_concurrency", 0, 1000000, 0, &n, e))
		return e->code;
	w->key_concurrency = (int)n;
	w->backoff_base_ms = 1000;
	w->backoff_max_ms = 300000;
	json_t *rb = json_object_get(body, "retry_backoff");
	if (rb != NULL && !json_is_null(rb)) {
		if (!json_is_object(rb))
			return err_set(e, ERR_INVALID, "retry_backoff: must be an object");
		if (hc_only_keys(rb, backoff_keys, e))
			return e->code;
		struct err inner = {0};
		if (hc_int(rb, "base_ms", 0, 86400000, 1000, &w->backoff_base_ms, &inner) ||
		    hc_int(rb, "max_ms", 0, 86400000, 300000, &w->backoff_max_ms, &inner))
			return err_set(e, inner.code, "retry_backoff.%.200s", inner.msg);
		if (w->backoff_max_ms < w->backoff_base_ms)
			return err_set(e, ERR_INVALID,
				       "retry_backoff.max_ms: must not be less than base_ms");
	}
	/* Write-only: a body read back from GET has no secret and must not turn
	 * signing off; only an explicit null does. */
	w->keep_secret = json_object_get(body, "secret") == NULL;
	w->secret = NULL;
	if (hc_str(body, "secret", SIG_SECRET_MAX, &w->secret, e))
		return e->code;
	if (w->secret != NULL && sig_check_secret("secret", w->secret, e))
		return e->code;
	if (hc_bool(body, "step_output_replay", false, &w->step_output_replay, e))
		return e->code;
	/* README "Long-running steps": the longest a step may stay pending. */
	if (hc_int(body, "max_pending_ms", 1000, 31536000000LL, 86400000, &w->max_pending_ms, e))
		return e->code;
	/* README "Child runs": what a cancel of one of its runs does to its children. */
	if (hc_str(body, "on_parent_cancel", 16, &w->on_parent_cancel, e))
		return e->code;
	if (w->on_parent_cancel == NULL)
		w->on_parent_cancel = "cancel";
	if (strcmp(w->on_parent_cancel, "cancel") != 0 &&
	    strcmp(w->on_parent_cancel, "abandon") != 0)
		return err_set(e, ERR_INVALID, "on_parent_cancel: must be cancel or abandon");
	return parse_flow(body, w, e);
}

void handle_workflow_put(struct http_req *r)
{
	struct err e = {0};
	json_t *body = NULL, *out = NULL;
	struct db_conn *c = NULL;
	struct workflow_def w = {.name = http_req_param(r, 0)};
	bool created = false;
	if (ids_check_workflow_name("name", w.name, strlen(w.name), &e) ||
	    http_req_json(r, &body, &e) ||
	    workflows_parse_body(body, &http_req_app(r)->cfg->egress, &w, &e) || hc_db(r, &c, &e) ||
	    db_workflow_put(c, &w, config_encryption_key(http_req_app(r)->cfg), &created, &out, &e))
		goto out;
	http_reply_json(r, created ? 201 : 200, out);
	out = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	json_decref(out);
	json_decref(body);
}

enum err_code workflows_parse_rotate(const json_t *body, struct workflow_rotate *out, struct err *e)
{
	static const char *const keys[] = {"secret", "grace_ms", NULL};
	out->secret = NULL;
	out->grace_ms = WORKFLOW_GRACE_DEFAULT_MS;
	if (body == NULL)
		return ERR_OK;
	if (hc_only_keys(body, keys, e) ||
	    hc_str(body, "secret", SIG_SECRET_MAX, &out->secret, e) ||
	    (out->secret != NULL && sig_check_secret("secret", out->secret, e)) ||
	    hc_int(body, "grace_ms", 0, WORKFLOW_GRACE_MAX_MS, WORKFLOW_GRACE_DEFAULT_MS,
		   &out->grace_ms, e))
		return e->code;
	return ERR_OK;
}

/* POST /v1/workflows/{name}/secret: the new secret is in the answer once and
 * nowhere else (the generated one is wiped from this stack after). */
void handle_workflow_rotate(struct http_req *r)
{
	struct err e = {0};
	json_t *body = NULL, *out = NULL;
	struct db_conn *c = NULL;
	struct workflow_rotate rot = {0};
	char generated[SIG_SECRET_MAX + 1] = "";
	const char *name = http_req_param(r, 0);
	if (ids_check_workflow_name("name", name, strlen(name), &e))
		goto out;
	if (http_req_has_body(r) && http_req_json(r, &body, &e))
		goto out;
	if (workflows_parse_rotate(body, &rot, &e))
		goto out;
	if (rot.secret == NULL) {
		if (sig_new_secret(generated, &e))
			goto out;
		rot.secret = generated;
	}
	if (hc_db(r, &c, &e) ||
	    db_workflow_rotate(c, name, rot.secret, rot.grace_ms,
			       config_encryption_key(http_req_app(r)->cfg), &out, &e))
		goto out;
	if (json_object_set_new(out, "secret", json_string(rot.secret)) != 0) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	http_reply_json(r, 200, out);
	out = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	json_decref(out);
	json_decref(body);
	OPENSSL_cleanse(generated, sizeof generated);
}

enum err_code workflows_parse_pause(const json_t *body, struct err *e)
{
	static const char *const pause_keys[] = {NULL};
	if (body == NULL)
		return ERR_OK;
	return hc_only_keys(body, pause_keys, e);
}

/* POST /v1/workflows/{name}/pause and /resume. */
static void pause_or_resume(struct http_req *r, bool paused)
{
	struct err e = {0};
	json_t *body = NULL, *out = NULL;
	struct db_conn *c = NULL;
	const char *name = http_req_param(r, 0);
	if (ids_check_workflow_name("name", name, strlen(name), &e))
		goto out;
	if (http_req_has_body(r) && http_req_json(r, &body, &e))
		goto out;
	if (workflows_parse_pause(body, &e) || hc_db(r, &c, &e) ||
	    db_workflow_pause(c, name, paused, &out, &e))
		goto out;
	http_reply_json(r, 200, out);
	out = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	json_decref(out);
	json_decref(body);
}

void handle_workflow_pause(struct http_req *r)
{
	pause_or_resume(r, true);
}

void handle_workflow_resume(struct http_req *r)
{
	pause_or_resume(r, false);
}

void handle_workflow_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *out = NULL;
	const char *name = http_req_param(r, 0);
	if (ids_check_workflow_name("name", name, strlen(name), &e) || hc_db(r, &c, &e) ||
	    db_workflow_get(c, name, &out, &e))
		goto out;
	http_reply_json(r, 200, out);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_workflow_list(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page items = {0};
	struct db_page_req pg;
	if (hc_paging(r, HC_PAGE_LIMIT, &pg, &e) || hc_db(r, &c, &e) ||
	    db_workflow_list(c, &pg, &items, &e))
		goto out;
	hc_reply_page(r, 200, NULL, "workflows", &items);
out:
	db_page_cleanup(&items);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_workflow_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *name = http_req_param(r, 0);
	if (ids_check_workflow_name("name", name, strlen(name), &e) || hc_db(r, &c, &e) ||
	    db_workflow_delete(c, name, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
