/* db/stats: gauges read from the database for /metrics. */
#include "db/stats.h"

#include "db/internal.h"

#include <string.h>

static const struct db_stmt q_stats = {
	"stats",
	"SELECT 'run' AS what, s.status, (SELECT count(*) FROM run r WHERE r.status = s.status)"
	" FROM unnest(ARRAY['pending','scheduled','waiting','running','cancelling']) AS s(status)"
	" UNION ALL SELECT 'callback', s.status,"
	" (SELECT count(*) FROM callback c WHERE c.status = s.status)"
	" FROM unnest(ARRAY['pending','scheduled','running']) AS s(status)"
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
