/* db/listen: LISTEN/NOTIFY on a connection of its own. */
#include "db/listen.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct db_listener {
	PGconn *pg;
};

enum err_code db_listen_open(const char *url, const char *const *channels, int n,
			     struct db_listener **out, struct err *e)
{
	*out = NULL;
	struct db_listener *l = calloc(1, sizeof *l);
	if (l == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	l->pg = PQconnectdb(url);
	if (PQstatus(l->pg) != CONNECTION_OK) {
		err_set(e, ERR_UNAVAILABLE, "database unavailable");
		db_listen_free(l);
		return e->code;
	}
	for (int i = 0; i < n; i++) {
		char sql[128];
		snprintf(sql, sizeof sql, "LISTEN %s", channels[i]);
		PGresult *r = PQexec(l->pg, sql);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
		if (!ok) {
			err_set(e, ERR_UNAVAILABLE, "LISTEN %s failed", channels[i]);
			db_listen_free(l);
			return e->code;
		}
	}
	PQsetnonblocking(l->pg, 1);
	*out = l;
	return ERR_OK;
}

int db_listen_fd(const struct db_listener *l)
{
	return PQsocket(l->pg);
}

enum err_code db_listen_drain(struct db_listener *l,
			      void (*fn)(void *arg, const char *channel, const char *payload),
			      void *arg, struct err *e)
{
	if (!PQconsumeInput(l->pg) || PQstatus(l->pg) != CONNECTION_OK)
		return err_set(e, ERR_UNAVAILABLE, "listen connection lost");
	PGnotify *nt;
	while ((nt = PQnotifies(l->pg)) != NULL) {
		fn(arg, nt->relname, nt->extra);
		PQfreemem(nt);
	}
	return ERR_OK;
}

void db_listen_free(struct db_listener *l)
{
	if (l == NULL)
		return;
	if (l->pg != NULL)
		PQfinish(l->pg);
	free(l);
}
