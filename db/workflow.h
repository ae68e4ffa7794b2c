/* db/workflow: the workflow table (registered webhooks and their settings). */
#ifndef HOOKFLOW_DB_WORKFLOW_H
#define HOOKFLOW_DB_WORKFLOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "db/db.h"

/* A validated workflow definition; strings are borrowed. */
struct workflow_def {
	const char *name;
	const char *url;
	const char *callback_url; /* NULL: none */
	bool keep_secret;         /* true: keep the stored secret(s), `secret` is ignored */
	const char *secret;       /* NULL: unsigned (any previous secret is dropped too) */
	int timeout_ms;
	int max_attempts;
	int priority;
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	int max_concurrency;
	int key_concurrency; /* 0: no limit per concurrency key */
	bool step_output_replay;
	/* Flow control (README "Flow control"; migrations/0007_flow_control.sql). */
	const char *key_mode; /* queue, skip, cancel_active or debounce */
	int debounce_ms;      /* debounce only (else 0) */
	int debounce_max_ms;  /* debounce only; 0: no bound */
	int rate_limit;       /* calls per rate_period_ms; 0: no rate limit */
	int rate_period_ms;
	bool rate_per_key;
	bool endpoint_control;        /* its calls count in their endpoint's allowance */
	int64_t max_pending_ms;       /* the longest a step may stay pending (migrations/0008) */
	const char *on_parent_cancel; /* cancel or abandon its runs' children (migrations/0008) */
};

/* Creates or replaces workflow `w`. *created tells which; *out is the
 * workflow's public JSON (new reference). Whether it is paused is left as it
 * is (a new workflow is not paused): see db_workflow_pause. The signing secret: kept as it is
 * (with a rotation's previous secret) when w->keep_secret, a new workflow
 * then being unsigned; else set to w->secret, the previous secret dropped
 * unless w->secret is the current secret (an identical PUT changes
 * nothing). With `enc_key` (HOOKFLOW_ENCRYPTION_KEY, may be NULL) the secret
 * is stored sealed. */
enum err_code db_workflow_put(struct db_conn *c, const struct workflow_def *w,
			      const unsigned char *enc_key, bool *created, json_t **out,
			      struct err *e);

/* Rotates the signing secret of workflow `name` to `secret` (a valid
 * "whsec_" secret, borrowed): the current secret, if any, keeps signing next
 * to it for `grace_ms` (0: not at all), an older previous secret is dropped.
 * *out (new reference) is {"previous_valid_until": RFC 3339 or null,
 * "workflow": its public JSON}. ERR_NOT_FOUND when there is no such
 * workflow. With `enc_key` (may be NULL) the secret is stored sealed. */
enum err_code db_workflow_rotate(struct db_conn *c, const char *name, const char *secret,
				 int64_t grace_ms, const unsigned char *enc_key, json_t **out,
				 struct err *e);

/* Pauses (`paused` true) or resumes workflow `name`; the same state again
 * changes nothing. A resume wakes the claimers of every instance. *out is
 * the workflow's public JSON afterwards (new reference). ERR_NOT_FOUND when
 * there is no such workflow. */
enum err_code db_workflow_pause(struct db_conn *c, const char *name, bool paused, json_t **out,
				struct err *e);

/* The public JSON of workflow `name` (new reference), or ERR_NOT_FOUND. */
enum err_code db_workflow_get(struct db_conn *c, const char *name, json_t **out, struct err *e);

/* One page (`pg`, borrowed) of the workflows by name into *out (the caller
 * owns it: db_page_cleanup; zeroed on failure). */
enum err_code db_workflow_list(struct db_conn *c, const struct db_page_req *pg, struct db_page *out,
			       struct err *e);

/* Deletes workflow `name`: ERR_NOT_FOUND, or ERR_WORKFLOW_IN_USE while it has
 * active runs. */
enum err_code db_workflow_delete(struct db_conn *c, const char *name, struct err *e);

#endif
