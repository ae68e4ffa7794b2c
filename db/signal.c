/* db/signal: SQL of signals and the signal buffer. */
#include "db/signal.h"

#include <string.h>

#include "db/internal.h"

static const struct db_stmt q_send = {"signal_send", "SELECT hf_signal($1, $2::jsonb)", 2};
static const struct db_stmt q_clear = {
	"signal_clear", "DELETE FROM signal_buffer WHERE correlation_key = $1 RETURNING 1", 1};

enum err_code db_signal_send(struct db_conn *c, const char *key, const char *payload_json,
			     enum signal_outcome *out, struct err *e)
{
	const char *p[2] = {key, payload_json};
	PGresult *r = db_exec(c, &q_send, p, e);
	if (r == NULL)
		return e->code;
	*out = strcmp(PQgetvalue(r, 0, 0), "delivered") == 0 ? SIGNAL_DELIVERED : SIGNAL_BUFFERED;
	PQclear(r);
	return ERR_OK;
}

enum err_code db_signal_clear(struct db_conn *c, const char *key, bool *removed, struct err *e)
{
	const char *p[1] = {key};
	PGresult *r = db_exec(c, &q_clear, p, e);
	if (r == NULL)
		return e->code;
	*removed = PQntuples(r) > 0;
	PQclear(r);
	return ERR_OK;
}
