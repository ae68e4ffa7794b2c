/* webhook: outgoing HTTP calls of one worker thread, many at once, on curl
 * multi handles driven by the worker's epoll loop (curl_multi_socket_action).
 *
 * Threads: a webhook_client and its calls belong to the thread that created
 * them; nothing here is shared. Connections to a webhook are kept alive and
 * reused between calls. Redirects are never followed; the response body is
 * capped (larger bodies abort the call and are reported as too_large), as are
 * response headers. */
#ifndef HOOKFLOW_WEBHOOK_H
#define HOOKFLOW_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/netpolicy.h"
#include "base/version.h"
#include "service/verdict.h"

#define WEBHOOK_USER_AGENT "hookflow/" HOOKFLOW_VERSION
#define WEBHOOK_MAX_HEADER_BYTES (64 * 1024)

struct webhook_client;
struct webhook_call;
struct stack_st_X509; /* OpenSSL's STACK_OF(X509) */

/* TLS of the calls (README "TLS"). Servers are verified against the system's
 * store (libcurl's default CA bundle) plus `extra_cas`. */
struct webhook_tls {
	const struct stack_st_X509 *extra_cas; /* HOOKFLOW_CA_FILE's certificates, or NULL */
	const char *client_cert; /* HOOKFLOW_CLIENT_CERT: PEM file shown when a server asks
				    for a client certificate, or NULL */
	const char *client_key;  /* HOOKFLOW_CLIENT_KEY: its key, with client_cert */
};

/* Whether this libcurl can apply `tls`: adding CAs to the system's store
 * takes libcurl built with OpenSSL. ERR_INVALID naming HOOKFLOW_CA_FILE
 * otherwise. Call once at start-up, after curl_global_init. */
enum err_code webhook_tls_check(const struct webhook_tls *tls, struct err *e);

/* One call to make. webhook_call_start takes `body` (malloc'd, NUL-terminated,
 * body_len bytes before the NUL) whether it succeeds or fails; the other
 * strings are copied. */
struct webhook_request {
	const char *url;
	char *body;
	size_t body_len;
	const char *msg_id;          /* webhook-id */
	const char *secret;          /* "whsec_..." or NULL: unsigned */
	const char *secret_previous; /* also signs (a rotation's grace period), or NULL */
	int timeout_ms;              /* the whole call's deadline */
	void *user;                  /* returned by webhook_call_user */
	const char *traceparent;     /* W3C traceparent header value, or NULL: none */
	const char *tracestate;      /* W3C tracestate header value, or NULL: none */
};

/* Creates a client that registers its sockets on `epfd` (borrowed: the
 * caller's epoll instance; events carry the socket fd in data.fd, so the
 * caller must not use data.fd values that are sockets for other purposes).
 * No proxy is ever taken from the environment. With `proxy` NULL, calls go
 * straight to the webhook and every connection's address is checked against
 * `egress` (borrowed) before curl connects. With `proxy` ("http://host:port",
 * borrowed: HOOKFLOW_EGRESS_PROXY), every call goes through that proxy: the
 * webhook's host is resolved here (on helper threads; the resolver's eventfd
 * joins `epfd`), and the proxy is told to CONNECT to the first address
 * `egress` allows. `tls` (copied; the certificates and paths it points to are
 * borrowed for the client's life; NULL: the system's store, no client
 * certificate) applies to every https call. Returns NULL when out of memory or out of threads. */
struct webhook_client *webhook_client_new(int epfd, int64_t max_response_bytes,
					  const struct netpolicy *egress, const char *proxy,
					  const struct webhook_tls *tls);

/* Aborts every call still in flight and frees the client. NULL is a no-op. */
void webhook_client_free(struct webhook_client *wc);

/* Starts a call. On success *out is the call, owned by the client until it
 * completes and is taken with webhook_client_take_done. */
enum err_code webhook_call_start(struct webhook_client *wc, const struct webhook_request *req,
				 struct webhook_call **out, struct err *e);

/* Aborts an in-flight call at once (its connection is closed); it completes
 * with transport_error set and transport_msg "aborted". A call already done
 * is left as it is. */
void webhook_call_abort(struct webhook_client *wc, struct webhook_call *call);

/* True when `fd` is a socket this client watches. */
bool webhook_client_owns_fd(const struct webhook_client *wc, int fd);

/* Drives the transfers after epoll reported `events` (EPOLLIN/EPOLLOUT/
 * EPOLLERR...) on `fd`. */
void webhook_client_socket_event(struct webhook_client *wc, int fd, uint32_t events);

/* Milliseconds until curl needs webhook_client_timeout called (-1: none). */
long webhook_client_timeout_ms(const struct webhook_client *wc);

/* Lets curl handle its timers (call when webhook_client_timeout_ms elapsed). */
void webhook_client_timeout(struct webhook_client *wc);

/* Number of calls started and not yet taken. */
int webhook_client_inflight(const struct webhook_client *wc);

/* Takes one completed call, or NULL when none is waiting. The caller reads it
 * with webhook_call_result / webhook_call_user and frees it with
 * webhook_call_free. */
struct webhook_call *webhook_client_take_done(struct webhook_client *wc);

/* Fills `r` from the completed `call` (pointers borrowed from the call). */
void webhook_call_result(const struct webhook_call *call, struct call_result *r);

void *webhook_call_user(const struct webhook_call *call);

/* Milliseconds the call took. */
int64_t webhook_call_duration_ms(const struct webhook_call *call);

/* True when the call was aborted with webhook_call_abort. */
bool webhook_call_aborted(const struct webhook_call *call);

/* Frees a completed call taken with webhook_client_take_done. NULL is a no-op. */
void webhook_call_free(struct webhook_call *call);

#endif
