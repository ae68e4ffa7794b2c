/* db/listen: a dedicated LISTEN connection and its notifications. */
#ifndef HOOKFLOW_DB_LISTEN_H
#define HOOKFLOW_DB_LISTEN_H

#include "base/err.h"

struct db_listener;

/* Opens a connection to `url` and LISTENs on the `n` channels. *out is owned by
 * the caller (db_listen_free). ERR_UNAVAILABLE when the database is down. */
enum err_code db_listen_open(const char *url, const char *const *channels, int n,
			     struct db_listener **out, struct err *e);

/* The socket to poll for readability. */
int db_listen_fd(const struct db_listener *l);

/* Reads what arrived and calls fn(arg, channel, payload) for each
 * notification (strings borrowed for the call). ERR_UNAVAILABLE when the
 * connection was lost: free it and open a new one. */
enum err_code db_listen_drain(struct db_listener *l,
			      void (*fn)(void *arg, const char *channel, const char *payload),
			      void *arg, struct err *e);

void db_listen_free(struct db_listener *l);

#endif
