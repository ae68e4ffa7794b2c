/* db/jobs: SQL of claims, settlements, leases, promotion and reaping, and the
 * encoding of settlements for the engine. */
#include "db/jobs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/timefmt.h"
#include "db/internal.h"

/* The SELECT list of JOB_COLUMNS, after a constant first column (0) that
 * gives every column of the list the same ", name" shape. */
#define JOB_SELECT(name, type) ", " #name
static const struct db_stmt q_cycle = {
	"jobs_cycle",
	"SELECT 0" JOB_COLUMNS(JOB_SELECT) " FROM hf_cycle($1::jsonb, $2::jsonb, $3, $4, $5, "
					   "$6::jsonb, $7::jsonb, $8::bytea)",
	8};
/* The parameter of q_cycle and q_settle_steps sent in binary: the payloads. */
#define CYCLE_TEXTS_BIN (1u << 7)
#define SETTLE_TEXTS_BIN (1u << 1)
static const struct db_stmt q_settle_steps = {
	"jobs_settle_steps",
	"SELECT run_id, outcome FROM hf_settle_steps($1::jsonb, p_texts => $2::bytea)", 2};
static const struct db_stmt q_settle_callbacks = {
	"jobs_settle_callbacks", "SELECT id, outcome FROM hf_settle_callbacks($1::jsonb)", 1};
static const struct db_stmt q_store_outputs = {"jobs_store_outputs",
					       "SELECT hf_store_outputs($1::jsonb)", 1};
static const struct db_stmt q_complete = {"jobs_complete",
					  "SELECT outcome, run FROM hf_complete($1, $2::integer, "
					  "$3::integer, $4::integer, $5::jsonb)",
					  5};
static const struct db_stmt q_heartbeat = {
	"jobs_heartbeat",
	"SELECT outcome, cancel_requested FROM hf_heartbeat($1, $2::integer, $3::integer,"
	" $4::integer, $5::jsonb, $6::boolean)",
	6};
static const struct db_stmt q_sweep = {"jobs_sweep", "SELECT hf_sweep($1, $2, $3)", 3};
static const struct db_stmt q_renew = {
	"jobs_renew", "SELECT kind, id, cancel_requested FROM hf_renew($1, $2)", 2};
static const struct db_stmt q_promote = {"jobs_promote", "SELECT hf_promote($1)", 1};
static const struct db_stmt q_next_due = {"jobs_next_due",
					  "SELECT hf_next_due($1::bigint), hf_ms(now())", 1};
static const struct db_stmt q_reap = {"jobs_reap", "SELECT hf_reap($1, $2)", 2};

/* ---- claimed jobs: JOB_COLUMNS' types read from a result --------------- */

static enum job_kind read_KIND(const PGresult *r, int row, int col)
{
	return strcmp(PQgetvalue(r, row, col), "step") == 0 ? JOB_STEP : JOB_CALLBACK;
}

static char *read_STR(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	size_t n = (size_t)PQgetlength(r, row, col);
	char *s = malloc(n + 1);
	if (s != NULL) {
		memcpy(s, PQgetvalue(r, row, col), n);
		s[n] = '\0';
	}
	return s;
}

static int read_INT(const PGresult *r, int row, int col)
{
	return (int)db_i64(r, row, col);
}

static int64_t read_I64(const PGresult *r, int row, int col)
{
	return db_i64(r, row, col);
}

static bool read_BOOL(const PGresult *r, int row, int col)
{
	return strcmp(PQgetvalue(r, row, col), "t") == 0;
}

/* The index of each column among JOB_COLUMNS: JOB_COL_<name>. */
enum {
#define JOB_INDEX(name, type) JOB_COL_##name,
	JOB_COLUMNS(JOB_INDEX)
#undef JOB_INDEX
};

/* Reads the job of row `row`, whose columns start at `col`. */
static void read_job(const PGresult *r, int row, int col, struct claimed_job *j)
{
	int payload_col = col + JOB_COL_payload;
#define JOB_READ(name, type) j->name = read_##type(r, row, col++);
	JOB_COLUMNS(JOB_READ)
#undef JOB_READ
	j->payload_len = j->payload != NULL ? (size_t)PQgetlength(r, row, payload_col) : 0;
}

void db_claimed_job_cleanup(struct claimed_job *j)
{
#define JOB_FREE_KIND(x)
#define JOB_FREE_STR(x) free(x);
#define JOB_FREE_INT(x)
#define JOB_FREE_I64(x)
#define JOB_FREE_BOOL(x)
#define JOB_FREE(name, type) JOB_FREE_##type(j->name)
	JOB_COLUMNS(JOB_FREE)
	memset(j, 0, sizeof *j);
}

/* ---- settlements ----------------------------------------------------------- */

void settlement_cleanup(struct settlement *s)
{
	free(s->id);
	free(s->reason);
	free(s->wait_key);
	json_decref(s->wait_keys);
	json_decref(s->children);
	json_decref(s->wait_children);
	json_decref(s->payload);
	free(s->payload_text);
	json_decref(s->value);
	free(s->value_text);
	json_decref(s->kv_put);
	json_decref(s->kv_delete);
	json_decref(s->replay_outcome);
	free(s->span);
	memset(s, 0, sizeof *s);
}

static bool reserve(struct settlements *l, size_t more)
{
	if (l->n + more <= l->cap)
		return true;
	size_t cap = l->cap ? l->cap : 16;
	while (cap < l->n + more)
		cap *= 2;
	struct settlement *v = realloc(l->v, cap * sizeof *v);
	if (v == NULL)
		return false;
	l->v = v;
	l->cap = cap;
	return true;
}

bool settlements_push(struct settlements *l, struct settlement *s)
{
	if (!reserve(l, 1)) {
		settlement_cleanup(s);
		return false;
	}
	l->v[l->n++] = *s;
	memset(s, 0, sizeof *s);
	return true;
}

bool settlements_take(struct settlements *to, struct settlements *from)
{
	if (from->n == 0)
		return true;
	if (!reserve(to, from->n))
		return false;
	memcpy(to->v + to->n, from->v, from->n * sizeof *from->v);
	to->n += from->n;
	from->n = 0;
	return true;
}

bool settlements_take_upto(struct settlements *to, struct settlements *from, size_t max_size)
{
	size_t size = 0, n = 0;
	for (size_t i = 0; i < to->n; i++)
		size += to->v[i].size;
	while (n < from->n && (to->n + n == 0 || size + from->v[n].size <= max_size))
		size += from->v[n++].size;
	if (n == 0)
		return true;
	if (!reserve(to, n))
		return false;
	memcpy(to->v + to->n, from->v, n * sizeof *from->v);
	to->n += n;
	memmove(from->v, from->v + n, (from->n - n) * sizeof *from->v);
	from->n -= n;
	return true;
}

int claim_batch_size(int room, int batch, size_t job_bytes, size_t max_bytes)
{
	int n = room < batch ? room : batch;
	if (n <= 0)
		return 0;
	if (job_bytes > 0 && max_bytes / job_bytes < (size_t)n)
		n = max_bytes / job_bytes > 0 ? (int)(max_bytes / job_bytes) : 1;
	return n;
}

void settlements_clear(struct settlements *l)
{
	for (size_t i = 0; i < l->n; i++)
		settlement_cleanup(&l->v[i]);
	l->n = 0;
}

void settlements_cleanup(struct settlements *l)
{
	settlements_clear(l);
	free(l->v);
	memset(l, 0, sizeof *l);
}

const char *db_settle_result_name(enum settle_result r)
{
	switch (r) {
	case SETTLE_CONTINUE:
		return "continue";
	case SETTLE_SUCCEED:
		return "succeed";
	case SETTLE_FAIL:
		return "fail";
	case SETTLE_CANCEL:
		return "cancel";
	case SETTLE_DELIVERED:
		return "ok";
	case SETTLE_TRANSIENT:
		return "transient_error";
	case SETTLE_PERMANENT:
		return "permanent_error";
	case SETTLE_PENDING:
		return "pending";
	}
	return "?";
}

/* The engine's JSON item of settlement `s` (a new reference, NULL when out
 * of memory): the one place the settlement wire format is written. */
static json_t *encode(const struct settlement *s)
{
	json_t *it = json_object();
	if (it == NULL)
		return NULL;
	int bad =
		json_object_set_new(it, s->kind == JOB_STEP ? "run_id" : "id", json_string(s->id)) |
		json_object_set_new(it, "claim_token", json_integer(s->claim_token)) |
		json_object_set_new(it, "result", json_string(db_settle_result_name(s->result)));
	if (s->http_status > 0)
		bad |= json_object_set_new(it, "http_status", json_integer(s->http_status));
	if (s->reason != NULL)
		bad |= json_object_set_new(it, "reason", json_string(s->reason));
	if (s->result == SETTLE_TRANSIENT && s->retry_delay_ms >= 0)
		bad |= json_object_set_new(it, "retry_delay_ms", json_integer(s->retry_delay_ms));
	if (s->result == SETTLE_PENDING) {
		bad |= json_object_set_new(it, "timeout_ms", json_integer(s->timeout_ms));
		if (s->heartbeat_timeout_ms > 0)
			bad |= json_object_set_new(it, "heartbeat_timeout_ms",
						   json_integer(s->heartbeat_timeout_ms));
	}
	if (s->result == SETTLE_CONTINUE) {
		if (s->payload_text == NULL)
			bad |= json_object_set(it, "payload",
					       s->payload ? s->payload : json_null());
		if (s->wait_key != NULL) {
			bad |= json_object_set_new(it, "wait_key", json_string(s->wait_key)) |
			       json_object_set_new(it, "wait_timeout_ms",
						   json_integer(s->wait_timeout_ms));
			if (s->wait_keys != NULL)
				bad |= json_object_set(it, "wait_keys", s->wait_keys);
		} else if (s->children != NULL) {
			bad |= json_object_set(it, "children", s->children) |
			       json_object_set_new(it, "max_children",
						   json_integer(s->max_children)) |
			       json_object_set_new(it, "max_depth", json_integer(s->max_depth));
			if (s->wait_children != NULL)
				bad |= json_object_set(it, "wait_children", s->wait_children);
		} else if (s->run_at_ms > 0) {
			char at[TIMEFMT_RFC3339_LEN + 1];
			timefmt_rfc3339(s->run_at_ms, at);
			bad |= json_object_set_new(it, "run_at", json_string(at));
		} else if (s->delay_ms > 0) {
			bad |= json_object_set_new(it, "delay_ms", json_integer(s->delay_ms));
		}
	}
	if (s->result == SETTLE_SUCCEED && s->value_text == NULL)
		bad |= json_object_set(it, "value", s->value ? s->value : json_null());
	if (s->kv_put != NULL || s->kv_delete != NULL) {
		json_t *kv = json_object();
		if (s->kv_put != NULL)
			bad |= json_object_set(kv, "put", s->kv_put);
		if (s->kv_delete != NULL)
			bad |= json_object_set(kv, "delete", s->kv_delete);
		bad |= json_object_set_new(it, "kv", kv);
	}
	if (bad) {
		json_decref(it);
		return NULL;
	}
	return it;
}

/* Appends the JSON text of settlement `s`'s engine item to `b`, without
 * "run_id" and "claim_token" when `anonymous`. A payload held as text goes
 * to `texts` when it is given: the item says where ("payload_at": [byte
 * offset, byte length]) and the engine stores the text as json, never
 * parsed to jsonb (migrations/0013_payload_json.sql). A payload or value
 * held as text otherwise goes in as it is, as the object's last member.
 * False when out of memory (b->oom may be set too). */
static bool encode_into(struct strbuf *b, const struct settlement *s, bool anonymous,
			struct strbuf *texts)
{
	json_t *it = encode(s);
	if (it != NULL && anonymous) {
		json_object_del(it, "run_id");
		json_object_del(it, "claim_token");
	}
	const char *raw = s->payload_text != NULL ? s->payload_text : s->value_text;
	if (it != NULL && s->payload_text != NULL && texts != NULL) {
		size_t len = strlen(s->payload_text);
		json_t *at = json_pack("[I, I]", (json_int_t)texts->len, (json_int_t)len);
		if (json_object_set_new(it, "payload_at", at)) {
			json_decref(it);
			it = NULL;
		}
		strbuf_add(texts, s->payload_text, len);
		raw = NULL;
	}
	char *t = it ? json_dumps(it, JSON_COMPACT) : NULL;
	json_decref(it);
	if (t == NULL)
		return false;
	if (raw == NULL) {
		strbuf_puts(b, t);
	} else {
		size_t n = strlen(t) - 1; /* all but its closing brace */
		strbuf_add(b, t, n);
		strbuf_puts(b, n > 1 ? "," : "");
		strbuf_puts(b, s->payload_text != NULL ? "\"payload\":" : "\"value\":");
		strbuf_puts(b, raw);
		strbuf_puts(b, "}");
	}
	free(t);
	return !b->oom && (texts == NULL || !texts->oom);
}

/* Takes the text `b` holds (NULL when it ran out of memory or `ok` is false). */
static char *take_text(struct strbuf *b, bool ok)
{
	if (!ok || b->oom) {
		strbuf_cleanup(b);
		return NULL;
	}
	return strbuf_take(b);
}

/* The items of kind `kind` among v[0..n) as the engine reads them: their
 * JSON text (returned, malloc'd; NULL when out of memory) and, for steps,
 * the payload texts they point into, appended to `texts`. */
static char *encode_items(const struct settlement *v, size_t n, enum job_kind kind,
			  struct strbuf *texts)
{
	struct strbuf b = {0};
	bool ok = true, first = true;
	strbuf_puts(&b, "[");
	for (size_t i = 0; ok && i < n; i++) {
		if (v[i].kind != kind)
			continue;
		if (!first)
			strbuf_puts(&b, ",");
		first = false;
		ok = encode_into(&b, &v[i], false, kind == JOB_STEP ? texts : NULL);
	}
	strbuf_puts(&b, "]");
	return take_text(&b, ok);
}

void claim_lane_cleanup(struct claim_lane *l)
{
	free(l->workflow);
	free(l->key);
	memset(l, 0, sizeof *l);
}

/* The cursor as hf_claim reads it: {"priority", "workflow", "key"}, or
 * "null". Malloc'd; NULL when out of memory. */
static char *encode_lane(const struct claim_lane *l)
{
	if (!l->set)
		return strdup("null");
	json_t *o = json_pack("{s:i, s:s, s:s}", "priority", l->priority, "workflow", l->workflow,
			      "key", l->key);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

/* Takes the lane of row `row` (kind 'lane') as the cursor. */
static void read_lane(const PGresult *r, int row, int col, struct claim_lane *l)
{
	struct claimed_job j = {0};
	read_job(r, row, col, &j);
	if (j.workflow != NULL && j.concurrency_key != NULL) {
		claim_lane_cleanup(l);
		l->set = true;
		l->priority = j.priority;
		l->workflow = j.workflow;
		l->key = j.concurrency_key;
		j.workflow = NULL;
		j.concurrency_key = NULL;
	}
	db_claimed_job_cleanup(&j);
}

/* Sets flags[i] for the settlements v[i] of kind `kind` whose id row `row`
 * names (in its `id` column, `col`). */
static void mark(const PGresult *r, int row, int col, enum job_kind kind,
		 const struct settlement *v, size_t n, bool *flags)
{
	const char *id = PQgetvalue(r, row, col);
	for (size_t i = 0; flags != NULL && i < n; i++)
		if (v[i].kind == kind && v[i].id != NULL && strcmp(v[i].id, id) == 0)
			flags[i] = true;
}

enum err_code db_jobs_cycle(struct db_conn *c, const struct settlement *v, size_t n, bool *refused,
			    bool *ended, const char *owner, int limit, int lease_ms,
			    struct claim_lane *lane, const char *room, struct claimed_job **jobs,
			    int *njobs, int *lost, struct err *e)
{
	*jobs = NULL;
	*njobs = 0;
	*lost = 0;
	struct strbuf texts = {0};
	/* The payload texts in one allocation: each is part of its answer. */
	size_t answers = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].kind == JOB_STEP && v[i].payload_text != NULL)
			answers += v[i].size;
	if (answers > 0)
		strbuf_reserve(&texts, answers);
	char *st = encode_items(v, n, JOB_STEP, &texts);
	char *cb = encode_items(v, n, JOB_CALLBACK, NULL);
	char *ln = encode_lane(lane);
	if (st == NULL || cb == NULL || ln == NULL || texts.oom || texts.len > INT_MAX) {
		free(st);
		free(cb);
		free(ln);
		strbuf_cleanup(&texts);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	char lim[16], lease[16];
	snprintf(lim, sizeof lim, "%d", limit);
	snprintf(lease, sizeof lease, "%d", lease_ms);
	const char *p[8] = {st, cb, owner, lim, lease, ln, room, texts.len > 0 ? texts.data : ""};
	const int lengths[8] = {[7] = (int)texts.len};
	PGresult *r = db_exec_bin(c, &q_cycle, p, lengths, CYCLE_TEXTS_BIN, e);
	free(st);
	free(cb);
	free(ln);
	strbuf_cleanup(&texts);
	if (r == NULL)
		return e->code;
	/* A row is a claimed job, the lane the claim stopped at (kind lane), a
	 * settlement whose claim was lost (kind lost_step, lost_callback), or a
	 * run the settlement ended (kind ended). */
	int rows = PQntuples(r);
	struct claimed_job *a = rows > 0 ? calloc((size_t)rows, sizeof *a) : NULL;
	if (rows > 0 && a == NULL) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	int k = 0;
	for (int i = 0; i < rows; i++) {
		const char *kind = PQgetvalue(r, i, 1);
		if (strncmp(kind, "lost_", 5) == 0) {
			(*lost)++;
			mark(r, i, 2, strcmp(kind, "lost_step") == 0 ? JOB_STEP : JOB_CALLBACK, v,
			     n, refused);
		} else if (strcmp(kind, "ended") == 0) {
			mark(r, i, 2, JOB_STEP, v, n, ended);
		} else if (strcmp(kind, "lane") == 0) {
			read_lane(r, i, 1, lane);
		} else {
			read_job(r, i, 1, &a[k++]);
		}
	}
	PQclear(r);
	if (k == 0) {
		free(a);
		a = NULL;
	}
	*jobs = a;
	*njobs = k;
	return ERR_OK;
}

/* Runs settlement statement `st` over the items of `kind` among v[0..n) and
 * adds the refused ones to *lost. */
static enum err_code settle_kind(struct db_conn *c, const struct db_stmt *st,
				 const struct settlement *v, size_t n, enum job_kind kind,
				 int *lost, struct err *e)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		count += v[i].kind == kind;
	if (count == 0)
		return ERR_OK;
	struct strbuf texts = {0};
	char *text = encode_items(v, n, kind, &texts);
	if (text == NULL || texts.oom || texts.len > INT_MAX) {
		free(text);
		strbuf_cleanup(&texts);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	const char *p[2] = {text, texts.len > 0 ? texts.data : ""};
	const int lengths[2] = {0, (int)texts.len};
	PGresult *r = db_exec_bin(c, st, p, lengths, kind == JOB_STEP ? SETTLE_TEXTS_BIN : 0, e);
	free(text);
	strbuf_cleanup(&texts);
	if (r == NULL)
		return e->code;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 1), "claim_lost") == 0)
			(*lost)++;
	PQclear(r);
	return ERR_OK;
}

enum err_code db_jobs_settle(struct db_conn *c, const struct settlement *v, size_t n, int *lost,
			     struct err *e)
{
	int l = 0;
	if (settle_kind(c, &q_settle_steps, v, n, JOB_STEP, &l, e) == ERR_OK)
		settle_kind(c, &q_settle_callbacks, v, n, JOB_CALLBACK, &l, e);
	if (lost)
		*lost = l;
	return e->code;
}

enum err_code db_jobs_store_outputs(struct db_conn *c, const struct settlement *v, size_t n,
				    struct err *e)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr != NULL && i < n; i++) {
		if (v[i].kind != JOB_STEP || v[i].replay_outcome == NULL)
			continue;
		if (json_array_append_new(arr,
					  json_pack("{s:s, s:I, s:O}", "run_id", v[i].id,
						    "claim_token", (json_int_t)v[i].claim_token,
						    "outcome", v[i].replay_outcome))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	if (arr != NULL && json_array_size(arr) == 0) {
		json_decref(arr);
		return ERR_OK;
	}
	char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
	json_decref(arr);
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

enum err_code db_jobs_next_due(struct db_conn *c, int64_t clock_offset_ms, int64_t *due_ms,
			       bool *has, int64_t *db_now_ms, struct err *e)
{
	char off[24];
	snprintf(off, sizeof off, "%lld", (long long)clock_offset_ms);
	const char *p[1] = {off};
	PGresult *r = db_exec(c, &q_next_due, p, e);
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

/* The error of hf_complete's or hf_heartbeat's outcome `o` for attempt `a`
 * (ERR_OK for "completed" and "ok"). */
static enum err_code attempt_outcome(const char *o, const struct attempt_ref *a, struct err *e)
{
	if (strcmp(o, "completed") == 0 || strcmp(o, "ok") == 0)
		return ERR_OK;
	if (strcmp(o, "not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "run %s not found", a->run_id);
	if (strcmp(o, "already_completed") == 0)
		return err_set(e, ERR_ALREADY_COMPLETED,
			       "step %d attempt %d of run %s was already completed", a->step,
			       a->attempt, a->run_id);
	if (strcmp(o, "run_cancelled") == 0)
		return err_set(e, ERR_RUN_CANCELLED, "run %s was cancelled", a->run_id);
	return err_set(e, ERR_STALE_ATTEMPT,
		       "step %d attempt %d (generation %d) of run %s is no longer the current "
		       "attempt",
		       a->step, a->attempt, a->generation, a->run_id);
}

static void attempt_params(const struct attempt_ref *a, char gen[16], char step[16], char att[16])
{
	snprintf(gen, 16, "%d", a->generation);
	snprintf(step, 16, "%d", a->step);
	snprintf(att, 16, "%d", a->attempt);
}

enum err_code db_jobs_complete(struct db_conn *c, const struct attempt_ref *a,
			       const struct settlement *s, json_t **run, struct err *e)
{
	*run = NULL;
	struct settlement item = *s; /* a shallow copy: borrows what s owns */
	item.kind = JOB_STEP;
	item.id = (char *)a->run_id;
	struct strbuf b = {0};
	char *text = take_text(&b, encode_into(&b, &item, true, NULL));
	if (text == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	char gen[16], step[16], att[16];
	attempt_params(a, gen, step, att);
	const char *p[5] = {a->run_id, gen, step, att, text};
	PGresult *r = db_exec(c, &q_complete, p, e);
	free(text);
	if (r == NULL)
		return e->code;
	if (attempt_outcome(PQgetvalue(r, 0, 0), a, e) == ERR_OK) {
		*run = db_json(r, 0, 1);
		if (*run == NULL)
			err_set(e, ERR_INTERNAL, "out of memory");
	}
	PQclear(r);
	return e->code;
}

enum err_code db_jobs_heartbeat(struct db_conn *c, const struct attempt_ref *a,
				const char *details_json, bool *cancel_requested, struct err *e)
{
	*cancel_requested = false;
	char gen[16], step[16], att[16];
	attempt_params(a, gen, step, att);
	const char *p[6] = {a->run_id, gen,          step,
			    att,       details_json, details_json != NULL ? "true" : "false"};
	PGresult *r = db_exec(c, &q_heartbeat, p, e);
	if (r == NULL)
		return e->code;
	if (attempt_outcome(PQgetvalue(r, 0, 0), a, e) == ERR_OK)
		*cancel_requested = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
	PQclear(r);
	return e->code;
}
