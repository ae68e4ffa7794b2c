/* client: the command line's HTTP calls, on libcurl's easy interface: one
 * call at a time, to the hookflow API (HOOKFLOW_URL) or, for check-webhook,
 * to a webhook. Redirects are never followed, only http and https are
 * spoken, and every answer's body is capped. */
#ifndef HOOKFLOW_CMD_CLIENT_H
#define HOOKFLOW_CMD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "base/strbuf.h"

#define CLIENT_MAX_API_RESPONSE (64L * 1024 * 1024) /* an API answer (a page of 1000 runs) */
#define CLIENT_CONNECT_TIMEOUT_MS 10000
#define CLIENT_API_TIMEOUT_MS 60000 /* a call that does not long-poll */

/* One answer. Every pointer owned by the struct (client_reply_cleanup). */
struct client_reply {
	long status;          /* the HTTP status; 0 when no answer came (transport failure) */
	char *body;           /* NUL-terminated (also when empty), `len` bytes before the NUL */
	size_t len;           /* at most the cap given to the call */
	bool too_large;       /* the body passed the cap: the call was cut off */
	bool timed_out;       /* the call hit its timeout */
	int64_t duration_ms;  /* from the start of the call to its end */
	char request_id[128]; /* the X-Request-Id header, "" when none */
	char error[256];      /* transport failure: curl's text ("Connection refused") */
};

/* One HTTP request. All pointers borrowed. */
struct client_request {
	const char *method;         /* "GET", "POST", "PUT" */
	const char *url;            /* absolute http:// or https:// URL */
	const char *body;           /* sent as is with `body_len` bytes, or NULL for none */
	size_t body_len;            /* ignored without a body */
	const char *const *headers; /* "Name: value" lines, NULL-terminated, or NULL */
	long timeout_ms;            /* the whole call */
	long max_response;          /* the body cap in bytes */
	bool use_env_proxy;         /* false: never a proxy from the environment */
};

/* Makes the call. A complete answer (any status) is ERR_OK with `out`
 * filled; a transport failure (refused, DNS, TLS, reset, timeout, the body
 * cap) is ERR_UNAVAILABLE with `out` filled as far as it got (status 0,
 * error set, or too_large / timed_out) and e->msg "<curl text>". ERR_INTERNAL
 * when out of memory. `out` is overwritten; release it with
 * client_reply_cleanup whatever the result. */
enum err_code client_send(const struct client_request *req, struct client_reply *out,
			  struct err *e);

/* Calls the hookflow API of `cfg` (borrowed): `method` on cfg->url + `path`
 * (borrowed: starts with '/', already escaped, with its query), with the JSON
 * `body` (borrowed, NUL-terminated) or NULL, the bearer token when cfg has
 * one, a timeout of `timeout_ms`, and an answer cap of
 * CLIENT_MAX_API_RESPONSE. Proxies come from the environment as for curl.
 * A transport failure is ERR_UNAVAILABLE "cannot reach hookflow at <url>:
 * <why>"; an answer over the cap is ERR_TOO_LARGE. */
enum err_code client_api(const struct client_config *cfg, const char *method, const char *path,
			 const char *body, long timeout_ms, struct client_reply *out,
			 struct err *e);

/* Frees what `r` owns and zeroes it. A zeroed struct is a no-op. */
void client_reply_cleanup(struct client_reply *r);

/* Appends `s` (borrowed, NUL-terminated) to `out` percent-encoded for a path
 * segment or a query value: every byte but [A-Za-z0-9._~-] as %XX. */
void client_escape(const char *s, struct strbuf *out);

#endif
