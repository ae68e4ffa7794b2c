/* db/group: SQL of run groups and members. */
#include "db/group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "db/internal.h"

static const struct db_stmt q_submit = {
	"group_submit",
	"SELECT outcome, submitted FROM hf_group_submit($1, $2, $3::bytea, $4::jsonb,"
	" $5::integer, $6::integer, $7::jsonb)",
	7};
static const struct db_stmt q_counts = {
	"group_counts",
	"SELECT g.workflow, hf_ts(g.created_at), g.total,"
	" count(*) FILTER (WHERE r.status IN ('pending', 'scheduled', 'waiting')),"
	" count(*) FILTER (WHERE r.status IN ('running', 'cancelling')),"
	" count(*) FILTER (WHERE r.status = 'succeeded'),"
	" count(*) FILTER (WHERE r.status = 'failed'),"
	" count(*) FILTER (WHERE r.status = 'cancelled')"
	" FROM run_group g LEFT JOIN group_member m ON m.group_id = g.group_id"
	" LEFT JOIN run r ON r.run_id = m.run_id WHERE g.group_id = $1"
	" GROUP BY g.group_id",
	1};
static const struct db_stmt q_members = {
	"group_members",
	DB_PAGE_SQL("SELECT jsonb_build_object('key', m.key, 'run_id', m.run_id,"
		    " 'status', r.status, 'result', r.result, 'error', r.error,"
		    " 'generation', r.generation)::text AS item, m.ord AS ms, 'm' AS id"
		    " FROM group_member m LEFT JOIN run r ON r.run_id = m.run_id"
		    " WHERE m.group_id = $1 AND m.ord > $2 ORDER BY m.ord",
		    "ms", "$3", "$4"),
	4};
static const struct db_stmt q_cancel = {"group_cancel",
					"SELECT hf_cancel_many(NULL, NULL, $1, NULL, 1000000)", 1};
static const struct db_stmt q_forget = {"group_forget", "SELECT hf_group_forget($1)", 1};

enum err_code db_group_submit(struct db_conn *c, const char *group_id, const char *workflow,
			      const unsigned char manifest[32], const char *members_json,
			      int priority, int max_attempts, const struct trace_parent *trace,
			      bool *created, int *submitted, struct err *e)
{
	bool oom;
	json_t *tr = db_trace_json(trace, &oom);
	char *tr_text = tr != NULL ? json_dumps(tr, JSON_COMPACT) : NULL;
	json_decref(tr);
	if (oom || (tr != NULL && tr_text == NULL))
		return err_set(e, ERR_INTERNAL, "out of memory");
	char hash[2 + 64 + 1] = "\\x";
	ids_hex(manifest, 32, hash + 2);
	char prio[16], att[16];
	snprintf(prio, sizeof prio, "%d", priority);
	snprintf(att, sizeof att, "%d", max_attempts);
	const char *p[7] = {group_id,
			    workflow,
			    hash,
			    members_json,
			    priority >= 0 ? prio : NULL,
			    max_attempts >= 0 ? att : NULL,
			    tr_text};
	PGresult *r = db_exec(c, &q_submit, p, e);
	free(tr_text);
	if (r == NULL)
		return e->code;
	char outcome[32];
	snprintf(outcome, sizeof outcome, "%s", PQgetvalue(r, 0, 0));
	*submitted = (int)db_i64(r, 0, 1);
	PQclear(r);
	if (strcmp(outcome, "workflow_not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "workflow: %s not found", workflow);
	if (strcmp(outcome, "group_mismatch") == 0)
		return err_set(e, ERR_GROUP_MISMATCH,
			       "members: group %s was submitted with another member set", group_id);
	*created = strcmp(outcome, "created") == 0;
	return ERR_OK;
}

enum err_code db_group_get(struct db_conn *c, const char *group_id, const struct db_page_req *pg,
			   json_t **head, struct db_page *members, bool *done, struct err *e)
{
	*head = NULL;
	memset(members, 0, sizeof *members);
	char *after = NULL;
	int64_t ord = -1;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &ord, &after, e))
		return e->code;
	free(after);
	const char *p1[1] = {group_id};
	PGresult *r = db_exec(c, &q_counts, p1, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "group %s not found", group_id);
	}
	json_t *g = json_pack(
		"{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "group_id", group_id, "workflow",
		PQgetvalue(r, 0, 0), "created_at", PQgetvalue(r, 0, 1), "total",
		(json_int_t)db_i64(r, 0, 2), "pending", (json_int_t)db_i64(r, 0, 3), "running",
		(json_int_t)db_i64(r, 0, 4), "succeeded", (json_int_t)db_i64(r, 0, 5), "failed",
		(json_int_t)db_i64(r, 0, 6), "cancelled", (json_int_t)db_i64(r, 0, 7));
	*done = db_i64(r, 0, 3) + db_i64(r, 0, 4) == 0;
	PQclear(r);
	if (g == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");

	char after_ord[24];
	struct db_page_params pp;
	snprintf(after_ord, sizeof after_ord, "%lld", (long long)ord);
	db_page_params(pg, &pp);
	const char *p2[4] = {group_id, after_ord, pp.limit, pp.max_bytes};
	r = db_exec(c, &q_members, p2, e);
	if (r == NULL || db_page_read(r, members, e)) {
		json_decref(g);
		return e->code;
	}
	*head = g;
	return ERR_OK;
}

enum err_code db_group_cancel(struct db_conn *c, const char *group_id, int *n, struct err *e)
{
	const char *p[1] = {group_id};
	PGresult *r = db_exec(c, &q_cancel, p, e);
	if (r == NULL)
		return e->code;
	*n = (int)db_i64(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_group_forget(struct db_conn *c, const char *group_id, struct err *e)
{
	const char *p[1] = {group_id};
	PGresult *r = db_exec(c, &q_forget, p, e);
	if (r == NULL)
		return e->code;
	char res[32];
	snprintf(res, sizeof res, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (strcmp(res, "not_found") == 0)
		return err_set(e, ERR_NOT_FOUND, "group %s not found", group_id);
	if (strcmp(res, "group_active") == 0)
		return err_set(e, ERR_GROUP_ACTIVE, "group %s has active members", group_id);
	return ERR_OK;
}
