/* db/jobs: the dispatcher's side of the run and callback tables: claim, settle,
 * renew leases, promote due jobs, reap expired leases. Each call is one
 * transaction (one SQL function of migrations/). */
#ifndef HOOKFLOW_DB_JOBS_H
#define HOOKFLOW_DB_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "db/db.h"

enum job_kind { JOB_STEP = 1, JOB_CALLBACK };

/* One claimed job. Every string is owned (malloc'd) by the struct. */
struct claimed_job {
	enum job_kind kind;
	char *id; /* job id, sent as webhook-id */
	char *run_id;
	char *workflow;
	int step;    /* steps only */
	int attempt; /* 1-based attempt now being made */
	int max_attempts;
	int generation;
	char *payload;  /* JSON text: the step payload, or the callback body */
	char *headers;  /* JSON text (steps), NULL for callbacks */
	char *signal;   /* JSON text or NULL */
	char *group_id; /* NULL unless a group member */
	char *group_key;
	int64_t claim_token;
	bool cancel_requested;
	char *url;
	int timeout_ms;
	char *secret; /* NULL: unsigned */
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	bool replay;
	int64_t now_ms; /* the database's clock at claim time */
	char *replayed; /* replay record {"outcome", "age_ms"} (JSON text) or NULL */
};

/* Frees what `j` owns and zeroes it. */
void db_claimed_job_cleanup(struct claimed_job *j);

/* One dispatcher cycle in one transaction (hf_cycle): settles the step calls
 * in `steps` and the callback calls in `callbacks` (borrowed JSON arrays, as
 * hf_settle_steps / hf_settle_callbacks take them; either may be empty), then
 * claims up to `limit` jobs (0: none) for `owner` with a lease of `lease_ms`.
 * *jobs is a malloc'd array of *n jobs (free each with db_claimed_job_cleanup,
 * then the array); *lost receives how many settlements were refused because
 * their claim had been lost (someone else owns the job now). On failure
 * nothing was settled or claimed. */
enum err_code db_jobs_cycle(struct db_conn *c, const json_t *steps, const json_t *callbacks,
			    const char *owner, int limit, int lease_ms, struct claimed_job **jobs,
			    int *n, int *lost, struct err *e);

/* Settles step calls (kind JOB_STEP) or callback calls (JOB_CALLBACK) in one
 * transaction. `items` (borrowed) is the JSON array hf_settle_steps /
 * hf_settle_callbacks take. *lost (may be NULL) receives how many claims had
 * been lost (settled by nobody: someone else owns the job now). */
enum err_code db_jobs_settle(struct db_conn *c, enum job_kind kind, const json_t *items, int *lost,
			     struct err *e);

/* Stores step-output replay records for claims still held. `items` is the JSON
 * array hf_store_outputs takes: [{"run_id", "claim_token", "outcome"}]. */
enum err_code db_jobs_store_outputs(struct db_conn *c, const json_t *items, struct err *e);

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

/* The earliest due time of a scheduled job or a lease (epoch ms); *has is
 * false when nothing is timed. *db_now_ms is the database's clock. */
enum err_code db_jobs_next_due(struct db_conn *c, int64_t *due_ms, bool *has, int64_t *db_now_ms,
			       struct err *e);

/* Reaps up to `limit` expired claims (owner NULL) or every claim of `owner`;
 * *n receives how many. */
enum err_code db_jobs_reap(struct db_conn *c, const char *owner, int limit, int *n, struct err *e);

/* The key that signs memo delivery tokens (shared by every instance): copies
 * up to `cap` bytes into `out`, *len receives the length. */
enum err_code db_jobs_memo_key(struct db_conn *c, unsigned char *out, size_t cap, size_t *len,
			       struct err *e);

#endif
