/* db/memo: the memo table (run-scope memos have scope -1, step memos the step
 * number). */
#ifndef HOOKFLOW_DB_MEMO_H
#define HOOKFLOW_DB_MEMO_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "db/db.h"

#define MEMO_RUN_SCOPE (-1)

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
