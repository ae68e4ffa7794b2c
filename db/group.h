/* db/group: run groups and their members (openapi.yaml, tag groups). */
#ifndef HOOKFLOW_DB_GROUP_H
#define HOOKFLOW_DB_GROUP_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "base/trace.h"
#include "db/db.h"

/* Submits group `group_id`: `members_json` is the JSON array hf_group_submit
 * takes; `manifest` the SHA-256 of the canonical member list. *created tells
 * first submission from re-submission; *submitted how many members started.
 * The members it starts join the caller's trace `trace` (borrowed), or a new
 * trace for the request when NULL (README "Traces"). Errors: ERR_NOT_FOUND (workflow), ERR_GROUP_MISMATCH. */
enum err_code db_group_submit(struct db_conn *c, const char *group_id, const char *workflow,
			      const unsigned char manifest[32], const char *members_json,
			      int priority, int max_attempts, const struct trace_parent *trace,
			      bool *created, int *submitted, struct err *e);

/* Group `group_id`: *head is its JSON object without the members (new
 * reference: group_id, workflow, created_at, total and the counts by status),
 * *members one page (`pg`, borrowed) of its members (the caller owns it:
 * db_page_cleanup), *done whether every member is terminal. On failure *head
 * is NULL and *members zeroed. ERR_NOT_FOUND for an unknown group. */
enum err_code db_group_get(struct db_conn *c, const char *group_id, const struct db_page_req *pg,
			   json_t **head, struct db_page *members, bool *done, struct err *e);

/* Cancels the group's active members; *n receives how many. */
enum err_code db_group_cancel(struct db_conn *c, const char *group_id, int *n, struct err *e);

/* Forgets a group: ERR_NOT_FOUND, or ERR_GROUP_ACTIVE while a member is active. */
enum err_code db_group_forget(struct db_conn *c, const char *group_id, struct err *e);

#endif
