/* db/deadletter: dead steps and callbacks (openapi.yaml, tag dead-letters). */
#ifndef HOOKFLOW_DB_DEADLETTER_H
#define HOOKFLOW_DB_DEADLETTER_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "db/db.h"

/* One page (`pg`, borrowed) of the dead letters, newest first, filtered by
 * workflow and kind ("step" or "callback"; NULL: any), into *out (the caller
 * owns it: db_page_cleanup; zeroed on failure). */
enum err_code db_deadletter_list(struct db_conn *c, const char *workflow, const char *kind,
				 const struct db_page_req *pg, struct db_page *out, struct err *e);

/* Redrives dead letter `id`: *kind receives "step" or "callback" (static).
 * Errors: ERR_NOT_FOUND; ERR_RUN_ACTIVE when a dead step's run runs again. */
enum err_code db_deadletter_redrive(struct db_conn *c, const char *id, const char **kind,
				    struct err *e);

/* Deletes dead letter `id`, or ERR_NOT_FOUND. */
enum err_code db_deadletter_delete(struct db_conn *c, const char *id, struct err *e);

#endif
