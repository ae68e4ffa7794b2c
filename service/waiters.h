/* waiters: long-poll registrations keyed by run id. A request that waits for a
 * run registers here with a deadline and a fire callback; the listener fires
 * every waiter of a run when its termination is NOTIFYed, and fires expired
 * waiters on its timer. Thread-safe. No database connection is held while
 * waiting. */
#ifndef HOOKFLOW_WAITERS_H
#define HOOKFLOW_WAITERS_H

#include <stdint.h>

struct waiters;
struct waiter;

typedef void (*waiter_fire_fn)(void *arg);

struct waiters *waiters_new(void);
void waiters_free(struct waiters *ws);

/* Registers a waiter on `key` (copied) until `deadline_ms` (monotonic).
 * `fire(arg)` is called exactly once, from the thread that fires it (with no
 * lock held), unless waiters_cancel returns true first. Returns the waiter's
 * id: never 0, never reused by this table. 0 when out of memory. */
uint64_t waiters_add(struct waiters *ws, const char *key, int64_t deadline_ms, waiter_fire_fn fire,
		     void *arg);

/* Removes the waiter `id` if it has not fired. Returns true when it was
 * removed (fire will not be called), false when it already fired (or is
 * firing). The caller holds only the id, never the waiter: a waiter that
 * another thread is firing and freeing is never touched, and no other waiter
 * can be taken for it. */
int waiters_cancel(struct waiters *ws, uint64_t id);

/* Fires every waiter on `key`. */
void waiters_notify(struct waiters *ws, const char *key);

/* Fires every waiter (e.g. after the notification channel was lost). */
void waiters_notify_all(struct waiters *ws);

/* Fires waiters whose deadline is <= now_ms; returns the next deadline
 * (monotonic ms) or -1 when none is registered. */
int64_t waiters_expire(struct waiters *ws, int64_t now_ms);

#endif
