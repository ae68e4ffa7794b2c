/* db/memo: the memo table (run-scope memos have scope -1, step memos the step
 * number). */
#ifndef HOOKFLOW_DB_MEMO_H
#define HOOKFLOW_DB_MEMO_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "db/db.h"

#define MEMO_RUN_SCOPE (-1)

/* For a request authorised by a delivery token of `generation` (-1: a
 * token of release 0.1.0, any generation): ERR_FORBIDDEN when run `run_id`
 * has ended, was rerun since, or no longer exists. */
enum err_code db_memo_token_check(struct db_conn *c, const char *run_id, int generation,
				  struct err *e);

/* The memo value (new reference), or ERR_NOT_FOUND. */
enum err_code db_memo_get(struct db_conn *c, const char *run_id, int scope, const char *key,
			  json_t **value, struct err *e);

/* Writes a memo (`value_json` is JSON text). ERR_NOT_FOUND for an unknown run. */
enum err_code db_memo_put(struct db_conn *c, const char *run_id, int scope, const char *key,
			  const char *value_json, struct err *e);

/* Deletes a memo; *removed tells whether it existed. */
enum err_code db_memo_delete(struct db_conn *c, const char *run_id, int scope, const char *key,
			     bool *removed, struct err *e);

#endif
