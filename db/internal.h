/* db/internal: what the files of db/ share: libpq access, named statements and
 * result helpers. Not included outside db/. */
#ifndef HOOKFLOW_DB_INTERNAL_H
#define HOOKFLOW_DB_INTERNAL_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "base/trace.h"
#include "db/db.h"

/* A named statement: prepared once per connection on first use (sent unnamed,
 * with its text, behind a transaction pooler: db_set_transaction_pooler).
 * Each db/ file declares its statements as static const struct db_stmt, so
 * the SQL of a table lives in one place. */
struct db_stmt {
	const char *name;
	const char *sql;
	int nparams;
};

/* The libpq connection of `c`, reset first when it was lost. NULL when it
 * cannot be re-established (ERR_UNAVAILABLE set). */
PGconn *db_pg(struct db_conn *c, struct err *e);

/* Executes statement `st` with text parameters `params` (NULL entries are SQL
 * NULL). On success returns a PGresult the caller PQclear()s; on failure NULL
 * with `e` set: unique violation -> ERR_CONFLICT, check/format violations ->
 * ERR_INVALID, connection failures -> ERR_UNAVAILABLE, else ERR_INTERNAL. */
PGresult *db_exec(struct db_conn *c, const struct db_stmt *st, const char *const *params,
		  struct err *e);

/* db_exec with binary parameters: bit k of `binary` set sends parameter k
 * (0-based) in binary format, lengths[k] bytes of it (a bytea, say, sent as
 * it is instead of hex-encoded); lengths[] is ignored for the others.
 * Borrows everything it is given. */
PGresult *db_exec_bin(struct db_conn *c, const struct db_stmt *st, const char *const *params,
		      const int *lengths, unsigned binary, struct err *e);

/* Executes plain SQL without parameters (migrations, BEGIN/COMMIT). Same
 * result contract as db_exec. */
PGresult *db_exec_sql(struct db_conn *c, const char *sql, struct err *e);

/* The engine's trace argument for a caller's trace context `t` (README
 * "Traces"): {"trace_id", "parent_span_id", "tracestate"?}, a new
 * reference; NULL when `t` is NULL or empty (the engine starts a trace) or
 * out of memory (*oom set). */
json_t *db_trace_json(const struct trace_parent *t, bool *oom);

/* Parses the text of column `col` of row `row` as JSON: a new reference, or
 * JSON null for SQL NULL, or NULL when the text is not JSON. */
json_t *db_json(const PGresult *r, int row, int col);

/* Column helpers: NULL -> 0 / NULL. db_str returns a borrowed pointer into `r`. */
int64_t db_i64(const PGresult *r, int row, int col);
const char *db_str(const PGresult *r, int row, int col);

/* The SQL of one page of a list, bounded in items and in bytes (struct
 * db_page_req). `inner` is the list's query up to its ORDER BY (no LIMIT): its
 * first three output columns are `item` (the item's JSON as text), `ms` and
 * `id` (the row's cursor parts: an integer and text), and it is ordered by `keys`,
 * which names its output columns (so that the window below reuses the order
 * and nothing is sorted again). `lim` and `cap` are the statement's
 * parameters carrying the page's limit and byte cap ("$8").
 *
 * PostgreSQL reads at most lim + 1 rows and keeps a running sum of their JSON
 * text; only items inside both bounds travel: the first row always, then
 * each row while the sum up to it stays within `cap`. One more row comes
 * back with item NULL when the list goes on (the cursor is then that of the
 * last item). So the result holds at most `cap` bytes of items, or one item
 * larger than `cap`, never lim + 1 items. */
#define DB_PAGE_SQL(inner, keys, lim, cap)                                                 \
	"SELECT CASE WHEN p.hf_n <= " lim "::integer AND (p.hf_n = 1 OR p.hf_upto <= " cap \
	"::bigint) THEN p.item END, p.ms, p.id"                                            \
	" FROM (SELECT q.*, row_number() OVER w AS hf_n, sum(octet_length(q.item)) OVER w" \
	" AS hf_upto FROM (" inner " LIMIT " lim "::integer + 1) q"                        \
	" WINDOW w AS (ORDER BY " keys " ROWS UNBOUNDED PRECEDING)) p"                     \
	" WHERE p.hf_n <= 2 OR p.hf_upto - octet_length(p.item) <= " cap "::bigint"        \
	" ORDER BY " keys

/* The limit and byte cap of `pg` as text parameters for DB_PAGE_SQL. */
struct db_page_params {
	char limit[16];
	char max_bytes[24];
};
void db_page_params(const struct db_page_req *pg, struct db_page_params *out);

/* Turns the rows of a DB_PAGE_SQL query into *out (a zeroed struct the
 * caller then owns: db_page_cleanup): the JSON array text of the items, each
 * item's text copied as PostgreSQL rendered it (our SQL's jsonb, so valid
 * JSON; nothing is parsed), and, when the list goes on, the cursor of the
 * last item. Clears `r` in every case. ERR_INTERNAL (out left zeroed) when
 * out of memory. */
enum err_code db_page_read(PGresult *r, struct db_page *out, struct err *e);

/* Opaque pagination cursors: base64url of "<created ms>|<id>". */
char *db_cursor_encode(int64_t ms, const char *id);
enum err_code db_cursor_decode(const char *cursor, int64_t *ms, char **id, struct err *e);

#endif
