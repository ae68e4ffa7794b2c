/* handlers/attempts: one step attempt, from outside its HTTP call (README
 * "Long-running steps"): POST /v1/runs/{id}/steps/{n}/complete settles it
 * as if its webhook had answered, POST /v1/runs/{id}/steps/{n}/heartbeat
 * keeps a pending one alive. Both are authorised by the delivery token of
 * that attempt's step request only (service/http.c, HTTP_AUTH_DELIVERY),
 * which names the generation and attempt; the step in the path must be the
 * token's. */
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"
#include "db/jobs.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "service/metrics.h"
#include "service/verdict.h"

#define HEARTBEAT_MAX_DETAILS_BYTES (64 * 1024)

/* The attempt the path and the delivery token name together. */
static enum err_code attempt_of(struct http_req *r, struct attempt_ref *a, struct err *e)
{
	struct token_claims claims;
	a->run_id = http_req_param(r, 0);
	if (ids_check_run_id("run_id", a->run_id, strlen(a->run_id), e) ||
	    hc_step_param(r, 1, &a->step, e))
		return e->code;
	if (!http_req_delivery_token(r, &claims))
		return err_set(e, ERR_UNAUTHENTICATED,
			       "authorization: a delivery token is required");
	if (claims.step != a->step)
		return err_set(e, ERR_FORBIDDEN,
			       "authorization: the delivery token is for step %d, not step %d",
			       claims.step, a->step);
	a->generation = claims.generation;
	a->attempt = claims.attempt;
	return ERR_OK;
}

/* {"error": {"message": S, "retryable": B}} (retryable defaults to true:
 * retried by the workflow's policy) into settlement `s`. */
static enum err_code parse_error(const json_t *body, struct settlement *s, struct err *e)
{
	static const char *const top[] = {"error", NULL};
	static const char *const keys[] = {"message", "retryable", NULL};
	const json_t *err = json_object_get(body, "error");
	const char *msg = NULL;
	bool retryable = true;
	if (hc_only_keys(body, top, e))
		return e->code;
	if (!json_is_object(err))
		return err_set(e, ERR_INVALID, "error: must be an object");
	struct err inner = {0};
	if (hc_only_keys(err, keys, &inner) ||
	    hc_str(err, "message", VERDICT_MAX_REASON_BYTES, &msg, &inner) ||
	    hc_bool(err, "retryable", true, &retryable, &inner))
		return err_set(e, inner.code, "error.%.200s", inner.msg);
	if (msg == NULL)
		return err_set(e, ERR_INVALID, "error.message: is required");
	s->result = retryable ? SETTLE_TRANSIENT : SETTLE_PERMANENT;
	s->retry_delay_ms = -1; /* the workflow's backoff */
	s->reason = strdup(msg);
	return s->reason != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

/* The body of a completion: an outcome a webhook may answer, but pending,
 * or an error. */
static enum err_code parse_completion(const json_t *body, struct settlement *s, struct err *e)
{
	if (json_object_get(body, "error") != NULL && json_object_get(body, "outcome") == NULL)
		return parse_error(body, s, e);
	struct outcome o;
	if (outcome_from_json(body, &o, e))
		return e->code;
	if (o.kind == OUTCOME_PENDING)
		err_set(e, ERR_INVALID,
			"outcome: pending does not complete a step (answer it from the webhook's "
			"call)");
	else if (!outcome_settlement(&o, 0, s))
		err_set(e, ERR_INTERNAL, "out of memory");
	outcome_cleanup(&o);
	return e->code;
}

void handle_step_complete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct attempt_ref a;
	struct settlement s = {.kind = JOB_STEP};
	json_t *body = NULL, *run = NULL;
	const struct config *cfg = http_req_app(r)->cfg;
	s.max_children = cfg->max_children;
	s.max_depth = cfg->max_child_depth;
	if (attempt_of(r, &a, &e) || http_req_json(r, &body, &e) ||
	    parse_completion(body, &s, &e) || hc_db(r, &c, &e) ||
	    db_jobs_complete(c, &a, &s, &run, &e))
		goto out;
	metrics_step_result(metrics_result_of(s.result));
	http_reply_json(r, 200, run);
out:
	settlement_cleanup(&s);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

/* An optional body {"details": <json>}: *details is its canonical JSON
 * (malloc'd), or NULL when there are none. */
static enum err_code parse_heartbeat(struct http_req *r, char **details, struct err *e)
{
	static const char *const keys[] = {"details", NULL};
	json_t *body = NULL;
	*details = NULL;
	if (!http_req_has_body(r))
		return ERR_OK;
	if (http_req_json(r, &body, e) || hc_only_keys(body, keys, e))
		goto out;
	const json_t *d = json_object_get(body, "details");
	if (d == NULL)
		goto out;
	*details = canon_json_dumps(d);
	if (*details == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	else if (strlen(*details) > HEARTBEAT_MAX_DETAILS_BYTES)
		err_set(e, ERR_INVALID, "details: larger than %d bytes",
			HEARTBEAT_MAX_DETAILS_BYTES);
out:
	json_decref(body);
	if (e->code) {
		free(*details);
		*details = NULL;
	}
	return e->code;
}

void handle_step_heartbeat(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct attempt_ref a;
	char *details = NULL;
	bool cancel_requested = false;
	if (attempt_of(r, &a, &e) || parse_heartbeat(r, &details, &e) || hc_db(r, &c, &e) ||
	    db_jobs_heartbeat(c, &a, details, &cancel_requested, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:b}", "cancel_requested", cancel_requested));
out:
	free(details);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
