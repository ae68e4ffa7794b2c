/* db/conninfo: a database URL (HOOKFLOW_DATABASE_URL, HOOKFLOW_LISTEN_DATABASE_URL)
 * checked with libpq's own parser and
 * completed before any connection is made. */
#ifndef HOOKFLOW_DB_CONNINFO_H
#define HOOKFLOW_DB_CONNINFO_H

#include "base/err.h"

/* The connect_timeout (seconds, per host) added to a database URL that sets
 * none. */
#define DB_CONNECT_TIMEOUT_S 5

/* Checks `url` (the value of the setting `name`, both borrowed; a libpq URI or key=value connection string, borrowed) and
 * returns in *out a copy (malloc'd, owned by the caller) that carries
 * connect_timeout=DB_CONNECT_TIMEOUT_S when neither `url` nor the
 * environment (PGCONNECT_TIMEOUT) sets one and it names no service file
 * entry (service=) that could. Without it libpq waits as long as the network
 * lets it for a host that never answers (one that accepts the connection and
 * says nothing, or drops it): every thread that connects would hang there,
 * however many other hosts a multi-host URL lists after it. ERR_INVALID when
 * libpq cannot parse `url`; the message names `name` and
 * gives libpq's reason. */
enum err_code db_conninfo_complete(const char *name, const char *url, char **out, struct err *e);

#endif
