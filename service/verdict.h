/* verdict: what a webhook's answer means. The status-class table of
 * docs/webhook-protocol.md (section 2), outcome-body parsing and validation
 * (section 3), the error-body override, Retry-After and the retry backoff.
 * Pure: no I/O, no clocks (callers pass `now`). */
#ifndef HOOKFLOW_VERDICT_H
#define HOOKFLOW_VERDICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "db/jobs.h"
#include "service/effects.h"

#define VERDICT_ERROR_BODY_BYTES 200
#define VERDICT_MAX_DELAY_MS (366LL * 24 * 3600 * 1000) /* delays and signal timeouts */
#define VERDICT_MAX_REASON_BYTES 4096
#define VERDICT_MAX_WAIT_KEYS 16   /* wait_for_signal.correlation_keys */
#define VERDICT_MAX_CHILDREN 10000 /* children: the most HOOKFLOW_MAX_CHILDREN may allow */

enum outcome_kind {
	OUTCOME_CONTINUE = 1,
	OUTCOME_SUCCEED,
	OUTCOME_FAIL,
	OUTCOME_CANCEL,
	OUTCOME_PENDING, /* a step answer only: the step stays open (README "Long-running steps") */
};
enum trigger_kind { TRIGGER_NOW = 0, TRIGGER_AFTER, TRIGGER_SIGNAL, TRIGGER_AT };

/* A validated step outcome. Every pointer is owned by the struct. */
struct outcome {
	enum outcome_kind kind;
	json_t *payload;    /* continue: next step's payload (JSON null when absent), or NULL
			  * when payload_text holds it */
	json_t *result;     /* succeed: the run's result (JSON null when absent), or NULL when
			  * result_text holds it */
	char *payload_text; /* continue: the payload as the body wrote it (malloc'd), when
			     * outcome_parse could pass it on without decoding it; else NULL */
	char *result_text;  /* succeed: the same for the result */
	char *reason;       /* fail, cancel: malloc'd text */
	enum trigger_kind trigger;
	int64_t delay_ms;         /* TRIGGER_AFTER: 0..VERDICT_MAX_DELAY_MS */
	int64_t run_at_ms;        /* TRIGGER_AT: epoch ms ("run_at", RFC 3339) */
	char *correlation_key;    /* TRIGGER_SIGNAL: malloc'd, passes ids_check_key; the first
				* of correlation_keys when those were given */
	json_t *correlation_keys; /* TRIGGER_SIGNAL: the keys when several were given (an
				   * array of 1..VERDICT_MAX_WAIT_KEYS distinct keys), else NULL */
	int64_t timeout_ms;       /* TRIGGER_SIGNAL: 1..VERDICT_MAX_DELAY_MS; PENDING: 0 (absent)
				* or 1..VERDICT_MAX_DELAY_MS */
	int64_t heartbeat_timeout_ms; /* PENDING: 0 (absent) or 1..VERDICT_MAX_DELAY_MS */
	json_t *children;      /* CONTINUE: the child runs to start (a validated array), or NULL */
	json_t *wait_children; /* with children: {"mode", "count", "timeout_ms"} as given, or NULL */
	struct effects kv;     /* optional "kv" effects (never with PENDING) */
};

/* Parses and validates an outcome body (`body` of `len` bytes, borrowed, need
 * not be NUL-terminated) into `out`. A payload or result comes back as the
 * text it was in the body when jsonscan vouches for the body (the common
 * case: a large payload is then never decoded and encoded again), else
 * decoded. Accepted shapes (unknown keys rejected):
 *   {"outcome":"continue","payload":J}                       TRIGGER_NOW
 *   {"outcome":"continue","payload":J,"delay_ms":N}          TRIGGER_AFTER (N >= 0; 0 means now)
 *   {"outcome":"continue","payload":J,"run_at":"<RFC 3339>"} TRIGGER_AT
 *   {"outcome":"continue","payload":J,"wait_for_signal":{"correlation_key":K,"timeout_ms":N}}
 *       (or "correlation_keys":[K, ...]: the first signal on any of them)
 *   {"outcome":"continue","payload":J,"children":[{"key","workflow","input","headers",
 *       "concurrency_key"}, ...],"wait_for_children":{"mode","count","timeout_ms"}}
 *   {"outcome":"succeed","result":J}
 *   {"outcome":"fail","reason":S}   {"outcome":"cancel","reason":S}
 *   {"outcome":"pending","timeout_ms":N,"heartbeat_timeout_ms":H}  (both optional)
 * each but pending with an optional "kv" (see effects_parse). delay_ms,
 * run_at and wait_for_signal are exclusive. On failure `out` is zeroed and ERR_INVALID carries a message
 * naming the field ("outcome: must be one of continue, succeed, fail, cancel"). */
enum err_code outcome_parse(const char *body, size_t len, struct outcome *out, struct err *e);

/* Same as outcome_parse, for an already-decoded JSON object (borrowed). */
enum err_code outcome_from_json(const json_t *obj, struct outcome *out, struct err *e);

/* Encodes `o` back to the JSON shape outcome_parse accepts (new reference);
 * NULL for a pending outcome (never replayed) or when out of memory. */
json_t *outcome_to_json(const struct outcome *o);

/* Fills the outcome's part of step settlement `s` from `o`: result,
 * payload, delay_ms or run_at_ms, wait, value, reason, kv, and for a pending
 * outcome its timeouts, each capped at `max_pending_ms` (the timeout
 * defaulting to it). `s` takes o's payload and result texts (o is left with
 * NULL in their place: with large payloads, a copy of each was a tenth of
 * the dispatcher's copying) and its own references and copies of the rest.
 * False when out of memory (what was set stays for settlement_cleanup). */
bool outcome_settlement(struct outcome *o, int64_t max_pending_ms, struct settlement *s);

#define VERDICT_MAX_HEADERS 64
#define VERDICT_MAX_HEADER_NAME 256
#define VERDICT_MAX_HEADER_VALUE 4096

/* Validates user headers named `field` (a run's, a group member's, a child
 * run's): an object of at most 64 string values of at most 4096 bytes;
 * names of 1..256 bytes that do not start with the reserved "workflow."
 * prefix. */
enum err_code verdict_check_headers(const char *field, const json_t *h, struct err *e);

/* Frees what `o` owns and zeroes it. A zeroed struct is a no-op. */
void outcome_cleanup(struct outcome *o);

/* What the HTTP layer observed for one webhook call. All pointers borrowed. */
struct call_result {
	int transport_error;        /* 0 when a complete HTTP response arrived */
	const char *transport_msg;  /* human text for a transport error ("Connection refused") */
	bool timed_out;             /* the call hit its deadline */
	int64_t timeout_ms;         /* the deadline used, for the message */
	bool too_large;             /* the body exceeded the response cap */
	int64_t max_response_bytes; /* the cap, for the message */
	long status;                /* HTTP status when transport_error == 0 */
	const char *body;           /* response body (possibly truncated copy) */
	size_t body_len;
	const char *retry_after; /* raw Retry-After header value, or NULL */
	const char *refused;     /* the address policy refused the connection: why */
};

enum verdict_kind { VERDICT_OK = 1, VERDICT_TRANSIENT, VERDICT_PERMANENT };

struct verdict {
	enum verdict_kind kind;
	struct outcome outcome; /* VERDICT_OK of a step call: the parsed outcome */
	char error[512];        /* errors: the run's error text */
	int64_t retry_after_ms; /* transient with a usable Retry-After: the delay; else -1 */
};

/* Classifies one call (docs/webhook-protocol.md, section 2):
 *  - an address the egress policy refused: permanent;
 *  - transport errors (refused, DNS, TLS, reset) and timeouts: transient;
 *  - too_large: permanent "response body exceeds N bytes";
 *  - 2xx: when `expect_outcome` (a step call) the body must parse as an
 *    outcome, else permanent "invalid step response: <reason>"; for a callback
 *    (`expect_outcome` false) any 2xx is VERDICT_OK;
 *  - 3xx: permanent; 408, 425, 429, 5xx: transient; other 4xx (and 1xx):
 *    permanent;
 *  - a non-2xx body {"error":{"message":S,"retryable":B}} overrides the class
 *    with B (S a string, B a boolean; other members are tolerated; any other
 *    body leaves the status class alone);
 *  - error text "HTTP <status>: <first 200 bytes of the body>" (cut on a UTF-8
 *    boundary, invalid bytes and NUL replaced with U+FFFD, trailing white space
 *    dropped; just "HTTP <status>" for an empty body), "timed out after N ms",
 *    or "connection failed: <transport text>";
 *  - Retry-After (delta-seconds or HTTP-date relative to `now_ms`) sets
 *    retry_after_ms on transient errors.
 * `v` is overwritten; release it with verdict_cleanup. */
void verdict_from_call(const struct call_result *r, bool expect_outcome, int64_t now_ms,
		       struct verdict *v);

/* Frees what `v` owns. */
void verdict_cleanup(struct verdict *v);

/* Parses a Retry-After value: delta-seconds (non-negative integer) or an
 * HTTP-date, relative to `now_ms`. A date in the past gives 0. Returns false
 * for anything else (the header is then ignored). */
bool verdict_parse_retry_after(const char *value, int64_t now_ms, int64_t *delay_ms);

/* The retry delay after failed attempt `attempt` (1-based):
 * min(base_ms * 2^(attempt-1), max_ms), without overflow; 0 when base_ms is 0. */
int64_t verdict_backoff_ms(int64_t base_ms, int64_t max_ms, int attempt);

/* The delay before the next attempt of a transient error: the Retry-After
 * delay capped at max_ms when there is one, otherwise verdict_backoff_ms. */
int64_t verdict_retry_delay_ms(const struct verdict *v, int64_t base_ms, int64_t max_ms,
			       int attempt);

#endif
