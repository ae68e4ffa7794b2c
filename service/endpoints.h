/* endpoints: what one hookflow instance has learnt about each webhook
 * endpoint that pushes back (issue 14, item 6). An endpoint is a webhook
 * origin, "scheme://host:port" in lower case, given by the caller and shared
 * by every workflow that calls it. Per endpoint the table keeps an in-flight
 * allowance (AIMD, like a TCP congestion window) and a circuit breaker.
 *
 * Pure logic: no I/O and no clock. Every function takes `now_ms`, the
 * caller's monotonic clock in milliseconds (timefmt_mono_ms), and every time
 * it returns is on that clock. Instances do not share this state: independent
 * AIMD senders converge on a shared bottleneck the way TCP flows do.
 *
 * Threads: every function may be called from any thread; one mutex inside the
 * table serializes them (the dispatcher's database thread asks for room, its
 * I/O thread reports starts and ends, HTTP handlers take snapshots). No
 * function calls back into the caller, and none blocks on anything but that
 * mutex.
 *
 * The contract, per endpoint:
 *
 * Room. endpoints_room says how many NEW calls may start now:
 *  - ENDPOINTS_UNLIMITED when the endpoint is unknown or unconstrained: the
 *    allowance is at the cap (max_inflight), the breaker is closed and no
 *    Retry-After pause holds;
 *  - 0 while a Retry-After pause holds or while the breaker is open;
 *  - max(0, 1 - calls in flight) while the breaker is half-open (one probe);
 *  - otherwise max(0, floor(allowance) - calls in flight).
 * Room is advice read before a claim: calls started by other threads between
 * endpoints_room and endpoints_started are not reserved, so two claims that
 * read the same room may both use it (the next answers correct it).
 *
 * Calls. endpoints_started counts calls in flight and hands out a token; each
 * of those calls is reported exactly once to endpoints_finished with that
 * token and one result:
 *  - ENDPOINT_SUCCESS: any answer that is none of the others (2xx, 3xx, 4xx
 *    other than 429, a body too large);
 *  - ENDPOINT_THROTTLED: HTTP 429: cuts the allowance, honours Retry-After;
 *    the breaker neither counts it nor resets its count (the endpoint is up);
 *  - ENDPOINT_UNAVAILABLE: HTTP 503: throttles like a 429 AND counts as a
 *    breaker failure (a 503 is also what a proxy answers for a service that
 *    is down; the issue names 503 among the answers that cut and 5xx among
 *    those that open the breaker);
 *  - ENDPOINT_FAILURE: a connection error, a timeout, or a 5xx other than 503;
 *  - ENDPOINT_IGNORED: the call says nothing about the endpoint (cancelled,
 *    interrupted by a drain, refused by the egress policy before any
 *    connection): only the in-flight count changes.
 * endpoints_result_of_call maps a webhook client's call_result to these.
 *
 * Allowance (AIMD). A new endpoint starts unconstrained (allowance = cap,
 * slow-start threshold = cap).
 *  - A throttle (429 or 503) cuts: allowance = max(1, min(allowance, calls in
 *    flight at that moment, the throttled call included) / 2), and the
 *    slow-start threshold becomes that new allowance. One cut per round trip:
 *    a cut opens a new epoch and only a throttled call that started in the
 *    current epoch (after the last cut) cuts again, so when the calls started
 *    under one allowance all answer 429 together the allowance is cut once.
 *  - A Retry-After (retry_after_ms >= 0) on a throttle pauses the endpoint:
 *    no new call until now + min(retry_after_ms, ENDPOINTS_MAX_PAUSE_MS); a
 *    later pause extends, never shortens, the one in force.
 *  - A success while the breaker is closed grows the allowance: +1 while it
 *    is below the slow-start threshold, never past it (slow start: it doubles
 *    per round trip), +1/(ENDPOINTS_AVOIDANCE_DIVISOR x allowance) from there
 *    on (congestion avoidance: +1/4 per round trip, so near a ceiling it
 *    creeps up and overshoots rarely). When the allowance reaches the cap the
 *    endpoint is unconstrained again.
 *  - Calm: when a success finds the allowance in congestion avoidance and
 *    ENDPOINTS_CALM_MS passed since the last cut (or breaker close, or calm),
 *    the slow-start threshold is raised to min(cap, 2 x allowance): the
 *    allowance may double once more per calm period, so an endpoint that
 *    pushed back once climbs back to the cap in minutes rather than the tens
 *    of thousands of round trips that +1/4 per round trip would take.
 *
 * Circuit breaker (closed -> open -> half-open -> closed or open).
 *  - Failures (ENDPOINT_FAILURE, ENDPOINT_UNAVAILABLE) are counted in runs: a
 *    success ends the run; a failure more than breaker_window_ms after the
 *    first failure of the run starts a new run of 1. When a run reaches
 *    breaker_threshold failures (so all of them within breaker_window_ms of
 *    its first and none separated by a success) the breaker opens.
 *  - Open: no call for the cool-down (cooldown_ms the first time). Calls
 *    already in flight just finish: results of calls started before the
 *    breaker last changed state are not counted by it.
 *  - Then half-open: one probe call (the first started). Its success closes
 *    the breaker: the cool-down goes back to cooldown_ms, and the allowance
 *    restarts at 1 in slow start up to the allowance it had when the breaker
 *    opened (so a recovering endpoint is not hit by the whole backlog at
 *    once). Its failure opens the breaker again with the cool-down doubled, up
 *    to cooldown_max_ms. A probe that is throttled (429) or ignored neither
 *    closes nor reopens: the next call started is the probe.
 *
 * Recent error rate: the fraction of calls (ignored ones left out) that ended
 * throttled or failed over the last minute, kept in ENDPOINTS_RATE_BUCKETS
 * buckets of ENDPOINTS_RATE_BUCKET_MS: it covers the current bucket and the 5
 * before it, so between 50 and 60 seconds.
 *
 * Bounded memory: at most ENDPOINTS_MAX_TRACKED endpoints. When the table is
 * full and a call starts to a new origin, the least recently active idle
 * endpoint is forgotten: idle means nothing in flight, breaker closed, no
 * pause, and either unconstrained or without any call started or finished for
 * ENDPOINTS_FORGET_MS. With none idle, the new origin is not tracked (its
 * calls go ahead unlimited; endpoints_started says so). Forgetting an
 * endpoint drops its counters.
 *
 * Disabled (config.enabled false): every endpoint always has unlimited room,
 * nothing is tracked and snapshots are empty. */
#ifndef HOOKFLOW_ENDPOINTS_H
#define HOOKFLOW_ENDPOINTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "service/verdict.h"

/* Room for an endpoint that this table does not limit. INT_MAX rather than a
 * negative sentinel, so that min(batch, room) is right without a test. */
#define ENDPOINTS_UNLIMITED INT_MAX

#define ENDPOINTS_MAX_TRACKED 4096
#define ENDPOINTS_ORIGIN_BYTES 300 /* "https://" + a 253-byte host + ":65535", with room */
#define ENDPOINTS_ERROR_BYTES 200  /* the last error text kept, cut on a character */
#define ENDPOINTS_MAX_PAUSE_MS (10LL * 60 * 1000) /* the longest Retry-After honoured */
/* +1/(4 x allowance) per success above the slow-start threshold. Against an
 * endpoint that answers 429 above 5 calls in flight (the simulation of
 * tests/unit/test_endpoints.c), 1 (TCP's Reno) throttles 6.5% of calls, 2
 * throttles 3.5%, 4 throttles 1.8% with a mean of 4.1 in flight. */
#define ENDPOINTS_AVOIDANCE_DIVISOR 4
#define ENDPOINTS_CALM_MS 30000                /* no cut for this long: the allowance may double */
#define ENDPOINTS_FORGET_MS (10LL * 60 * 1000) /* idle this long: a limited endpoint may go */
#define ENDPOINTS_RATE_BUCKETS 6
#define ENDPOINTS_RATE_BUCKET_MS 10000

/* Bounds endpoints_new enforces. */
#define ENDPOINTS_MAX_INFLIGHT_LIMIT 1000000
#define ENDPOINTS_MAX_THRESHOLD 1000000
#define ENDPOINTS_MAX_DURATION_MS (24LL * 3600 * 1000)

struct endpoints_config {
	bool enabled;              /* false: unlimited room, nothing tracked */
	int max_inflight;          /* the allowance's cap: 1..ENDPOINTS_MAX_INFLIGHT_LIMIT */
	int breaker_threshold;     /* failures in a run that open: 1..ENDPOINTS_MAX_THRESHOLD */
	int64_t breaker_window_ms; /* a run's span: 1..ENDPOINTS_MAX_DURATION_MS */
	int64_t cooldown_ms;       /* the first cool-down: 1..ENDPOINTS_MAX_DURATION_MS */
	int64_t cooldown_max_ms;   /* the doubling's cap: cooldown_ms..ENDPOINTS_MAX_DURATION_MS */
};

enum endpoint_result {
	ENDPOINT_SUCCESS = 1,
	ENDPOINT_THROTTLED,   /* 429 */
	ENDPOINT_UNAVAILABLE, /* 503 */
	ENDPOINT_FAILURE,     /* connection error, timeout, other 5xx */
	ENDPOINT_IGNORED,     /* cancelled, drained, refused before connecting */
};

enum endpoint_state { ENDPOINT_CLOSED = 1, ENDPOINT_OPEN, ENDPOINT_HALF_OPEN };

/* One endpoint as endpoints_snapshot saw it. Owns nothing outside itself. */
struct endpoint_info {
	char origin[ENDPOINTS_ORIGIN_BYTES + 1];
	enum endpoint_state state;
	double allowance;        /* the cap when unconstrained */
	bool unconstrained;      /* room is ENDPOINTS_UNLIMITED (pause and breaker aside) */
	int room;                /* what endpoints_room would answer now */
	int inflight;            /* calls in flight */
	int64_t paused_until_ms; /* a Retry-After pause in force until then, else 0 */
	int64_t open_until_ms;   /* open: the cool-down ends (half-open) then, else 0 */
	int64_t cooldown_ms;     /* the cool-down the next opening (or this one) lasts */
	double error_rate;       /* 0..1 over the last minute; 0 without calls */
	uint64_t recent_calls;   /* the calls that rate is over */
	char last_error[ENDPOINTS_ERROR_BYTES + 1]; /* "" when none yet */
	int64_t last_error_ms;                      /* when (0 when none) */
	/* Counters since the endpoint was first tracked (for /metrics). */
	uint64_t calls;         /* finished calls, ignored ones left out */
	uint64_t throttled;     /* throttled or unavailable (429, 503) */
	uint64_t failures;      /* counted by the breaker (503, errors, other 5xx) */
	uint64_t breaker_opens; /* times the breaker opened, reopenings included */
};

/* One endpoint whose room is limited now (see endpoints_limited). */
struct endpoint_room {
	char origin[ENDPOINTS_ORIGIN_BYTES + 1];
	int room; /* 0..max_inflight, never ENDPOINTS_UNLIMITED */
	/* When a room of 0 ends by itself (a Retry-After pause or the breaker's
	 * cool-down running out; monotonic ms), 0 when only an ending call
	 * frees it. */
	int64_t reopen_ms;
};

struct endpoints;

/* The defaults: enabled, max_inflight 10000, breaker_threshold 10,
 * breaker_window_ms 10000, cooldown_ms 1000, cooldown_max_ms 60000. */
struct endpoints_config endpoints_config_default(void);

/* A new, empty table for `cfg` (copied). NULL with ERR_INVALID naming the
 * field when a value is out of its range (checked even when disabled), or
 * ERR_INTERNAL when out of memory. Release with endpoints_free. */
struct endpoints *endpoints_new(const struct endpoints_config *cfg, struct err *e);

/* Frees the table. No other thread may still use it. NULL is a no-op. */
void endpoints_free(struct endpoints *eps);

/* How many new calls to `origin` (borrowed) may start now: see "Room" above.
 * Unknown or invalid origins get ENDPOINTS_UNLIMITED. */
int endpoints_room(struct endpoints *eps, const char *origin, int64_t now_ms);

/* Records `n` (>= 1) calls to `origin` (borrowed, copied when new) started
 * now, and sets *token to the value each of them hands back to
 * endpoints_finished. *token 0 means "not tracked": finishing with it does
 * nothing. Errors (the calls may still go ahead, untracked; *token is 0):
 * ERR_INVALID for an empty origin, one longer than ENDPOINTS_ORIGIN_BYTES or
 * an n out of range; ERR_UNAVAILABLE when the table is full and no endpoint
 * is idle; ERR_INTERNAL when out of memory. Disabled: ERR_OK, *token 0. */
enum err_code endpoints_started(struct endpoints *eps, const char *origin, int n, int64_t now_ms,
				uint64_t *token, struct err *e);

/* Records the end of one call to `origin` (borrowed) started with `token`.
 * `retry_after_ms` is the Retry-After delay the answer carried (>= 0), else
 * -1; it is used for ENDPOINT_THROTTLED and ENDPOINT_UNAVAILABLE only.
 * `error` (borrowed, NULL allowed) is the call's error text, kept (cut to
 * ENDPOINTS_ERROR_BYTES) as the endpoint's last error for every result but
 * success and ignored. Token 0 and unknown origins are no-ops. */
void endpoints_finished(struct endpoints *eps, const char *origin, uint64_t token,
			enum endpoint_result r, int64_t retry_after_ms, const char *error,
			int64_t now_ms);

/* Every tracked endpoint, sorted by origin: *out is a malloc'd array of *n
 * entries that the caller owns and releases with endpoints_snapshot_free
 * (NULL with *n 0 when none). ERR_INTERNAL when out of memory (*out NULL,
 * *n 0). */
enum err_code endpoints_snapshot(struct endpoints *eps, int64_t now_ms, struct endpoint_info **out,
				 size_t *n, struct err *e);

/* Releases a snapshot. NULL is a no-op. */
void endpoints_snapshot_free(struct endpoint_info *list);

/* Every tracked endpoint whose room is not ENDPOINTS_UNLIMITED now, with that
 * room (for a claim that takes many endpoints at once): *out is a malloc'd
 * array of *n entries the caller owns and releases with free() (NULL with *n
 * 0 when none). ERR_INTERNAL when out of memory (*out NULL, *n 0). */
enum err_code endpoints_limited(struct endpoints *eps, int64_t now_ms, struct endpoint_room **out,
				size_t *n, struct err *e);

/* "closed", "open" or "half_open" (static strings); "unknown" otherwise. */
const char *endpoint_state_name(enum endpoint_state s);

/* The result a webhook call `r` (borrowed) means for its endpoint: refused by
 * the egress policy: ignored; timeout or transport error: failure; 429:
 * throttled; 503: unavailable; another 5xx: failure; anything else
 * (including a body too large): success. A call the dispatcher aborted
 * (cancel, drain) is ENDPOINT_IGNORED whatever this says: the caller knows. */
enum endpoint_result endpoints_result_of_call(const struct call_result *r);

#endif
