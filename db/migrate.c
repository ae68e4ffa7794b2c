/* db/migrate: applies the embedded migrations, each once, under an advisory lock. */
#include "db/migrate.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "db/internal.h"

#define MIGRATE_LOCK "7243902001" /* pg_advisory_lock key of hookflow migrations */

static const struct db_stmt q_applied = {"migrate_applied",
					 "SELECT 1 FROM schema_migrations WHERE version = $1", 1};
static const struct db_stmt q_record = {"migrate_record",
					"INSERT INTO schema_migrations (version) VALUES ($1)", 1};
static const struct db_stmt q_latest = {"migrate_latest",
					"SELECT max(version) FROM schema_migrations", 0};

static enum err_code run_sql(struct db_conn *c, const char *sql, struct err *e)
{
	PGresult *r = db_exec_sql(c, sql, e);
	if (r == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

enum err_code db_migrate(struct db_conn *c, int *applied, struct err *e)
{
	int n = 0;
	if (applied)
		*applied = 0;
	if (run_sql(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK ")", e))
		return e->code;
	if (run_sql(c,
		    "CREATE TABLE IF NOT EXISTS schema_migrations ("
		    "version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
		    e))
		goto out;
	for (int i = 0; i < db_migrations_count; i++) {
		const char *v = db_migrations[i].version;
		const char *params[1] = {v};
		PGresult *r = db_exec(c, &q_applied, params, e);
		if (r == NULL)
			goto out;
		int done = PQntuples(r) > 0;
		PQclear(r);
		if (done)
			continue;
		if (run_sql(c, "BEGIN", e))
			goto out;
		if (run_sql(c, db_migrations[i].sql, e)) {
			struct err ignore = {0};
			run_sql(c, "ROLLBACK", &ignore);
			log_error("migrate", "migration failed", "version=%s error=\"%s\"", v,
				  e->msg);
			goto out;
		}
		r = db_exec(c, &q_record, params, e);
		if (r == NULL)
			goto out;
		PQclear(r);
		if (run_sql(c, "COMMIT", e))
			goto out;
		log_info("migrate", "migration applied", "version=%s", v);
		n++;
	}
out:;
	struct err ignore = {0};
	run_sql(c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK ")", &ignore);
	if (applied)
		*applied = n;
	return e ? e->code : ERR_OK;
}

enum err_code db_schema_check(struct db_conn *c, struct err *e)
{
	PGresult *r = db_exec(c, &q_latest, NULL, e);
	if (r == NULL)
		return e->code;
	const char *have = db_str(r, 0, 0);
	const char *want = db_migrations[db_migrations_count - 1].version;
	enum err_code rc = ERR_OK;
	if (have == NULL || strcmp(have, want) != 0)
		rc = err_set(e, ERR_UNAVAILABLE, "schema behind: database at %s, binary needs %s",
			     have ? have : "none", want);
	PQclear(r);
	return rc;
}
