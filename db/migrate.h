/* db/migrate: the database's schema and engine, brought up to this binary.
 *
 * The schema is the forward-only migrations (migrations/NNNN_name.sql): a
 * migration that shipped in a release is never edited, each is applied once
 * and recorded in schema_migrations. The engine is the functions and triggers
 * of the .sql files of db/engine/: they are not versioned by migrations but reloaded whole
 * whenever what the database actually holds differs from the binary's (a
 * hash of each live definition is compared with the record the last load
 * left; a function replaced by hand is noticed too). Both are embedded into
 * the binary at build time and applied under one advisory lock, so several
 * instances starting together do the work once.
 *
 * A binary refuses a database that a newer hookflow upgraded (a migration it
 * does not know, or an engine loaded by a later version): upgrades are
 * stop-the-old, start-the-new (README, "Versions and upgrades"). */
#ifndef HOOKFLOW_DB_MIGRATE_H
#define HOOKFLOW_DB_MIGRATE_H

#include <stdbool.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "db/db.h"

/* One embedded SQL file (scripts/embed-sql.sh): "0001_init" or "05_settle". */
struct db_sql_file {
	const char *name;
	const char *sql;
};

extern const struct db_sql_file db_migrations[];
extern const int db_migrations_count;
extern const struct db_sql_file db_engine_files[];
extern const int db_engine_files_count;

/* The schema version this binary needs: the name of its latest migration
 * (static storage). */
const char *db_schema_version(void);

/* Writes the SHA-256 of the binary's engine files (in order, names and
 * texts), as 64 hex digits and a NUL, to `out`. */
void db_engine_hash(char out[65]);

/* What db_migrate did. */
struct db_migrate_report {
	int applied;        /* migrations applied */
	bool engine_loaded; /* the engine was (re)loaded */
};

/* Brings the database up to this binary: applies the migrations it has not
 * recorded, each in its own transaction, then reloads the engine in one
 * transaction when it differs; all under the migration lock. `c` must not be
 * inside a transaction, and must reach PostgreSQL directly: the lock is a
 * session advisory lock held across those transactions, which a transaction
 * pooler would run in different server sessions. *out (may be NULL) says what
 * was done. Failures: ERR_CONFLICT when a newer hookflow upgraded the
 * database (nothing is changed), ERR_UNAVAILABLE when the database is away,
 * else ERR_INTERNAL. */
enum err_code db_migrate(struct db_conn *c, struct db_migrate_report *out, struct err *e);

/* Compares the database with this binary without changing anything and
 * appends one line per difference to `diff` (may be NULL): migrations missing
 * or unknown to the binary, engine objects changed, missing or extra, an
 * engine loaded from other sources. ERR_OK when there is none; ERR_CONFLICT
 * when a newer hookflow upgraded the database; ERR_UNAVAILABLE ("schema
 * behind: ...", "engine differs: ...") for any other difference, with a
 * summary in `e`. */
enum err_code db_schema_check(struct db_conn *c, struct strbuf *diff, struct err *e);

#endif
