/* db/run: the run table seen from the API: submit, read, history, list, cancel. */
#ifndef HOOKFLOW_DB_RUN_H
#define HOOKFLOW_DB_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/trace.h"
#include "db/db.h"

/* A validated submission; every pointer borrowed. */
struct run_submit {
	const char *run_id;
	const char *workflow;
	const char *input_json; /* JSON text of the input ("null" when absent) */
	unsigned char input_hash[32];
	const char *headers_json;    /* JSON object text */
	int priority;                /* -1: the workflow's */
	int max_attempts;            /* -1: the workflow's */
	int64_t delay_ms;            /* -1: none */
	const char *run_at;          /* RFC 3339, or NULL */
	const char *callback_url;    /* NULL: the workflow's */
	const char *kv_json;         /* validated effects JSON, or NULL */
	const char *concurrency_key; /* the flow-control key (ids_check_concurrency_key), or NULL */
	const char *group_id;        /* NULL unless a group member */
	const char *group_key;
	const struct trace_parent *trace; /* the caller's valid traceparent, or NULL: a new trace */
};

/* RUN_SKIPPED: key_mode skip, the key has an active run (run_json is it). */
enum run_submit_result { RUN_CREATED = 1, RUN_DUPLICATE, RUN_SKIPPED };

/* The batch item of submission `s` for db_run_submit_many: a malloc'd JSON
 * text the caller frees, or NULL when out of memory. Pure. */
char *db_run_submit_item(const struct run_submit *s);

/* What became of one submission: created or duplicate with the run's JSON
 * text as it stands (malloc'd, the caller frees it), or an error:
 * ERR_NOT_FOUND (unknown workflow), ERR_INPUT_MISMATCH. */
struct run_submit_answer {
	enum run_submit_result res;
	char *run_json;
	struct err err;
};

/* Submits the `n` runs of `items` (texts of db_run_submit_item, borrowed) in
 * one transaction, in order, and writes each one's fate to answers[i]. When
 * the batch fails as a whole (nothing was submitted) returns that error and
 * leaves `answers` untouched. */
enum err_code db_run_submit_many(struct db_conn *c, char *const *items, int n,
				 struct run_submit_answer *answers, struct err *e);

/* The JSON of run `run_id` (new reference) and whether it is terminal, or
 * ERR_NOT_FOUND. `terminal` may be NULL. */
enum err_code db_run_get(struct db_conn *c, const char *run_id, json_t **out, bool *terminal,
			 struct err *e);

/* db_run_get's run as the JSON text PostgreSQL wrote (malloc'd, the
 * caller's), for a reply that passes it on without decoding its input and
 * result. */
enum err_code db_run_get_text(struct db_conn *c, const char *run_id, char **out, bool *terminal,
			      struct err *e);

/* One page (`pg`, borrowed) of the attempt history of run `run_id`, oldest
 * first, into *out (the caller owns it: db_page_cleanup; zeroed on failure).
 * ERR_NOT_FOUND when the run does not exist, ERR_INVALID for a malformed
 * cursor. */
enum err_code db_run_steps(struct db_conn *c, const char *run_id, const struct db_page_req *pg,
			   struct db_page *out, struct err *e);

/* A page of the child runs run `run_id` started (README "Child runs"), by
 * generation, step and key: *out as for db_run_steps. ERR_NOT_FOUND when
 * the run does not exist. */
enum err_code db_run_children(struct db_conn *c, const char *run_id, const struct db_page_req *pg,
			      struct db_page *out, struct err *e);

struct run_filter {
	const char *workflow;        /* NULL: any */
	const char *statuses;        /* Postgres array literal "{a,b}", or NULL */
	const char *group_id;        /* NULL: any */
	const char *concurrency_key; /* NULL: any */
	const char *created_after;   /* RFC 3339 or NULL */
	const char *created_before;  /* RFC 3339 or NULL */
};

/* One page (`pg`, borrowed) of the runs matching `f` (borrowed), newest
 * first, into *out (the caller owns it: db_page_cleanup; zeroed on failure). */
enum err_code db_run_list(struct db_conn *c, const struct run_filter *f,
			  const struct db_page_req *pg, struct db_page *out, struct err *e);

enum run_cancel_result { RUN_CANCELLED = 1, RUN_CANCELLING };

/* Cancels run `run_id` (docs/run-states.md): a queued step is removed and the run ends
 * cancelled (RUN_CANCELLED), or a running one is marked and its call aborted
 * (RUN_CANCELLING). *run is the run's JSON afterwards (new reference).
 * Errors: ERR_NOT_FOUND, ERR_ALREADY_TERMINAL. */
enum err_code db_run_cancel(struct db_conn *c, const char *run_id, enum run_cancel_result *res,
			    json_t **run, struct err *e);

/* Starts a new generation of terminated run `run_id` at `from_step` (docs/run-states.md).
 * `input_json` (with its hash) replaces the input, only with step 0 (NULL:
 * keep). *run is the run's JSON afterwards. Errors: ERR_NOT_FOUND,
 * ERR_RUN_ACTIVE, ERR_INVALID when the run never reached `from_step`. */
enum err_code db_run_rerun(struct db_conn *c, const char *run_id, int from_step,
			   const char *input_json, const unsigned char *input_hash, json_t **run,
			   struct err *e);

/* Cancels up to `limit` active runs matching the filters (NULL: any); *n
 * receives how many. */
enum err_code db_run_cancel_many(struct db_conn *c, const char *workflow, const char *statuses,
				 const char *group_id, const char *created_before, int limit,
				 int *n, struct err *e);

#endif
