/* db/migrate: forward-only schema migrations (migrations/NNNN_name.sql,
 * embedded into the binary at build time), applied in order under an advisory
 * lock so several instances starting together apply each exactly once. */
#ifndef HOOKFLOW_DB_MIGRATE_H
#define HOOKFLOW_DB_MIGRATE_H

#include "base/err.h"
#include "db/db.h"

struct db_migration {
	const char *version; /* "0001_init" */
	const char *sql;
};

extern const struct db_migration db_migrations[];
extern const int db_migrations_count;

/* Applies every embedded migration not yet recorded in schema_migrations, each
 * in its own transaction. *applied (may be NULL) receives how many ran. */
enum err_code db_migrate(struct db_conn *c, int *applied, struct err *e);

/* ERR_OK when the database's schema is the binary's latest migration;
 * ERR_UNAVAILABLE otherwise ("schema behind: ..."). */
enum err_code db_schema_check(struct db_conn *c, struct err *e);

#endif
