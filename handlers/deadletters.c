/* handlers/deadletters: GET /v1/dead-letters, POST .../{id}/redrive, DELETE .../{id}. */
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "db/deadletter.h"
#include "handlers/common.h"
#include "handlers/handlers.h"

static enum err_code dead_id(struct http_req *r, const char **id, struct err *e)
{
	*id = http_req_param(r, 0);
	return ids_check_run_id("id", *id, strlen(*id), e);
}

void handle_deadletter_list(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page items = {0};
	struct db_page_req pg;
	const char *workflow = http_req_query(r, "workflow");
	const char *kind = http_req_query(r, "kind");
	if (hc_paging(r, HC_PAGE_LIMIT, &pg, &e))
		goto out;
	if (workflow != NULL && ids_check_workflow_name("workflow", workflow, strlen(workflow), &e))
		goto out;
	if (kind != NULL && strcmp(kind, "step") != 0 && strcmp(kind, "callback") != 0) {
		err_set(&e, ERR_INVALID, "kind: must be step or callback");
		goto out;
	}
	if (hc_db(r, &c, &e) || db_deadletter_list(c, workflow, kind, &pg, &items, &e))
		goto out;
	hc_reply_page(r, 200, NULL, "dead_letters", &items);
out:
	db_page_cleanup(&items);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_deadletter_redrive(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *id, *kind = NULL;
	if (dead_id(r, &id, &e) || hc_db(r, &c, &e) || db_deadletter_redrive(c, id, &kind, &e))
		goto out;
	http_reply_json(r, 200,
			json_pack("{s:s, s:s, s:b}", "id", id, "kind", kind, "redriven", 1));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_deadletter_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *id;
	if (dead_id(r, &id, &e) || hc_db(r, &c, &e) || db_deadletter_delete(c, id, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
