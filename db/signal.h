/* db/signal: signals (openapi.yaml, tag signals) and the signal buffer table. */
#ifndef HOOKFLOW_DB_SIGNAL_H
#define HOOKFLOW_DB_SIGNAL_H

#include <stdbool.h>

#include "base/err.h"
#include "db/db.h"

enum signal_outcome { SIGNAL_DELIVERED = 1, SIGNAL_BUFFERED };

/* Sends `payload_json` (JSON text) on `key`: delivered to the run waiting on
 * it, or buffered (replacing an earlier buffered signal). */
enum err_code db_signal_send(struct db_conn *c, const char *key, const char *payload_json,
			     enum signal_outcome *out, struct err *e);

/* Removes the buffered signal of `key`; *removed tells whether there was one. */
enum err_code db_signal_clear(struct db_conn *c, const char *key, bool *removed, struct err *e);

#endif
