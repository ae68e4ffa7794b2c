/* db/run: SQL of the run table for the API (submit, read, history, list, cancel). */
#include "db/run.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/jsonscan.h"
#include "base/strbuf.h"
#include "db/internal.h"

static const struct db_stmt q_submit_many = {
	"run_submit_many", "SELECT outcome, run_json, rid, wf FROM hf_submit_many($1::jsonb)", 1};
static const struct db_stmt q_get = {
	"run_get",
	"SELECT hf_run_text(r), r.status IN ('succeeded', 'failed', 'cancelled')"
	" FROM run r WHERE r.run_id = $1",
	1};
/* History in the order attempts happen: a generation's steps in turn, each
 * one's attempts in turn, a rerun's generation after the last (the unique
 * index of step_attempt serves this order and the cursor), and last the
 * attempt now pending, if any (result "pending", from the run row: an
 * attempt's row is written when it ends). */
#define STEP_ITEM(a, result, finished, output_cols)                                             \
	"SELECT jsonb_build_object('step', " a ".step, 'attempt', " a ".attempt,"               \
	" 'generation', " a ".generation, 'payload',"                                           \
	" coalesce(" a ".payload, hf_step_payload(" a ".run_id, " a ".generation, " a           \
	".step, NULL, (SELECT r0.input FROM run r0 WHERE r0.run_id = $1))), 'signal', " a       \
	".signal, 'started_at', hf_ts(" a ".started_at), 'finished_at', hf_ts(" finished        \
	"), 'duration_ms', hf_ms(" finished ") - hf_ms(" a ".started_at), 'result', " result    \
	", " output_cols ", 'pending_since', hf_ts(" a ".pending_since), 'heartbeat',"          \
	" CASE WHEN " a ".heartbeat_at IS NOT NULL THEN jsonb_build_object('at', hf_ts(" a      \
	".heartbeat_at), 'details', " a ".heartbeat) END)::text AS item, " a                    \
	".generation AS ms, " a ".step || '.' || " a ".attempt AS id, " a ".step AS k_step, " a \
	".attempt AS k_attempt"
/* The attempts that ended, and the one now pending. */
#define STEPS_ENDED                                                                        \
	STEP_ITEM("a", "a.result", "a.finished_at",                                        \
		  "'http_status', a.http_status, 'error', a.error")                        \
	" FROM step_attempt a WHERE a.run_id = $1"                                         \
	" AND (a.generation, a.step, a.attempt) > ($2::integer, $3::integer, $4::integer)" \
	" ORDER BY a.generation, a.step, a.attempt"
#define STEP_PENDING                                                   \
	STEP_ITEM("p", "'pending'", "NULL::timestamptz",               \
		  "'http_status', NULL::integer, 'error', NULL::text") \
	" FROM (SELECT x.*, x.claimed_at AS started_at FROM run x"     \
	" WHERE x.run_id = $1 AND x.pending_since IS NOT NULL"         \
	" AND (x.generation, x.step, x.attempt) > ($2::integer, $3::integer, $4::integer)) p"
static const struct db_stmt q_steps = {"run_steps",
				       DB_PAGE_SQL("SELECT * FROM ((" STEPS_ENDED
						   ") UNION ALL (" STEP_PENDING ")) h"
						   " ORDER BY ms, k_step, k_attempt",
						   "ms, k_step, k_attempt", "$5", "$6"),
				       6};
/* A run's children, by the generation and step that started them, then
 * key (run_children); the cursor's number is generation << 32 | step. */
static const struct db_stmt q_children = {
	"run_children",
	DB_PAGE_SQL("SELECT hf_run_text(r) AS item,"
		    " (r.parent_generation::bigint << 32) | r.parent_step AS ms, r.child_key AS id"
		    " FROM run r WHERE r.parent_run_id = $1"
		    " AND (r.parent_generation, r.parent_step, r.child_key COLLATE \"C\")"
		    " > ($2::integer, $3::integer, $4 COLLATE \"C\")"
		    " ORDER BY r.parent_generation, r.parent_step, r.child_key COLLATE \"C\"",
		    "ms, id COLLATE \"C\"", "$5", "$6"),
	6};
static const struct db_stmt q_exists = {"run_exists", "SELECT 1 FROM run WHERE run_id = $1", 1};
/* Newest first, from the cursor on. Every filter reads an index in this
 * order and stops after the page (tests/integration/test_size_plans.py).
 * The list order of every run, and of a workflow's, is the narrow table
 * run_listing (migrations/0015_run_listing.sql: run_listing_all,
 * run_listing_workflow), each row's run found by its key; a status filter
 * applies to the runs read. That walk ends quickly when most runs match:
 * no status, or ?status with succeeded. A filter that few runs match reads
 * run through an index of those runs instead (q_list_run, chosen by
 * list_reads_run); ?concurrency_key (alone or with the others) is
 * q_list_key. The cursor is one row comparison, which bounds the index scan
 * (an OR of two comparisons filtered every row before it). These plans are
 * PostgreSQL's custom plans, made with the parameters' values, which fold
 * the tests on NULL parameters away; its generic plan (a walk of
 * run_listing_all filtering every row) is estimated to cost more, so the
 * plan cache keeps making custom ones. */
static const struct db_stmt q_list = {
	"run_list",
	DB_PAGE_SQL("SELECT hf_run_text(r) AS item, hf_us(l.created_at) AS ms, l.run_id AS id,"
		    " l.created_at AS k_created"
		    " FROM run_listing l JOIN run r ON r.run_id = l.run_id"
		    " WHERE ($1::text IS NULL OR l.workflow = $1)"
		    " AND ($2::text[] IS NULL OR r.status = ANY ($2::text[]))"
		    " AND $3::text IS NULL AND $4::text IS NULL" /* else q_list_run, q_list_key */
		    " AND ($5::timestamptz IS NULL OR l.created_at > $5::timestamptz)"
		    " AND ($6::timestamptz IS NULL OR l.created_at < $6::timestamptz)"
		    " AND ($7::bigint IS NULL"
		    "      OR (l.created_at, l.run_id) < (hf_from_us($7::bigint), $8))"
		    " ORDER BY l.created_at DESC, l.run_id DESC",
		    "k_created DESC, id DESC", "$9", "$10"),
	10};
/* q_list of the runs of a group, or of statuses few runs have, read from run
 * through their index (list_reads_run): ?group_id through run_by_group,
 * ?status=failed or cancelled (with or without ?workflow) through
 * run_list_ended and run_list_workflow_ended (migrations/0006) in list order,
 * the active statuses through run_active_workflow (then sorted: the runs in
 * flight). One status is an equality (PostgreSQL 15 reads "status = ANY"
 * through an index without its order, and sorts every row that matches). */
static const struct db_stmt q_list_run = {
	"run_list_run",
	DB_PAGE_SQL("SELECT hf_run_text(r) AS item, hf_us(r.created_at) AS ms, r.run_id AS id,"
		    " r.created_at AS k_created FROM run r"
		    " WHERE ($1::text IS NULL OR r.workflow = $1)"
		    " AND ($2::text[] IS NULL OR CASE WHEN cardinality($2::text[]) = 1"
		    "      THEN r.status = ($2::text[])[1] ELSE r.status = ANY ($2::text[]) END)"
		    " AND ($3::text IS NULL OR r.group_id = $3)"
		    " AND $4::text IS NULL" /* else q_list_key */
		    " AND ($5::timestamptz IS NULL OR r.created_at > $5::timestamptz)"
		    " AND ($6::timestamptz IS NULL OR r.created_at < $6::timestamptz)"
		    " AND ($7::bigint IS NULL"
		    "      OR (r.created_at, r.run_id) < (hf_from_us($7::bigint), $8))"
		    " ORDER BY r.created_at DESC, r.run_id DESC",
		    "k_created DESC, id DESC", "$9", "$10"),
	10};
/* q_list with ?concurrency_key ($4, never NULL here): the keyed runs' own
 * table run_key (migrations/0012_run_key.sql) read through run_key_list in
 * the same order from the cursor on, each row's run found by its key; the
 * other filters apply to the rows read (the run's status and group, the
 * key row's workflow and creation time, the same as the run's). */
static const struct db_stmt q_list_key = {
	"run_list_by_key",
	DB_PAGE_SQL("SELECT hf_run_text(r) AS item, hf_us(k.created_at) AS ms, k.run_id AS id,"
		    " k.created_at AS k_created FROM run_key k JOIN run r ON r.run_id = k.run_id"
		    " WHERE k.concurrency_key = $4"
		    " AND ($1::text IS NULL OR k.workflow = $1)"
		    " AND ($2::text[] IS NULL OR r.status = ANY ($2::text[]))"
		    " AND ($3::text IS NULL OR r.group_id = $3)"
		    " AND ($5::timestamptz IS NULL OR k.created_at > $5::timestamptz)"
		    " AND ($6::timestamptz IS NULL OR k.created_at < $6::timestamptz)"
		    " AND ($7::bigint IS NULL"
		    "      OR (k.created_at, k.run_id) < (hf_from_us($7::bigint), $8))"
		    " ORDER BY k.created_at DESC, k.run_id DESC",
		    "k_created DESC, id DESC", "$9", "$10"),
	10};
static const struct db_stmt q_cancel = {"run_cancel", "SELECT outcome, run FROM hf_cancel_run($1)",
					1};
static const struct db_stmt q_rerun = {"run_rerun",
				       "SELECT hf_rerun($1, $2::integer, $3::jsonb, $4::bytea)", 4};
static const struct db_stmt q_cancel_many = {
	"run_cancel_many",
	"SELECT hf_cancel_many($1, $2::text[], $3, $4::timestamptz, $5::integer)", 5};

char *db_run_submit_item(const struct run_submit *s)
{
	char hash[64 + 1];
	ids_hex(s->input_hash, 32, hash);
	json_t *headers = json_loads(s->headers_json, 0, NULL);
	json_t *kv = s->kv_json ? json_loads(s->kv_json, 0, NULL) : NULL;
	json_t *it = json_object();
	char *text = NULL;
	if (headers == NULL || (s->kv_json != NULL && kv == NULL) || it == NULL)
		goto out;
	json_object_set_new(it, "run_id", json_string(s->run_id));
	json_object_set_new(it, "workflow", json_string(s->workflow));
	json_object_set_new(it, "input_hash", json_string(hash));
	json_object_set(it, "headers", headers);
	if (s->priority >= 0)
		json_object_set_new(it, "priority", json_integer(s->priority));
	if (s->max_attempts >= 0)
		json_object_set_new(it, "max_attempts", json_integer(s->max_attempts));
	if (s->delay_ms >= 0)
		json_object_set_new(it, "delay_ms", json_integer(s->delay_ms));
	if (s->run_at != NULL)
		json_object_set_new(it, "run_at", json_string(s->run_at));
	if (s->callback_url != NULL)
		json_object_set_new(it, "callback_url", json_string(s->callback_url));
	if (kv != NULL)
		json_object_set(it, "kv", kv);
	if (s->concurrency_key != NULL)
		json_object_set_new(it, "concurrency_key", json_string(s->concurrency_key));
	bool oom;
	json_t *tr = db_trace_json(s->trace, &oom);
	if (oom)
		goto out;
	if (tr != NULL)
		json_object_set_new(it, "trace", tr);
	/* The input goes in as its text (large inputs: not decoded again). */
	char *head = json_dumps(it, JSON_COMPACT);
	struct strbuf in = {0};
	strbuf_puts(&in, "\"input\":");
	strbuf_puts(&in, s->input_json);
	if (head != NULL && !in.oom)
		text = jsonscan_append(head, in.data);
	free(head);
	strbuf_cleanup(&in);
out:
	json_decref(headers);
	json_decref(kv);
	json_decref(it);
	return text;
}

enum err_code db_run_submit_many(struct db_conn *c, char *const *items, int n,
				 struct run_submit_answer *answers, struct err *e)
{
	struct strbuf b = {0};
	strbuf_add(&b, "[", 1);
	for (int i = 0; i < n; i++) {
		if (i > 0)
			strbuf_add(&b, ",", 1);
		strbuf_puts(&b, items[i]);
	}
	strbuf_add(&b, "]", 1);
	if (b.oom) {
		strbuf_cleanup(&b);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	const char *p[1] = {b.data};
	PGresult *r = db_exec(c, &q_submit_many, p, e);
	strbuf_cleanup(&b);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) != n) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "submit: %d answers for %d runs", PQntuples(r), n);
	}
	for (int i = 0; i < n; i++) {
		struct run_submit_answer *a = &answers[i];
		const char *outcome = PQgetvalue(r, i, 0);
		memset(a, 0, sizeof *a);
		if (strcmp(outcome, "workflow_not_found") == 0) {
			err_set(&a->err, ERR_NOT_FOUND, "workflow: %s not found",
				PQgetvalue(r, i, 3));
		} else if (strcmp(outcome, "input_mismatch") == 0) {
			err_set(&a->err, ERR_INPUT_MISMATCH,
				"input: run %s was already submitted with a different input",
				PQgetvalue(r, i, 2));
		} else {
			a->res = strcmp(outcome, "created") == 0   ? RUN_CREATED
				 : strcmp(outcome, "skipped") == 0 ? RUN_SKIPPED
								   : RUN_DUPLICATE;
			a->run_json = strdup(PQgetvalue(r, i, 1));
			if (a->run_json == NULL)
				err_set(&a->err, ERR_INTERNAL, "out of memory");
		}
	}
	PQclear(r);
	return ERR_OK;
}

enum err_code db_run_get_text(struct db_conn *c, const char *run_id, char **out, bool *terminal,
			      struct err *e)
{
	*out = NULL;
	const char *p[1] = {run_id};
	PGresult *r = db_exec(c, &q_get, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "run %s not found", run_id);
	}
	*out = strdup(PQgetvalue(r, 0, 0));
	if (terminal)
		*terminal = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
	PQclear(r);
	return *out != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

enum err_code db_run_get(struct db_conn *c, const char *run_id, json_t **out, bool *terminal,
			 struct err *e)
{
	char *text = NULL;
	*out = NULL;
	if (db_run_get_text(c, run_id, &text, terminal, e))
		return e->code;
	*out = db_json_parse(text, strlen(text));
	free(text);
	return *out != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "run %s: unreadable JSON", run_id);
}

/* The position "<step>.<attempt>" of a steps cursor (its generation is the
 * number part). */
static enum err_code steps_cursor(const char *pos, int *step, int *attempt, struct err *e)
{
	char *end = NULL;
	long s = isdigit((unsigned char)pos[0]) ? strtol(pos, &end, 10) : -1;
	if (s < 0 || s > INT32_MAX || *end != '.')
		return err_set(e, ERR_INVALID, "cursor: malformed");
	const char *a_text = end + 1;
	long a = isdigit((unsigned char)a_text[0]) ? strtol(a_text, &end, 10) : -1;
	if (a < 0 || a > INT32_MAX || *end != '\0')
		return err_set(e, ERR_INVALID, "cursor: malformed");
	*step = (int)s;
	*attempt = (int)a;
	return ERR_OK;
}

/* Reads page `r` (NULL: its statement failed, e says why) of a list that
 * belongs to run `run_id` into *out; an empty page of a run that does not
 * exist is ERR_NOT_FOUND. */
static enum err_code read_run_page(struct db_conn *c, const char *run_id, PGresult *r,
				   struct db_page *out, struct err *e)
{
	if (r == NULL)
		return e->code;
	bool empty = PQntuples(r) == 0;
	if (db_page_read(r, out, e))
		return e->code;
	if (empty) { /* nothing listed, or no run at all? */
		const char *p1[1] = {run_id};
		r = db_exec(c, &q_exists, p1, e);
		if (r == NULL || PQntuples(r) == 0) {
			if (r != NULL)
				err_set(e, ERR_NOT_FOUND, "run %s not found", run_id);
			PQclear(r);
			db_page_cleanup(out);
			return e->code;
		}
		PQclear(r);
	}
	return ERR_OK;
}

enum err_code db_run_steps(struct db_conn *c, const char *run_id, const struct db_page_req *pg,
			   struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	int64_t gen = 0;
	int step = -1, attempt = -1;
	if (pg->cursor != NULL) {
		char *pos = NULL;
		enum err_code rc = db_cursor_decode(pg->cursor, &gen, &pos, e);
		if (rc == ERR_OK)
			rc = steps_cursor(pos, &step, &attempt, e);
		free(pos);
		if (rc)
			return rc;
		if (gen > INT32_MAX)
			return err_set(e, ERR_INVALID, "cursor: malformed");
	}
	char g[24], s[16], a[16];
	struct db_page_params pp;
	snprintf(g, sizeof g, "%lld", (long long)gen);
	snprintf(s, sizeof s, "%d", step);
	snprintf(a, sizeof a, "%d", attempt);
	db_page_params(pg, &pp);
	const char *p[6] = {run_id, g, s, a, pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_steps, p, e);
	return read_run_page(c, run_id, r, out, e);
}

enum err_code db_run_children(struct db_conn *c, const char *run_id, const struct db_page_req *pg,
			      struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	int64_t pos = 0;
	char *key = NULL;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &pos, &key, e))
		return e->code;
	char g[24], s[24];
	snprintf(g, sizeof g, "%lld", (long long)(pos >> 32));
	snprintf(s, sizeof s, "%lld", (long long)(pg->cursor != NULL ? (pos & 0xffffffffLL) : -1));
	struct db_page_params pp;
	db_page_params(pg, &pp);
	const char *p[6] = {run_id, g, s, key != NULL ? key : "", pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_children, p, e);
	free(key);
	return read_run_page(c, run_id, r, out, e);
}

/* Whether the runs `f` (without a key) asks for are better read from run,
 * through an index of just those runs, than by walking the list order of
 * every run (q_list): a group's, or those of statuses few runs have, all
 * failed or cancelled or all active. With succeeded, or with both ended and
 * active statuses (no one index holds them), the walk reads least. */
static bool list_reads_run(const struct run_filter *f)
{
	if (f->group_id != NULL)
		return true;
	if (f->statuses == NULL)
		return false;
	bool ended = false, active = false;
	for (const char *p = f->statuses + 1; *p != '\0' && *p != '}';) {
		size_t n = strcspn(p, ",}");
		if (n == 9 && strncmp(p, "succeeded", n) == 0)
			return false;
		if ((n == 6 && strncmp(p, "failed", n) == 0) ||
		    (n == 9 && strncmp(p, "cancelled", n) == 0))
			ended = true;
		else
			active = true;
		p += n + (p[n] == ',');
	}
	return ended != active;
}

enum err_code db_run_list(struct db_conn *c, const struct run_filter *f,
			  const struct db_page_req *pg, struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	char *after_id = NULL;
	int64_t after_us = 0;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &after_us, &after_id, e))
		return e->code;
	char us[24];
	struct db_page_params pp;
	snprintf(us, sizeof us, "%lld", (long long)after_us);
	db_page_params(pg, &pp);
	const char *p[10] = {f->workflow,          f->statuses,      f->group_id,
			     f->concurrency_key,   f->created_after, f->created_before,
			     after_id ? us : NULL, after_id,         pp.limit,
			     pp.max_bytes};
	const struct db_stmt *q = f->concurrency_key != NULL ? &q_list_key
				  : list_reads_run(f)        ? &q_list_run
							     : &q_list;
	PGresult *r = db_exec(c, q, p, e);
	free(after_id);
	if (r == NULL)
		return e->code;
	return db_page_read(r, out, e);
}

enum err_code db_run_cancel(struct db_conn *c, const char *run_id, enum run_cancel_result *res,
			    json_t **run, struct err *e)
{
	*run = NULL;
	const char *p[1] = {run_id};
	PGresult *r = db_exec(c, &q_cancel, p, e);
	if (r == NULL)
		return e->code;
	char outcome[32];
	snprintf(outcome, sizeof outcome, "%s", PQgetvalue(r, 0, 0));
	enum err_code rc = ERR_OK;
	if (strcmp(outcome, "not_found") == 0) {
		rc = err_set(e, ERR_NOT_FOUND, "run %s not found", run_id);
	} else if (strcmp(outcome, "already_terminal") == 0) {
		rc = err_set(e, ERR_ALREADY_TERMINAL, "run %s has already terminated", run_id);
	} else {
		*res = strcmp(outcome, "cancelled") == 0 ? RUN_CANCELLED : RUN_CANCELLING;
		*run = db_json(r, 0, 1);
	}
	PQclear(r);
	return rc;
}

enum err_code db_run_rerun(struct db_conn *c, const char *run_id, int from_step,
			   const char *input_json, const unsigned char *input_hash, json_t **run,
			   struct err *e)
{
	*run = NULL;
	char step[16];
	snprintf(step, sizeof step, "%d", from_step);
	char hash[2 + 64 + 1] = "\\x";
	if (input_hash != NULL)
		ids_hex(input_hash, 32, hash + 2);
	const char *p[4] = {run_id, step, input_json, input_hash ? hash : NULL};
	PGresult *r = db_exec(c, &q_rerun, p, e);
	if (r == NULL)
		return e->code;
	char res[32];
	snprintf(res, sizeof res, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (strcmp(res, "not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "run %s not found", run_id);
	if (strcmp(res, "run_active") == 0)
		return err_set(e, ERR_RUN_ACTIVE, "run %s is still active", run_id);
	if (strcmp(res, "step_not_reached") == 0)
		return err_set(e, ERR_INVALID, "from_step: run %s never reached step %d", run_id,
			       from_step);
	return db_run_get(c, run_id, run, NULL, e);
}

enum err_code db_run_cancel_many(struct db_conn *c, const char *workflow, const char *statuses,
				 const char *group_id, const char *created_before, int limit,
				 int *n, struct err *e)
{
	char lim[16];
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[5] = {workflow, statuses, group_id, created_before, lim};
	PGresult *r = db_exec(c, &q_cancel_many, p, e);
	if (r == NULL)
		return e->code;
	*n = (int)db_i64(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}
