/* handlers/endpoints: GET /v1/endpoints, the in-flight allowance and circuit
 * breaker this instance keeps per webhook endpoint (service/endpoints.h;
 * README "Flow control"). Each instance keeps its own: the answer names it. */
#include "handlers/handlers.h"

#include "base/timefmt.h"
#include "service/dispatcher.h"
#include "service/endpoints.h"

/* A monotonic time of the endpoint table as RFC 3339, or JSON null for 0. */
static json_t *wall_time(int64_t mono_ms, int64_t now_mono, int64_t now_wall)
{
	if (mono_ms == 0)
		return json_null();
	char ts[TIMEFMT_RFC3339_LEN + 1];
	timefmt_rfc3339(now_wall + (mono_ms - now_mono), ts);
	return json_string(ts);
}

static json_t *endpoint_json(const struct endpoint_info *ep, int64_t now_mono, int64_t now_wall)
{
	json_t *o = json_pack(
		"{s:s, s:s, s:b, s:f, s:i, s:o, s:o, s:f, s:I, s:o, s:o, s:I, s:I, s:I, s:I}",
		"endpoint", ep->origin, "state", endpoint_state_name(ep->state), "limited",
		!ep->unconstrained, "allowance", ep->allowance, "inflight", ep->inflight,
		"paused_until", wall_time(ep->paused_until_ms, now_mono, now_wall), "open_until",
		wall_time(ep->state == ENDPOINT_OPEN ? ep->open_until_ms : 0, now_mono, now_wall),
		"error_rate", ep->error_rate, "recent_calls", (json_int_t)ep->recent_calls,
		"last_error", ep->last_error[0] ? json_string(ep->last_error) : json_null(),
		"last_error_at", wall_time(ep->last_error_ms, now_mono, now_wall), "calls",
		(json_int_t)ep->calls, "throttled", (json_int_t)ep->throttled, "failures",
		(json_int_t)ep->failures, "breaker_opens", (json_int_t)ep->breaker_opens);
	return o;
}

void handle_endpoint_list(struct http_req *r)
{
	const struct app *app = http_req_app(r);
	struct endpoint_info *v = NULL;
	size_t n = 0;
	struct err e = {0};
	int64_t now_mono = timefmt_mono_ms(), now_wall = timefmt_now_ms();
	if (endpoints_snapshot(dispatcher_endpoints(app->dispatcher), now_mono, &v, &n, &e)) {
		http_reply_error(r, &e);
		return;
	}
	json_t *items = json_array();
	for (size_t i = 0; items != NULL && i < n; i++)
		if (json_array_append_new(items, endpoint_json(&v[i], now_mono, now_wall))) {
			json_decref(items);
			items = NULL;
		}
	endpoints_snapshot_free(v);
	json_t *body = items ? json_pack("{s:s, s:b, s:o}", "instance",
					 dispatcher_instance(app->dispatcher), "enabled",
					 app->cfg->endpoint_control, "endpoints", items)
			     : NULL;
	if (body == NULL) {
		err_set(&e, ERR_INTERNAL, "endpoints: out of memory");
		http_reply_error(r, &e);
		return;
	}
	http_reply_json(r, 200, body);
}
