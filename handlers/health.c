/* handlers/health: /healthz, /readyz, /metrics and /openapi.yaml. */
#include <stdlib.h>

#include "base/strbuf.h"
#include "db/migrate.h"
#include "db/stats.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "service/listener.h"
#include "service/metrics.h"

void handle_healthz(struct http_req *r)
{
	http_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

void handle_readyz(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	if (hc_db(r, &c, &e) || db_conn_ping(c, &e) || db_schema_check(c, NULL, &e))
		goto out;
	if (!listener_connected(http_req_app(r)->listener)) {
		err_set(&e, ERR_UNAVAILABLE, "notification channel not connected");
		goto out;
	}
	http_reply_json(r, 200, json_pack("{s:s}", "status", "ready"));
out:
	hc_db_release(r, c);
	if (e.code) {
		e.code = ERR_UNAVAILABLE;
		http_reply_error(r, &e);
	}
}

void handle_metrics(struct http_req *r)
{
	struct strbuf b = {0};
	struct err e = {0};
	struct db_conn *c = NULL;
	metrics_render(&b);
	if (hc_db(r, &c, &e) == ERR_OK)
		db_stats_render(c, &b, &e);
	hc_db_release(r, c);
	strbuf_printf(&b,
		      "# HELP hookflow_up Whether the database answered this scrape.\n"
		      "# TYPE hookflow_up gauge\nhookflow_up %d\n",
		      e.code == ERR_OK ? 1 : 0);
	http_reply_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "",
			 b.len);
	strbuf_cleanup(&b);
}

void handle_openapi(struct http_req *r)
{
	const struct app *app = http_req_app(r);
	http_reply_bytes(r, 200, "application/yaml", app->openapi, app->openapi_len);
}
