/* db/jobs: the dispatcher's side of the run and callback tables: claim,
 * settle, renew leases, promote due jobs, reap expired leases. Each call is
 * one transaction (one SQL function of db/engine/).
 *
 * The contract with the engine is typed here: a claimed job is a struct
 * claimed_job, whose fields, SQL SELECT list and decoder all come from
 * JOB_COLUMNS; an ended call is a struct settlement, which db/jobs.c alone
 * encodes for the engine. */
#ifndef HOOKFLOW_DB_JOBS_H
#define HOOKFLOW_DB_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "db/db.h"

enum job_kind { JOB_STEP = 1, JOB_CALLBACK };

/* The columns of a claimed job, in the order of the SQL type hf_job
 * (migrations/0001_init.sql; later migrations add attributes at its end)
 * that hf_claim returns: X(name, type) where type
 * is KIND (enum job_kind), STR (owned char *, NULL for SQL NULL; JSON columns
 * come as their text), INT (int), I64 (int64_t) or BOOL (bool). */
#define JOB_COLUMNS(X)                                                                       \
	X(kind, KIND) /* step or callback; lost_step, lost_callback: see db_jobs_cycle */    \
	X(id, STR)    /* job id, sent as webhook-id */                                       \
	X(run_id, STR)                                                                       \
	X(workflow, STR)                                                                     \
	X(step, INT)    /* steps only */                                                     \
	X(attempt, INT) /* 1-based attempt now being made */                                 \
	X(max_attempts, INT)                                                                 \
	X(generation, INT)                                                                   \
	X(payload, STR)  /* JSON: the step payload, or the callback body */                  \
	X(headers, STR)  /* JSON (steps), NULL for callbacks */                              \
	X(signal, STR)   /* JSON or NULL */                                                  \
	X(group_id, STR) /* NULL unless a group member */                                    \
	X(group_key, STR)                                                                    \
	X(claim_token, I64)                                                                  \
	X(cancel_requested, BOOL)                                                            \
	X(url, STR)                                                                          \
	X(timeout_ms, INT)                                                                   \
	X(secret, STR) /* NULL: unsigned */                                                  \
	X(backoff_base_ms, I64)                                                              \
	X(backoff_max_ms, I64)                                                               \
	X(replay, BOOL)  /* the workflow keeps step-output replay records */                 \
	X(now_ms, I64)   /* the database's clock at claim time */                            \
	X(replayed, STR) /* JSON replay record {"outcome", "age_ms"} or NULL */              \
	/* the replaced secret, signing in a rotation's grace, or NULL */                    \
	X(secret_previous, STR)                                                              \
	X(concurrency_key, STR) /* the run's flow-control key, or NULL */                    \
	X(priority, INT)                                                                     \
	/* the endpoint whose allowance the call counts in (service/endpoints.h), or NULL */ \
	X(endpoint, STR)                                                                     \
	/* JSON: what the last unfinished attempt of this step reported, or NULL */          \
	X(last_heartbeat, STR)                                                               \
	X(max_pending_ms, I64) /* steps: the workflow's cap on a pending step */             \
	X(children, STR)       /* JSON: the children a wait for them ended with, or NULL */  \
	/* the run's trace (README "Traces"), a uuid's text: NULL for a run that  \
	 * ended before 0010 */          \
	X(trace_id, STR)                                                                     \
	X(tracestate, STR) /* the caller's W3C tracestate, or NULL */                        \
	/* first attempt of a step, on a connection that exports spans: when the wait   \
	 * before it began and when the step came due (epoch ms; 0: not known) */    \
	X(wait_from_ms, I64)                                                                 \
	X(due_ms, I64)

#define JOB_CTYPE_KIND enum job_kind
#define JOB_CTYPE_STR char *
#define JOB_CTYPE_INT int
#define JOB_CTYPE_I64 int64_t
#define JOB_CTYPE_BOOL bool
#define JOB_FIELD(name, type) JOB_CTYPE_##type name;

/* One claimed job. Every string is owned (malloc'd) by the struct. */
struct claimed_job {
	JOB_COLUMNS(JOB_FIELD)
	size_t payload_len; /* strlen(payload), 0 when it is NULL: set by the claim */
};

/* Frees what `j` owns and zeroes it. */
void db_claimed_job_cleanup(struct claimed_job *j);

/* How a job's call ended (db/engine/05_settle.sql settles each). */
enum settle_result {
	SETTLE_CONTINUE = 1, /* step: the next step, now, after delay_ms or after a signal */
	SETTLE_SUCCEED,      /* step: the run succeeds with `value` */
	SETTLE_FAIL,         /* step: the run fails with `reason`, no dead letter */
	SETTLE_CANCEL,       /* step: the webhook cancelled its run with `reason` */
	SETTLE_DELIVERED,    /* callback: acknowledged */
	SETTLE_TRANSIENT,    /* the call failed, may be retried after retry_delay_ms */
	SETTLE_PERMANENT,    /* the call failed for good */
	SETTLE_PENDING,      /* step: the call ended, the step stays open (timeout_ms) */
};

/* The engine's name of result `r` ("continue", ..., "ok" for a delivered
 * callback, "transient_error"): static storage. */
const char *db_settle_result_name(enum settle_result r);

/* One ended call of a claimed job, as the dispatcher hands it to the
 * engine. Owns its strings and JSON references (settlement_cleanup). */
struct settlement {
	enum job_kind kind;
	char *id;            /* the run id (steps) or the callback id */
	int64_t claim_token; /* the claim the call was made under */
	enum settle_result result;
	int http_status;        /* the answer's status, 0 when there was none */
	char *reason;           /* FAIL, CANCEL: the reason; TRANSIENT, PERMANENT: the error */
	int64_t retry_delay_ms; /* TRANSIENT; < 0: the workflow's backoff (db_jobs_complete) */
	json_t *payload;        /* CONTINUE: the next step's payload, or NULL when payload_text
				 * holds it */
	char *payload_text;     /* CONTINUE: or its JSON text, checked (malloc'd) */
	int64_t delay_ms;       /* CONTINUE: 0 for now */
	int64_t run_at_ms;      /* CONTINUE: > 0: at this time (epoch ms) instead of delay_ms */
	char *wait_key;         /* CONTINUE: wait for a signal on this key, or NULL */
	json_t *wait_keys;      /* CONTINUE: or on the first of these keys (a JSON array whose
				 * first is wait_key), or NULL */
	int64_t wait_timeout_ms;
	json_t *children;      /* CONTINUE: child runs to start and wait for (an array), or NULL */
	json_t *wait_children; /* with children: {"mode", "count", "timeout_ms"}, or NULL */
	int max_children;      /* with children: HOOKFLOW_MAX_CHILDREN */
	int max_depth;         /* with children: HOOKFLOW_MAX_CHILD_DEPTH */
	int64_t timeout_ms;    /* PENDING: how long the step may stay open */
	int64_t heartbeat_timeout_ms; /* PENDING: 0, or the most between heartbeats */
	json_t *value;          /* SUCCEED: the run's result, or NULL when value_text has it */
	char *value_text;       /* SUCCEED: or its JSON text, checked (malloc'd) */
	json_t *kv_put;         /* kv effects of an outcome ({key: value}), or NULL */
	json_t *kv_delete;      /* ([key, ...]), or NULL */
	json_t *replay_outcome; /* a step's validated outcome to keep for replay, or NULL */
	void *span; /* the dispatcher's settle span (malloc'd, freed with the settlement), or NULL */
	size_t size; /* the answer's bytes, which its texts come from (0: none) */
};

/* Frees what `s` owns and zeroes it. */
void settlement_cleanup(struct settlement *s);

/* A growable list of settlements; zero-initialised is empty. */
struct settlements {
	struct settlement *v;
	size_t n;
	size_t cap;
};

/* Moves *s to the end of `l` (s is zeroed). Returns false when out of
 * memory (s is then cleaned up: the job's lease expires and it is delivered
 * again). */
bool settlements_push(struct settlements *l, struct settlement *s);

/* Moves every item of `from` to the end of `to`. False when out of memory
 * (nothing moved). */
bool settlements_take(struct settlements *to, struct settlements *from);

/* Moves items from the front of `from` to the end of `to` while the sizes
 * of `to`'s items add up to at most `max_size`, and always one when `to` is
 * empty. False when out of memory (nothing moved). */
bool settlements_take_upto(struct settlements *to, struct settlements *from, size_t max_size);

/* How many jobs a claim asks for: `room`, at most `batch`, and at most as
 * many as `max_bytes` holds at `job_bytes` each (an estimate of a job's
 * size; 0: as many as `batch`), but at least one when room > 0. */
int claim_batch_size(int room, int batch, size_t job_bytes, size_t max_bytes);

/* Cleans up every item (the list stays allocated, empty). */
void settlements_clear(struct settlements *l);

/* Frees the list and its items; zeroed. */
void settlements_cleanup(struct settlements *l);

/* Where a claimer's previous claim stopped among the lanes of pending runs
 * (priority, workflow, concurrency key; hf_claim in db/engine/04_claim.sql):
 * the next claim takes the lanes in turn from there. Zeroed: from the start.
 * The strings are owned. */
struct claim_lane {
	bool set;
	int priority;
	char *workflow;
	char *key;
};

/* Frees what `l` owns and zeroes it. */
void claim_lane_cleanup(struct claim_lane *l);

/* One dispatcher cycle in one transaction (hf_cycle): settles `n` ended
 * calls `v` (borrowed; either kind, n may be 0; refused[i], when `refused`
 * is not NULL, is set to whether v[i] was refused because its claim was
 * lost, and ended[i], when `ended` is not NULL, to whether v[i] ended its
 * run), then claims up to `limit`
 * jobs (0: none) for `owner` with a lease of `lease_ms`, taking the lanes in
 * turn after `*lane`, which receives where this claim stopped (unchanged when
 * it took no step), and starting at most what `room` (borrowed JSON text
 * {"<endpoint>": n}, or NULL: no endpoint limited) allows per endpoint.
 * *jobs is a malloc'd
 * array of *njobs jobs (free each with db_claimed_job_cleanup, then the
 * array); *lost receives how many settlements were refused because their
 * claim had been lost (someone else owns the job now). On failure nothing
 * was settled or claimed. */
enum err_code db_jobs_cycle(struct db_conn *c, const struct settlement *v, size_t n, bool *refused,
			    bool *ended, const char *owner, int limit, int lease_ms,
			    struct claim_lane *lane, const char *room, struct claimed_job **jobs,
			    int *njobs, int *lost, struct err *e);

/* Settles `n` ended calls `v` (borrowed) in one transaction. *lost (may be
 * NULL) receives how many claims had been lost. */
enum err_code db_jobs_settle(struct db_conn *c, const struct settlement *v, size_t n, int *lost,
			     struct err *e);

/* Stores the replay records (replay_outcome) of the step settlements among
 * `v[0..n)` whose claim is still held, before they are settled, so a crash
 * in between replays the answer instead of calling again. */
enum err_code db_jobs_store_outputs(struct db_conn *c, const struct settlement *v, size_t n,
				    struct err *e);

/* Which attempt of a run a delivery token names (base/token.h). */
struct attempt_ref {
	const char *run_id; /* borrowed */
	int generation;
	int step;
	int attempt;
};

/* Settles attempt `a` of a step with `s` (borrowed; its kind, id and
 * claim_token are ignored) as if its webhook had answered it (hf_complete),
 * whether the step is pending or its call still in flight. On success *run
 * receives the run after settlement (a new reference). Errors:
 * ERR_NOT_FOUND (no such run), ERR_ALREADY_COMPLETED, ERR_STALE_ATTEMPT,
 * ERR_RUN_CANCELLED (a cancel ended or ends the run instead). */
enum err_code db_jobs_complete(struct db_conn *c, const struct attempt_ref *a,
			       const struct settlement *s, json_t **run, struct err *e);

/* Records a heartbeat of attempt `a` (hf_heartbeat): `details_json`
 * (borrowed JSON text, or NULL: none given) and, while the step is pending
 * with a heartbeat timeout, a new heartbeat deadline. *cancel_requested
 * says whether the run is being, or was, cancelled. Errors as for
 * db_jobs_complete, but a cancelled run is not one. */
enum err_code db_jobs_heartbeat(struct db_conn *c, const struct attempt_ref *a,
				const char *details_json, bool *cancel_requested, struct err *e);

/* Runs one retention pass (see hf_sweep); *n receives the larger of runs and
 * dead letters removed. */
enum err_code db_jobs_sweep(struct db_conn *c, int64_t retention_ms, int64_t dead_retention_ms,
			    int limit, int *n, struct err *e);

/* Extends every lease `owner` holds; calls fn(arg, kind, id, cancel_requested)
 * for each claim still held. */
enum err_code db_jobs_renew(struct db_conn *c, const char *owner, int lease_ms,
			    void (*fn)(void *arg, enum job_kind kind, const char *id,
				       bool cancel_requested),
			    void *arg, struct err *e);

/* Moves up to `limit` due scheduled jobs to pending; *n receives how many. */
enum err_code db_jobs_promote(struct db_conn *c, int limit, int *n, struct err *e);

/* The earliest due time of a scheduled job, a lease or a schedule's fire
 * time (epoch ms, on the database's clock; the schedules' clock runs
 * `clock_offset_ms` ahead of it, HOOKFLOW_CLOCK_OFFSET_MS); *has is false
 * when nothing is timed. *db_now_ms is the database's clock. */
enum err_code db_jobs_next_due(struct db_conn *c, int64_t clock_offset_ms, int64_t *due_ms,
			       bool *has, int64_t *db_now_ms, struct err *e);

/* Reaps up to `limit` expired claims (owner NULL) or every claim of `owner`;
 * *n receives how many. */
enum err_code db_jobs_reap(struct db_conn *c, const char *owner, int limit, int *n, struct err *e);

#endif
