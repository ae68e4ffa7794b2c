/* dispatcher: the worker threads that claim step and callback jobs, POST them
 * to webhooks, keep their leases alive and settle them.
 *
 * Threads: HOOKFLOW_WORKERS worker threads, each with its own epoll loop, curl
 * multi handle (service/webhook) and database connection, each driving up to
 * max_inflight / workers concurrent calls (with HOOKFLOW_EGRESS_PROXY, each
 * worker's webhook client also has RESOLVER_THREADS name-lookup threads).
 * Other threads talk to a worker only through its mailbox (mutex + eventfd):
 * dispatcher_wake and dispatcher_cancel are safe from any thread. No database
 * transaction is open while a call is in flight: a claim commits, the call
 * runs, the settlement commits. */
#ifndef HOOKFLOW_DISPATCHER_H
#define HOOKFLOW_DISPATCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/config.h"
#include "base/err.h"

struct keyring;
struct waiters;
struct endpoints;

struct dispatcher;

/* Creates the dispatcher (threads not started). `cfg` is borrowed and must
 * outlive it; `instance` (copied) names this process in lease owners;
 * `keyring` (borrowed, outlives the dispatcher) signs delivery tokens; the
 * long-polls of `ws` (borrowed, outlives it; NULL: none) on a run its
 * settlement ended are woken once it committed, without waiting for the
 * NOTIFY that wakes every instance's. NULL when out of memory. */
struct dispatcher *dispatcher_new(const struct config *cfg, const char *instance,
				  struct keyring *keyring, struct waiters *ws);

/* Starts the worker threads. */
enum err_code dispatcher_start(struct dispatcher *d, struct err *e);

/* The allowance and breaker of every endpoint this process calls (borrowed,
 * lives as long as `d`; its functions are thread-safe). */
struct endpoints *dispatcher_endpoints(struct dispatcher *d);

/* The name of this process in lease owners (borrowed). */
const char *dispatcher_instance(const struct dispatcher *d);

/* Tells every worker that claimable work may exist. Thread-safe. */
void dispatcher_wake(struct dispatcher *d);

/* Aborts the in-flight call of run `run_id` if a worker of this process holds
 * it (the run is then settled cancelled). Thread-safe; `run_id` copied. */
void dispatcher_cancel(struct dispatcher *d, const char *run_id);

/* Graceful stop: workers stop claiming, let calls in flight finish for up to
 * `grace_ms`, abort the rest, settle what finished, release the claims they
 * could not settle, and exit. Blocks until every worker has exited. */
void dispatcher_stop(struct dispatcher *d, int grace_ms);

/* Stops claiming for good (calls in flight finish and settle): a newer
 * hookflow upgraded the database, so this binary's engine is gone (README,
 * "Versions and upgrades"). Any thread; idempotent. */
void dispatcher_refuse(struct dispatcher *d);

/* True once dispatcher_refuse was called. */
bool dispatcher_refusing(struct dispatcher *d);

/* Frees a stopped (or never started) dispatcher. NULL is a no-op. */
void dispatcher_free(struct dispatcher *d);

#endif
