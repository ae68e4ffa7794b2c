/* handlers/health: /healthz, /readyz, /metrics and /openapi.yaml. */
#include <stdlib.h>

#include "base/config.h"
#include "base/strbuf.h"
#include "db/db.h"
#include "handlers/common.h"
#include "handlers/handlers.h"

#include "service/dispatcher.h"
#include "service/listener.h"
#include "service/metrics.h"
#include "service/snapshot.h"

void handle_healthz(struct http_req *r)
{
	http_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* /readyz and /metrics read the snapshot (service/snapshot.h): no database
 * query and no pooled connection per request, however many arrive. */
void handle_readyz(struct http_req *r)
{
	struct err e = {0};
	struct snapshot_view v;
	snapshot_read(http_req_app(r)->snapshot, &v, NULL);
	if (!v.ready)
		err_set(&e, ERR_UNAVAILABLE, "%s", v.why);
	else if (!listener_connected(http_req_app(r)->listener))
		err_set(&e, ERR_UNAVAILABLE, "notification channel not connected");
	if (e.code) {
		http_reply_error(r, &e);
		return;
	}
	const struct app *app = http_req_app(r);
	struct config_db_budget b;
	config_db_budget(app->cfg, &b);
	struct db_pool_stats ps;
	db_pool_stats(app->pool, &ps);
	http_reply_json(r, 200,
			json_pack("{s:s, s:{s:{s:i, s:i, s:i, s:i, s:i, s:i}, s:{s:i, s:i, s:i, "
				  "s:i, s:I}}}",
				  "status", "ready", "database", "connections", "workers",
				  b.workers, "submitter", b.submitter, "listener", b.listener,
				  "snapshot", b.snapshot, "api_pool", b.api_pool, "total", b.total,
				  "api_pool", "size", ps.size, "open", ps.open, "in_use", ps.in_use,
				  "waiting", ps.waiting, "acquire_timeouts",
				  (json_int_t)ps.acquire_timeouts));
}

void handle_metrics(struct http_req *r)
{
	struct strbuf b = {0};
	struct snapshot_view v;
	metrics_render(&b);
	metrics_render_endpoints(&b, dispatcher_endpoints(http_req_app(r)->dispatcher));
	snapshot_read(http_req_app(r)->snapshot, &v, &b);
	strbuf_printf(&b,
		      "# HELP hookflow_up Whether the database answered its latest check (at most "
		      "a few seconds old).\n"
		      "# TYPE hookflow_up gauge\nhookflow_up %d\n"
		      "# HELP hookflow_db_snapshot_age_seconds Age of the database gauges above.\n"
		      "# TYPE hookflow_db_snapshot_age_seconds gauge\n"
		      "hookflow_db_snapshot_age_seconds %.3f\n",
		      v.db_up ? 1 : 0, v.age_ms < 0 ? 0.0 : (double)v.age_ms / 1000.0);
	if (b.oom) {
		strbuf_cleanup(&b);
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "metrics: out of memory");
		http_reply_error(r, &e);
		return;
	}
	http_reply_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "",
			 b.len);
	strbuf_cleanup(&b);
}

void handle_openapi(struct http_req *r)
{
	const struct app *app = http_req_app(r);
	http_reply_bytes(r, 200, "application/yaml", app->openapi, app->openapi_len);
}
