/* db/migrate: applies the embedded migrations and loads the embedded engine,
 * under one advisory lock, and compares both with what the database holds. */
#include "db/migrate.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/version.h"
#include "db/internal.h"

#define MIGRATE_LOCK "7243902001" /* pg_advisory_lock key of hookflow migrations */

/* The engine's objects as PostgreSQL shows them: every hf_* function of the
 * schema and every trigger that calls one, each with the md5 of its
 * definition. */
#define LIVE_ENGINE                                                              \
	"SELECT 'function ' || p.oid::regprocedure::text AS object,"             \
	" md5(pg_get_functiondef(p.oid)) AS md5"                                 \
	" FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"          \
	" WHERE n.nspname = current_schema() AND p.proname LIKE 'hf\\_%'"        \
	" UNION ALL"                                                             \
	" SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text," \
	" md5(pg_get_triggerdef(t.oid))"                                         \
	" FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"                  \
	" JOIN pg_namespace n ON n.oid = p.pronamespace"                         \
	" WHERE NOT t.tgisinternal AND n.nspname = current_schema() AND p.proname LIKE 'hf\\_%'"

static const struct db_stmt q_has_migrations = {
	"migrate_has_table", "SELECT to_regclass('schema_migrations') IS NOT NULL", 0};
static const struct db_stmt q_recorded = {
	"migrate_recorded", "SELECT version FROM schema_migrations ORDER BY version", 0};
static const struct db_stmt q_record = {"migrate_record",
					"INSERT INTO schema_migrations (version) VALUES ($1)", 1};
static const struct db_stmt q_engine = {"migrate_engine",
					"SELECT source_sha256, hookflow_version FROM hf_engine", 0};
/* Objects whose live definition is not the one recorded at the last load. */
static const struct db_stmt q_engine_diff = {
	"migrate_engine_diff",
	"WITH live AS (" LIVE_ENGINE ")"
	" SELECT coalesce(l.object, r.object),"
	" CASE WHEN r.object IS NULL THEN 'not part of the loaded engine'"
	" WHEN l.object IS NULL THEN 'missing' ELSE 'changed' END"
	" FROM live l FULL JOIN hf_engine_object r ON r.object = l.object"
	" WHERE l.md5 IS DISTINCT FROM r.md5 ORDER BY 1",
	0};
static const struct db_stmt q_engine_forget = {"migrate_engine_forget",
					       "DELETE FROM hf_engine_object", 0};
static const struct db_stmt q_engine_objects = {
	"migrate_engine_objects",
	"INSERT INTO hf_engine_object (object, md5) SELECT object, md5 FROM (" LIVE_ENGINE ") live",
	0};
static const struct db_stmt q_engine_record = {
	"migrate_engine_record",
	"INSERT INTO hf_engine (source_sha256, hookflow_version, loaded_at)"
	" VALUES ($1, $2, now()) ON CONFLICT (singleton) DO UPDATE SET"
	" source_sha256 = EXCLUDED.source_sha256, hookflow_version = EXCLUDED.hookflow_version,"
	" loaded_at = EXCLUDED.loaded_at",
	2};
/* Drops the engine (every hf_* function and the triggers calling one) so
 * that the files create it afresh, renamed and removed objects included.
 * Nothing else may depend on an engine function: a DROP that would take
 * another object with it fails instead. */
static const char drop_engine[] =
	"DO $$ DECLARE o record; BEGIN"
	" FOR o IN SELECT t.tgname, t.tgrelid::regclass AS rel FROM pg_trigger t"
	" JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace n ON n.oid = p.pronamespace"
	" WHERE NOT t.tgisinternal AND n.nspname = current_schema() AND p.proname LIKE 'hf\\_%'"
	" LOOP EXECUTE format('DROP TRIGGER %I ON %s', o.tgname, o.rel); END LOOP;"
	" FOR o IN SELECT p.oid::regprocedure AS f FROM pg_proc p"
	" JOIN pg_namespace n ON n.oid = p.pronamespace"
	" WHERE n.nspname = current_schema() AND p.proname LIKE 'hf\\_%'"
	" LOOP EXECUTE format('DROP FUNCTION %s', o.f); END LOOP; END $$";

const char *db_schema_version(void)
{
	return db_migrations[db_migrations_count - 1].name;
}

void db_engine_hash(char out[65])
{
	unsigned char md[32] = {0};
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	/* EVP fails only when OpenSSL cannot allocate: the hash then matches
	 * nothing and the engine is reloaded, which is harmless. */
	if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
		for (int i = 0; i < db_engine_files_count; i++) {
			const struct db_sql_file *f = &db_engine_files[i];
			EVP_DigestUpdate(ctx, f->name, strlen(f->name) + 1);
			EVP_DigestUpdate(ctx, f->sql, strlen(f->sql) + 1);
		}
		EVP_DigestFinal_ex(ctx, md, &n);
	}
	EVP_MD_CTX_free(ctx);
	ids_hex(md, sizeof md, out);
}

static bool known_migration(const char *v)
{
	for (int i = 0; i < db_migrations_count; i++)
		if (strcmp(db_migrations[i].name, v) == 0)
			return true;
	return false;
}

static enum err_code run_sql(struct db_conn *c, const char *sql, struct err *e)
{
	PGresult *r = db_exec_sql(c, sql, e);
	if (r == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

/* What the database holds, read without changing anything. */
struct state {
	PGresult *recorded;    /* schema_migrations versions, or NULL when none */
	bool has_engine_table; /* migration 0002 applied */
	char source[65];       /* hf_engine.source_sha256, "" when never loaded */
	char loaded_by[64];    /* hf_engine.hookflow_version */
	PGresult *engine_diff; /* q_engine_diff rows, or NULL */
};

static void state_cleanup(struct state *s)
{
	PQclear(s->recorded);
	PQclear(s->engine_diff);
	memset(s, 0, sizeof *s);
}

static enum err_code read_state(struct db_conn *c, struct state *s, struct err *e)
{
	memset(s, 0, sizeof *s);
	PGresult *r = db_exec(c, &q_has_migrations, NULL, e);
	if (r == NULL)
		return e->code;
	bool has = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	if (!has)
		return ERR_OK;
	if ((s->recorded = db_exec(c, &q_recorded, NULL, e)) == NULL)
		return e->code;
	for (int i = 0; i < PQntuples(s->recorded); i++)
		if (strcmp(PQgetvalue(s->recorded, i, 0), "0002_engine_record") == 0)
			s->has_engine_table = true;
	if (!s->has_engine_table)
		return ERR_OK;
	if ((r = db_exec(c, &q_engine, NULL, e)) == NULL)
		return e->code;
	if (PQntuples(r) == 1) {
		snprintf(s->source, sizeof s->source, "%s", PQgetvalue(r, 0, 0));
		snprintf(s->loaded_by, sizeof s->loaded_by, "%s", PQgetvalue(r, 0, 1));
	}
	PQclear(r);
	if ((s->engine_diff = db_exec(c, &q_engine_diff, NULL, e)) == NULL)
		return e->code;
	return ERR_OK;
}

/* ERR_CONFLICT when a newer hookflow upgraded the database. */
static enum err_code check_not_newer(const struct state *s, struct strbuf *diff, struct err *e)
{
	for (int i = 0; s->recorded != NULL && i < PQntuples(s->recorded); i++) {
		const char *v = PQgetvalue(s->recorded, i, 0);
		if (known_migration(v))
			continue;
		if (diff)
			strbuf_printf(diff, "migration %s: applied by a newer hookflow\n", v);
		err_set(e, ERR_CONFLICT,
			"database upgraded by a newer hookflow: it has migration %s, unknown to "
			"hookflow %s (schema %s); run that version or a later one",
			v, HOOKFLOW_VERSION, db_schema_version());
	}
	if (s->loaded_by[0] != '\0' && version_compare(s->loaded_by, HOOKFLOW_VERSION) > 0) {
		if (diff)
			strbuf_printf(diff, "engine: loaded by hookflow %s\n", s->loaded_by);
		err_set(e, ERR_CONFLICT,
			"database upgraded by a newer hookflow: its engine was loaded by hookflow "
			"%s, this is %s; run that version or a later one",
			s->loaded_by, HOOKFLOW_VERSION);
	}
	return e->code;
}

/* True when the engine the database holds is exactly the binary's. Appends
 * each difference to `diff` (may be NULL) and names the first in *first. */
static bool engine_current(const struct state *s, struct strbuf *diff, char *first, size_t cap)
{
	char want[65];
	db_engine_hash(want);
	bool same = true;
	first[0] = '\0';
	if (!s->has_engine_table) {
		snprintf(first, cap, "never loaded");
		if (diff)
			strbuf_puts(diff, "engine: never loaded\n");
		return false;
	}
	if (strcmp(s->source, want) != 0) {
		same = false;
		snprintf(first, cap, "%s",
			 s->source[0] ? "loaded from other sources" : "never loaded");
		if (diff)
			strbuf_printf(diff, "engine: %s (database %.12s, binary %.12s)\n", first,
				      s->source[0] ? s->source : "none", want);
	}
	for (int i = 0; s->engine_diff != NULL && i < PQntuples(s->engine_diff); i++) {
		const char *obj = PQgetvalue(s->engine_diff, i, 0);
		const char *how = PQgetvalue(s->engine_diff, i, 1);
		if (same)
			snprintf(first, cap, "%s %s", obj, how);
		same = false;
		if (diff)
			strbuf_printf(diff, "engine: %s %s\n", obj, how);
	}
	return same;
}

/* Applies migration `m` and records it, in one transaction. */
static enum err_code apply_migration(struct db_conn *c, void *arg, struct err *e)
{
	const struct db_sql_file *m = arg;
	const char *params[1] = {m->name};
	if (run_sql(c, m->sql, e))
		return e->code;
	PGresult *r = db_exec(c, &q_record, params, e);
	if (r == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

/* Loads the engine afresh and records it, in one transaction. */
static enum err_code load_engine(struct db_conn *c, void *arg, struct err *e)
{
	(void)arg;
	if (run_sql(c, drop_engine, e))
		return e->code;
	for (int i = 0; i < db_engine_files_count; i++) {
		if (run_sql(c, db_engine_files[i].sql, e)) {
			log_error("migrate", "engine file failed", "file=%s error=\"%s\"",
				  db_engine_files[i].name, e->msg);
			return e->code;
		}
	}
	char hash[65];
	db_engine_hash(hash);
	const char *params[2] = {hash, HOOKFLOW_VERSION};
	const struct db_stmt *record[] = {&q_engine_forget, &q_engine_objects, &q_engine_record};
	for (size_t i = 0; i < sizeof record / sizeof record[0]; i++) {
		PGresult *r = db_exec(c, record[i], record[i]->nparams ? params : NULL, e);
		if (r == NULL)
			return e->code;
		PQclear(r);
	}
	return run_sql(c, "NOTIFY hookflow_engine", e);
}

/* Whether migration `name` is among the `recorded` versions (NULL: none). */
static bool recorded(const PGresult *recorded, const char *name)
{
	for (int k = 0; recorded != NULL && k < PQntuples(recorded); k++)
		if (strcmp(PQgetvalue(recorded, k, 0), name) == 0)
			return true;
	return false;
}

static void log_engine_loaded(void)
{
	char hash[65];
	db_engine_hash(hash);
	log_info("migrate", "engine loaded", "files=%d source=%.12s", db_engine_files_count, hash);
}

struct upgrade {
	const PGresult *recorded; /* the versions applied before (borrowed) */
	int npending;             /* how many are not */
};

/* Applies every migration not recorded yet, then loads the engine (inside
 * the caller's transaction). */
static enum err_code upgrade(struct db_conn *c, void *arg, struct err *e)
{
	const struct upgrade *up = arg;
	for (int i = 0; i < db_migrations_count; i++) {
		if (recorded(up->recorded, db_migrations[i].name))
			continue;
		if (apply_migration(c, (void *)&db_migrations[i], e)) {
			log_error("migrate", "migration failed", "version=%s error=\"%s\"",
				  db_migrations[i].name, e->msg);
			return e->code;
		}
	}
	return load_engine(c, NULL, e);
}

enum err_code db_migrate(struct db_conn *c, struct db_migrate_report *out, struct err *e)
{
	struct db_migrate_report rep = {0};
	struct state s = {0};
	if (run_sql(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK ")", e))
		return e->code;
	if (run_sql(c,
		    "CREATE TABLE IF NOT EXISTS schema_migrations ("
		    "version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
		    e) ||
	    read_state(c, &s, e) || check_not_newer(&s, NULL, e))
		goto out;
	struct upgrade up = {.recorded = s.recorded};
	for (int i = 0; i < db_migrations_count; i++)
		if (!recorded(s.recorded, db_migrations[i].name))
			up.npending++;
	if (up.npending > 0) {
		/* The migrations and the engine that goes with them, in one
		 * transaction: an instance of the release before never runs its
		 * engine on the new schema (say, creating a keyed run that
		 * migration 0012's run_key would miss). */
		if (db_tx_run(c, upgrade, &up, e))
			goto out;
		for (int i = 0; i < db_migrations_count; i++)
			if (!recorded(s.recorded, db_migrations[i].name))
				log_info("migrate", "migration applied", "version=%s",
					 db_migrations[i].name);
		log_engine_loaded();
		rep.applied = up.npending;
		rep.engine_loaded = true;
		goto out;
	}
	char first[200];
	if (!engine_current(&s, NULL, first, sizeof first)) {
		log_info("migrate", "loading the engine", "reason=\"%s\"", first);
		if (db_tx_run(c, load_engine, NULL, e))
			goto out;
		log_engine_loaded();
		rep.engine_loaded = true;
	}
out:
	state_cleanup(&s);
	struct err ignore = {0};
	run_sql(c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK ")", &ignore);
	if (out)
		*out = rep;
	return e->code;
}

enum err_code db_schema_check(struct db_conn *c, struct strbuf *diff, struct err *e)
{
	struct state s;
	if (read_state(c, &s, e)) {
		state_cleanup(&s);
		return e->code;
	}
	const char *want = db_schema_version();
	if (check_not_newer(&s, diff, e) == ERR_OK) {
		int missing = 0;
		const char *first = NULL;
		for (int i = 0; i < db_migrations_count; i++) {
			if (recorded(s.recorded, db_migrations[i].name))
				continue;
			if (first == NULL)
				first = db_migrations[i].name;
			missing++;
			if (diff)
				strbuf_printf(diff, "migration %s: not applied\n",
					      db_migrations[i].name);
		}
		char what[200];
		if (missing > 0)
			err_set(e, ERR_UNAVAILABLE,
				"schema behind: %d migration(s) not applied (first %s), binary "
				"needs %s",
				missing, first, want);
		else if (!engine_current(&s, diff, what, sizeof what))
			err_set(e, ERR_UNAVAILABLE, "engine differs: %s", what);
	}
	state_cleanup(&s);
	return e->code;
}
