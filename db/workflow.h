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
	const char *secret;       /* NULL: unsigned */
	int timeout_ms;
	int max_attempts;
	int priority;
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	int max_concurrency;
	bool step_output_replay;
};

/* Creates or replaces workflow `w`. *created tells which; *out is the
 * workflow's public JSON (new reference). */
enum err_code db_workflow_put(struct db_conn *c, const struct workflow_def *w, bool *created,
			      json_t **out, struct err *e);

/* The public JSON of workflow `name` (new reference), or ERR_NOT_FOUND. */
enum err_code db_workflow_get(struct db_conn *c, const char *name, json_t **out, struct err *e);

/* One page (`pg`, borrowed) of the workflows by name as a new JSON array in
 * *items; *next is a malloc'd cursor, or NULL on the last page. */
enum err_code db_workflow_list(struct db_conn *c, const struct db_page_req *pg, json_t **items,
			       char **next, struct err *e);

/* Deletes workflow `name`: ERR_NOT_FOUND, or ERR_WORKFLOW_IN_USE while it has
 * active runs. */
enum err_code db_workflow_delete(struct db_conn *c, const char *name, struct err *e);

#endif
