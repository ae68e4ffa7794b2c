/* db/kv: the application KV table. Items are {"key", "value", "updated_at"}. */
#ifndef HOOKFLOW_DB_KV_H
#define HOOKFLOW_DB_KV_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "db/db.h"

/* The item of `key` (new reference), or ERR_NOT_FOUND. */
enum err_code db_kv_get(struct db_conn *c, const char *key, json_t **item, struct err *e);

/* One page (`pg`, borrowed) of the items whose key starts with `prefix` (""
 * for all), by key, into *out (the caller owns it: db_page_cleanup; zeroed on
 * failure). */
enum err_code db_kv_list(struct db_conn *c, const char *prefix, const struct db_page_req *pg,
			 struct db_page *out, struct err *e);

/* Writes `value_json` (JSON text) at `key`; *item is the stored item. */
enum err_code db_kv_put(struct db_conn *c, const char *key, const char *value_json, json_t **item,
			struct err *e);

/* Deletes `key`; *removed tells whether it existed. */
enum err_code db_kv_delete(struct db_conn *c, const char *key, bool *removed, struct err *e);

#endif
