/* db/stats: the database-derived gauges of /metrics. */
#ifndef HOOKFLOW_DB_STATS_H
#define HOOKFLOW_DB_STATS_H

#include "base/err.h"
#include "base/strbuf.h"
#include "db/db.h"

/* Appends Prometheus gauges for active runs by status, callback jobs by state
 * and dead letters by kind to `b`. Only indexed, bounded counts: terminal runs
 * are not counted here (see hookflow_step_results_total). */
enum err_code db_stats_render(struct db_conn *c, struct strbuf *b, struct err *e);

/* What the server can still give: its max_connections less the slots
 * reserved for superusers, and the client connections open now other than
 * `c`'s own. Failure: the error currency. */
struct db_conn_room {
	int max_connections;
	int reserved;
	int in_use;
};
enum err_code db_conn_room(struct db_conn *c, struct db_conn_room *out, struct err *e);

/* The server's autovacuum: whether it runs, and how often it visits each
 * database (autovacuum_naptime, seconds). Failure: the error currency. */
struct db_autovacuum {
	bool on;
	int naptime_s;
};
enum err_code db_autovacuum(struct db_conn *c, struct db_autovacuum *out, struct err *e);

#endif
