/* handlers/signals: POST and DELETE /v1/signals/{correlation_key}. */
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "db/signal.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "handlers/parse.h"

enum err_code signals_parse_send(const json_t *body, char **payload, struct err *e)
{
	static const char *const keys[] = {"payload", NULL};
	*payload = NULL;
	if (body != NULL && hc_only_keys(body, keys, e))
		return e->code;
	json_t *p = body ? json_object_get(body, "payload") : NULL;
	*payload = json_dumps(p ? p : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
	if (*payload == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	return ERR_OK;
}

void handle_signal_send(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL;
	char *payload = NULL;
	const char *key = http_req_param(r, 0);
	enum signal_outcome out;
	if (ids_check_key("correlation_key", key, strlen(key), &e))
		goto out;
	if (http_req_has_body(r) && http_req_json(r, &body, &e))
		goto out;
	if (signals_parse_send(body, &payload, &e) || hc_db(r, &c, &e) ||
	    db_signal_send(c, key, payload, &out, &e))
		goto out;
	http_reply_json(
		r, 200,
		json_pack("{s:s}", "outcome", out == SIGNAL_DELIVERED ? "delivered" : "buffered"));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
	free(payload);
	json_decref(body);
}

void handle_signal_clear(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *key = http_req_param(r, 0);
	bool removed = false;
	if (ids_check_key("correlation_key", key, strlen(key), &e) || hc_db(r, &c, &e) ||
	    db_signal_clear(c, key, &removed, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:b}", "removed", removed));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
