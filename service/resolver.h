/* resolver: host name lookups for one owner thread, made by a few helper
 * threads, with a small cache.
 *
 * The webhook client needs it when calls go through an egress proxy: the
 * proxy would otherwise resolve the webhook's host itself, out of reach of
 * the egress policy, so hookflow looks the name up, checks the addresses and
 * has the proxy connect to the checked one. getaddrinfo blocks and the owner
 * (a worker's epoll loop driving thousands of calls) must not, so lookups run
 * on RESOLVER_THREADS helper threads that signal completions on an eventfd the
 * owner watches (resolver_fd); the owner then calls resolver_dispatch.
 *
 * Concurrent lookups of one name share one getaddrinfo. Answers are cached for
 * RESOLVER_TTL_MS (curl keeps names 60 s in its own cache too); failures are
 * not cached. At most RESOLVER_MAX_NAMES answers are kept (the oldest unused
 * goes first).
 *
 * Threads: every function is called by the owner thread only; the helper
 * threads touch nothing but their queue. */
#ifndef HOOKFLOW_RESOLVER_H
#define HOOKFLOW_RESOLVER_H

#include <stdbool.h>
#include <sys/socket.h>

#include "base/err.h"

#define RESOLVER_THREADS 4
#define RESOLVER_TTL_MS 60000
#define RESOLVER_MAX_NAMES 1024
#define RESOLVER_MAX_ADDRS 16
#define RESOLVER_MAX_HOST 253 /* the longest DNS name */

struct resolver;
struct resolver_entry;

/* What a lookup found: up to RESOLVER_MAX_ADDRS addresses in getaddrinfo's
 * order (the system's preference), or the getaddrinfo error. */
struct resolver_answer {
	int error; /* 0, or an EAI_* code (gai_strerror) */
	int n;
	struct sockaddr_storage addrs[RESOLVER_MAX_ADDRS];
};

/* A caller waiting for a lookup; lives in the caller's own structure and
 * must stay put until it is answered or cancelled. */
struct resolver_wait {
	struct resolver_wait *prev, *next;
	struct resolver_entry *entry; /* NULL: not waiting */
};

/* Called by resolver_dispatch for each waiter whose lookup finished. `a` is
 * valid during the call only. */
typedef void (*resolver_done_fn)(struct resolver_wait *w, const struct resolver_answer *a,
				 void *arg);

/* A resolver with its helper threads started; NULL with `e` set when the
 * threads or the eventfd cannot be created. Release with resolver_free. */
struct resolver *resolver_new(struct err *e);

/* Stops the helper threads (waiting for a lookup in progress to return) and
 * frees everything. Waiters still registered are forgotten, not called.
 * NULL is a no-op. */
void resolver_free(struct resolver *r);

/* The eventfd that becomes readable when lookups have finished. */
int resolver_fd(const struct resolver *r);

/* Looks `host` (a name, not an address literal) up. When a fresh answer is
 * cached, returns true and points *a at it (valid until the next resolver
 * call). Otherwise registers `w` (not waiting) and returns false: `done` is
 * called with it from a later resolver_dispatch. A host longer than
 * RESOLVER_MAX_HOST, or no memory for the lookup, answers at once with
 * EAI_NONAME or EAI_MEMORY. */
bool resolver_lookup(struct resolver *r, const char *host, struct resolver_wait *w,
		     const struct resolver_answer **a);

/* Stops waiting: `w` will not be called. A no-op when `w` is not waiting. */
void resolver_cancel(struct resolver *r, struct resolver_wait *w);

/* Drains the eventfd and answers the waiters of every finished lookup with
 * `done(w, answer, arg)`. `done` may call resolver_cancel, not
 * resolver_lookup. */
void resolver_dispatch(struct resolver *r, resolver_done_fn done, void *arg);

#endif
