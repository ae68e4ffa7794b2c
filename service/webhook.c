/* webhook: many concurrent webhook calls per thread on curl multi handles and epoll.
 *
 * curl tells us which sockets to watch (socket callback -> epoll_ctl on the
 * worker's epoll instance) and when to call it back (timer callback -> a
 * deadline the worker's loop honours). Completed transfers are moved to a
 * done list the worker drains. All of it runs on the owning worker thread.
 *
 * The calls are spread over shards of at most SHARD_CALLS calls, each its own
 * multi handle with its own connection cache, filled first-come: libcurl
 * looks for a reusable connection by walking every connection it holds to the
 * same host, so with all calls in one multi, starting the n-th concurrent
 * call to one webhook cost O(n) and a burst of n calls O(n^2) (10,000 calls
 * held at once took seconds of CPU to start). Below SHARD_CALLS concurrent
 * calls everything runs in the first shard; a shard above it that has been
 * empty for SHARD_IDLE_MS is closed with its idle connections.
 *
 * Egress: curl never takes a proxy from the environment (http_proxy,
 * ALL_PROXY, no_proxy... are all overridden on every handle). Without an
 * egress proxy, curl connects to the webhook itself and every address is
 * checked against the policy as the socket is opened (on_open_socket). With
 * HOOKFLOW_EGRESS_PROXY, curl only ever connects to the proxy, so the policy
 * is applied before: the webhook's host is resolved here (resolver.c, off this
 * thread), the first address the policy allows is picked, and the proxy is
 * told to CONNECT to that address (CURLOPT_CONNECT_TO, with a tunnel forced
 * for plain http too), never to the name, which it would resolve itself.
 *
 * TLS: https webhooks are verified against the system's store (libcurl's
 * default CA bundle and path). HOOKFLOW_CA_FILE's certificates, read once at
 * start-up, are added to that store as each connection's SSL_CTX is set up
 * (CURLOPT_SSL_CTX_FUNCTION): CURLOPT_CAINFO would replace the system's
 * bundle, not add to it, and a combined bundle would need a file of our own
 * or the whole system bundle parsed again for every connection. A client
 * certificate is given to libcurl by path (CURLOPT_SSLCERT/SSLKEY), read for
 * each new connection, so renewed files are taken without a restart. Without
 * one, the same hook notes when a server asks for a client certificate: a
 * server that requires one often cuts the connection so fast that libcurl's
 * own error says nothing of TLS, so the call's error says it. */
#include "service/webhook.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "base/log.h"
#include "base/sig.h"
#include "base/timefmt.h"
#include "base/trace.h"
#include "service/resolver.h"

struct shard;

struct webhook_call {
	struct webhook_client *wc;
	struct shard *shard; /* whose multi holds the transfer, while in flight */
	CURL *easy;
	struct curl_slist *hdrs;       /* one allocation: see headers_build */
	struct curl_slist *connect_to; /* through the proxy: the pinned address */
	char *body;
	size_t body_len;
	char *resp;
	size_t resp_len;
	size_t resp_cap;
	bool too_large;
	bool header_too_large;
	size_t header_bytes;
	char *refused;     /* why the egress policy refused the address (malloc'd), or NULL */
	char *retry_after; /* the answer's Retry-After, or NULL */
	long status;
	CURLcode code;
	char errbuf[CURL_ERROR_SIZE];
	SSL_CTX *ssl_ctx;    /* the TLS context of its connection while it sets up, or NULL */
	bool cert_requested; /* the server asked for a client certificate, none was given */
	bool done;
	bool aborted;
	int timeout_ms;
	int64_t deadline_ms; /* monotonic: started_ms + timeout_ms */
	/* Through the proxy, until the host is resolved: */
	struct resolver_wait wait;
	int heap_at; /* index in wc->resolving, or -1 */
	char *host;  /* malloc'd: only calls through the proxy resolve a host */
	long port;
	int64_t started_ms;
	int64_t finished_ms;
	void *user;
	struct webhook_call *next;  /* done list */
	struct webhook_call *aprev; /* active list: calls in flight */
	struct webhook_call *anext;
};

/* The longest reason the egress policy gives for refusing an address. */
#define REFUSED_MAX 160

#define SPARE_EASY 256
#define SHARD_CALLS 256
#define SHARD_IDLE_MS 10000

struct shard {
	struct webhook_client *wc;
	CURLM *multi;
	int64_t timer_at;    /* monotonic ms when curl wants its timeout, or -1 */
	int calls;           /* transfers in this multi */
	int64_t empty_since; /* monotonic ms when calls dropped to 0 */
};

struct webhook_client {
	int epfd;
	int64_t max_response;
	const struct netpolicy *egress;
	struct webhook_tls tls;          /* all NULL: the system's store, no client cert */
	const char *proxy;               /* HOOKFLOW_EGRESS_PROXY, or NULL: direct */
	struct resolver *resolver;       /* with a proxy */
	struct webhook_call **resolving; /* calls waiting for their host, a min-heap by deadline */
	int nresolving;
	int resolving_cap;
	struct shard **shards; /* [0] always exists; the others are closed when idle */
	int nshards;
	int shards_cap;
	int inflight;
	struct shard **fds; /* fds[fd]: the shard whose socket it is, or NULL */
	int nfds;
	struct webhook_call *done_head;
	struct webhook_call *done_tail;
	struct webhook_call *active;
	/* The TLS session cache of every call of this client (only its thread
	 * uses it, so it needs no locks): without it, libcurl gives each easy
	 * handle a cache of its own, allocated with the handle's first transfer
	 * even for plain http, about 0.9 KiB of each call in flight. */
	CURLSH *share;
	/* Easy handles of finished calls, reset and kept for the next calls:
	 * creating one per call (and its transfer buffers) was the largest
	 * share of this thread's allocations. */
	CURL *spare[SPARE_EASY];
	int nspare;
};

static CURL *easy_get(struct webhook_client *wc)
{
	return wc->nspare > 0 ? wc->spare[--wc->nspare] : curl_easy_init();
}

/* Returns easy handle `c` (no longer in the multi) for reuse. */
static void easy_put(struct webhook_client *wc, CURL *c)
{
	if (c == NULL)
		return;
	if (wc->nspare < SPARE_EASY) {
		curl_easy_reset(c);
		wc->spare[wc->nspare++] = c;
	} else {
		curl_easy_cleanup(c);
	}
}

/* Records that `fd` is watched for shard `sh` (NULL: no longer). Returns
 * false when the map cannot grow (out of memory). */
static bool watch_fd(struct webhook_client *wc, int fd, struct shard *sh)
{
	if (fd >= wc->nfds) {
		if (sh == NULL)
			return true;
		int n = wc->nfds ? wc->nfds : 1024;
		while (n <= fd)
			n *= 2;
		struct shard **f = realloc(wc->fds, (size_t)n * sizeof *f);
		if (f == NULL)
			return false;
		memset(f + wc->nfds, 0, (size_t)(n - wc->nfds) * sizeof *f);
		wc->fds = f;
		wc->nfds = n;
	}
	wc->fds[fd] = sh;
	return true;
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	(void)easy;
	struct shard *sh = userp;
	struct webhook_client *wc = sh->wc;
	struct epoll_event ev = {.data.fd = s};
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(wc->epfd, EPOLL_CTL_DEL, s, NULL);
		watch_fd(wc, s, NULL);
		curl_multi_assign(sh->multi, s, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (socketp == NULL) {
		if (!watch_fd(wc, s, sh))
			return -1; /* curl fails the transfer */
		if (epoll_ctl(wc->epfd, EPOLL_CTL_ADD, s, &ev) != 0)
			epoll_ctl(wc->epfd, EPOLL_CTL_MOD, s, &ev);
		curl_multi_assign(sh->multi, s, sh); /* any non-NULL marker */
	} else {
		epoll_ctl(wc->epfd, EPOLL_CTL_MOD, s, &ev);
	}
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	struct shard *sh = userp;
	sh->timer_at = timeout_ms < 0 ? -1 : timefmt_mono_ms() + timeout_ms;
	return 0;
}

/* A new, empty shard, appended to wc->shards; NULL when out of memory. */
static struct shard *shard_add(struct webhook_client *wc)
{
	if (wc->nshards == wc->shards_cap) {
		int n = wc->shards_cap ? wc->shards_cap * 2 : 8;
		struct shard **a = realloc(wc->shards, (size_t)n * sizeof *a);
		if (a == NULL)
			return NULL;
		wc->shards = a;
		wc->shards_cap = n;
	}
	struct shard *sh = calloc(1, sizeof *sh);
	if (sh == NULL)
		return NULL;
	sh->multi = curl_multi_init();
	if (sh->multi == NULL) {
		free(sh);
		return NULL;
	}
	sh->wc = wc;
	sh->timer_at = -1;
	sh->empty_since = timefmt_mono_ms();
	curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
	curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
	/* Keep idle keep-alive connections to webhooks for reuse: as many as
	 * the shard runs calls. */
	curl_multi_setopt(sh->multi, CURLMOPT_MAXCONNECTS, (long)SHARD_CALLS);
	wc->shards[wc->nshards++] = sh;
	return sh;
}

/* Closes the last shard (no transfers left in it) and its idle connections. */
static void shard_drop_last(struct webhook_client *wc)
{
	struct shard *sh = wc->shards[--wc->nshards];
	curl_multi_cleanup(sh->multi); /* closes its connections: on_socket REMOVE */
	for (int fd = 0; fd < wc->nfds; fd++)
		if (wc->fds[fd] == sh)
			wc->fds[fd] = NULL;
	free(sh);
}

/* The shard for a new call: the first with room, else a new one (NULL: out
 * of memory). */
static struct shard *shard_for_call(struct webhook_client *wc)
{
	for (int i = 0; i < wc->nshards; i++)
		if (wc->shards[i]->calls < SHARD_CALLS)
			return wc->shards[i];
	return shard_add(wc);
}

/* Closes trailing shards that have been empty for SHARD_IDLE_MS. Only outside
 * curl's callbacks. */
static void shards_trim(struct webhook_client *wc, int64_t now)
{
	while (wc->nshards > 1) {
		struct shard *last = wc->shards[wc->nshards - 1];
		if (last->calls > 0 || now - last->empty_since < SHARD_IDLE_MS)
			break;
		shard_drop_last(wc);
	}
}

/* curl's open-socket hook: the address is final here (after DNS), so the
 * egress policy is checked on what will really be connected to. Through the
 * egress proxy every connection goes to the proxy (the operator's choice,
 * not a webhook address): the target was checked before the call started. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct webhook_call *call = clientp;
	(void)purpose;
	char why[REFUSED_MAX];
	free(call->refused);
	call->refused = NULL;
	if (call->wc->proxy == NULL &&
	    !netpolicy_allowed(call->wc->egress, &a->addr, why, sizeof why)) {
		/* Kept only when refused (rare), not in every call. Out of
		 * memory, the call still fails, as a plain connect error. */
		call->refused = strdup(why);
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* ---- TLS -----------------------------------------------------------------
 * Each new TLS connection's SSL_CTX points at the call that opened it (ex
 * data) until the call completes, so that on_cert_request can note a
 * server's request for a client certificate in the call. The two point at
 * each other weakly: a call that completes clears the context's pointer, a
 * context freed first (its connection closed) clears the call's. Both
 * happen on the client's thread. This rests on libcurl making an SSL_CTX of
 * its own for each connection (it caches sessions and, from 7.87, the CA
 * store, never a context). */

static int ssl_ctx_index = -1;
static pthread_once_t ssl_ctx_index_once = PTHREAD_ONCE_INIT;

/* OpenSSL frees a context (of any SSL_CTX in the process: `ptr` is NULL but
 * for ours). */
static void on_ssl_ctx_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
			    void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	struct webhook_call *call = ptr;
	if (call != NULL)
		call->ssl_ctx = NULL;
}

static void ssl_ctx_index_init(void)
{
	ssl_ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, on_ssl_ctx_free);
}

/* Forgets the call's connection context (the call is done). */
static void tls_detach(struct webhook_call *call)
{
	if (call->ssl_ctx != NULL) {
		SSL_CTX_set_ex_data(call->ssl_ctx, ssl_ctx_index, NULL);
		call->ssl_ctx = NULL;
	}
}

/* OpenSSL asks for a client certificate when the server wants one and none
 * is configured: none is sent (the server decides), and the call notes it. */
static int on_cert_request(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	(void)x509;
	(void)pkey;
	struct webhook_call *call = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ssl_ctx_index);
	if (call != NULL)
		call->cert_requested = true;
	return 0;
}

/* libcurl's SSL_CTX hook, for each new TLS connection of `arg` (the call),
 * once the system's store is loaded: adds HOOKFLOW_CA_FILE's certificates to
 * it (a certificate the store holds already, as when libcurl shares one store
 * between connections, is taken as added), and without a client certificate
 * watches for a server asking for one. */
static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *arg)
{
	(void)easy;
	struct webhook_call *call = arg;
	const struct webhook_client *wc = call->wc;
	const STACK_OF(X509) *cas = (const STACK_OF(X509) *)wc->tls.extra_cas;
	X509_STORE *store = SSL_CTX_get_cert_store(ssl_ctx);
	for (int i = 0; cas != NULL && i < sk_X509_num(cas); i++) {
		if (store == NULL || X509_STORE_add_cert(store, sk_X509_value(cas, i)) != 1) {
			ERR_clear_error();
			return CURLE_OUT_OF_MEMORY;
		}
	}
	if (wc->tls.client_cert == NULL && ssl_ctx_index >= 0 &&
	    SSL_CTX_set_ex_data(ssl_ctx, ssl_ctx_index, call) == 1) {
		/* A call that opens another connection (libcurl retrying on a
		 * fresh one) lets go of the first. */
		if (call->ssl_ctx != NULL && call->ssl_ctx != ssl_ctx)
			SSL_CTX_set_ex_data(call->ssl_ctx, ssl_ctx_index, NULL);
		call->ssl_ctx = ssl_ctx;
		SSL_CTX_set_client_cert_cb(ssl_ctx, on_cert_request);
	}
	return CURLE_OK;
}

enum err_code webhook_tls_check(const struct webhook_tls *tls, struct err *e)
{
	if (tls == NULL || tls->extra_cas == NULL)
		return ERR_OK;
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	if (v->ssl_version == NULL || strncmp(v->ssl_version, "OpenSSL/", 8) != 0)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_CA_FILE: needs libcurl built with OpenSSL (this one uses "
			       "%s)",
			       v->ssl_version ? v->ssl_version : "no TLS");
	return ERR_OK;
}

struct webhook_client *webhook_client_new(int epfd, int64_t max_response_bytes,
					  const struct netpolicy *egress, const char *proxy,
					  const struct webhook_tls *tls)
{
	struct webhook_client *wc = calloc(1, sizeof *wc);
	if (wc == NULL)
		return NULL;
	wc->epfd = epfd;
	wc->max_response = max_response_bytes;
	wc->egress = egress;
	wc->proxy = proxy;
	if (tls != NULL)
		wc->tls = *tls;
	pthread_once(&ssl_ctx_index_once, ssl_ctx_index_init);
	wc->share = curl_share_init();
	if (wc->share == NULL ||
	    curl_share_setopt(wc->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) !=
		    CURLSHE_OK ||
	    shard_add(wc) == NULL) {
		curl_share_cleanup(wc->share);
		free(wc->shards);
		free(wc);
		return NULL;
	}
	if (proxy != NULL) {
		struct err e = {0};
		wc->resolver = resolver_new(&e);
		struct epoll_event ev = {.events = EPOLLIN};
		if (wc->resolver != NULL) {
			ev.data.fd = resolver_fd(wc->resolver);
			if (epoll_ctl(epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0) {
				resolver_free(wc->resolver);
				wc->resolver = NULL;
			}
		}
		if (wc->resolver == NULL) {
			shard_drop_last(wc);
			curl_share_cleanup(wc->share);
			free(wc->shards);
			free(wc);
			return NULL;
		}
	}
	return wc;
}

/* ---- calls waiting for their host (through the proxy) --------------------
 * A min-heap by deadline, so the loop's timeout and the expiry of calls
 * whose lookup outlives them cost O(log n), not a walk of every call. */

static void heap_set(struct webhook_client *wc, int i, struct webhook_call *c)
{
	wc->resolving[i] = c;
	c->heap_at = i;
}

static void heap_up(struct webhook_client *wc, int i)
{
	struct webhook_call *c = wc->resolving[i];
	while (i > 0) {
		int parent = (i - 1) / 2;
		if (wc->resolving[parent]->deadline_ms <= c->deadline_ms)
			break;
		heap_set(wc, i, wc->resolving[parent]);
		i = parent;
	}
	heap_set(wc, i, c);
}

static void heap_down(struct webhook_client *wc, int i)
{
	struct webhook_call *c = wc->resolving[i];
	for (;;) {
		int l = 2 * i + 1, m = i;
		int64_t best = c->deadline_ms;
		if (l < wc->nresolving && wc->resolving[l]->deadline_ms < best) {
			m = l;
			best = wc->resolving[l]->deadline_ms;
		}
		if (l + 1 < wc->nresolving && wc->resolving[l + 1]->deadline_ms < best)
			m = l + 1;
		if (m == i)
			break;
		heap_set(wc, i, wc->resolving[m]);
		i = m;
	}
	heap_set(wc, i, c);
}

static bool heap_push(struct webhook_client *wc, struct webhook_call *c)
{
	if (wc->nresolving == wc->resolving_cap) {
		int n = wc->resolving_cap ? wc->resolving_cap * 2 : 64;
		struct webhook_call **a = realloc(wc->resolving, (size_t)n * sizeof *a);
		if (a == NULL)
			return false;
		wc->resolving = a;
		wc->resolving_cap = n;
	}
	heap_set(wc, wc->nresolving++, c);
	heap_up(wc, c->heap_at);
	return true;
}

static void heap_remove(struct webhook_client *wc, struct webhook_call *c)
{
	int i = c->heap_at;
	if (i < 0)
		return;
	c->heap_at = -1;
	struct webhook_call *last = wc->resolving[--wc->nresolving];
	if (last == c)
		return;
	heap_set(wc, i, last);
	heap_up(wc, i);
	heap_down(wc, last->heap_at);
}

static void call_release(struct webhook_call *call)
{
	tls_detach(call);
	easy_put(call->wc, call->easy);
	free(call->hdrs);
	curl_slist_free_all(call->connect_to);
	free(call->retry_after);
	free(call->refused);
	free(call->host);
	free(call->body);
	free(call->resp);
	free(call);
}

static void finish(struct webhook_client *wc, struct webhook_call *call, CURLcode code)
{
	if (call->done)
		return;
	call->done = true;
	call->code = code;
	tls_detach(call);
	if (code != CURLE_OK && call->cert_requested) {
		char why[CURL_ERROR_SIZE];
		snprintf(why, sizeof why, "%s",
			 call->errbuf[0] ? call->errbuf : curl_easy_strerror(code));
		snprintf(call->errbuf, sizeof call->errbuf,
			 "TLS: the server asked for a client certificate, none was sent "
			 "(HOOKFLOW_CLIENT_CERT is not set): %.150s",
			 why);
	}
	if (call->aprev)
		call->aprev->anext = call->anext;
	else
		wc->active = call->anext;
	if (call->anext)
		call->anext->aprev = call->aprev;
	call->aprev = call->anext = NULL;
	call->finished_ms = timefmt_mono_ms();
	if (wc->resolver != NULL) {
		resolver_cancel(wc->resolver, &call->wait);
		heap_remove(wc, call);
	}
	curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &call->status);
	if (call->shard != NULL) {
		curl_multi_remove_handle(call->shard->multi, call->easy);
		if (--call->shard->calls == 0)
			call->shard->empty_since = call->finished_ms;
		call->shard = NULL;
	}
	easy_put(wc, call->easy);
	call->easy = NULL;
	call->next = NULL;
	if (wc->done_tail)
		wc->done_tail->next = call;
	else
		wc->done_head = call;
	wc->done_tail = call;
}

static void check_done(struct webhook_client *wc, struct shard *sh)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(sh->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct webhook_call *call = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&call);
		if (call != NULL)
			finish(wc, call, m->data.result);
	}
}

void webhook_client_free(struct webhook_client *wc)
{
	if (wc == NULL)
		return;
	struct webhook_call *c = wc->done_head;
	while (c != NULL) {
		struct webhook_call *n = c->next;
		call_release(c);
		c = n;
	}
	/* Calls still in flight: their easy handles are still in a multi, or
	 * they wait for their host (forgotten with the resolver). */
	if (wc->resolver != NULL) {
		epoll_ctl(wc->epfd, EPOLL_CTL_DEL, resolver_fd(wc->resolver), NULL);
		resolver_free(wc->resolver);
	}
	free(wc->resolving);
	c = wc->active;
	while (c != NULL) {
		struct webhook_call *n = c->anext;
		if (c->shard != NULL) {
			curl_multi_remove_handle(c->shard->multi, c->easy);
			c->shard->calls--;
		}
		call_release(c);
		c = n;
	}
	while (wc->nspare > 0)
		curl_easy_cleanup(wc->spare[--wc->nspare]);
	while (wc->nshards > 0)
		shard_drop_last(wc);
	curl_share_cleanup(wc->share); /* after every easy handle that used it */
	free(wc->shards);
	free(wc->fds);
	free(wc);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct webhook_call *call = userdata;
	size_t n = size * nmemb;
	int64_t cap = call->wc->max_response;
	if ((int64_t)(call->resp_len + n) > cap) {
		call->too_large = true;
		return 0; /* aborts the transfer */
	}
	if (call->resp_len + n + 1 > call->resp_cap) {
		size_t want = call->resp_cap ? call->resp_cap : 4096;
		while (want < call->resp_len + n + 1)
			want *= 2;
		char *p = realloc(call->resp, want);
		if (p == NULL)
			return 0;
		call->resp = p;
		call->resp_cap = want;
	}
	memcpy(call->resp + call->resp_len, ptr, n);
	call->resp_len += n;
	call->resp[call->resp_len] = '\0';
	return n;
}

/* Frees the request's body once the answer has begun and the whole body went
 * out: libcurl does not read it again then (it follows no redirect, does no
 * authentication, sends no Expect: 100-continue, and sends a request again
 * only on a reused connection that closed before any byte of an answer). A
 * call that is receiving a large answer then does not hold its request as
 * well: with 1,024 calls of 100 KB in flight, that was the larger part of
 * hookflow's peak of memory (BENCHMARKS.md). */
static void release_body(struct webhook_call *call)
{
	curl_off_t sent = 0;
	if (call->body != NULL &&
	    curl_easy_getinfo(call->easy, CURLINFO_SIZE_UPLOAD_T, &sent) == CURLE_OK &&
	    sent == (curl_off_t)call->body_len) {
		free(call->body);
		call->body = NULL;
	}
}

/* The most an answer's buffer is sized to from its Content-Length alone: a
 * server that announces more than it sends holds no more than this. */
#define PRESIZE_MAX (256 * 1024)

/* Makes room for an answer of `len` bytes at once, from its Content-Length
 * (at most PRESIZE_MAX; a server that sends less or more is read as
 * before). */
static void presize_answer(struct webhook_call *call, const char *v, size_t vl)
{
	char num[24];
	if (vl == 0 || vl >= sizeof num)
		return;
	memcpy(num, v, vl);
	num[vl] = '\0';
	char *end = NULL;
	long long len = strtoll(num, &end, 10);
	if (end == num || *end != '\0' || len <= 0 || len > call->wc->max_response)
		return;
	if (len > PRESIZE_MAX)
		len = PRESIZE_MAX;
	if ((size_t)len + 1 <= call->resp_cap)
		return;
	char *p = realloc(call->resp, (size_t)len + 1);
	if (p == NULL)
		return; /* on_body grows it as it comes */
	call->resp = p;
	call->resp_cap = (size_t)len + 1;
}

/* A header's value: `buf` (n bytes) without the name of `name_len` bytes,
 * spaces and the line's end. */
static const char *header_value(const char *buf, size_t n, size_t name_len, size_t *vl)
{
	const char *v = buf + name_len;
	size_t l = n - name_len;
	while (l > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		l--;
	}
	while (l > 0 && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' '))
		l--;
	*vl = l;
	return v;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct webhook_call *call = userdata;
	size_t n = size * nitems;
	if (call->header_bytes == 0)
		release_body(call);
	call->header_bytes += n;
	if (call->header_bytes > WEBHOOK_MAX_HEADER_BYTES) {
		call->header_too_large = true;
		return 0;
	}
	/* A new status line (e.g. after 100 Continue) starts a new header block. */
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		free(call->retry_after);
		call->retry_after = NULL;
	}
	static const char name[] = "retry-after:";
	static const char length[] = "content-length:";
	size_t vl = 0;
	if (n > sizeof length - 1 && strncasecmp(buf, length, sizeof length - 1) == 0) {
		const char *v = header_value(buf, n, sizeof length - 1, &vl);
		presize_answer(call, v, vl);
	}
	if (n > sizeof name - 1 && strncasecmp(buf, name, sizeof name - 1) == 0) {
		const char *v = header_value(buf, n, sizeof name - 1, &vl);
		if (vl < 128) { /* longer is no date or number of seconds */
			free(call->retry_after);
			call->retry_after = strndup(v, vl);
		}
	}
	return n;
}

/* Adds the call's transfer to a shard with room. */
static enum err_code transfer_start(struct webhook_client *wc, struct webhook_call *call,
				    struct err *e)
{
	struct shard *sh = shard_for_call(wc);
	if (sh == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	CURLMcode mc = curl_multi_add_handle(sh->multi, call->easy);
	if (mc != CURLM_OK)
		return err_set(e, ERR_INTERNAL, "curl: %s", curl_multi_strerror(mc));
	call->shard = sh;
	sh->calls++;
	return ERR_OK;
}

/* The call is in flight from now on: it completes through the done list. */
static void track(struct webhook_client *wc, struct webhook_call *call)
{
	wc->inflight++;
	call->anext = wc->active;
	if (wc->active)
		wc->active->aprev = call;
	wc->active = call;
}

/* Completes a call that failed before or instead of its transfer, with
 * `msg` as curl's error text. */
static void fail_call(struct webhook_client *wc, struct webhook_call *call, CURLcode code,
		      const char *msg)
{
	snprintf(call->errbuf, sizeof call->errbuf, "%s", msg);
	finish(wc, call, code);
}

/* The webhook's host and port (through the proxy). An address literal is
 * answered into `literal` with *host NULL; a name is returned in *host
 * (curl_free), its IDN form in punycode. */
static enum err_code target_of(const char *url, struct webhook_call *call, char **host,
			       struct resolver_answer *literal, struct err *e)
{
	*host = NULL;
	CURLU *u = curl_url();
	char *h = NULL, *port = NULL;
	unsigned host_flags = 0;
#ifdef CURLU_PUNYCODE
	host_flags = CURLU_PUNYCODE;
#endif
	enum err_code rc = ERR_OK;
	if (u == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &h, host_flags) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		rc = err_set(e, ERR_INVALID, "the webhook URL cannot be parsed");
		goto out;
	}
	call->port = strtol(port, NULL, 10);
	free(call->host);
	call->host = strndup(h, RESOLVER_MAX_HOST);
	if (call->host == NULL) {
		rc = err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	memset(literal, 0, sizeof *literal);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&literal->addrs[0];
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&literal->addrs[0];
	size_t n = strlen(h);
	if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		literal->n = 1;
	} else if (h[0] == '[' && n > 2 && h[n - 1] == ']') {
		h[n - 1] = '\0';
		if (inet_pton(AF_INET6, h + 1, &v6->sin6_addr) != 1) {
			rc = err_set(e, ERR_INVALID,
				     "the webhook URL's IPv6 address cannot be parsed");
			goto out;
		}
		v6->sin6_family = AF_INET6;
		literal->n = 1;
	} else {
		*host = h;
		h = NULL;
	}
out:
	curl_free(h);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* Through the proxy, once the host's addresses are known: picks the first
 * the egress policy allows (in the resolver's order), pins it as the
 * proxy's CONNECT target and starts the transfer, or completes the call
 * (refused, not resolved, out of time). */
static void proxy_connect(struct webhook_client *wc, struct webhook_call *call,
			  const struct resolver_answer *a)
{
	if (a->error != 0 || a->n == 0) {
		char msg[CURL_ERROR_SIZE];
		snprintf(msg, sizeof msg, "Could not resolve host: %.160s (%s)", call->host,
			 gai_strerror(a->error ? a->error : EAI_NONAME));
		fail_call(wc, call, CURLE_COULDNT_RESOLVE_HOST, msg);
		return;
	}
	const struct sockaddr *pick = NULL;
	char why[REFUSED_MAX] = "";
	for (int i = 0; i < a->n && pick == NULL; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&a->addrs[i];
		char w[REFUSED_MAX];
		if (netpolicy_allowed(wc->egress, sa, w, sizeof w))
			pick = sa;
		else if (why[0] == '\0')
			memcpy(why, w, sizeof why);
	}
	if (pick == NULL) {
		free(call->refused);
		call->refused = strdup(why);
		fail_call(wc, call, CURLE_COULDNT_CONNECT, why);
		return;
	}
	int64_t left = call->deadline_ms - timefmt_mono_ms();
	if (left <= 0) {
		char msg[CURL_ERROR_SIZE];
		snprintf(msg, sizeof msg, "Resolving timed out after %d milliseconds",
			 call->timeout_ms);
		fail_call(wc, call, CURLE_OPERATION_TIMEDOUT, msg);
		return;
	}
	char ip[INET6_ADDRSTRLEN] = "", line[INET6_ADDRSTRLEN + 32];
	if (pick->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)pick)->sin_addr, ip, sizeof ip);
		snprintf(line, sizeof line, "::%s:%ld", ip, call->port);
	} else {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)pick)->sin6_addr, ip, sizeof ip);
		snprintf(line, sizeof line, "::[%s]:%ld", ip, call->port);
	}
	struct err e = {0};
	call->connect_to = curl_slist_append(NULL, line);
	if (call->connect_to == NULL ||
	    curl_easy_setopt(call->easy, CURLOPT_CONNECT_TO, call->connect_to) != CURLE_OK ||
	    curl_easy_setopt(call->easy, CURLOPT_TIMEOUT_MS, (long)left) != CURLE_OK) {
		fail_call(wc, call, CURLE_FAILED_INIT, "out of memory");
		return;
	}
	if (transfer_start(wc, call, &e))
		fail_call(wc, call, CURLE_FAILED_INIT, e.msg);
}

/* resolver_dispatch's answer for a call waiting for its host. */
static void on_resolved(struct resolver_wait *w, const struct resolver_answer *a, void *arg)
{
	struct webhook_client *wc = arg;
	struct webhook_call *call =
		(struct webhook_call *)((char *)w - offsetof(struct webhook_call, wait));
	heap_remove(wc, call);
	proxy_connect(wc, call, a);
}

/* The call's request headers as one allocation: a curl_slist array whose
 * lines live after it (curl only reads the list; a list per header line
 * cost two small allocations each, a tenth of a call's memory with
 * thousands in flight). Returns NULL when out of memory. */
static struct curl_slist *headers_build(const char *const *lines, int n)
{
	size_t bytes = (size_t)n * sizeof(struct curl_slist);
	for (int i = 0; i < n; i++)
		bytes += strlen(lines[i]) + 1;
	struct curl_slist *list = malloc(bytes);
	if (list == NULL)
		return NULL;
	char *at = (char *)(list + n);
	for (int i = 0; i < n; i++) {
		size_t len = strlen(lines[i]) + 1;
		memcpy(at, lines[i], len);
		list[i].data = at;
		list[i].next = i + 1 < n ? &list[i + 1] : NULL;
		at += len;
	}
	return list;
}

enum err_code webhook_call_start(struct webhook_client *wc, const struct webhook_request *req,
				 struct webhook_call **out, struct err *e)
{
	*out = NULL;
	struct webhook_call *call = calloc(1, sizeof *call);
	if (call == NULL) {
		free(req->body);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	call->wc = wc;
	call->heap_at = -1;
	call->user = req->user;
	call->timeout_ms = req->timeout_ms;
	call->body = req->body;
	call->body_len = req->body_len;
	call->easy = easy_get(wc);
	if (call->easy == NULL) {
		call_release(call);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}

	char id[256], stamp[64], sig[SIG_HEADER_MAX + 32];
	char tp[TRACE_HEADER_MAX + 16], tstate[TRACE_HEADER_MAX + 16];
	int64_t ts = timefmt_now_ms() / 1000;
	/* The User-Agent is a line of the list, not CURLOPT_USERAGENT, which
	 * libcurl would keep twice more per call (the option's copy and the
	 * formatted header line). */
	const char *lines[8] = {"Content-Type: application/json",
				"Expect:",
				"User-Agent: " WEBHOOK_USER_AGENT,
				id,
				stamp,
				sig};
	int nlines = req->secret != NULL ? 6 : 5;
	snprintf(id, sizeof id, "webhook-id: %s", req->msg_id);
	snprintf(stamp, sizeof stamp, "webhook-timestamp: %lld", (long long)ts);
	if (req->secret != NULL) {
		char v[SIG_HEADER_MAX];
		if (sig_sign_header(req->secret, req->secret_previous, req->msg_id, ts, call->body,
				    call->body_len, v, e)) {
			call_release(call);
			return e->code;
		}
		snprintf(sig, sizeof sig, "webhook-signature: %s", v);
	}
	/* The trace context (README "Traces"), outside the signature, which
	 * covers webhook-id, webhook-timestamp and the body only. */
	if (req->traceparent != NULL) {
		snprintf(tp, sizeof tp, "traceparent: %s", req->traceparent);
		lines[nlines++] = tp;
		if (req->tracestate != NULL && req->tracestate[0] != '\0') {
			snprintf(tstate, sizeof tstate, "tracestate: %s", req->tracestate);
			lines[nlines++] = tstate;
		}
	}
	call->hdrs = headers_build(lines, nlines);
	if (call->hdrs == NULL) {
		call_release(call);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}

	CURL *c = call->easy;
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, call->body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->body_len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, call->hdrs);
	curl_easy_setopt(c, CURLOPT_SHARE, wc->share);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)wc->max_response);
	/* curl's smallest receive buffer (1 KiB): a webhook's answer is short, and
	 * the default 16 KiB was a fifth of a call's memory. */
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 1024L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, call);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, call);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, call->errbuf);
	curl_easy_setopt(c, CURLOPT_PRIVATE, call);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, call);
	/* Never a proxy from the environment: "" disables http_proxy,
	 * https_proxy, ALL_PROXY and the rest, and with the egress proxy an
	 * explicit (empty) no-proxy list keeps no_proxy from sending a call
	 * around it (without one, no_proxy can only take away a proxy there
	 * is not). */
	curl_easy_setopt(c, CURLOPT_PROXY, wc->proxy != NULL ? wc->proxy : "");
	/* libcurl copies its default CA bundle and path into every handle, and
	 * again into every connection, for the webhook and for a proxy: about
	 * 0.3 KiB of each call in flight that a plain http call to the webhook
	 * (TLS is never set up on it) or the proxy side without a proxy never
	 * reads. */
	if (strncasecmp(req->url, "http://", 7) == 0) {
		curl_easy_setopt(c, CURLOPT_CAINFO, NULL);
		curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
	}
	if (wc->proxy == NULL) {
		curl_easy_setopt(c, CURLOPT_PROXY_CAINFO, NULL);
		curl_easy_setopt(c, CURLOPT_PROXY_CAPATH, NULL);
	} else {
		curl_easy_setopt(c, CURLOPT_NOPROXY, "");
		/* CONNECT for plain http too: an absolute-URI request would let
		 * the proxy resolve the name itself. */
		curl_easy_setopt(c, CURLOPT_HTTPPROXYTUNNEL, 1L);
		/* The proxy sees the User-Agent in its CONNECT (the header list
		 * goes to the webhook only). */
		curl_easy_setopt(c, CURLOPT_USERAGENT, WEBHOOK_USER_AGENT);
	}
	if (wc->tls.extra_cas != NULL || wc->tls.client_cert == NULL) {
		/* CURLE_NOT_BUILT_IN but with OpenSSL: webhook_tls_check refused
		 * extra CAs then, and the note of a certificate request is a
		 * nicety. */
		curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
		curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, call);
	}
	if (wc->tls.client_cert != NULL) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, wc->tls.client_cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, wc->tls.client_key);
	}
	call->started_ms = timefmt_mono_ms();
	call->deadline_ms = call->started_ms + req->timeout_ms;
	shards_trim(wc, call->started_ms);
	if (wc->proxy == NULL) {
		if (transfer_start(wc, call, e)) {
			call_release(call);
			return e->code;
		}
		track(wc, call);
	} else {
		struct resolver_answer literal;
		char *host = NULL;
		if (target_of(req->url, call, &host, &literal, e)) {
			call_release(call);
			return e->code;
		}
		track(wc, call);
		const struct resolver_answer *a = &literal;
		if (host == NULL || resolver_lookup(wc->resolver, host, &call->wait, &a))
			proxy_connect(wc, call, a);
		else if (!heap_push(wc, call))
			fail_call(wc, call, CURLE_FAILED_INIT, "out of memory");
		curl_free(host);
	}
	*out = call;
	return ERR_OK;
}

void webhook_call_abort(struct webhook_client *wc, struct webhook_call *call)
{
	if (call->done)
		return;
	call->aborted = true;
	finish(wc, call, CURLE_ABORTED_BY_CALLBACK);
}

bool webhook_client_owns_fd(const struct webhook_client *wc, int fd)
{
	if (wc->resolver != NULL && fd == resolver_fd(wc->resolver))
		return true;
	return fd >= 0 && fd < wc->nfds && wc->fds[fd] != NULL;
}

void webhook_client_socket_event(struct webhook_client *wc, int fd, uint32_t events)
{
	if (wc->resolver != NULL && fd == resolver_fd(wc->resolver)) {
		resolver_dispatch(wc->resolver, on_resolved, wc);
		return;
	}
	if (!webhook_client_owns_fd(wc, fd))
		return; /* closed since epoll_wait returned */
	struct shard *sh = wc->fds[fd];
	int mask = 0;
	if (events & EPOLLIN)
		mask |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		mask |= CURL_CSELECT_OUT;
	if (events & (EPOLLERR | EPOLLHUP))
		mask |= CURL_CSELECT_ERR;
	int running = 0;
	curl_multi_socket_action(sh->multi, fd, mask, &running);
	check_done(wc, sh);
}

/* The earliest of the shards' curl timers, of the deadline of the calls
 * waiting for their host and of the idle trailing shard's closing time, as
 * monotonic ms, or -1. */
static int64_t next_deadline(const struct webhook_client *wc)
{
	int64_t at = wc->nresolving > 0 ? wc->resolving[0]->deadline_ms : -1;
	for (int i = 0; i < wc->nshards; i++) {
		int64_t t = wc->shards[i]->timer_at;
		if (t >= 0 && (at < 0 || t < at))
			at = t;
	}
	const struct shard *last = wc->shards[wc->nshards - 1];
	if (wc->nshards > 1 && last->calls == 0) {
		int64_t t = last->empty_since + SHARD_IDLE_MS;
		if (at < 0 || t < at)
			at = t;
	}
	return at;
}

long webhook_client_timeout_ms(const struct webhook_client *wc)
{
	int64_t at = next_deadline(wc);
	if (at < 0)
		return -1;
	int64_t d = at - timefmt_mono_ms();
	return d < 0 ? 0 : (long)d;
}

void webhook_client_timeout(struct webhook_client *wc)
{
	int64_t now = timefmt_mono_ms();
	while (wc->nresolving > 0 && wc->resolving[0]->deadline_ms <= now) {
		struct webhook_call *c = wc->resolving[0];
		char msg[CURL_ERROR_SIZE];
		snprintf(msg, sizeof msg, "Resolving timed out after %d milliseconds",
			 c->timeout_ms);
		fail_call(wc, c, CURLE_OPERATION_TIMEDOUT, msg); /* leaves the heap */
	}
	for (int i = 0; i < wc->nshards; i++) {
		struct shard *sh = wc->shards[i];
		if (sh->timer_at < 0 || sh->timer_at > now)
			continue;
		int running = 0;
		sh->timer_at = -1;
		curl_multi_socket_action(sh->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		check_done(wc, sh);
	}
	shards_trim(wc, now);
}

int webhook_client_inflight(const struct webhook_client *wc)
{
	return wc->inflight;
}

struct webhook_call *webhook_client_take_done(struct webhook_client *wc)
{
	struct webhook_call *c = wc->done_head;
	if (c == NULL)
		return NULL;
	wc->done_head = c->next;
	if (wc->done_head == NULL)
		wc->done_tail = NULL;
	c->next = NULL;
	wc->inflight--;
	return c;
}

void webhook_call_result(const struct webhook_call *call, struct call_result *r)
{
	memset(r, 0, sizeof *r);
	r->timeout_ms = call->timeout_ms;
	r->max_response_bytes = call->wc->max_response;
	r->body = call->resp ? call->resp : "";
	r->body_len = call->resp_len;
	r->retry_after = call->retry_after;
	if (call->too_large || call->code == CURLE_FILESIZE_EXCEEDED) {
		r->too_large = true;
		r->status = call->status;
		return;
	}
	if (call->refused != NULL && call->code != CURLE_OK) {
		r->refused = call->refused;
		return;
	}
	if (call->aborted) {
		r->transport_error = CURLE_ABORTED_BY_CALLBACK;
		r->transport_msg = "aborted";
		return;
	}
	if (call->header_too_large) {
		r->transport_error = CURLE_WRITE_ERROR;
		r->transport_msg = "response headers exceed 65536 bytes";
		return;
	}
	if (call->code == CURLE_OK) {
		r->status = call->status;
		return;
	}
	if (call->code == CURLE_OUT_OF_MEMORY) {
		/* What curl reports for a header line over its own limit. */
		r->transport_error = (int)call->code;
		r->transport_msg = "response headers too large (or out of memory)";
		return;
	}
	r->transport_error = (int)call->code;
	r->timed_out = call->code == CURLE_OPERATION_TIMEDOUT;
	r->transport_msg = call->errbuf[0] ? call->errbuf : curl_easy_strerror(call->code);
}

void *webhook_call_user(const struct webhook_call *call)
{
	return call->user;
}

int64_t webhook_call_duration_ms(const struct webhook_call *call)
{
	return call->finished_ms - call->started_ms;
}

bool webhook_call_aborted(const struct webhook_call *call)
{
	return call->aborted;
}

void webhook_call_free(struct webhook_call *call)
{
	if (call == NULL)
		return;
	call_release(call);
}
