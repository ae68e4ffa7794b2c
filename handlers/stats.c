/* handlers/stats: the read-only figures the dashboard draws (db/series.h):
 * GET /v1/workflows/{name}/stats, GET /v1/stats/series and
 * GET /v1/runs/{run_id}/callbacks. */
#include <string.h>

#include "base/ids.h"
#include "db/series.h"
#include "handlers/common.h"
#include "handlers/handlers.h"

/* The window of a series: whole hours, so that its points (minutes seconds
 * each) are whole minutes of step_stats. */
#define SERIES_MIN_MINUTES 60
#define SERIES_MAX_MINUTES 1440

/* Replies with the JSON `j` (taken) or the error `e`, and releases `c`. */
static void reply(struct http_req *r, struct db_conn *c, json_t *j, struct err *e)
{
	hc_db_release(r, c);
	if (e->code) {
		json_decref(j);
		http_reply_error(r, e);
		return;
	}
	http_reply_json(r, 200, j);
}

void handle_workflow_stats(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *j = NULL;
	const char *name = http_req_param(r, 0);
	if (ids_check_workflow_name("name", name, strlen(name), &e) || hc_db(r, &c, &e))
		goto out;
	db_workflow_stats(c, name, &j, &e);
out:
	reply(r, c, j, &e);
}

void handle_stats_series(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *j = NULL;
	int64_t minutes = 0;
	const char *workflow = http_req_query(r, "workflow");
	if (hc_query_int(r, "minutes", SERIES_MIN_MINUTES, SERIES_MAX_MINUTES, 60, &minutes, &e))
		goto out;
	if (minutes % 60 != 0) {
		err_set(&e, ERR_INVALID, "minutes: must be a multiple of 60 (whole hours)");
		goto out;
	}
	if (workflow != NULL && *workflow == '\0')
		workflow = NULL;
	if (workflow != NULL && ids_check_workflow_name("workflow", workflow, strlen(workflow), &e))
		goto out;
	if (hc_db(r, &c, &e))
		goto out;
	db_stats_series(c, (int)minutes, workflow, &j, &e);
out:
	reply(r, c, j, &e);
}

void handle_run_callbacks(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *j = NULL;
	const char *id = http_req_param(r, 0);
	if (ids_check_run_id("run_id", id, strlen(id), &e) || hc_db(r, &c, &e))
		goto out;
	db_run_callbacks(c, id, &j, &e);
out:
	reply(r, c, j, &e);
}
