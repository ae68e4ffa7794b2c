/* handlers/kv: GET, PUT, DELETE /v1/kv/{key} and GET /v1/kv?prefix=
 * (openapi/openapi.yaml, tag kv). */
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "db/kv.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "service/effects.h"

/* Validates the key of the path; `writing` refuses the reserved prefix. */
static enum err_code kv_key(struct http_req *r, bool writing, const char **key, struct err *e)
{
	*key = http_req_param(r, 0);
	if (ids_check_key("key", *key, strlen(*key), e))
		return e->code;
	if (writing && strncmp(*key, EFFECTS_RESERVED_PREFIX, strlen(EFFECTS_RESERVED_PREFIX)) == 0)
		return err_set(e, ERR_INVALID, "key: the workflow/ prefix is reserved");
	return ERR_OK;
}

void handle_kv_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *key;
	json_t *item = NULL;
	if (kv_key(r, false, &key, &e) || hc_db(r, &c, &e) || db_kv_get(c, key, &item, &e))
		goto out;
	http_reply_json(r, 200, item);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_kv_list(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page items = {0};
	struct db_page_req pg;
	const char *prefix = http_req_query(r, "prefix");
	if (prefix == NULL)
		prefix = "";
	if (hc_paging(r, HC_PAGE_LIMIT, &pg, &e))
		goto out;
	if (*prefix != '\0' && ids_check_key("prefix", prefix, strlen(prefix), &e))
		goto out;
	if (hc_db(r, &c, &e) || db_kv_list(c, prefix, &pg, &items, &e))
		goto out;
	hc_reply_page(r, 200, NULL, "items", &items);
out:
	db_page_cleanup(&items);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_kv_put(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *key;
	char *value = NULL;
	json_t *item = NULL;
	if (kv_key(r, true, &key, &e) || hc_value_body(r, &value, &e) || hc_db(r, &c, &e) ||
	    db_kv_put(c, key, value, &item, &e))
		goto out;
	http_reply_json(r, 200, item);
out:
	free(value);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_kv_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *key;
	bool removed;
	if (kv_key(r, true, &key, &e) || hc_db(r, &c, &e) || db_kv_delete(c, key, &removed, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
