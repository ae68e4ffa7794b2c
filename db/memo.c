/* db/memo: SQL of the memo table. */
#include "db/memo.h"

#include <stdio.h>
#include <string.h>

#include "db/internal.h"

static const struct db_stmt q_get = {
	"memo_get", "SELECT value FROM memo WHERE run_id = $1 AND scope = $2 AND key = $3", 3};
static const struct db_stmt q_put = {
	"memo_put",
	"INSERT INTO memo (run_id, scope, key, value)"
	" SELECT $1, $2, $3, $4::jsonb WHERE EXISTS (SELECT 1 FROM run WHERE run_id = $1)"
	" ON CONFLICT (run_id, scope, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()"
	" RETURNING 1",
	4};
static const struct db_stmt q_delete = {
	"memo_delete", "DELETE FROM memo WHERE run_id = $1 AND scope = $2 AND key = $3 RETURNING 1",
	3};

static const struct db_stmt q_run_live = {"memo_run_live",
					  "SELECT generation, status IN ('succeeded', 'failed', "
					  "'cancelled') FROM run WHERE run_id = $1",
					  1};

enum err_code db_memo_token_check(struct db_conn *c, const char *run_id, int generation,
				  struct err *e)
{
	const char *p[1] = {run_id};
	PGresult *r = db_exec(c, &q_run_live, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0)
		err_set(e, ERR_FORBIDDEN,
			"authorization: the delivery token's run no longer exists");
	else if (strcmp(PQgetvalue(r, 0, 1), "t") == 0)
		err_set(e, ERR_FORBIDDEN, "authorization: the delivery token's run has ended");
	else if (generation >= 0 && db_i64(r, 0, 0) != generation)
		err_set(e, ERR_FORBIDDEN,
			"authorization: the delivery token is for generation %d; the run was rerun",
			generation);
	PQclear(r);
	return e->code;
}

enum err_code db_memo_get(struct db_conn *c, const char *run_id, int scope, const char *key,
			  json_t **value, struct err *e)
{
	*value = NULL;
	char sc[16];
	snprintf(sc, sizeof sc, "%d", scope);
	const char *p[3] = {run_id, sc, key};
	PGresult *r = db_exec(c, &q_get, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "memo not found");
	}
	*value = db_json(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_memo_put(struct db_conn *c, const char *run_id, int scope, const char *key,
			  const char *value_json, struct err *e)
{
	char sc[16];
	snprintf(sc, sizeof sc, "%d", scope);
	const char *p[4] = {run_id, sc, key, value_json};
	PGresult *r = db_exec(c, &q_put, p, e);
	if (r == NULL)
		return e->code;
	int n = PQntuples(r);
	PQclear(r);
	if (n == 0)
		return err_set(e, ERR_NOT_FOUND, "run %s not found", run_id);
	return ERR_OK;
}

enum err_code db_memo_delete(struct db_conn *c, const char *run_id, int scope, const char *key,
			     bool *removed, struct err *e)
{
	char sc[16];
	snprintf(sc, sizeof sc, "%d", scope);
	const char *p[3] = {run_id, sc, key};
	PGresult *r = db_exec(c, &q_delete, p, e);
	if (r == NULL)
		return e->code;
	*removed = PQntuples(r) > 0;
	PQclear(r);
	return ERR_OK;
}
