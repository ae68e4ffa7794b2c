/* handlers/runs: submit, read (with long-poll), history, list and cancel of runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"
#include "base/jsonscan.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "db/run.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "handlers/parse.h"
#include "service/effects.h"
#include "service/submitter.h"
#include "service/verdict.h"

#define MAX_WAIT_MS 300000

static const char *const submit_keys[] = {
	"workflow", "run_id", "input",        "headers", "priority",        "max_attempts",
	"delay_ms", "run_at", "callback_url", "kv",      "concurrency_key", NULL};

static const char *const statuses[] = {"pending", "scheduled",  "waiting",
				       "running", "cancelling", "succeeded",
				       "failed",  "cancelled",  NULL};

enum err_code runs_parse_submit(const json_t *body, const struct netpolicy *egress,
				struct run_submit *out, struct run_submit_buf *buf, struct err *e)
{
	struct effects fx = {0};
	int64_t n;
	struct run_submit s = {.priority = -1, .max_attempts = -1, .delay_ms = -1};

	if (hc_only_keys(body, submit_keys, e))
		goto out;
	if (hc_str(body, "workflow", IDS_MAX_NAME + 1, &s.workflow, e))
		goto out;
	if (s.workflow == NULL) {
		err_set(e, ERR_INVALID, "workflow: required");
		goto out;
	}
	if (ids_check_workflow_name("workflow", s.workflow, strlen(s.workflow), e))
		goto out;
	if (hc_str(body, "run_id", IDS_MAX_RUN_ID + 1, &s.run_id, e))
		goto out;
	if (s.run_id != NULL) {
		if (ids_check_run_id("run_id", s.run_id, strlen(s.run_id), e))
			goto out;
	} else {
		ids_ulid_new(buf->ulid);
		s.run_id = buf->ulid;
	}

	json_t *input = json_object_get(body, "input");
	if (input == NULL)
		input = json_null();
	if (canon_json_sha256(input, s.input_hash) != 0) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	buf->input_text = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);

	json_t *headers = json_object_get(body, "headers");
	bool has_headers = headers != NULL && !json_is_null(headers);
	if (has_headers) {
		if (verdict_check_headers("headers", headers, e))
			goto out;
		buf->headers_text = json_dumps(headers, JSON_COMPACT);
	}
	s.input_json = buf->input_text;
	s.headers_json = buf->headers_text ? buf->headers_text : "{}";

	if (hc_int(body, "priority", 0, 2147483647, -1, &n, e))
		goto out;
	s.priority = (int)n;
	if (hc_int(body, "max_attempts", 1, 1000, -1, &n, e))
		goto out;
	s.max_attempts = (int)n;
	if (hc_int(body, "delay_ms", 0, VERDICT_MAX_DELAY_MS, -1, &s.delay_ms, e))
		goto out;
	if (hc_str(body, "run_at", 64, &s.run_at, e))
		goto out;
	if (s.run_at != NULL) {
		int64_t ms;
		if (s.delay_ms >= 0) {
			err_set(e, ERR_INVALID, "run_at: cannot be combined with delay_ms");
			goto out;
		}
		if (!timefmt_parse_rfc3339(s.run_at, &ms)) {
			err_set(e, ERR_INVALID, "run_at: must be an RFC 3339 timestamp");
			goto out;
		}
	}
	if (hc_str(body, "callback_url", HC_MAX_URL, &s.callback_url, e))
		goto out;
	if (s.callback_url != NULL && hc_check_url(egress, "callback_url", s.callback_url, e))
		goto out;
	if (hc_concurrency_key(body, "concurrency_key", &s.concurrency_key, e))
		goto out;
	if (effects_parse(json_object_get(body, "kv"), "kv", &fx, e))
		goto out;
	if (!effects_empty(&fx)) {
		json_t *kv = json_object();
		if (fx.put)
			json_object_set(kv, "put", fx.put);
		if (fx.del)
			json_object_set(kv, "delete", fx.del);
		buf->kv_text = json_dumps(kv, JSON_COMPACT);
		json_decref(kv);
		if (buf->kv_text == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto out;
		}
		s.kv_json = buf->kv_text;
	}
	if (buf->input_text == NULL || (has_headers && buf->headers_text == NULL)) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	*out = s;
out:
	effects_cleanup(&fx);
	return e->code;
}

void runs_submit_buf_cleanup(struct run_submit_buf *buf)
{
	free(buf->input_text);
	free(buf->headers_text);
	free(buf->kv_text);
	memset(buf, 0, sizeof *buf);
}

static void free_job(void *j)
{
	submit_job_unref(j);
}

/* Validates the submission on the HTTP thread, queues it for the submitter
 * and suspends; called again once its batch has committed. */
void handle_run_submit(struct http_req *r)
{
	struct submit_job *job = http_req_ctx(r);
	struct err e = {0};
	if (job == NULL) {
		json_t *body = NULL;
		struct run_submit s = {0};
		struct run_submit_buf buf = {0};
		struct trace_parent tp;
		char *item = NULL;
		if (http_req_json(r, &body, &e) == ERR_OK &&
		    runs_parse_submit(body, &http_req_app(r)->cfg->egress, &s, &buf, &e) ==
			    ERR_OK) {
			/* The caller's trace, when its traceparent is valid; else the
			 * run starts one (README "Traces"). */
			s.trace = http_req_trace(r, &tp) ? &tp : NULL;
			if ((item = db_run_submit_item(&s)) == NULL)
				err_set(&e, ERR_INTERNAL, "out of memory");
		}
		runs_submit_buf_cleanup(&buf);
		json_decref(body);
		void *token = e.code ? NULL : http_async_arm(r);
		if (e.code == ERR_OK && token == NULL)
			err_set(&e, ERR_INTERNAL, "out of memory");
		if (e.code) {
			free(item);
			http_reply_error(r, &e);
			return;
		}
		job = submit_job_new(item, http_async_fire, token);
		if (job == NULL) {
			http_async_fire(token);
			err_set(&e, ERR_INTERNAL, "out of memory");
			http_reply_error(r, &e);
			return;
		}
		http_req_set_ctx(r, job, free_job);
		submitter_enqueue(http_req_app(r)->submitter, job);
		if (http_longpoll_suspend(r))
			return;
	}
	/* Answered. */
	const struct run_submit_answer *a = &job->answer;
	if (a->err.code) {
		http_reply_error(r, &a->err);
		return;
	}
	/* The run as PostgreSQL wrote it, its input not decoded again, and
	 * skipped: the run is the key's active run (key_mode skip). */
	char members[64];
	snprintf(members, sizeof members, "\"newly_submitted\":%s,\"skipped\":%s",
		 a->res == RUN_CREATED ? "true" : "false",
		 a->res == RUN_SKIPPED ? "true" : "false");
	http_reply_json_text(r, a->res == RUN_CREATED ? 201 : 200,
			     jsonscan_append(a->run_json, members));
}

static enum err_code path_run_id(struct http_req *r, const char **id, struct err *e)
{
	*id = http_req_param(r, 0);
	return ids_check_run_id("run_id", *id, strlen(*id), e);
}

void handle_run_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	char *run = NULL; /* the run's JSON text, passed on as PostgreSQL wrote it */
	const char *id;
	int64_t wait_ms;
	bool terminal = false;
	if (path_run_id(r, &id, &e) ||
	    hc_query_int(r, "wait_ms", 0, MAX_WAIT_MS, 0, &wait_ms, &e) || hc_db(r, &c, &e))
		goto out;
	/* A wait's first entry arms, then reads: a termination committed in
	 * between is either seen by this read or fires the waiter. (Called
	 * again after the wait fired, it reads first: the run has most likely
	 * ended.) */
	bool armed = wait_ms > 0 && http_longpoll_state(r) == HTTP_LP_NONE;
	if ((armed && http_longpoll_arm(r, id, wait_ms, &e)) ||
	    db_run_get_text(c, id, &run, &terminal, &e))
		goto out;
	/* Until the run is terminal or the wait is over. A wait that fired
	 * without the run terminating (the LISTEN connection came back after
	 * a failover, which fires every waiter) waits again for what is left. */
	while (!terminal && wait_ms > 0 && !http_longpoll_expired(r)) {
		if (!armed) { /* arm, then read again, as above */
			free(run);
			run = NULL;
			if (http_longpoll_arm(r, id, wait_ms, &e) ||
			    db_run_get_text(c, id, &run, &terminal, &e))
				goto out;
			if (terminal)
				break;
		}
		armed = false;
		hc_db_release(r, c);
		c = NULL;
		if (http_longpoll_suspend(r)) {
			free(run);
			return; /* called again when the wait fires */
		}
		free(run);
		run = NULL;
		if (hc_db(r, &c, &e) || db_run_get_text(c, id, &run, &terminal, &e))
			goto out;
	}
	http_reply_json_text(r, 200, run);
	run = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	free(run);
}

/* A page of a list that belongs to the run in the path: its steps, its
 * children. */
static void run_page(struct http_req *r,
		     enum err_code (*list)(struct db_conn *c, const char *run_id,
					   const struct db_page_req *pg, struct db_page *out,
					   struct err *e),
		     const char *key)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page page = {0};
	struct db_page_req pg;
	const char *id;
	if (path_run_id(r, &id, &e) || hc_paging(r, HC_STEPS_PAGE_LIMIT, &pg, &e) ||
	    hc_db(r, &c, &e) || list(c, id, &pg, &page, &e))
		goto out;
	hc_reply_page(r, 200, NULL, key, &page);
out:
	db_page_cleanup(&page);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_run_steps(struct http_req *r)
{
	run_page(r, db_run_steps, "steps");
}

void handle_run_children(struct http_req *r)
{
	run_page(r, db_run_children, "children");
}

enum err_code runs_parse_statuses(const char *in, struct strbuf *out, struct err *e)
{
	strbuf_puts(out, "{");
	const char *p = in;
	bool first = true;
	for (;;) { /* every comma-separated value, empty ones included */
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		bool ok = false;
		for (int i = 0; statuses[i] != NULL; i++)
			if (strlen(statuses[i]) == n && strncmp(statuses[i], p, n) == 0)
				ok = true;
		if (!ok)
			return err_set(
				e, ERR_INVALID,
				"status: each value must be one of pending, scheduled, waiting, "
				"running, cancelling, succeeded, failed, cancelled");
		if (!first)
			strbuf_puts(out, ",");
		strbuf_add(out, p, n);
		first = false;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	strbuf_puts(out, "}");
	return ERR_OK;
}

void handle_run_list(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page items = {0};
	struct strbuf st = {0};
	struct db_page_req pg;
	int64_t ms;
	struct run_filter f = {
		.workflow = http_req_query(r, "workflow"),
		.group_id = http_req_query(r, "group_id"),
		.concurrency_key = http_req_query(r, "concurrency_key"),
		.created_after = http_req_query(r, "created_after"),
		.created_before = http_req_query(r, "created_before"),
	};
	const char *status = http_req_query(r, "status");
	if (hc_paging(r, HC_PAGE_LIMIT, &pg, &e))
		goto out;
	if (f.workflow != NULL &&
	    ids_check_workflow_name("workflow", f.workflow, strlen(f.workflow), &e))
		goto out;
	if (f.group_id != NULL && ids_check_run_id("group_id", f.group_id, strlen(f.group_id), &e))
		goto out;
	/* An empty ?concurrency_key= is no filter (what a form sends). */
	if (f.concurrency_key != NULL && *f.concurrency_key == '\0')
		f.concurrency_key = NULL;
	if (f.concurrency_key != NULL &&
	    ids_check_concurrency_key("concurrency_key", f.concurrency_key,
				      strlen(f.concurrency_key), &e))
		goto out;
	if (f.created_after != NULL && !timefmt_parse_rfc3339(f.created_after, &ms)) {
		err_set(&e, ERR_INVALID, "created_after: must be an RFC 3339 timestamp");
		goto out;
	}
	if (f.created_before != NULL && !timefmt_parse_rfc3339(f.created_before, &ms)) {
		err_set(&e, ERR_INVALID, "created_before: must be an RFC 3339 timestamp");
		goto out;
	}
	if (status != NULL && *status != '\0') {
		if (runs_parse_statuses(status, &st, &e))
			goto out;
		f.statuses = st.data;
	}
	if (hc_db(r, &c, &e) || db_run_list(c, &f, &pg, &items, &e))
		goto out;
	hc_reply_page(r, 200, NULL, "runs", &items);
out:
	db_page_cleanup(&items);
	strbuf_cleanup(&st);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_run_cancel(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *run = NULL;
	const char *id;
	enum run_cancel_result res;
	if (path_run_id(r, &id, &e) || hc_db(r, &c, &e) || db_run_cancel(c, id, &res, &run, &e))
		goto out;
	http_reply_json(r, res == RUN_CANCELLED ? 200 : 202, run);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

enum err_code runs_parse_rerun(const json_t *body, struct run_rerun *out, struct err *e)
{
	static const char *const keys[] = {"from_step", "input", NULL};
	int64_t from = 0;
	out->from_step = 0;
	out->input_text = NULL;
	if (body == NULL)
		return ERR_OK;
	if (hc_only_keys(body, keys, e) || hc_int(body, "from_step", 0, 2147483647, 0, &from, e))
		return e->code;
	out->from_step = (int)from;
	json_t *input = json_object_get(body, "input");
	if (input == NULL)
		return ERR_OK;
	if (from != 0)
		return err_set(e, ERR_INVALID, "input: only allowed with from_step 0");
	out->input_text = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
	if (out->input_text == NULL || canon_json_sha256(input, out->input_hash) != 0)
		return err_set(e, ERR_INTERNAL, "out of memory");
	return ERR_OK;
}

void runs_rerun_cleanup(struct run_rerun *r)
{
	free(r->input_text);
	memset(r, 0, sizeof *r);
}

void handle_run_rerun(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL, *run = NULL;
	struct run_rerun rr = {0};
	const char *id;
	if (path_run_id(r, &id, &e))
		goto out;
	if (http_req_has_body(r) && http_req_json(r, &body, &e))
		goto out;
	if (runs_parse_rerun(body, &rr, &e) || hc_db(r, &c, &e) ||
	    db_run_rerun(c, id, rr.from_step, rr.input_text, rr.input_text ? rr.input_hash : NULL,
			 &run, &e))
		goto out;
	http_reply_json(r, 201, run);
out:
	runs_rerun_cleanup(&rr);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

enum err_code runs_parse_cancel_many(const json_t *body, struct run_cancel_filter *out,
				     struct err *e)
{
	static const char *const keys[] = {"workflow", "status", "group_id", "created_before",
					   NULL};
	int64_t ms;
	if (hc_only_keys(body, keys, e) ||
	    hc_str(body, "workflow", IDS_MAX_NAME + 1, &out->workflow, e) ||
	    hc_str(body, "group_id", IDS_MAX_RUN_ID + 1, &out->group_id, e) ||
	    hc_str(body, "created_before", 64, &out->created_before, e))
		return e->code;
	if (out->workflow != NULL &&
	    ids_check_workflow_name("workflow", out->workflow, strlen(out->workflow), e))
		return e->code;
	if (out->group_id != NULL &&
	    ids_check_run_id("group_id", out->group_id, strlen(out->group_id), e))
		return e->code;
	if (out->created_before != NULL && !timefmt_parse_rfc3339(out->created_before, &ms))
		return err_set(e, ERR_INVALID, "created_before: must be an RFC 3339 timestamp");
	json_t *sv = json_object_get(body, "status");
	if (sv != NULL && !json_is_null(sv)) {
		if (!json_is_array(sv) || json_array_size(sv) == 0)
			return err_set(e, ERR_INVALID,
				       "status: must be a non-empty array of statuses");
		struct strbuf joined = {0};
		size_t i;
		json_t *x;
		json_array_foreach (sv, i, x) {
			if (!json_is_string(x)) {
				strbuf_cleanup(&joined);
				return err_set(e, ERR_INVALID, "status[%zu]: must be a string", i);
			}
			if (strchr(json_string_value(x), ',') != NULL) {
				strbuf_cleanup(&joined);
				return err_set(e, ERR_INVALID, "status[%zu]: must be one status",
					       i);
			}
			if (i > 0)
				strbuf_puts(&joined, ",");
			strbuf_puts(&joined, json_string_value(x));
		}
		enum err_code rc =
			runs_parse_statuses(joined.data ? joined.data : "", &out->statuses, e);
		strbuf_cleanup(&joined);
		if (rc)
			return rc;
	}
	if (out->workflow == NULL && out->group_id == NULL && out->created_before == NULL &&
	    out->statuses.data == NULL)
		return err_set(
			e, ERR_INVALID,
			"body: name at least one of workflow, status, group_id, created_before");
	return ERR_OK;
}

void runs_cancel_filter_cleanup(struct run_cancel_filter *f)
{
	strbuf_cleanup(&f->statuses);
	memset(f, 0, sizeof *f);
}

void handle_run_cancel_many(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL;
	struct run_cancel_filter f = {0};
	int total = 0, n;
	if (http_req_json(r, &body, &e) || runs_parse_cancel_many(body, &f, &e) || hc_db(r, &c, &e))
		goto out;
	do {
		if (db_run_cancel_many(c, f.workflow, f.statuses.data, f.group_id, f.created_before,
				       500, &n, &e))
			goto out;
		total += n;
	} while (n == 500);
	http_reply_json(r, 200, json_pack("{s:i}", "cancelled", total));
out:
	runs_cancel_filter_cleanup(&f);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
