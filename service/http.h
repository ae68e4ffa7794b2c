/* http: the libmicrohttpd daemon, request bodies (capped), authentication,
 * routing (the table is handed in by the caller), replies and long-poll suspension.
 *
 * Threads: MHD runs HOOKFLOW_HTTP_THREADS threads with epoll. A handler runs
 * on one of them and may use the database pool; it never makes an outgoing
 * HTTP call. A long-poll suspends its connection (no thread, no database
 * connection held) until the listener fires its waiter. */
#ifndef HOOKFLOW_HTTP_H
#define HOOKFLOW_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "base/token.h"
#include "base/trace.h"

struct db_pool;
struct dispatcher;
struct listener;
struct snapshot;
struct submitter;

/* What handlers reach through a request: borrowed, lives as long as the
 * server. */
struct app {
	const struct config *cfg;
	struct db_pool *pool;
	struct dispatcher *dispatcher;
	struct listener *listener;
	struct submitter *submitter;
	struct snapshot *snapshot; /* what /readyz and /metrics report of the database */
	const char *openapi;       /* the OpenAPI document */
	size_t openapi_len;
	struct keyring *keyring; /* verifies delivery tokens */
};

struct http_req;
struct http_server;

#define HTTP_MAX_PARAMS 4

/* A handler replies with one of the http_reply_* calls, or suspends with
 * http_longpoll_suspend and is called again when the wait ends. */
typedef void (*http_handler_fn)(struct http_req *r);

/* Matches request path `path` (without the query string) against route
 * pattern `pattern` ("/v1/runs/{}/steps"), both borrowed.
 * Segments compare byte for byte, except that a "{}" segment captures one
 * segment (possibly empty: the handler names the field), percent-decoded
 * ("%2F" stays inside it; a malformed escape or "%00" fails the match). On a match writes the captures, malloc'd,
 * to params[0..*nparams) (at most HTTP_MAX_PARAMS; the caller frees them) and
 * returns true; otherwise returns false with *nparams 0 and nothing allocated
 * (also when out of memory). Pure. */
bool http_path_match(const char *pattern, const char *path, char *params[HTTP_MAX_PARAMS],
		     int *nparams);

/* Who may call a route. */
enum http_auth {
	HTTP_AUTH_PUBLIC = 0, /* no credentials (health, metrics, openapi) */
	HTTP_AUTH_API,        /* an API token when tokens are configured */
	HTTP_AUTH_MEMO,       /* an API token, or the delivery token of the run in the path */
	HTTP_AUTH_DELIVERY,   /* only the delivery token of the run in the path (it names the
			       * step attempt: POST .../complete and .../heartbeat) */
};

/* One entry of the routing table: (method, path pattern) -> handler. A
 * pattern segment "{}" captures one percent-decoded path segment. */
struct http_route {
	const char *method;
	const char *pattern;
	http_handler_fn fn;
	enum http_auth auth;
};

/* Starts serving on cfg->listen_host:listen_port with the routing table
 * `routes[0..nroutes)`. `app` and `routes` are borrowed and must outlive the
 * server. */
enum err_code http_server_start(const struct app *app, const struct http_route *routes, int nroutes,
				struct http_server **out, struct err *e);

/* The TCP port the server listens on (the one bound when HOOKFLOW_LISTEN
 * gave port 0). */
int http_server_port(const struct http_server *s);

/* Stops accepting, closes connections and frees the server. NULL is a no-op. */
void http_server_stop(struct http_server *s);

/* ---- request accessors (all returned strings borrowed from the request) -- */

const struct app *http_req_app(const struct http_req *r);
const char *http_req_method(const struct http_req *r);
/* Path parameter `i` ({...} segments of the route, percent-decoded). */
const char *http_req_param(const struct http_req *r, int i);
/* Query parameter `name` (decoded), or NULL when absent. */
const char *http_req_query(const struct http_req *r, const char *name);
/* The request body (NUL-terminated; empty when none). */
const char *http_req_body(const struct http_req *r, size_t *len);
bool http_req_has_body(const struct http_req *r);
/* What the request's credential may do: TOKEN_SCOPE_READ for a token of
 * scope read, TOKEN_SCOPE_ADMIN otherwise (an admin token, a delivery token,
 * or no credential on an instance without tokens). */
enum token_scope http_req_scope(const struct http_req *r);
const char *http_req_id(const struct http_req *r);

/* True when the request was authorised by a delivery token (a memo route
 * called with the token of a step request) rather than an API token; fills
 * *claims (may be NULL) with what the token binds. */
bool http_req_delivery_token(const struct http_req *r, struct token_claims *claims);

/* The caller's W3C trace context (README "Traces"): its traceparent header
 * (exactly one) and its tracestate headers (joined with ","), validated by
 * trace_parent_parse. True with *out filled when the traceparent is valid;
 * false with *out empty when there is none or it is not valid (the request
 * then starts a trace of its own: never an error). */
bool http_req_trace(const struct http_req *r, struct trace_parent *out);

/* Parses the body as a JSON object (new reference in *out). ERR_INVALID
 * "body: ..." when it is not one. */
enum err_code http_req_json(const struct http_req *r, json_t **out, struct err *e);

/* ---- replies ------------------------------------------------------------ */

/* Replies `status` with `body` (stolen) as JSON. */
void http_reply_json(struct http_req *r, int status, json_t *body);

/* Replies with the error object of `e` and its HTTP status. A 500 hides its
 * detail behind the request id (the detail is logged). */
void http_reply_error(struct http_req *r, const struct err *e);

/* Replies `status` with one page of a list, as JSON: the object `head`
 * (stolen; NULL: an empty one) with two more members, "<key>" (`key`
 * borrowed; not a member of `head`) whose value is the JSON array text
 * `items` (`len` bytes, borrowed, copied as is: it must already be valid
 * JSON, e.g. as PostgreSQL rendered it) and "next_cursor": `next` (borrowed)
 * as a string, or null when NULL. */
void http_reply_page(struct http_req *r, int status, json_t *head, const char *key,
		     const char *items, size_t len, const char *next);

/* Replies `status` with the JSON text `text` (malloc'd; taken, also on
 * failure; NULL replies 500). For JSON written elsewhere (PostgreSQL) and
 * passed on without being decoded. */
void http_reply_json_text(struct http_req *r, int status, char *text);

/* Replies `status` with `len` bytes of `body` (copied) of type `ctype`. */
void http_reply_bytes(struct http_req *r, int status, const char *ctype, const char *body,
		      size_t len);

/* Replies `status` without a body (e.g. 204). */
void http_reply_empty(struct http_req *r, int status);

/* Every answer carries X-Request-Id, Cache-Control: no-store and
 * X-Content-Type-Options: nosniff. A handler adds others with
 * http_reply_header (`name` and `value` copied) before it replies; at most
 * HTTP_MAX_EXTRA_HEADERS, further ones (or any when out of memory) are
 * dropped. */
#define HTTP_MAX_EXTRA_HEADERS 8
void http_reply_header(struct http_req *r, const char *name, const char *value);

/* ---- long-poll ------------------------------------------------------------ */

enum http_longpoll_state { HTTP_LP_NONE = 0, HTTP_LP_ARMED, HTTP_LP_FIRED };

/* NONE on a first call, FIRED when the handler is called again after its
 * wait fired (the run terminated, the deadline passed, or the LISTEN
 * connection came back). */
enum http_longpoll_state http_longpoll_state(const struct http_req *r);

/* Registers a waiter on `key` (a run id, or "group:<id>") until `wait_ms`
 * after the first arm of this request; arming again after a wait fired
 * re-arms with what is left. Call before the final re-read of the state, so
 * no change can slip between read and wait. Arms nothing once the wait is
 * over (http_longpoll_expired; http_longpoll_suspend then returns false). A
 * wait may fire before what it waits for happened (the LISTEN connection
 * came back: every waiter fires): the handler reads again and arms again
 * while the wait is not over. */
enum err_code http_longpoll_arm(struct http_req *r, const char *key, int64_t wait_ms,
				struct err *e);

/* True once the deadline set by the first arm has passed, or the service
 * is shutting down (listener_closing): the wait is over, answer as things
 * stand. */
bool http_longpoll_expired(const struct http_req *r);

/* Suspends the connection until the waiter fires. Returns false when it has
 * already fired (reply now instead). */
bool http_longpoll_suspend(struct http_req *r);

/* ---- work finished on another thread ---------------------------------- */

/* Arms the request for work done elsewhere: returns the token to hand to
 * http_async_fire once the work is done; the handler then suspends with
 * http_longpoll_suspend and is called again, with http_longpoll_state
 * FIRED. NULL when out of memory. */
void *http_async_arm(struct http_req *r);

/* Resumes the request of `token` (once per token; any thread). */
void http_async_fire(void *token);

/* The handler's state between its calls: `ctx` is owned by the request from
 * now on and freed with `free_fn` (may be NULL) when the request ends. */
void http_req_set_ctx(struct http_req *r, void *ctx, void (*free_fn)(void *));
void *http_req_ctx(const struct http_req *r);

#endif
