/* handlers/runs: submit, read (with long-poll), history, list and cancel of runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/run.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "service/canon.h"
#include "service/effects.h"
#include "service/ids.h"
#include "service/strbuf.h"
#include "service/timefmt.h"
#include "service/verdict.h"

#define MAX_WAIT_MS 300000

static const char *const submit_keys[] = {
	"workflow", "run_id", "input", "headers", "priority", "max_attempts", "delay_ms",
	"run_at", "callback_url", "kv", NULL};

static const char *const statuses[] = {"pending", "scheduled", "waiting", "running",
				       "cancelling", "succeeded", "failed", "cancelled", NULL};

void handle_run_submit(struct http_req *r)
{
	struct err e = {0};
	json_t *body = NULL, *run = NULL;
	struct db_conn *c = NULL;
	struct effects fx = {0};
	char *input_text = NULL, *headers_text = NULL, *kv_text = NULL;
	char ulid[IDS_ULID_LEN + 1];
	int64_t n;
	struct run_submit s = {.priority = -1, .max_attempts = -1, .delay_ms = -1};

	if (http_req_json(r, &body, &e) || hc_only_keys(body, submit_keys, &e))
		goto out;
	if (hc_str(body, "workflow", IDS_MAX_NAME + 1, &s.workflow, &e))
		goto out;
	if (s.workflow == NULL) {
		err_set(&e, ERR_INVALID, "workflow: required");
		goto out;
	}
	if (ids_check_workflow_name("workflow", s.workflow, strlen(s.workflow), &e))
		goto out;
	if (hc_str(body, "run_id", IDS_MAX_RUN_ID + 1, &s.run_id, &e))
		goto out;
	if (s.run_id != NULL) {
		if (ids_check_run_id("run_id", s.run_id, strlen(s.run_id), &e))
			goto out;
	} else {
		ids_ulid_new(ulid);
		s.run_id = ulid;
	}

	json_t *input = json_object_get(body, "input");
	if (input == NULL)
		input = json_null();
	if (canon_json_sha256(input, s.input_hash) != 0) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	input_text = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);

	json_t *headers = json_object_get(body, "headers");
	if (headers != NULL && !json_is_null(headers)) {
		if (hc_check_headers("headers", headers, &e))
			goto out;
		headers_text = json_dumps(headers, JSON_COMPACT);
	}
	s.input_json = input_text;
	s.headers_json = headers_text ? headers_text : "{}";

	if (hc_int(body, "priority", 0, 2147483647, -1, &n, &e))
		goto out;
	s.priority = (int)n;
	if (hc_int(body, "max_attempts", 1, 1000, -1, &n, &e))
		goto out;
	s.max_attempts = (int)n;
	if (hc_int(body, "delay_ms", 0, VERDICT_MAX_DELAY_MS, -1, &s.delay_ms, &e))
		goto out;
	if (hc_str(body, "run_at", 64, &s.run_at, &e))
		goto out;
	if (s.run_at != NULL) {
		int64_t ms;
		if (s.delay_ms >= 0) {
			err_set(&e, ERR_INVALID, "run_at: cannot be combined with delay_ms");
			goto out;
		}
		if (!timefmt_parse_rfc3339(s.run_at, &ms)) {
			err_set(&e, ERR_INVALID, "run_at: must be an RFC 3339 timestamp");
			goto out;
		}
	}
	if (hc_str(body, "callback_url", HC_MAX_URL, &s.callback_url, &e))
		goto out;
	if (s.callback_url != NULL && hc_check_url(&http_req_app(r)->cfg->egress, "callback_url", s.callback_url, &e))
		goto out;
	if (effects_parse(json_object_get(body, "kv"), "kv", &fx, &e))
		goto out;
	if (!effects_empty(&fx)) {
		json_t *kv = json_object();
		if (fx.put)
			json_object_set(kv, "put", fx.put);
		if (fx.del)
			json_object_set(kv, "delete", fx.del);
		kv_text = json_dumps(kv, JSON_COMPACT);
		json_decref(kv);
		s.kv_json = kv_text;
	}
	if (input_text == NULL || (headers != NULL && !json_is_null(headers) && headers_text == NULL)) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto out;
	}

	enum run_submit_result res;
	if (hc_db(r, &c, &e) || db_run_submit(c, &s, &res, &run, &e))
		goto out;
	json_object_set_new(run, "newly_submitted", json_boolean(res == RUN_CREATED));
	http_reply_json(r, res == RUN_CREATED ? 201 : 200, run);
	run = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	effects_cleanup(&fx);
	free(input_text);
	free(headers_text);
	free(kv_text);
	json_decref(run);
	json_decref(body);
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
	json_t *run = NULL;
	const char *id;
	int64_t wait_ms;
	bool terminal = false;
	if (path_run_id(r, &id, &e) || hc_query_int(r, "wait_ms", 0, MAX_WAIT_MS, 0, &wait_ms, &e) ||
	    hc_db(r, &c, &e) || db_run_get(c, id, &run, &terminal, &e))
		goto out;
	if (!terminal && wait_ms > 0 && http_longpoll_state(r) == HTTP_LP_NONE) {
		/* Arm first, then read again: a termination committed in between
		 * is either seen by this read or fires the waiter. */
		json_decref(run);
		run = NULL;
		if (http_longpoll_arm(r, id, wait_ms, &e) || db_run_get(c, id, &run, &terminal, &e))
			goto out;
		if (!terminal) {
			hc_db_release(r, c);
			c = NULL;
			if (http_longpoll_suspend(r)) {
				json_decref(run);
				return; /* called again when the wait ends */
			}
			json_decref(run);
			run = NULL;
			if (hc_db(r, &c, &e) || db_run_get(c, id, &run, &terminal, &e))
				goto out;
		}
	}
	http_reply_json(r, 200, run);
	run = NULL;
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	json_decref(run);
}

void handle_run_steps(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *steps = NULL;
	const char *id;
	if (path_run_id(r, &id, &e) || hc_db(r, &c, &e) || db_run_steps(c, id, &steps, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:o}", "steps", steps));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

/* Turns "a,b" into the array literal "{a,b}" after checking each status. */
static enum err_code parse_statuses(const char *in, struct strbuf *out, struct err *e)
{
	strbuf_puts(out, "{");
	const char *p = in;
	bool first = true;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		bool ok = false;
		for (int i = 0; statuses[i] != NULL; i++)
			if (strlen(statuses[i]) == n && strncmp(statuses[i], p, n) == 0)
				ok = true;
		if (!ok)
			return err_set(e, ERR_INVALID,
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
	json_t *items = NULL;
	char *next = NULL;
	struct strbuf st = {0};
	int limit;
	const char *cursor;
	int64_t ms;
	struct run_filter f = {
		.workflow = http_req_query(r, "workflow"),
		.group_id = http_req_query(r, "group_id"),
		.created_after = http_req_query(r, "created_after"),
		.created_before = http_req_query(r, "created_before"),
	};
	const char *status = http_req_query(r, "status");
	if (hc_paging(r, &limit, &cursor, &e))
		goto out;
	if (f.workflow != NULL && ids_check_workflow_name("workflow", f.workflow, strlen(f.workflow), &e))
		goto out;
	if (f.group_id != NULL && ids_check_run_id("group_id", f.group_id, strlen(f.group_id), &e))
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
		if (parse_statuses(status, &st, &e))
			goto out;
		f.statuses = st.data;
	}
	if (hc_db(r, &c, &e) || db_run_list(c, &f, limit, cursor, &items, &next, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:o, s:s?}", "runs", items, "next_cursor", next));
out:
	free(next);
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

void handle_run_rerun(struct http_req *r)
{
	static const char *const keys[] = {"from_step", "input", NULL};
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL, *run = NULL;
	char *input_text = NULL;
	unsigned char hash[32];
	const char *id;
	int64_t from = 0;
	if (path_run_id(r, &id, &e))
		goto out;
	if (http_req_has_body(r)) {
		if (http_req_json(r, &body, &e) || hc_only_keys(body, keys, &e) ||
		    hc_int(body, "from_step", 0, 2147483647, 0, &from, &e))
			goto out;
		json_t *input = json_object_get(body, "input");
		if (input != NULL) {
			if (from != 0) {
				err_set(&e, ERR_INVALID, "input: only allowed with from_step 0");
				goto out;
			}
			input_text = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
			if (input_text == NULL || canon_json_sha256(input, hash) != 0) {
				err_set(&e, ERR_INTERNAL, "out of memory");
				goto out;
			}
		}
	}
	if (hc_db(r, &c, &e) ||
	    db_run_rerun(c, id, (int)from, input_text, input_text ? hash : NULL, &run, &e))
		goto out;
	http_reply_json(r, 201, run);
out:
	free(input_text);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_run_cancel_many(struct http_req *r)
{
	static const char *const keys[] = {"workflow", "status", "group_id", "created_before", NULL};
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL;
	struct strbuf st = {0};
	const char *workflow, *group_id, *before;
	int64_t ms;
	int total = 0, n;
	if (http_req_json(r, &body, &e) || hc_only_keys(body, keys, &e) ||
	    hc_str(body, "workflow", IDS_MAX_NAME + 1, &workflow, &e) ||
	    hc_str(body, "group_id", IDS_MAX_RUN_ID + 1, &group_id, &e) ||
	    hc_str(body, "created_before", 64, &before, &e))
		goto out;
	if (workflow != NULL && ids_check_workflow_name("workflow", workflow, strlen(workflow), &e))
		goto out;
	if (group_id != NULL && ids_check_run_id("group_id", group_id, strlen(group_id), &e))
		goto out;
	if (before != NULL && !timefmt_parse_rfc3339(before, &ms)) {
		err_set(&e, ERR_INVALID, "created_before: must be an RFC 3339 timestamp");
		goto out;
	}
	json_t *sv = json_object_get(body, "status");
	if (sv != NULL && !json_is_null(sv)) {
		if (!json_is_array(sv) || json_array_size(sv) == 0) {
			err_set(&e, ERR_INVALID, "status: must be a non-empty array of statuses");
			goto out;
		}
		struct strbuf joined = {0};
		size_t i;
		json_t *x;
		json_array_foreach(sv, i, x) {
			if (!json_is_string(x)) {
				strbuf_cleanup(&joined);
				err_set(&e, ERR_INVALID, "status[%zu]: must be a string", i);
				goto out;
			}
			if (i > 0)
				strbuf_puts(&joined, ",");
			strbuf_puts(&joined, json_string_value(x));
		}
		enum err_code rc = parse_statuses(joined.data ? joined.data : "", &st, &e);
		strbuf_cleanup(&joined);
		if (rc)
			goto out;
	}
	if (workflow == NULL && group_id == NULL && before == NULL && st.data == NULL) {
		err_set(&e, ERR_INVALID,
			"body: name at least one of workflow, status, group_id, created_before");
		goto out;
	}
	if (hc_db(r, &c, &e))
		goto out;
	do {
		if (db_run_cancel_many(c, workflow, st.data, group_id, before, 500, &n, &e))
			goto out;
		total += n;
	} while (n == 500);
	http_reply_json(r, 200, json_pack("{s:i}", "cancelled", total));
out:
	strbuf_cleanup(&st);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
