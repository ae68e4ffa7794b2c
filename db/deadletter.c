/* db/deadletter: SQL of the dead_letter table. */
#include "db/deadletter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/internal.h"

static const struct db_stmt q_list = {
	"deadletter_list",
	DB_PAGE_SQL("SELECT jsonb_build_object('id', d.id, 'kind', d.kind, 'run_id', d.run_id,"
		    " 'workflow', d.workflow, 'generation', d.generation, 'step', d.step,"
		    " 'attempts', d.attempts, 'last_error', d.last_error,"
		    " 'last_http_status', d.last_http_status, 'payload', d.payload,"
		    " 'created_at', hf_ts(d.created_at))::text AS item,"
		    " hf_us(d.created_at) AS ms, d.id AS id, d.created_at AS k_created"
		    " FROM dead_letter d WHERE ($1::text IS NULL OR d.workflow = $1)"
		    " AND ($2::text IS NULL OR d.kind = $2)"
		    " AND ($3::bigint IS NULL OR d.created_at < hf_from_us($3::bigint)"
		    "      OR (d.created_at = hf_from_us($3::bigint) AND d.id < $4))"
		    " ORDER BY d.created_at DESC, d.id DESC",
		    "k_created DESC, id DESC", "$5", "$6"),
	6};
static const struct db_stmt q_redrive = {"deadletter_redrive", "SELECT hf_redrive($1)", 1};
static const struct db_stmt q_delete = {"deadletter_delete",
					"DELETE FROM dead_letter WHERE id = $1 RETURNING 1", 1};

enum err_code db_deadletter_list(struct db_conn *c, const char *workflow, const char *kind,
				 const struct db_page_req *pg, struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	char *after_id = NULL;
	int64_t after_us = 0;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &after_us, &after_id, e))
		return e->code;
	char us[24];
	struct db_page_params pp;
	snprintf(us, sizeof us, "%lld", (long long)after_us);
	db_page_params(pg, &pp);
	const char *p[6] = {workflow, kind, after_id ? us : NULL, after_id, pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_list, p, e);
	free(after_id);
	if (r == NULL)
		return e->code;
	return db_page_read(r, out, e);
}

enum err_code db_deadletter_redrive(struct db_conn *c, const char *id, const char **kind,
				    struct err *e)
{
	const char *p[1] = {id};
	PGresult *r = db_exec(c, &q_redrive, p, e);
	if (r == NULL)
		return e->code;
	char res[32];
	snprintf(res, sizeof res, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (strcmp(res, "not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "dead letter %s not found", id);
	if (strcmp(res, "run_active") == 0)
		return err_set(e, ERR_RUN_ACTIVE, "the run of dead letter %s is active again", id);
	*kind = strcmp(res, "step") == 0 ? "step" : "callback";
	return ERR_OK;
}

enum err_code db_deadletter_delete(struct db_conn *c, const char *id, struct err *e)
{
	const char *p[1] = {id};
	PGresult *r = db_exec(c, &q_delete, p, e);
	if (r == NULL)
		return e->code;
	int n = PQntuples(r);
	PQclear(r);
	if (n == 0)
		return err_set(e, ERR_NOT_FOUND, "dead letter %s not found", id);
	return ERR_OK;
}
