/* db: PostgreSQL connections, the connection pool, prepared statements and the
 * SQLSTATE -> error mapping. Only db/ includes libpq-fe.h; PGresult never
 * leaves db/.
 *
 * A struct db_conn is used by one thread at a time. A lost connection is
 * reported as ERR_UNAVAILABLE and reset on the next use, as is one whose
 * server turned read-only (SQLSTATE 25006: a failover in progress); prepared
 * statements are prepared again after a reset. */
#ifndef HOOKFLOW_DB_H
#define HOOKFLOW_DB_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"

struct db_conn;
struct db_pool;

/* What a list asks for: the items after `cursor` (an opaque next_cursor of
 * the same list, borrowed; NULL: the first page), at most `limit` of them and
 * at most `max_bytes` of their JSON text in all, as PostgreSQL renders it. A
 * first item larger than `max_bytes` comes alone, so paging always
 * progresses. The page ends early (with a next cursor) at whichever bound
 * comes first. */
struct db_page_req {
	int limit; /* >= 1 */
	const char *cursor;
	int64_t max_bytes; /* >= 1 */
};

/* One page of a list as PostgreSQL rendered it: the items' JSON text is
 * passed through, never parsed again. */
struct db_page {
	struct strbuf items; /* the JSON array of the items ("[...]"), owned */
	char *next;          /* the next_cursor (malloc'd), NULL on the last page */
};

/* Frees what `p` holds and zeroes it; a zeroed struct is a no-op. */
void db_page_cleanup(struct db_page *p);

/* Opens a connection to `url` (borrowed). On success *out is a new connection
 * owned by the caller (db_conn_free). Failure: ERR_UNAVAILABLE. */
/* Parses `len` bytes of JSON text that PostgreSQL rendered from jsonb
 * (borrowed). jsonb keeps numbers as numeric and renders 1e30 as a 31-digit
 * integer, which jansson cannot hold: a document with such a number is read
 * with every number as a real, so it keeps its value. Returns a new
 * reference, or NULL when the text is not JSON. */
json_t *db_json_parse(const char *s, size_t len);

enum err_code db_conn_open(const char *url, struct db_conn **out, struct err *e);

/* db_conn_open for the program's start-up and commands, which tell the
 * operator why a connection failed: e->msg is then libpq's own text (it names
 * the host, port, user and database: for the operator's terminal and log,
 * never for a client). ERR_INVALID when TLS was refused (the server's
 * certificate failed sslmode=verify-ca/verify-full, a file named by
 * sslrootcert/sslcert/sslkey is missing, the server has no TLS...): waiting
 * will not help. ERR_UNAVAILABLE otherwise. */
enum err_code db_conn_open_startup(const char *url, struct db_conn **out, struct err *e);

/* Whether libpq's connection error `msg` (borrowed; several lines when
 * several addresses were tried) says that TLS was refused; the line that
 * says so is copied to `out` (`out_len` bytes). Pure. */
bool db_tls_failure(const char *msg, char *out, size_t out_len);

/* Says that connections go through a transaction pooler (PgBouncer with
 * pool_mode = transaction), where each transaction of a connection may run in
 * another server session: with `on`, statements are sent unnamed with their
 * text instead of prepared once per connection (a named statement would be
 * missing in the next session). Process-wide: call once at start-up, before
 * any connection is opened. Default off. */
void db_set_transaction_pooler(bool on);

/* Where the spans the engine reports go (README "Traces"): when a sink is
 * set, every connection opened afterwards asks the engine for them
 * (application_name ending in " [hookflow spans]"; RAISE INFO 'hookflow-span <json>', one JSON object
 * a line), and sink(json, len) is called with each one's JSON text
 * (borrowed) on the
 * thread that ran the statement, once the transaction that reported it has
 * committed; never for one that was rolled back. Call once at start-up,
 * before the connections open; NULL: none. */
void db_set_span_sink(void (*sink)(const char *json, size_t len));

/* Closes `c`; NULL is a no-op. */
void db_conn_free(struct db_conn *c);

/* A connection the server closed while it sat idle (a restart, a failover, a
 * terminated backend) has its end of stream waiting to be read: this notices
 * it, so that the next statement on `c` (borrowed) connects again instead of
 * failing. One poll(2) without waiting; nothing when `c` is in a
 * transaction. Called on pooled connections as they are handed out, and by
 * the owners of long-lived ones before they use them. */
void db_conn_drop_if_closed(struct db_conn *c);

/* Checks that `c` answers (`SELECT 1`), reconnecting first if it was lost. */
enum err_code db_conn_ping(struct db_conn *c, struct err *e);

/* How many times a transaction aborted as busy (ERR_BUSY: a serialization
 * failure or a deadlock) is run in all before the error is returned. */
#define DB_TX_ATTEMPTS 5

/* Runs fn(c, arg, e) inside one transaction (BEGIN ... COMMIT on `c`, which
 * must not be in one). When PostgreSQL aborts it for a serialization failure
 * or a deadlock, it is rolled back and run again from the start, up to
 * DB_TX_ATTEMPTS times with a short growing pause; any other failure rolls
 * back and is returned (the connection is kept unless it was lost). A single
 * statement outside a transaction (db_exec) gets the same retries. `fn` must
 * do nothing but database work that a retry may repeat. */
enum err_code db_tx_run(struct db_conn *c,
			enum err_code (*fn)(struct db_conn *c, void *arg, struct err *e), void *arg,
			struct err *e);

/* Creates a pool of `size` lazily opened connections to `url` (copied).
 * Returns NULL when out of memory. */
struct db_pool *db_pool_new(const char *url, int size);

/* Frees the pool and closes its connections. Every connection must have been
 * released. NULL is a no-op. */
void db_pool_free(struct db_pool *p);

/* Borrows a connection, waiting up to `wait_ms` for one to be free. The
 * connection is opened (or re-opened) on demand; failure is ERR_UNAVAILABLE.
 * Give it back with db_pool_release. */
enum err_code db_pool_acquire(struct db_pool *p, int wait_ms, struct db_conn **out, struct err *e);

/* Returns a connection borrowed from `p`. NULL is a no-op. */
void db_pool_release(struct db_pool *p, struct db_conn *c);

/* The pool's state as it stands (for /readyz). */
struct db_pool_stats {
	int size;                 /* connections it may open */
	int open;                 /* connections opened (and not known to be lost) */
	int in_use;               /* connections borrowed right now */
	int waiting;              /* callers waiting for a free connection */
	int64_t acquire_timeouts; /* acquires that found none free in time, since start */
};

/* Fills `out` from `p` (borrowed) under the pool's lock. */
void db_pool_stats(struct db_pool *p, struct db_pool_stats *out);

#endif
