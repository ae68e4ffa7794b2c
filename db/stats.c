/* db/stats: gauges read from the database for /metrics. */
#include "db/stats.h"

#include "db/internal.h"

#include <string.h>

/* One count per status, the status spelled out in each, so that each reads
 * the partial index of its status (run_claim, run_due, run_lease,
 * callback_claim, ... in migrations/0001_init.sql), that is the active rows
 * only: a status taken from a list (WHERE r.status = s.status) matches no
 * partial index, and each count read every run ever kept
 * (tests/integration/test_size_plans.py). */
static const struct db_stmt q_stats = {
	"stats",
	"SELECT 'run' AS what, 'pending' AS status, count(*) FROM run WHERE status = 'pending'"
	" UNION ALL SELECT 'run', 'scheduled', count(*) FROM run WHERE status = 'scheduled'"
	" UNION ALL SELECT 'run', 'waiting', count(*) FROM run WHERE status = 'waiting'"
	" UNION ALL SELECT 'run', 'running', count(*) FROM run WHERE status = 'running'"
	" UNION ALL SELECT 'run', 'cancelling', count(*) FROM run WHERE status = 'cancelling'"
	" UNION ALL SELECT 'callback', 'pending', count(*) FROM callback WHERE status = 'pending'"
	" UNION ALL SELECT 'callback', 'scheduled', count(*) FROM callback"
	" WHERE status = 'scheduled'"
	" UNION ALL SELECT 'callback', 'running', count(*) FROM callback WHERE status = 'running'"
	" UNION ALL SELECT 'dead', k.kind, (SELECT count(*) FROM dead_letter d WHERE d.kind = "
	"k.kind)"
	" FROM unnest(ARRAY['step','callback']) AS k(kind)",
	0};

enum err_code db_stats_render(struct db_conn *c, struct strbuf *b, struct err *e)
{
	PGresult *r = db_exec(c, &q_stats, NULL, e);
	if (r == NULL)
		return e->code;
	strbuf_puts(b, "# HELP hookflow_runs Active runs by status.\n# TYPE hookflow_runs gauge\n");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "run") == 0)
			strbuf_printf(b, "hookflow_runs{status=\"%s\"} %s\n", PQgetvalue(r, i, 1),
				      PQgetvalue(r, i, 2));
	strbuf_puts(b, "# HELP hookflow_jobs Queued jobs by kind and state.\n# TYPE hookflow_jobs "
		       "gauge\n");
	for (int i = 0; i < PQntuples(r); i++) {
		const char *what = PQgetvalue(r, i, 0);
		if (strcmp(what, "run") == 0)
			strbuf_printf(b, "hookflow_jobs{kind=\"step\",state=\"%s\"} %s\n",
				      PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
		else if (strcmp(what, "callback") == 0)
			strbuf_printf(b, "hookflow_jobs{kind=\"callback\",state=\"%s\"} %s\n",
				      PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
	}
	strbuf_puts(b, "# HELP hookflow_dead_letters Dead letters by kind.\n"
		       "# TYPE hookflow_dead_letters gauge\n");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "dead") == 0)
			strbuf_printf(b, "hookflow_dead_letters{kind=\"%s\"} %s\n",
				      PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
	PQclear(r);
	return ERR_OK;
}

static const struct db_stmt q_room = {
	"conn_room",
	"SELECT current_setting('max_connections')::int,"
	" current_setting('superuser_reserved_connections')::int,"
	" (SELECT count(*)::int FROM pg_stat_activity"
	"  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())",
	0};

enum err_code db_conn_room(struct db_conn *c, struct db_conn_room *out, struct err *e)
{
	PGresult *r = db_exec(c, &q_room, NULL, e);
	if (r == NULL)
		return e->code;
	out->max_connections = (int)db_i64(r, 0, 0);
	out->reserved = (int)db_i64(r, 0, 1);
	out->in_use = (int)db_i64(r, 0, 2);
	PQclear(r);
	return ERR_OK;
}

static const struct db_stmt q_autovacuum = {
	"autovacuum_settings",
	"SELECT current_setting('autovacuum')::boolean,"
	" (SELECT setting::int FROM pg_settings WHERE name = 'autovacuum_naptime')",
	0};

enum err_code db_autovacuum(struct db_conn *c, struct db_autovacuum *out, struct err *e)
{
	PGresult *r = db_exec(c, &q_autovacuum, NULL, e);
	if (r == NULL)
		return e->code;
	out->on = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	out->naptime_s = (int)db_i64(r, 0, 1);
	PQclear(r);
	return ERR_OK;
}
