/* listener: the thread that hears the database. It holds a LISTEN connection
 * (wake-ups, cancels, terminations, schedule changes), sleeps until the next
 * due time (a delayed step, a retry backoff, an expiring lease or a long-poll
 * deadline), then promotes due jobs, reaps expired leases and fires waiters.
 * There is no polling per job: one timer for the earliest due time, plus a
 * HOOKFLOW_POLL_MS safety re-check. */
#ifndef HOOKFLOW_LISTENER_H
#define HOOKFLOW_LISTENER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "service/dispatcher.h"
#include "service/keyring.h"
#include "service/waiters.h"

struct listener;

/* All arguments borrowed; they must outlive the listener. `keys` is
 * reloaded from the database when `hookflow rotate-keys` announces new keys
 * (NOTIFY hookflow_keys) and after a reconnect. */
struct listener *listener_new(const struct config *cfg, struct dispatcher *d, struct waiters *ws,
			      struct keyring *keys);

enum err_code listener_start(struct listener *l, struct err *e);

/* Registers a long-poll waiter (see waiters_add: returns its id, 0 when out
 * of memory) and makes the listener account for its deadline. */
uint64_t listener_wait(struct listener *l, const char *run_id, int64_t deadline_ms,
		       waiter_fire_fn fire, void *arg);

/* Withdraws the waiter `id` registered with listener_wait; see
 * waiters_cancel. */
int listener_unwait(struct listener *l, uint64_t id);

/* True while the LISTEN connection is up. */
bool listener_connected(const struct listener *l);

/* Shutting down: fires every long-poll waiter, and from now on
 * listener_closing is true, so that a long-poll answers with what it waits
 * for as it stands instead of waiting again. (A reconnect of the LISTEN
 * connection also fires every waiter, since a termination may have been
 * missed: a long-poll then reads again and, when its wait is not over,
 * waits again.) */
void listener_close_waits(struct listener *l);

/* True once listener_close_waits was called. */
bool listener_closing(const struct listener *l);

/* Stops and joins the thread. */
void listener_stop(struct listener *l);

void listener_free(struct listener *l);

#endif
