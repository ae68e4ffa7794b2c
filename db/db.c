/* db: connections, the pool, named prepared statements and SQLSTATE mapping.
 *
 * Each connection remembers which named statements it has prepared; a reset
 * after a lost connection forgets them. Behind a transaction pooler nothing is
 * prepared: every statement goes unnamed, with its text. The pool hands each
 * connection to one thread at a time (mutex + condition variable) and opens
 * connections lazily, so the service starts even while the database is down
 * and recovers when it returns. */
#include "db/internal.h"

#include <errno.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/sig.h"
#include "base/timefmt.h"

#define MAX_PREPARED 64
/* The most parameters a statement with binary ones (db_exec_bin) has. */
#define DB_MAX_PARAMS 32

struct db_conn {
	char *url;
	PGconn *pg;
	char failure[300]; /* why the last connect failed: libpq's text, for the operator */
	const char *prepared[MAX_PREPARED]; /* names of statements prepared on pg */
	int nprepared;
	/* Spans the engine reported in the transaction under way, one JSON
	 * text a line: handed to the sink once it commits (db_set_span_sink). */
	struct strbuf spans;
};

/* Set once at start-up, before any connection exists (db_set_transaction_pooler). */
static bool behind_transaction_pooler;

static void (*span_sink)(const char *json, size_t len);

#define SPAN_PREFIX "hookflow-span "
/* The end of application_name that asks the engine for spans (hf_tracing). */
#define SPANS_MARK " [hookflow spans]"

void db_set_span_sink(void (*sink)(const char *json, size_t len))
{
	span_sink = sink;
}

/* The transaction that reported the pending spans has committed. */
static void spans_flush(struct db_conn *c)
{
	if (c->spans.len == 0)
		return;
	if (span_sink != NULL && !c->spans.oom) {
		const char *p = c->spans.data, *end = p + c->spans.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
			span_sink(p, n);
			p += n + 1;
		}
	}
	strbuf_cleanup(&c->spans);
}

/* ... or was rolled back. */
static void spans_discard(struct db_conn *c)
{
	strbuf_cleanup(&c->spans);
}

struct db_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *url;
	int size;
	struct db_conn **conns;
	bool *busy;
	int waiting;              /* callers in db_pool_acquire's wait */
	int64_t acquire_timeouts; /* acquires that gave up */
};

/* PostgreSQL's notices ("relation ... already exists, skipping") go to the
 * debug log instead of stderr; the engine's span reports (INFO, always
 * sent to the client) are kept for the sink until their transaction ends. */
static void on_notice(void *arg, const PGresult *res)
{
	struct db_conn *c = arg;
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	if (msg == NULL)
		return;
	if (span_sink != NULL && sev != NULL && strcmp(sev, "INFO") == 0 &&
	    strncmp(msg, SPAN_PREFIX, sizeof SPAN_PREFIX - 1) == 0) {
		if (c->spans.len > 0)
			strbuf_add(&c->spans, "\n", 1);
		strbuf_puts(&c->spans, msg + sizeof SPAN_PREFIX - 1);
		return;
	}
	char m[200];
	snprintf(m, sizeof m, "%s", msg);
	m[strcspn(m, "\n")] = '\0';
	log_debug("db", "notice", "msg=\"%s\"", m);
}

static enum err_code connect_pg(struct db_conn *c, struct err *e)
{
	if (c->pg != NULL) {
		PQfinish(c->pg);
		c->pg = NULL;
	}
	c->nprepared = 0;
	spans_discard(c);
	c->pg = PQconnectdb(c->url);
	if (PQstatus(c->pg) != CONNECTION_OK) {
		/* PostgreSQL's own text names the host, port, user and database:
		 * it goes to the log, never into an error that may reach a client. */
		char msg[300];
		if (!db_tls_failure(PQerrorMessage(c->pg), msg, sizeof msg)) {
			snprintf(msg, sizeof msg, "%s", PQerrorMessage(c->pg));
			msg[strcspn(msg, "\n")] = '\0';
		}
		snprintf(c->failure, sizeof c->failure, "%s", msg);
		log_warn("db", "cannot connect", "error=\"%s\"", msg);
		PQfinish(c->pg);
		c->pg = NULL;
		return err_set(e, ERR_UNAVAILABLE, "database unavailable");
	}
	PQsetNoticeReceiver(c->pg, on_notice, c);
	/* Settlement rules compare times in the database; keep sessions in UTC.
	 * With a span sink, the engine reports spans on this session: it looks
	 * for SPANS_MARK at the end of application_name (hf_tracing). Both are
	 * parameters a transaction pooler tracks per client and sets on whichever
	 * server session serves it (PgBouncer does for these; a custom setting
	 * would stay on the server session that took it). The URL's own
	 * application_name is kept, cut to leave room for the mark. On a session
	 * of its own, JIT is turned off: hookflow's statements read and write a
	 * few hundred rows, and a compile costs more than any of them (a pooler
	 * does not carry the setting, so the engine's functions set it too:
	 * db/engine/03_submit.sql). */
	char setup[256];
	snprintf(setup, sizeof setup, "SET TIME ZONE 'UTC'%s%s",
		 behind_transaction_pooler ? "" : "; SET jit = off",
		 span_sink != NULL ? "; SELECT set_config('application_name', "
				     "left(current_setting('application_name'), 40) || '" SPANS_MARK
				     "', false)"
				   : "");
	PGresult *r = PQexec(c->pg, setup);
	PQclear(r);
	return ERR_OK;
}

/* The lines of libpq's connection errors that say TLS was refused (its
 * messages are in English: hookflow never calls setlocale). "SSL error:"
 * lines are OpenSSL's reasons, except an end of file in the middle of the
 * handshake, which a server going down gives too. */
static bool tls_line(const char *line, size_t n)
{
	static const char *const marks[] = {
		"certificate",         /* server certificate for "x" does not match host
					* name "y", certificate verify failed, root
					* certificate file "f" does not exist... */
		"private key",         /* sslkey: its file is missing or readable by others */
		"does not support SSL" /* sslmode=require or stronger, server without TLS */
	};
	char buf[512];
	snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), line);
	for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
		if (strstr(buf, marks[i]) != NULL)
			return true;
	return strstr(buf, "SSL error:") != NULL && strcasestr(buf, "eof") == NULL;
}

bool db_tls_failure(const char *msg, char *out, size_t out_len)
{
	for (const char *p = msg; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, "\n");
		if (tls_line(p, n)) {
			if (out_len > 0)
				snprintf(out, out_len, "%.*s", (int)n, p);
			return true;
		}
		p += n;
		if (*p == '\n')
			p++;
	}
	return false;
}

enum err_code db_conn_open_startup(const char *url, struct db_conn **out, struct err *e)
{
	*out = NULL;
	struct db_conn *c = calloc(1, sizeof *c);
	if (c == NULL || (c->url = strdup(url)) == NULL) {
		free(c);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	struct err ce = {0};
	if (connect_pg(c, &ce) == ERR_OK) {
		*out = c;
		return ERR_OK;
	}
	char msg[sizeof c->failure];
	bool tls = db_tls_failure(c->failure, msg, sizeof msg);
	if (tls)
		err_set(e, ERR_INVALID, "TLS to the database refused: %s", msg);
	else
		err_set(e, ce.code, "%s", c->failure[0] ? c->failure : ce.msg);
	db_conn_free(c);
	return e->code;
}

enum err_code db_conn_open(const char *url, struct db_conn **out, struct err *e)
{
	*out = NULL;
	struct db_conn *c = calloc(1, sizeof *c);
	if (c == NULL || (c->url = strdup(url)) == NULL) {
		free(c);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	if (connect_pg(c, e)) {
		db_conn_free(c);
		return e->code;
	}
	*out = c;
	return ERR_OK;
}

void db_conn_free(struct db_conn *c)
{
	if (c == NULL)
		return;
	if (c->pg != NULL)
		PQfinish(c->pg);
	spans_discard(c);
	free(c->url);
	free(c);
}

PGconn *db_pg(struct db_conn *c, struct err *e)
{
	if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
		if (connect_pg(c, e))
			return NULL;
	}
	return c->pg;
}

/* Serialization failures and deadlocks: the transaction was aborted and
 * may simply be run again. */
static bool is_busy(const char *sqlstate)
{
	return sqlstate != NULL &&
	       (strcmp(sqlstate, "40001") == 0 || strcmp(sqlstate, "40P01") == 0);
}

/* A short pause before attempt `attempt` (2, 3, ...) of a transaction that
 * was aborted as busy: 1, 2, 4, 8 ms and so on, with jitter, so that the
 * transactions that collided do not collide again. */
static void busy_pause(int attempt)
{
	unsigned char rnd = 0;
	RAND_bytes(&rnd, 1);
	long us = (1000L << (attempt - 2)) + (long)rnd * 4;
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* Maps a failed result to the error currency. A connection lost, or to a
 * server that takes no writes (closed here), is ERR_UNAVAILABLE. */
static enum err_code map_error(struct db_conn *c, PGresult *r, const char *what, struct err *e)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg);
	char m[200];
	snprintf(m, sizeof m, "%s", msg ? msg : "");
	m[strcspn(m, "\n")] = '\0';
	if (PQstatus(c->pg) != CONNECTION_OK || state == NULL || strncmp(state, "08", 2) == 0 ||
	    strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 ||
	    strcmp(state, "57P03") == 0) {
		log_warn("db", "connection lost", "stmt=%s error=\"%s\"", what, m);
		return err_set(e, ERR_UNAVAILABLE, "database unavailable");
	}
	/* The server takes no writes (read_only_sql_transaction): a standby, or
	 * a node an HA manager fenced read-only during a failover (pg_auto_failover
	 * does so to the standby it promotes until the old primary is known
	 * gone). The connection is of no use for writing: it is closed so that
	 * its next use connects again, and a target_session_attrs=read-write URL
	 * then finds the node that takes writes. */
	if (strcmp(state, "25006") == 0) {
		log_warn("db", "server is read-only, reconnecting", "stmt=%s error=\"%s\"", what,
			 m);
		PQfinish(c->pg);
		c->pg = NULL;
		c->nprepared = 0;
		return err_set(e, ERR_UNAVAILABLE, "database unavailable");
	}
	if (strcmp(state, "23505") == 0)
		return err_set(e, ERR_CONFLICT, "conflict: %s", m);
	if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0)
		return err_set(e, ERR_INVALID, "invalid value: %s", m);
	if (is_busy(state)) {
		log_warn("db", "transaction aborted, busy", "stmt=%s sqlstate=%s", what, state);
		return err_set(e, ERR_BUSY, "database busy, try again");
	}
	log_error("db", "statement failed", "stmt=%s sqlstate=%s error=\"%s\"", what, state, m);
	return err_set(e, ERR_INTERNAL, "database error");
}

void db_set_transaction_pooler(bool on)
{
	behind_transaction_pooler = on;
}

static bool is_prepared(const struct db_conn *c, const char *name)
{
	for (int i = 0; i < c->nprepared; i++)
		if (c->prepared[i] == name || strcmp(c->prepared[i], name) == 0)
			return true;
	return false;
}

PGresult *db_exec(struct db_conn *c, const struct db_stmt *st, const char *const *params,
		  struct err *e)
{
	return db_exec_bin(c, st, params, NULL, 0, e);
}

PGresult *db_exec_bin(struct db_conn *c, const struct db_stmt *st, const char *const *params,
		      const int *lengths, unsigned binary, struct err *e)
{
	int formats[DB_MAX_PARAMS] = {0};
	if (binary != 0) {
		if (lengths == NULL || st->nparams > DB_MAX_PARAMS) {
			err_set(e, ERR_INTERNAL,
				"%s: binary parameters need their lengths and at most %d "
				"parameters",
				st->name, DB_MAX_PARAMS);
			return NULL;
		}
		for (int k = 0; k < st->nparams; k++)
			formats[k] = (binary >> k) & 1u;
	}
	const int *fmt = binary != 0 ? formats : NULL;
	PGconn *pg = db_pg(c, e);
	if (pg == NULL)
		return NULL;
	/* A named statement lives in one server session: behind a transaction
	 * pooler the next transaction may run in another, so the statement goes
	 * unnamed, its text parsed each time. So does a statement past the
	 * MAX_PREPARED a connection keeps track of (preparing it again at its
	 * next use would fail: it exists). */
	bool named = !behind_transaction_pooler;
	if (named && !is_prepared(c, st->name)) {
		named = c->nprepared < MAX_PREPARED;
		PGresult *p = named ? PQprepare(pg, st->name, st->sql, st->nparams, NULL) : NULL;
		if (named && PQresultStatus(p) != PGRES_COMMAND_OK) {
			map_error(c, p, st->name, e);
			PQclear(p);
			return NULL;
		}
		PQclear(p);
		if (named)
			c->prepared[c->nprepared++] = st->name;
	}
	/* Outside a transaction the statement is one of its own: when it is
	 * aborted as busy, it is run again (the transaction runner's policy). */
	bool own_tx = PQtransactionStatus(pg) == PQTRANS_IDLE;
	for (int attempt = 1;; attempt++) {
		PGresult *r =
			named ? PQexecPrepared(pg, st->name, st->nparams, params, lengths, fmt, 0)
			      : PQexecParams(pg, st->sql, st->nparams, NULL, params, lengths, fmt,
					     0);
		ExecStatusType s = PQresultStatus(r);
		if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
			if (PQtransactionStatus(pg) == PQTRANS_IDLE)
				spans_flush(c);
			return r;
		}
		spans_discard(c);
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		if (own_tx && attempt < DB_TX_ATTEMPTS && is_busy(state)) {
			log_debug("db", "busy, running the statement again",
				  "stmt=%s sqlstate=%s attempt=%d", st->name, state, attempt + 1);
			PQclear(r);
			busy_pause(attempt + 1);
			continue;
		}
		map_error(c, r, st->name, e);
		PQclear(r);
		return NULL;
	}
}

PGresult *db_exec_sql(struct db_conn *c, const char *sql, struct err *e)
{
	PGconn *pg = db_pg(c, e);
	if (pg == NULL)
		return NULL;
	PGresult *r = PQexec(pg, sql);
	ExecStatusType s = PQresultStatus(r);
	if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
		spans_discard(c);
		map_error(c, r, "sql", e);
		PQclear(r);
		return NULL;
	}
	if (strcmp(sql, "ROLLBACK") == 0)
		spans_discard(c);
	else if (PQtransactionStatus(pg) == PQTRANS_IDLE)
		spans_flush(c);
	return r;
}

enum err_code db_tx_run(struct db_conn *c,
			enum err_code (*fn)(struct db_conn *c, void *arg, struct err *e), void *arg,
			struct err *e)
{
	for (int attempt = 1;; attempt++) {
		struct err te = {0};
		PGresult *r = db_exec_sql(c, "BEGIN", &te);
		if (r != NULL) {
			PQclear(r);
			if (fn(c, arg, &te) == ERR_OK &&
			    (r = db_exec_sql(c, "COMMIT", &te)) != NULL) {
				PQclear(r);
				return ERR_OK;
			}
		}
		if (c->pg != NULL && PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
			struct err ignore = {0};
			PQclear(db_exec_sql(c, "ROLLBACK", &ignore));
		}
		if (te.code != ERR_BUSY || attempt >= DB_TX_ATTEMPTS)
			return err_set(e, te.code, "%s", te.msg);
		log_debug("db", "busy, running the transaction again", "attempt=%d", attempt + 1);
		busy_pause(attempt + 1);
	}
}

enum err_code db_conn_ping(struct db_conn *c, struct err *e)
{
	static const struct db_stmt ping = {"ping", "SELECT 1", 0};
	PGresult *r = db_exec(c, &ping, NULL, e);
	if (r == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

json_t *db_trace_json(const struct trace_parent *t, bool *oom)
{
	*oom = false;
	if (t == NULL || t->trace_id[0] == '\0')
		return NULL;
	json_t *o = json_pack("{s:s, s:s}", "trace_id", t->trace_id, "parent_span_id", t->span_id);
	if (o != NULL && t->tracestate[0] != '\0' &&
	    json_object_set_new(o, "tracestate", json_string(t->tracestate))) {
		json_decref(o);
		o = NULL;
	}
	*oom = o == NULL;
	return o;
}

json_t *db_json(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return json_null();
	return db_json_parse(PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

json_t *db_json_parse(const char *s, size_t len)
{
	json_error_t je;
	json_t *v = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (v == NULL && json_error_code(&je) == json_error_numeric_overflow)
		v = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
			       NULL);
	return v;
}

int64_t db_i64(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return 0;
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

const char *db_str(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	return PQgetvalue(r, row, col);
}

void db_page_params(const struct db_page_req *pg, struct db_page_params *out)
{
	snprintf(out->limit, sizeof out->limit, "%d", pg->limit);
	snprintf(out->max_bytes, sizeof out->max_bytes, "%lld", (long long)pg->max_bytes);
}

enum err_code db_page_read(PGresult *r, struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	int n = PQntuples(r), shown = 0;
	/* The items come first; a row without one says that the list goes on. */
	strbuf_add(&out->items, "[", 1);
	for (; shown < n && !PQgetisnull(r, shown, 0); shown++) {
		if (shown > 0)
			strbuf_add(&out->items, ",", 1);
		strbuf_add(&out->items, PQgetvalue(r, shown, 0), (size_t)PQgetlength(r, shown, 0));
	}
	strbuf_add(&out->items, "]", 1);
	if (shown > 0 && shown < n) {
		out->next = db_cursor_encode(db_i64(r, shown - 1, 1), PQgetvalue(r, shown - 1, 2));
		if (out->next == NULL) {
			PQclear(r);
			db_page_cleanup(out);
			return err_set(e, ERR_INTERNAL, "page: cannot make the cursor");
		}
	}
	PQclear(r);
	if (out->items.oom) {
		db_page_cleanup(out);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	return ERR_OK;
}

void db_page_cleanup(struct db_page *p)
{
	strbuf_cleanup(&p->items);
	free(p->next);
	p->next = NULL;
}

char *db_cursor_encode(int64_t ms, const char *id)
{
	char raw[600];
	int n = snprintf(raw, sizeof raw, "%lld|%s", (long long)ms, id);
	if (n < 0 || (size_t)n >= sizeof raw)
		return NULL;
	char *out = malloc(4 * (((size_t)n + 2) / 3) + 1);
	if (out == NULL)
		return NULL;
	sig_base64((const unsigned char *)raw, (size_t)n, out);
	/* base64url, unpadded: safe in a query string */
	for (char *p = out; *p; p++) {
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
		else if (*p == '=')
			*p = '\0';
	}
	return out;
}

enum err_code db_cursor_decode(const char *cursor, int64_t *ms, char **id, struct err *e)
{
	*id = NULL;
	size_t len = strlen(cursor);
	if (len == 0 || len > 800)
		return err_set(e, ERR_INVALID, "cursor: malformed");
	char b64[808];
	for (size_t i = 0; i < len; i++)
		b64[i] = cursor[i] == '-' ? '+' : cursor[i] == '_' ? '/' : cursor[i];
	b64[len] = '\0';
	unsigned char raw[608];
	long n = sig_base64_decode(b64, raw, sizeof raw - 1);
	if (n <= 0)
		return err_set(e, ERR_INVALID, "cursor: malformed");
	raw[n] = '\0';
	char *bar = memchr(raw, '|', (size_t)n);
	if (bar == NULL || bar == (char *)raw || bar[1] == '\0' ||
	    memchr(raw, '\0', (size_t)n) != NULL ||
	    !ids_utf8_valid(bar + 1, (size_t)n - (size_t)(bar + 1 - (char *)raw)))
		return err_set(e, ERR_INVALID, "cursor: malformed");
	*bar = '\0';
	char *end = NULL;
	errno = 0;
	long long v = strtoll((char *)raw, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		return err_set(e, ERR_INVALID, "cursor: malformed");
	*ms = v;
	*id = strdup(bar + 1);
	return ERR_OK;
}

struct db_pool *db_pool_new(const char *url, int size)
{
	struct db_pool *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->url = strdup(url);
	p->size = size;
	p->conns = calloc((size_t)size, sizeof *p->conns);
	p->busy = calloc((size_t)size, sizeof *p->busy);
	if (p->url == NULL || p->conns == NULL || p->busy == NULL) {
		db_pool_free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	return p;
}

void db_pool_free(struct db_pool *p)
{
	if (p == NULL)
		return;
	for (int i = 0; p->conns != NULL && i < p->size; i++)
		db_conn_free(p->conns[i]);
	free(p->conns);
	free(p->busy);
	free(p->url);
	if (p->conns != NULL) {
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
	}
	free(p);
}

void db_conn_drop_if_closed(struct db_conn *c)
{
	if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK ||
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		return;
	struct pollfd pf = {.fd = PQsocket(c->pg), .events = POLLIN};
	bool lost = false;
	/* The server's last message and its end of stream may take two reads. */
	for (int i = 0; i < 4 && !lost && pf.fd >= 0 && poll(&pf, 1, 0) > 0; i++)
		lost = PQconsumeInput(c->pg) == 0 || PQstatus(c->pg) != CONNECTION_OK;
	if (lost) {
		log_info("db", "pooled connection closed by the server, reconnecting", NULL);
		PQfinish(c->pg);
		c->pg = NULL;
		c->nprepared = 0;
	}
}

enum err_code db_pool_acquire(struct db_pool *p, int wait_ms, struct db_conn **out, struct err *e)
{
	*out = NULL;
	struct timespec dl;
	timefmt_mono_deadline(wait_ms, &dl);
	int slot = -1;
	struct db_conn *c = NULL;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		for (int i = 0; i < p->size; i++) {
			if (!p->busy[i]) {
				slot = i;
				break;
			}
		}
		if (slot >= 0)
			break;
		p->waiting++;
		int rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
		p->waiting--;
		if (rc == ETIMEDOUT)
			break;
	}
	if (slot >= 0) {
		p->busy[slot] = true;
		c = p->conns[slot];
	} else {
		p->acquire_timeouts++;
	}
	pthread_mutex_unlock(&p->mu);
	if (slot < 0)
		return err_set(e, ERR_UNAVAILABLE, "no database connection free, try again");

	if (c == NULL) {
		/* Opened outside the lock (it takes a network round trip), stored
		 * under it: db_pool_release reads every slot under the lock. */
		enum err_code rc = db_conn_open(p->url, &c, e);
		pthread_mutex_lock(&p->mu);
		if (rc == ERR_OK) {
			p->conns[slot] = c;
		} else {
			p->busy[slot] = false;
			pthread_cond_signal(&p->cv);
		}
		pthread_mutex_unlock(&p->mu);
		if (rc)
			return rc;
	} else {
		db_conn_drop_if_closed(c);
	}
	*out = c;
	return ERR_OK;
}

void db_pool_release(struct db_pool *p, struct db_conn *c)
{
	if (c == NULL)
		return;
	/* A connection left inside a transaction by an error path is rolled
	 * back before anyone else gets it: here, while the caller still owns it,
	 * not under the pool's lock (a round trip would hold up every other
	 * acquire and release). */
	if (c->pg != NULL && PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
		PGresult *r = PQexec(c->pg, "ROLLBACK");
		PQclear(r);
	}
	spans_discard(c);
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->size; i++) {
		if (p->conns[i] == c) {
			p->busy[i] = false;
			break;
		}
	}
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void db_pool_stats(struct db_pool *p, struct db_pool_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&p->mu);
	out->size = p->size;
	for (int i = 0; i < p->size; i++) {
		if (p->busy[i])
			out->in_use++;
		/* A borrowed connection belongs to its borrower's thread: its
		 * PGconn is not read here, only whether the slot holds one. */
		if (p->conns[i] != NULL && (p->busy[i] || p->conns[i]->pg != NULL))
			out->open++;
	}
	out->waiting = p->waiting;
	out->acquire_timeouts = p->acquire_timeouts;
	pthread_mutex_unlock(&p->mu);
}
