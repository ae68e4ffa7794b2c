/* http: the MHD daemon, routing, auth, capped bodies, JSON replies and long-poll suspension.
 *
 * Each request gets a struct http_req (MHD's per-request context). The first
 * call of the access handler checks the request's host and origin (no API
 * tokens), routes, authenticates and checks the body's size and type before
 * any byte of it is read; later calls collect the body up to
 * HOOKFLOW_MAX_BODY_BYTES (past it, nothing more is kept, and the connection
 * is closed within HTTP_LINGER_MS); the last call runs the handler. A
 * long-poll suspends the MHD connection; the waiter's fire callback resumes
 * it and the handler runs again. The long-poll state is reference-counted
 * because the listener thread may fire a waiter while the request is
 * finishing.
 *
 * Exhaustion: libmicrohttpd limits the connections of one client address
 * (HOOKFLOW_MAX_CONNS_PER_IP); a connection must send each request, and read
 * each answer, within HOOKFLOW_REQUEST_TIMEOUT_MS of being ready for it (a
 * sweeper thread shuts down the late ones: libmicrohttpd's own timeout is
 * reset by every byte). */
#include "service/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/sig.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "service/keyring.h"
#include "service/listener.h"

#define MAX_PATH_BYTES 4096
#define MAX_REQUEST_ID 128
#define HTTP_POOL_BYTES (32 * 1024)

/* A connection's deadline: while linked in the server's list, the client
 * must finish sending its request (or reading its answer) by `deadline`,
 * whatever trickle of bytes it sends meanwhile (libmicrohttpd's own timeout
 * is an idle one: every byte resets it). */
struct track_list {
	struct conn_track *head, *tail; /* in deadline order */
};

struct conn_track {
	struct conn_track *prev, *next;
	struct track_list *in; /* the list it is linked in, or NULL */
	bool expired;          /* shut down by the sweeper: never linked again */
	int fd;
	int64_t deadline; /* monotonic ms */
};

/* After an answer sent while a body was still coming (it passed its cap),
 * the rest of that body is discarded, unbuffered, for at most this long, so
 * that a client which finishes sending promptly reads the answer; then the
 * connection is closed. */
#define HTTP_LINGER_MS 2000

struct http_server {
	struct MHD_Daemon *daemon;
	const struct app *app;
	const struct http_route *routes;
	int nroutes;
	atomic_int port; /* the bound port (set once listening) */
	/* The deadline lists, each in deadline order (every deadline in `wait`
	 * is now + request_timeout_ms, every one in `linger` now +
	 * HTTP_LINGER_MS), and the thread that enforces them. */
	pthread_mutex_t tmu;
	pthread_cond_t tcv;
	struct track_list wait, linger;
	pthread_t sweeper;
	bool sweeping;
	bool stop;
	int64_t timeout_ms;
	/* Requests begun and not completed (under omu), waited for at stop. */
	pthread_mutex_t omu;
	pthread_cond_t ocv;
	int open_requests;
};

/* At stop, how long answers already on their way (long-polls the shutdown
 * woke, submissions the submitter answered) may take to be sent before the
 * daemon closes every connection. */
#define HTTP_STOP_DRAIN_MS 2000

struct longpoll {
	atomic_int refs;
	pthread_mutex_t mu;
	bool suspended;
	bool fired;
	struct MHD_Connection *conn;
	uint64_t waiter; /* the armed waiter's id; 0 once fired (or none) */
	struct listener *listener;
};

struct http_req {
	const struct app *app;
	const struct http_server *server;
	struct MHD_Connection *conn;
	const char *method;
	const struct http_route *route;
	char *params[HTTP_MAX_PARAMS];
	int nparams;
	char request_id[MAX_REQUEST_ID + 1];
	char *body;
	size_t body_len;
	size_t body_cap;
	bool has_body;
	bool replied;
	enum token_scope scope;                /* what the request's credential may do */
	bool close_after;                      /* the answer closes the connection */
	bool overflow;                         /* the body passed its cap: dropped as it comes */
	char *xh_name[HTTP_MAX_EXTRA_HEADERS]; /* headers of the answer (http_reply_header) */
	char *xh_value[HTTP_MAX_EXTRA_HEADERS];
	int nxh;
	bool early_reply;    /* replied before reading the body */
	struct err deferred; /* an error answered once the body has been read */
	size_t discarded;    /* body bytes read and dropped for a deferred error */
	struct longpoll *lp;
	bool by_token; /* authorised by a delivery token (claims in `token`) */
	struct token_claims token;
	int64_t wait_deadline; /* monotonic ms, fixed by the first arm; 0: none */
	char **allocs;         /* decoded query values, freed with the request */
	int nallocs;
	int64_t started_ms;
	int status;
	void *ctx; /* the handler's state between calls */
	void (*ctx_free)(void *);
};

/* ---- small helpers ------------------------------------------------------ */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes `n` bytes of `s` into a new string; `plus` turns '+' into
 * a space (query strings). NULL on a malformed escape or an embedded NUL. */
static char *pct_decode(const char *s, size_t n, bool plus)
{
	char *out = malloc(n + 1);
	if (out == NULL)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%') {
			int a = i + 1 < n ? hexval(s[i + 1]) : -1;
			int b = i + 2 < n ? hexval(s[i + 2]) : -1;
			if (a < 0 || b < 0 || (a == 0 && b == 0)) {
				free(out);
				return NULL;
			}
			out[o++] = (char)(a * 16 + b);
			i += 2;
		} else if (c == '+' && plus) {
			out[o++] = ' ';
		} else {
			out[o++] = c;
		}
	}
	out[o] = '\0';
	return out;
}

/* Keeps MHD from decoding anything: paths are split first, then each
 * segment is decoded, so an encoded '/' stays inside its segment. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

static bool valid_request_id(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MAX_REQUEST_ID)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == ':'))
			return false;
	}
	return true;
}

bool http_path_match(const char *pattern, const char *path, char *params[HTTP_MAX_PARAMS],
		     int *nparams)
{
	int np = 0;
	char *got[HTTP_MAX_PARAMS] = {0};
	const char *p = pattern;
	const char *s = path;
	*nparams = 0;
	while (*p && *s) {
		if (*p != '/' || *s != '/')
			goto no;
		p++;
		s++;
		const char *pe = strchr(p, '/');
		size_t pl = pe ? (size_t)(pe - p) : strlen(p);
		const char *se = strchr(s, '/');
		size_t sl = se ? (size_t)(se - s) : strlen(s);
		if (pl == 2 && p[0] == '{' && p[1] == '}') {
			if (np == HTTP_MAX_PARAMS)
				goto no;
			char *v = pct_decode(s, sl, false);
			if (v == NULL)
				goto no;
			got[np++] = v;
		} else if (pl != sl || strncmp(p, s, pl) != 0) {
			goto no;
		}
		p += pl;
		s += sl;
	}
	if (*p || *s)
		goto no;
	for (int i = 0; i < np; i++)
		params[i] = got[i];
	*nparams = np;
	return true;
no:
	for (int i = 0; i < np; i++)
		free(got[i]);
	return false;
}

/* ---- request deadlines -------------------------------------------------- */

static void track_unlink_locked(struct conn_track *t)
{
	struct track_list *l = t->in;
	if (l == NULL)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		l->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->tail = t->prev;
	t->prev = t->next = NULL;
	t->in = NULL;
}

/* (Re)starts the connection's deadline: `ms` from now, in list `l` (whose
 * deadlines are all now + the same `ms`, so appending keeps it in order). */
static void track_arm_in(struct http_server *s, struct conn_track *t, struct track_list *l,
			 int64_t ms)
{
	if (t == NULL || s->timeout_ms <= 0)
		return;
	pthread_mutex_lock(&s->tmu);
	if (!t->expired) {
		track_unlink_locked(t);
		t->deadline = timefmt_mono_ms() + ms;
		t->prev = l->tail;
		if (l->tail)
			l->tail->next = t;
		else
			l->head = t;
		l->tail = t;
		t->in = l;
		if (l->head == t)
			pthread_cond_signal(&s->tcv);
	}
	pthread_mutex_unlock(&s->tmu);
}

/* (Re)starts the connection's deadline: it ends request_timeout_ms from now. */
static void track_arm(struct http_server *s, struct conn_track *t)
{
	track_arm_in(s, t, &s->wait, s->timeout_ms);
}

/* Stops the connection's deadline (its handler runs, or it is suspended). */
static void track_disarm(struct http_server *s, struct conn_track *t)
{
	if (t == NULL || s->timeout_ms <= 0)
		return;
	pthread_mutex_lock(&s->tmu);
	track_unlink_locked(t);
	pthread_mutex_unlock(&s->tmu);
}

static struct conn_track *conn_track_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* Shuts down every connection past its deadline: libmicrohttpd then sees
 * the end of the stream and closes it. The socket is still open: a closing
 * connection leaves its list (on_connection, under the same lock) before
 * libmicrohttpd closes its socket. */
static void expire_locked(struct track_list *l, int64_t now)
{
	while (l->head != NULL && l->head->deadline <= now) {
		struct conn_track *t = l->head;
		track_unlink_locked(t);
		t->expired = true;
		shutdown(t->fd, SHUT_RDWR);
		log_debug("http", "connection deadline passed, connection closed", NULL);
	}
}

static void *sweeper_main(void *arg)
{
	struct http_server *s = arg;
	pthread_mutex_lock(&s->tmu);
	while (!s->stop) {
		int64_t now = timefmt_mono_ms();
		expire_locked(&s->wait, now);
		expire_locked(&s->linger, now);
		int64_t next = -1;
		if (s->wait.head != NULL)
			next = s->wait.head->deadline;
		if (s->linger.head != NULL && (next < 0 || s->linger.head->deadline < next))
			next = s->linger.head->deadline;
		if (next < 0) {
			pthread_cond_wait(&s->tcv, &s->tmu);
			continue;
		}
		int64_t wait = next - now;
		struct timespec ts;
		timefmt_mono_deadline(wait, &ts);
		pthread_cond_timedwait(&s->tcv, &s->tmu, &ts);
	}
	pthread_mutex_unlock(&s->tmu);
	return NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: a connection's deadline starts when it is
 * accepted; it leaves the list when it closes. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct conn_track *t = ci ? calloc(1, sizeof *t) : NULL;
		*socket_context = t;
		if (t == NULL) {
			if (ci != NULL) /* out of memory: no deadline could be kept */
				shutdown(ci->connect_fd, SHUT_RDWR);
			return;
		}
		t->fd = ci->connect_fd;
		track_arm(s, t);
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct conn_track *t = *socket_context;
		*socket_context = NULL;
		if (t == NULL)
			return;
		pthread_mutex_lock(&s->tmu);
		track_unlink_locked(t);
		pthread_mutex_unlock(&s->tmu);
		free(t);
	}
}

/* ---- replies ------------------------------------------------------------ */

static void queue(struct http_req *r, int status, const char *ctype, char *body, size_t len)
{
	if (r->replied) {
		free(body);
		return;
	}
	r->replied = true;
	r->status = status;
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(body);
		return;
	}
	if (ctype != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Request-Id", r->request_id);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	for (int i = 0; i < r->nxh; i++)
		MHD_add_response_header(resp, r->xh_name[i], r->xh_value[i]);
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (r->close_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	MHD_queue_response(r->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	/* The answer must be read within the request timeout too. */
	track_arm((struct http_server *)r->server, conn_track_of(r->conn));
}

void http_reply_json(struct http_req *r, int status, json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	json_decref(body);
	http_reply_json_text(r, status, s);
}

void http_reply_json_text(struct http_req *r, int status, char *text)
{
	if (text == NULL) {
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "could not encode the response");
		http_reply_error(r, &e);
		return;
	}
	queue(r, status, "application/json", text, strlen(text));
}

void http_reply_page(struct http_req *r, int status, json_t *head, const char *key,
		     const char *items, size_t len, const char *next)
{
	struct strbuf b = {0};
	char *h = head ? json_dumps(head, JSON_COMPACT) : NULL;
	json_decref(head);
	if (head != NULL && (h == NULL || h[0] != '{')) {
		free(h);
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "could not encode the response");
		http_reply_error(r, &e);
		return;
	}
	/* "{...}" without its closing brace, then the page's members. */
	size_t hl = h ? strlen(h) - 1 : 1;
	strbuf_add(&b, h ? h : "{", hl);
	free(h);
	if (hl > 1)
		strbuf_add(&b, ",", 1);
	strbuf_json_string(&b, key);
	strbuf_add(&b, ":", 1);
	strbuf_add(&b, items, len);
	strbuf_puts(&b, ",\"next_cursor\":");
	if (next != NULL)
		strbuf_json_string(&b, next);
	else
		strbuf_puts(&b, "null");
	strbuf_add(&b, "}", 1);
	size_t n = b.len;
	char *s = strbuf_take(&b);
	if (s == NULL) {
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "out of memory");
		http_reply_error(r, &e);
		return;
	}
	queue(r, status, "application/json", s, n);
}

void http_reply_error(struct http_req *r, const struct err *e)
{
	enum err_code code = e->code == ERR_OK ? ERR_INTERNAL : e->code;
	int status = err_code_http_status(code);
	char msg[320];
	if (code == ERR_INTERNAL) {
		log_error("http", "internal error", "request_id=%s method=%s error=\"%s\"",
			  r->request_id, r->method, e->msg);
		snprintf(msg, sizeof msg, "internal error (request id %s)", r->request_id);
	} else {
		snprintf(msg, sizeof msg, "%s", e->msg[0] ? e->msg : err_code_name(code));
	}
	json_t *body =
		json_pack("{s:{s:s, s:s}}", "error", "code", err_code_name(code), "message", msg);
	http_reply_json(r, status, body);
}

void http_reply_bytes(struct http_req *r, int status, const char *ctype, const char *body,
		      size_t len)
{
	char *copy = malloc(len + 1);
	if (copy == NULL)
		return;
	memcpy(copy, body, len);
	queue(r, status, ctype, copy, len);
}

void http_reply_empty(struct http_req *r, int status)
{
	queue(r, status, NULL, NULL, 0);
}

void http_reply_header(struct http_req *r, const char *name, const char *value)
{
	if (r->nxh == HTTP_MAX_EXTRA_HEADERS)
		return;
	char *n = strdup(name), *v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		return;
	}
	r->xh_name[r->nxh] = n;
	r->xh_value[r->nxh++] = v;
}

/* ---- accessors ----------------------------------------------------------- */

const struct app *http_req_app(const struct http_req *r)
{
	return r->app;
}
const char *http_req_method(const struct http_req *r)
{
	return r->method;
}
bool http_req_delivery_token(const struct http_req *r, struct token_claims *claims)
{
	if (r->by_token && claims != NULL)
		*claims = r->token;
	return r->by_token;
}

const char *http_req_id(const struct http_req *r)
{
	return r->request_id;
}
enum token_scope http_req_scope(const struct http_req *r)
{
	return r->scope;
}
bool http_req_has_body(const struct http_req *r)
{
	return r->body_len > 0;
}

const char *http_req_param(const struct http_req *r, int i)
{
	return i < r->nparams ? r->params[i] : NULL;
}

const char *http_req_query(const struct http_req *r, const char *name)
{
	const char *raw = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
	if (raw == NULL)
		return NULL;
	char *v = pct_decode(raw, strlen(raw), true);
	if (v == NULL)
		return NULL;
	char **a = realloc(r->allocs, (size_t)(r->nallocs + 1) * sizeof *a);
	if (a == NULL) {
		free(v);
		return NULL;
	}
	((struct http_req *)r)->allocs = a;
	a[((struct http_req *)r)->nallocs++] = v;
	return v;
}

/* Gathers the traceparent and tracestate headers of a request. */
struct trace_headers {
	const char *parent;
	int nparents;
	char state[TRACE_HEADER_MAX + 1];
	size_t state_len;
	bool state_too_long;
};

static enum MHD_Result on_trace_header(void *arg, enum MHD_ValueKind kind, const char *key,
				       const char *value)
{
	struct trace_headers *t = arg;
	(void)kind;
	if (value == NULL)
		return MHD_YES;
	if (strcasecmp(key, "traceparent") == 0) {
		t->parent = value;
		t->nparents++;
	} else if (strcasecmp(key, "tracestate") == 0) {
		size_t n = strlen(value);
		size_t need = t->state_len + (t->state_len > 0 ? 1 : 0) + n;
		if (need > TRACE_HEADER_MAX) {
			t->state_too_long = true;
		} else {
			if (t->state_len > 0)
				t->state[t->state_len++] = ',';
			memcpy(t->state + t->state_len, value, n);
			t->state_len += n;
			t->state[t->state_len] = '\0';
		}
	}
	return MHD_YES;
}

bool http_req_trace(const struct http_req *r, struct trace_parent *out)
{
	struct trace_headers t = {0};
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, on_trace_header, &t);
	/* Two traceparent headers are no valid trace context (W3C), and a
	 * tracestate too long to keep is dropped whole. */
	return trace_parent_parse(t.nparents == 1 ? t.parent : NULL,
				  t.state_len > 0 && !t.state_too_long ? t.state : NULL, out);
}

const char *http_req_body(const struct http_req *r, size_t *len)
{
	if (len)
		*len = r->body_len;
	return r->body ? r->body : "";
}

enum err_code http_req_json(const struct http_req *r, json_t **out, struct err *e)
{
	*out = NULL;
	if (r->body_len == 0)
		return err_set(e, ERR_INVALID, "body: a JSON object is required");
	json_error_t je;
	json_t *v = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
	if (v == NULL)
		return err_set(e, ERR_INVALID, "body: invalid JSON: %s (line %d, column %d)",
			       je.text, je.line, je.column);
	if (!json_is_object(v)) {
		json_decref(v);
		return err_set(e, ERR_INVALID, "body: must be a JSON object");
	}
	*out = v;
	return ERR_OK;
}

/* ---- long-poll ---------------------------------------------------------- */

static void lp_unref(struct longpoll *lp)
{
	if (lp != NULL && atomic_fetch_sub(&lp->refs, 1) == 1) {
		pthread_mutex_destroy(&lp->mu);
		free(lp);
	}
}

/* Waiter fire callback (listener thread): resume the connection if it is
 * suspended, then drop the waiter's reference. */
static void lp_fire(void *arg)
{
	struct longpoll *lp = arg;
	pthread_mutex_lock(&lp->mu);
	lp->fired = true;
	lp->waiter = 0;
	if (lp->suspended) {
		lp->suspended = false;
		MHD_resume_connection(lp->conn);
	}
	pthread_mutex_unlock(&lp->mu);
	lp_unref(lp);
}

enum http_longpoll_state http_longpoll_state(const struct http_req *r)
{
	if (r->lp == NULL)
		return HTTP_LP_NONE;
	pthread_mutex_lock(&r->lp->mu);
	bool fired = r->lp->fired;
	pthread_mutex_unlock(&r->lp->mu);
	return fired ? HTTP_LP_FIRED : HTTP_LP_ARMED;
}

static void lp_release(struct http_req *r);

void *http_async_arm(struct http_req *r)
{
	lp_release(r);
	struct longpoll *lp = calloc(1, sizeof *lp);
	if (lp == NULL)
		return NULL;
	pthread_mutex_init(&lp->mu, NULL);
	atomic_store(&lp->refs, 2); /* the request's and the token's */
	lp->conn = r->conn;
	lp->listener = r->app->listener;
	r->lp = lp;
	return lp;
}

enum err_code http_longpoll_arm(struct http_req *r, const char *key, int64_t wait_ms, struct err *e)
{
	int64_t now = timefmt_mono_ms();
	if (r->wait_deadline == 0)
		r->wait_deadline = now + wait_ms;
	lp_release(r); /* a fired wait is re-armed with what is left of the deadline */
	if (http_longpoll_expired(r))
		return ERR_OK;
	struct longpoll *lp = http_async_arm(r); /* the token is the waiter's */
	if (lp == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	pthread_mutex_lock(&lp->mu);
	lp->waiter = listener_wait(r->app->listener, key, r->wait_deadline, lp_fire, lp);
	if (lp->waiter == 0) {
		lp->fired = true;
		pthread_mutex_unlock(&lp->mu);
		lp_unref(lp); /* no waiter will */
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	pthread_mutex_unlock(&lp->mu);
	return ERR_OK;
}

bool http_longpoll_expired(const struct http_req *r)
{
	return (r->wait_deadline != 0 && timefmt_mono_ms() >= r->wait_deadline) ||
	       listener_closing(r->app->listener);
}

bool http_longpoll_suspend(struct http_req *r)
{
	struct longpoll *lp = r->lp;
	if (lp == NULL)
		return false;
	pthread_mutex_lock(&lp->mu);
	if (lp->fired) {
		pthread_mutex_unlock(&lp->mu);
		return false;
	}
	lp->suspended = true;
	MHD_suspend_connection(r->conn);
	pthread_mutex_unlock(&lp->mu);
	return true;
}

void http_async_fire(void *token)
{
	lp_fire(token);
}

void http_req_set_ctx(struct http_req *r, void *ctx, void (*free_fn)(void *))
{
	r->ctx = ctx;
	r->ctx_free = free_fn;
}

void *http_req_ctx(const struct http_req *r)
{
	return r->ctx;
}

/* Drops the request's hold on its long-poll, withdrawing a waiter that has
 * not fired. The listener thread may be firing that waiter right now (and
 * will free it): it is withdrawn by id, so nothing of it is touched unless
 * the waiter table still holds it, and then it is ours to free; when the
 * fire won, lp_fire drops the waiter's reference instead. */
static void lp_release(struct http_req *r)
{
	struct longpoll *lp = r->lp;
	if (lp == NULL)
		return;
	r->lp = NULL;
	pthread_mutex_lock(&lp->mu);
	uint64_t id = lp->fired ? 0 : lp->waiter;
	pthread_mutex_unlock(&lp->mu);
	if (id != 0 && listener_unwait(lp->listener, id))
		lp_unref(lp); /* the waiter's reference: it will never fire */
	lp_unref(lp);
}

/* ---- MHD callbacks ------------------------------------------------------ */

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	struct http_req *r = *con_cls;
	if (r == NULL)
		return;
	*con_cls = NULL;
	log_debug("http", "request", "request_id=%s method=%s status=%d duration_ms=%lld term=%d",
		  r->request_id, r->method, r->status,
		  (long long)(timefmt_mono_ms() - r->started_ms), (int)toe);
	struct http_server *s = (struct http_server *)r->server;
	pthread_mutex_lock(&s->omu);
	if (--s->open_requests == 0)
		pthread_cond_broadcast(&s->ocv);
	pthread_mutex_unlock(&s->omu);
	/* The next request on this connection has the whole timeout again. */
	track_arm((struct http_server *)r->server, conn_track_of(c));
	lp_release(r);
	if (r->ctx_free != NULL)
		r->ctx_free(r->ctx);
	for (int i = 0; i < r->nparams; i++)
		free(r->params[i]);
	for (int i = 0; i < r->nallocs; i++)
		free(r->allocs[i]);
	for (int i = 0; i < r->nxh; i++) {
		free(r->xh_name[i]);
		free(r->xh_value[i]);
	}
	free(r->allocs);
	free(r->body);
	free(r);
}

/* ---- a token-less instance answers only its own machine's pages ------- */

/* True when `h` (`n` bytes: a host name or an IP literal without brackets)
 * names this machine's loopback: localhost, 127.0.0.0/8, ::1 (or
 * ::ffff:127.x.y.z). */
static bool loopback_name(const char *h, size_t n)
{
	char buf[INET6_ADDRSTRLEN + 1];
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, h, n);
	buf[n] = '\0';
	if (strcasecmp(buf, "localhost") == 0)
		return true;
	struct in_addr a4;
	if (inet_pton(AF_INET, buf, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	struct in6_addr a6;
	if (inet_pton(AF_INET6, buf, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false;
}

/* True when the Host header value `host` is a loopback name with this
 * server's port (":port" may only be left out when the port is 80). */
static bool loopback_host(const char *host, int port)
{
	const char *name = host, *end;
	size_t n;
	if (host[0] == '[') {
		end = strchr(host, ']');
		if (end == NULL)
			return false;
		name = host + 1;
		n = (size_t)(end - name);
		end++;
	} else {
		end = strchr(host, ':');
		if (end == NULL)
			end = host + strlen(host);
		n = (size_t)(end - host);
	}
	long got = 80;
	if (*end == ':') {
		char *stop = NULL;
		if (end[1] < '0' || end[1] > '9')
			return false;
		got = strtol(end + 1, &stop, 10);
		if (*stop != '\0')
			return false;
	} else if (*end != '\0') {
		return false;
	}
	return got == port && loopback_name(name, n);
}

/* Without API tokens configured, being on this machine is the only
 * credential, so a web page the developer visits must not be able to use the
 * API: a request must be addressed to a loopback name with the listen port
 * (a DNS-rebinding page would name its own host), and a request that carries
 * an Origin header (every browser request but a same-origin GET) must come
 * from the service's own origin, http://<that host>. With tokens configured
 * neither is checked: a browser never sends the bearer token by itself, and
 * a reverse proxy may present any host name. */
static enum err_code local_origin_check(const struct http_req *r, struct err *e)
{
	if (r->app->cfg->ntokens > 0)
		return ERR_OK;
	int port = atomic_load(&r->server->port);
	const char *host =
		MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	char q[80];
	if (host == NULL || !loopback_host(host, port)) {
		ids_quote(host ? host : "", host ? strlen(host) : 0, q, sizeof q);
		return err_set(
			e, ERR_FORBIDDEN,
			"host: %s is not this service; without HOOKFLOW_API_TOKENS it answers "
			"only requests addressed to 127.0.0.1:%d, localhost:%d or [::1]:%d",
			host ? q : "(none)", port, port, port);
	}
	const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
	if (origin == NULL)
		return ERR_OK;
	if (strncasecmp(origin, "http://", 7) == 0 && strcasecmp(origin + 7, host) == 0)
		return ERR_OK;
	ids_quote(origin, strlen(origin), q, sizeof q);
	return err_set(e, ERR_FORBIDDEN,
		       "origin: requests from %s are refused; without HOOKFLOW_API_TOKENS this "
		       "service answers only its own pages (http://%s)",
		       q, host);
}

/* A route of one step attempt takes the delivery token of that attempt (the
 * run in the path; the handler checks the step): an API token names no
 * attempt, so it is refused (403), as is having no credential (401). */
static enum err_code authorize_delivery(struct http_req *r, const char *tok, struct err *e)
{
	if (tok == NULL)
		return err_set(e, ERR_UNAUTHENTICATED,
			       "authorization: the delivery token of the step request (memo.token) "
			       "is required");
	struct err te = {0};
	if (keyring_verify(r->app->keyring, r->params[0], tok, &r->token, &te) == ERR_OK &&
	    r->token.attempt >= 0) {
		r->by_token = true;
		return ERR_OK;
	}
	return err_set(e, ERR_FORBIDDEN,
		       "authorization: only the delivery token of a step attempt of run %.128s "
		       "(memo.token of its step request) may do this (%s)",
		       r->params[0],
		       te.code ? te.msg : "a token of release 0.1.0 names no attempt");
}

/* API routes need an API token when tokens are configured (401 otherwise);
 * a token of scope read may only GET (403 otherwise). Memo routes also accept
 * the delivery token of the run in their path; any other credential presented
 * there is refused with 403, and without tokens configured a request without
 * credentials is let through like any API call (with every right). */
static enum err_code authorize(struct http_req *r, struct err *e)
{
	const struct config *cfg = r->app->cfg;
	r->scope = TOKEN_SCOPE_ADMIN;
	if (r->route->auth == HTTP_AUTH_PUBLIC)
		return ERR_OK;
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	const char *tok = NULL;
	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0)
		tok = h + 7;
	if (r->route->auth == HTTP_AUTH_DELIVERY)
		return authorize_delivery(r, tok, e);
	int match = -1;
	for (int i = 0; tok != NULL && i < cfg->ntokens; i++) {
		int eq = sig_equal(tok, cfg->tokens[i]);
		match = eq ? i : match;
	}
	if (match >= 0) {
		r->scope = cfg->token_scopes[match];
		if (r->scope == TOKEN_SCOPE_READ && strcmp(r->method, "GET") != 0)
			return err_set(
				e, ERR_FORBIDDEN,
				"authorization: this token may only read (scope read); %s is "
				"refused",
				r->method);
		return ERR_OK;
	}
	if (r->route->auth == HTTP_AUTH_MEMO && tok != NULL) {
		struct err te = {0};
		if (keyring_verify(r->app->keyring, r->params[0], tok, &r->token, &te) == ERR_OK) {
			r->by_token = true;
			return ERR_OK;
		}
		return err_set(e, ERR_FORBIDDEN,
			       "authorization: this credential does not grant access to run %.128s "
			       "(%s)",
			       r->params[0], te.msg);
	}
	if (cfg->ntokens == 0)
		return ERR_OK;
	return err_set(e, ERR_UNAUTHENTICATED, "authorization: a valid bearer token is required");
}

static bool json_content_type(const char *ct)
{
	if (ct == NULL)
		return false;
	while (*ct == ' ')
		ct++;
	static const char want[] = "application/json";
	if (strncasecmp(ct, want, sizeof want - 1) != 0)
		return false;
	char next = ct[sizeof want - 1];
	return next == '\0' || next == ';' || next == ' ';
}

struct header_scan {
	const char *length; /* the first Content-Length */
	bool conflicting_length;
};

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	(void)kind;
	struct header_scan *hs = cls;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (hs->length != NULL && strcmp(hs->length, value ? value : "") != 0)
			hs->conflicting_length = true;
		if (hs->length == NULL)
			hs->length = value ? value : "";
	}
	return MHD_YES;
}

struct query_scan {
	char bad[80]; /* the first query parameter that does not decode, quoted */
};

static bool decodes(const char *s)
{
	if (s == NULL)
		return true;
	char *d = pct_decode(s, strlen(s), true);
	bool ok = d != NULL && ids_utf8_valid(d, strlen(d));
	free(d);
	return ok;
}

static enum MHD_Result scan_query(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	(void)kind;
	struct query_scan *qs = cls;
	if (qs->bad[0] == '\0' && (!decodes(key) || !decodes(value))) {
		ids_quote(key, strlen(key), qs->bad, sizeof qs->bad);
		return MHD_NO;
	}
	return MHD_YES;
}

/* First call of a request: route, authenticate, check the announced body.
 * On a failure the answer waits until the body has been read and dropped
 * (see `deferred`; past HOOKFLOW_MAX_BODY_BYTES for at most HTTP_LINGER_MS,
 * body_over_cap), so that a client still sending it reads the answer rather
 * than a reset connection; a body announced over the cap by at most as much
 * again is read so too (a client whose body grew past the limit reads its
 * 413). Requests without a body, bodies announced larger than that, and any
 * body sent to a route that takes none (GET, the public routes) are
 * answered at once, without reading a byte of the body. */
static void begin(struct http_req *r, const char *url)
{
	struct err e = {0};
	bool read_body_first = true;
	const char *q = strchr(url, '?');
	size_t plen = q ? (size_t)(q - url) : strlen(url);
	char path[MAX_PATH_BYTES];
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_TRANSFER_ENCODING);
	long long len = cl ? strtoll(cl, NULL, 10) : 0;
	r->has_body = len > 0 || te != NULL;
	if (len > 2 * r->app->cfg->max_body_bytes)
		read_body_first = false; /* too large to be worth reading */

	if (plen >= sizeof path) {
		err_set(&e, ERR_NOT_FOUND, "path too long");
		goto fail;
	}
	memcpy(path, url, plen);
	path[plen] = '\0';
	if (local_origin_check(r, &e))
		goto fail;

	bool path_known = false;
	const struct http_route *routes = r->server->routes;
	for (int i = 0; i < r->server->nroutes; i++) {
		if (!http_path_match(routes[i].pattern, path, r->params, &r->nparams))
			continue;
		if (strcmp(routes[i].method, r->method) == 0) {
			r->route = &routes[i];
			break;
		}
		path_known = true;
		for (int k = 0; k < r->nparams; k++) {
			free(r->params[k]);
			r->params[k] = NULL;
		}
		r->nparams = 0;
	}
	if (r->route == NULL) {
		if (path_known)
			err_set(&e, ERR_METHOD, "method %s is not allowed on %s", r->method, path);
		else
			err_set(&e, ERR_NOT_FOUND, "no such endpoint: %s %s", r->method, path);
		goto fail;
	}
	if (r->has_body && (strcmp(r->method, "GET") == 0 || r->route->auth == HTTP_AUTH_PUBLIC)) {
		read_body_first = false;
		err_set(&e, ERR_INVALID, "body: %s %s takes no request body", r->method, path);
		goto fail;
	}
	if (authorize(r, &e))
		goto fail;
	struct header_scan hs = {0};
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, scan_header, &hs);
	if (hs.conflicting_length) {
		err_set(&e, ERR_INVALID, "content-length: conflicting values");
		goto fail;
	}
	struct query_scan qs = {0};
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, scan_query, &qs);
	if (qs.bad[0] != '\0') {
		err_set(&e, ERR_INVALID, "%s: malformed percent-encoding or invalid UTF-8", qs.bad);
		goto fail;
	}
	if (r->has_body) {
		if (len > r->app->cfg->max_body_bytes) {
			err_set(&e, ERR_TOO_LARGE, "body: larger than %lld bytes",
				(long long)r->app->cfg->max_body_bytes);
			goto fail;
		}
		const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_TYPE);
		if (!json_content_type(ct)) {
			err_set(&e, ERR_MEDIA_TYPE, "content-type: must be application/json");
			goto fail;
		}
	}
	return;
fail:
	if (r->has_body && read_body_first) {
		r->deferred = e;
		return;
	}
	/* Answered now: libmicrohttpd reads none of the body and closes the
	 * connection once the answer is sent. */
	r->early_reply = true;
	http_reply_error(r, &e);
}

/* A body passed HOOKFLOW_MAX_BODY_BYTES: nothing more of it is buffered
 * or handed to a handler. What still comes is dropped as it arrives, for at
 * most HTTP_LINGER_MS: a client that finishes sending by then reads the 413
 * (or the error that was waiting for the body), on a connection then closed;
 * otherwise the connection is closed without more reading. */
static void body_over_cap(struct http_req *r)
{
	if (r->deferred.code == ERR_OK)
		err_set(&r->deferred, ERR_TOO_LARGE, "body: larger than %lld bytes",
			(long long)r->app->cfg->max_body_bytes);
	r->overflow = true;
	r->close_after = true;
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
	log_info("http", "request body over the limit, no longer read",
		 "request_id=%s method=%s max_body_bytes=%lld linger_ms=%d", r->request_id,
		 r->method, (long long)r->app->cfg->max_body_bytes, HTTP_LINGER_MS);
	struct http_server *s = (struct http_server *)r->server;
	track_arm_in(s, conn_track_of(r->conn), &s->linger, HTTP_LINGER_MS);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	struct http_server *s = cls;
	struct http_req *r = *con_cls;
	if (r == NULL) {
		r = calloc(1, sizeof *r);
		if (r == NULL)
			return MHD_NO;
		*con_cls = r;
		pthread_mutex_lock(&s->omu);
		s->open_requests++;
		pthread_mutex_unlock(&s->omu);
		r->app = s->app;
		r->server = s;
		r->conn = conn;
		r->method = method;
		r->started_ms = timefmt_mono_ms();
		const char *rid =
			MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
		if (rid != NULL && valid_request_id(rid))
			snprintf(r->request_id, sizeof r->request_id, "%s", rid);
		else
			ids_ulid_new(r->request_id);
		begin(r, url);
		return MHD_YES;
	}
	if (r->early_reply || (r->replied && *upload_data_size > 0)) {
		*upload_data_size = 0; /* discard: the answer is already queued */
		return MHD_YES;
	}
	if (r->deferred.code != ERR_OK) {
		if (*upload_data_size > 0) {
			r->discarded += *upload_data_size;
			*upload_data_size = 0;
			if (!r->overflow && (int64_t)r->discarded > r->app->cfg->max_body_bytes)
				body_over_cap(r);
			return MHD_YES;
		}
		if (!r->replied)
			http_reply_error(r, &r->deferred); /* the body is consumed: answer */
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if ((int64_t)(r->body_len + n) > r->app->cfg->max_body_bytes) {
			body_over_cap(r); /* from now on, the deferred answer */
			return MHD_YES;
		}
		if (r->body_len + n + 1 > r->body_cap) {
			size_t cap = r->body_cap ? r->body_cap : 1024;
			while (cap < r->body_len + n + 1)
				cap *= 2;
			char *b = realloc(r->body, cap);
			if (b == NULL)
				return MHD_NO;
			r->body = b;
			r->body_cap = cap;
		}
		memcpy(r->body + r->body_len, upload_data, n);
		r->body_len += n;
		r->body[r->body_len] = '\0';
		return MHD_YES;
	}
	if (r->replied)
		return MHD_YES;
	/* The request is read: its handler runs (or suspends) with no deadline. */
	track_disarm(s, conn_track_of(conn));
	r->route->fn(r);
	if (!r->replied && (r->lp == NULL || http_longpoll_state(r) == HTTP_LP_NONE)) {
		/* A handler that neither replied nor suspended is a bug. */
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "handler did not reply");
		http_reply_error(r, &e);
	}
	return MHD_YES;
}

static void server_free(struct http_server *s);

enum err_code http_server_start(const struct app *app, const struct http_route *routes, int nroutes,
				struct http_server **out, struct err *e)
{
	*out = NULL;
	const struct config *cfg = app->cfg;
	struct http_server *s = calloc(1, sizeof *s);
	if (s == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	s->app = app;
	s->routes = routes;
	s->nroutes = nroutes;
	atomic_store(&s->port, cfg->listen_port);
	s->timeout_ms = cfg->request_timeout_ms;
	pthread_mutex_init(&s->tmu, NULL);
	pthread_mutex_init(&s->omu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->tcv, &ca);
	pthread_cond_init(&s->ocv, &ca);
	pthread_condattr_destroy(&ca);
	if (s->timeout_ms > 0) {
		if (pthread_create(&s->sweeper, NULL, sweeper_main, s) != 0) {
			server_free(s);
			return err_set(e, ERR_INTERNAL, "http: cannot start the deadline thread");
		}
		s->sweeping = true;
	}

	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	const char *host =
		strcmp(cfg->listen_host, "localhost") == 0 ? "127.0.0.1" : cfg->listen_host;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)cfg->listen_port);
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)cfg->listen_port);
		flags |= MHD_USE_IPv6;
	} else {
		server_free(s);
		return err_set(e, ERR_INVALID, "HOOKFLOW_LISTEN: bad address %s", host);
	}
	s->daemon = MHD_start_daemon(
		flags, (uint16_t)cfg->listen_port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
		/* An idle timeout (every byte resets it); the request timeout is
		 * kept by the sweeper thread, whatever trickle of bytes arrives. */
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)20000, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)cfg->max_conns_per_ip, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		/* The per-connection pool holds the request line and headers (bodies
		 * are copied out as they arrive); libmicrohttpd zeroes it for every
		 * request, so its size is paid per request: 32 KiB (its default)
		 * admits request headers up to about 30 KiB (431 beyond). */
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_POOL_BYTES,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_UNESCAPE_CALLBACK,
		no_unescape, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
	if (s->daemon == NULL) {
		server_free(s);
		return err_set(e, ERR_UNAVAILABLE, "cannot listen on %s:%d", cfg->listen_host,
			       cfg->listen_port);
	}
	const union MHD_DaemonInfo *info =
		MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	if (info != NULL)
		atomic_store(&s->port, (int)info->port);
	log_info("http", "listening",
		 "address=%s port=%d max_conns_per_ip=%d request_timeout_ms=%d", cfg->listen_host,
		 atomic_load(&s->port), cfg->max_conns_per_ip, cfg->request_timeout_ms);
	*out = s;
	return ERR_OK;
}

int http_server_port(const struct http_server *s)
{
	return atomic_load(&s->port);
}

/* Stops the deadline thread and frees the server (the daemon is stopped). */
static void server_free(struct http_server *s)
{
	if (s->sweeping) {
		pthread_mutex_lock(&s->tmu);
		s->stop = true;
		pthread_cond_signal(&s->tcv);
		pthread_mutex_unlock(&s->tmu);
		pthread_join(s->sweeper, NULL);
	}
	pthread_cond_destroy(&s->tcv);
	pthread_mutex_destroy(&s->tmu);
	pthread_cond_destroy(&s->ocv);
	pthread_mutex_destroy(&s->omu);
	free(s);
}

void http_server_stop(struct http_server *s)
{
	if (s == NULL)
		return;
	/* The requests still open are answered by now or about to be (the
	 * callers stopped what they wait for first): let their answers go out,
	 * for HTTP_STOP_DRAIN_MS at most. */
	struct timespec dl;
	timefmt_mono_deadline(HTTP_STOP_DRAIN_MS, &dl);
	pthread_mutex_lock(&s->omu);
	while (s->open_requests > 0 && pthread_cond_timedwait(&s->ocv, &s->omu, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->omu);
	MHD_stop_daemon(s->daemon); /* every connection leaves the deadline list */
	server_free(s);
}
