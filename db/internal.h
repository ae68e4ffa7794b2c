/* db/internal: what the files of db/ share: libpq access, named statements and
 * result helpers. Not included outside db/. */
#ifndef HOOKFLOW_DB_INTERNAL_H
#define HOOKFLOW_DB_INTERNAL_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "db/db.h"

/* A named statement: prepared once per connection on first use. Each db/ file
 * declares its statements as static const struct db_stmt, so the SQL of a
 * table lives in one place. */
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

/* Executes plain SQL without parameters (migrations, BEGIN/COMMIT). Same
 * result contract as db_exec. */
PGresult *db_exec_sql(struct db_conn *c, const char *sql, struct err *e);

/* Parses the text of column `col` of row `row` as JSON: a new reference, or
 * JSON null for SQL NULL, or NULL when the text is not JSON. */
json_t *db_json(const PGresult *r, int row, int col);

/* Column helpers: NULL -> 0 / NULL. db_str returns a borrowed pointer into `r`. */
int64_t db_i64(const PGresult *r, int row, int col);
const char *db_str(const PGresult *r, int row, int col);

/* Turns the rows of a page query (fetched with LIMIT limit + 1) into a new
 * JSON array of column `json_col` in *items and, when a further row exists,
 * the cursor of the last row shown in *next (malloc'd; NULL on the last
 * page): its column `ms_col` (-1: 0) and its id column `id_col`. Clears `r`. */
void db_page(PGresult *r, int limit, int json_col, int ms_col, int id_col, json_t **items,
	     char **next);

/* Opaque pagination cursors: base64url of "<created ms>|<id>". */
char *db_cursor_encode(int64_t ms, const char *id);
enum err_code db_cursor_decode(const char *cursor, int64_t *ms, char **id, struct err *e);

#endif
