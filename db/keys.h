/* db/keys: the keys that sign delivery tokens (table hf_token_key), loaded
 * by every instance and rotated by `hookflow rotate-keys`. */
#ifndef HOOKFLOW_DB_KEYS_H
#define HOOKFLOW_DB_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/token.h"
#include "db/db.h"

/* Loads the keys still accepted, oldest first (the last is the current
 * one): a malloc'd array of *n keys in *out. Sealed keys are opened with
 * `enc_key` (NULL: none configured). ERR_FORBIDDEN when a key is sealed and
 * cannot be opened; ERR_INTERNAL when no current key exists. */
enum err_code db_keys_load(struct db_conn *c, const unsigned char *enc_key, struct token_key **out,
			   size_t *n, struct err *e);

/* Rotates: a new random key becomes the current one, the keys that were
 * current stay accepted for `grace_ms` more, keys whose grace has passed are
 * deleted; every instance is told (NOTIFY hookflow_keys). The new key is
 * sealed with `enc_key` when given. Its id goes to `kid`. One transaction. */
enum err_code db_keys_rotate(struct db_conn *c, const unsigned char *enc_key, int64_t grace_ms,
			     char kid[TOKEN_KID_MAX + 1], struct err *e);

#endif
