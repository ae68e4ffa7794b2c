/* handlers/groups: PUT, GET (with long-poll), DELETE /v1/groups/{id} and POST .../cancel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"
#include "db/group.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "handlers/parse.h"
#include "service/verdict.h"

#define MAX_MEMBERS 10000
#define MAX_WAIT_MS 300000

static const char *const group_keys[] = {"workflow",     "members", "priority",
					 "max_attempts", "headers", NULL};
static const char *const member_keys[] = {"key", "input", "headers", "concurrency_key", NULL};

/* Builds the member list hf_group_submit takes, and the manifest hash over
 * the ordered (key, input, headers, concurrency_key) list. A member without a
 * concurrency_key has none in the manifest either, so the manifests of groups
 * recorded before the field existed stay what they were. Returns a new
 * reference or NULL with `e` set. */
static json_t *members_of(const char *group_id, const json_t *members, const json_t *group_headers,
			  unsigned char manifest[32], struct err *e)
{
	if (!json_is_array(members) || json_array_size(members) == 0 ||
	    json_array_size(members) > MAX_MEMBERS) {
		err_set(e, ERR_INVALID, "members: must be an array of 1 to %d members",
			MAX_MEMBERS);
		return NULL;
	}
	json_t *out = json_array();
	json_t *manifest_list = json_array();
	json_t *seen = json_object();
	size_t i;
	json_t *m;
	json_array_foreach (members, i, m) {
		char field[48];
		snprintf(field, sizeof field, "members[%zu]", i);
		if (!json_is_object(m)) {
			err_set(e, ERR_INVALID, "%s: must be an object", field);
			goto fail;
		}
		if (hc_only_keys(m, member_keys, e))
			goto fail;
		json_t *k = json_object_get(m, "key");
		if (!json_is_string(k)) {
			err_set(e, ERR_INVALID, "%s.key: required string", field);
			goto fail;
		}
		const char *key = json_string_value(k);
		char kf[64];
		snprintf(kf, sizeof kf, "%s.key", field);
		if (ids_check_key(kf, key, json_string_length(k), e))
			goto fail;
		if (json_object_get(seen, key) != NULL) {
			char q[80];
			ids_quote(key, strlen(key), q, sizeof q);
			err_set(e, ERR_INVALID, "%s.key: duplicate member key %s", field, q);
			goto fail;
		}
		json_object_set_new(seen, key, json_true());
		char cf[64];
		const char *ckey;
		snprintf(cf, sizeof cf, "%s.concurrency_key", field);
		if (hc_concurrency_key(m, cf, &ckey, e))
			goto fail;
		json_t *input = json_object_get(m, "input");
		if (input == NULL)
			input = json_null();
		json_t *h = json_object_get(m, "headers");
		json_t *merged = json_object();
		if (json_is_object(group_headers))
			json_object_update(merged, (json_t *)group_headers);
		if (h != NULL && !json_is_null(h)) {
			char hf[64];
			snprintf(hf, sizeof hf, "%s.headers", field);
			if (verdict_check_headers(hf, h, e)) {
				json_decref(merged);
				goto fail;
			}
			json_object_update(merged, h);
		}
		unsigned char ih[32], rid[32];
		char ih_hex[65], rid_hex[65];
		if (canon_json_sha256(input, ih) != 0) {
			json_decref(merged);
			err_set(e, ERR_INTERNAL, "out of memory");
			goto fail;
		}
		ids_hex(ih, 32, ih_hex);
		size_t glen = strlen(group_id), klen = strlen(key);
		char *idsrc = malloc(glen + 1 + klen);
		if (idsrc == NULL) {
			json_decref(merged);
			err_set(e, ERR_INTERNAL, "out of memory");
			goto fail;
		}
		memcpy(idsrc, group_id, glen);
		idsrc[glen] = '/';
		memcpy(idsrc + glen + 1, key, klen);
		canon_sha256(idsrc, glen + 1 + klen, rid);
		free(idsrc);
		ids_hex(rid, 32, rid_hex);
		json_t *listed =
			json_pack("{s:s, s:O, s:O}", "key", key, "input", input, "headers", merged);
		json_t *member =
			json_pack("{s:s, s:s, s:O, s:s, s:o}", "key", key, "run_id", rid_hex,
				  "input", input, "input_hash", ih_hex, "headers", merged);
		if (listed == NULL || member == NULL) {
			json_decref(listed);
			json_decref(member);
			err_set(e, ERR_INTERNAL, "out of memory");
			goto fail;
		}
		if (ckey != NULL) {
			json_object_set_new(listed, "concurrency_key", json_string(ckey));
			json_object_set_new(member, "concurrency_key", json_string(ckey));
		}
		json_array_append_new(manifest_list, listed);
		json_array_append_new(out, member);
	}
	if (canon_json_sha256(manifest_list, manifest) != 0) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	json_decref(manifest_list);
	json_decref(seen);
	return out;
fail:
	json_decref(out);
	json_decref(manifest_list);
	json_decref(seen);
	return NULL;
}

enum err_code groups_parse_put(const char *group_id, const json_t *body, struct group_put *out,
			       struct err *e)
{
	int64_t prio, att;
	json_t *members = NULL;
	if (hc_only_keys(body, group_keys, e) ||
	    hc_str(body, "workflow", IDS_MAX_NAME + 1, &out->workflow, e))
		goto out;
	if (out->workflow == NULL) {
		err_set(e, ERR_INVALID, "workflow: required");
		goto out;
	}
	if (ids_check_workflow_name("workflow", out->workflow, strlen(out->workflow), e) ||
	    hc_int(body, "priority", 0, 2147483647, -1, &prio, e) ||
	    hc_int(body, "max_attempts", 1, 1000, -1, &att, e))
		goto out;
	out->priority = (int)prio;
	out->max_attempts = (int)att;
	json_t *gh = json_object_get(body, "headers");
	if (gh != NULL && !json_is_null(gh) && verdict_check_headers("headers", gh, e))
		goto out;
	members = members_of(group_id, json_object_get(body, "members"), gh, out->manifest, e);
	if (members == NULL)
		goto out;
	out->members_text = json_dumps(members, JSON_COMPACT);
	if (out->members_text == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
out:
	json_decref(members);
	return e->code;
}

void groups_put_cleanup(struct group_put *g)
{
	free(g->members_text);
	memset(g, 0, sizeof *g);
}

void handle_group_put(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *body = NULL, *g = NULL;
	struct db_page members = {0};
	const char *group_id = http_req_param(r, 0);
	struct group_put gp = {0};
	struct db_page_req first = hc_first_page(r, HC_PAGE_LIMIT);
	bool created = false, done;
	int submitted = 0;
	struct trace_parent tp;
	if (ids_check_run_id("group_id", group_id, strlen(group_id), &e) ||
	    http_req_json(r, &body, &e) || groups_parse_put(group_id, body, &gp, &e) ||
	    hc_db(r, &c, &e) ||
	    db_group_submit(c, group_id, gp.workflow, gp.manifest, gp.members_text, gp.priority,
			    gp.max_attempts, http_req_trace(r, &tp) ? &tp : NULL, &created,
			    &submitted, &e) ||
	    db_group_get(c, group_id, &first, &g, &members, &done, &e))
		goto out;
	json_object_set_new(g, "submitted", json_integer(submitted));
	hc_reply_page(r, created ? 201 : 200, g, "members", &members);
	g = NULL;
out:
	json_decref(g);
	db_page_cleanup(&members);
	groups_put_cleanup(&gp);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_group_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *g = NULL;
	struct db_page members = {0};
	const char *group_id = http_req_param(r, 0);
	struct db_page_req pg;
	int64_t wait_ms;
	bool done = false;
	char key[IDS_MAX_RUN_ID + 8];
	if (ids_check_run_id("group_id", group_id, strlen(group_id), &e) ||
	    hc_paging(r, HC_PAGE_LIMIT, &pg, &e) ||
	    hc_query_int(r, "wait_ms", 0, MAX_WAIT_MS, 0, &wait_ms, &e) || hc_db(r, &c, &e) ||
	    db_group_get(c, group_id, &pg, &g, &members, &done, &e))
		goto out;
	snprintf(key, sizeof key, "group:%s", group_id);
	/* Each member's termination fires the wait; it is re-armed until every
	 * member is terminal or the deadline passes. */
	while (!done && wait_ms > 0 && !http_longpoll_expired(r)) {
		json_decref(g);
		g = NULL;
		db_page_cleanup(&members);
		if (http_longpoll_arm(r, key, wait_ms, &e) ||
		    db_group_get(c, group_id, &pg, &g, &members, &done, &e))
			goto out;
		if (done)
			break;
		hc_db_release(r, c);
		c = NULL;
		if (http_longpoll_suspend(r))
			goto out;
		json_decref(g);
		g = NULL;
		db_page_cleanup(&members);
		if (hc_db(r, &c, &e) || db_group_get(c, group_id, &pg, &g, &members, &done, &e))
			goto out;
	}
	hc_reply_page(r, 200, g, "members", &members);
	g = NULL;
out:
	db_page_cleanup(&members);
	json_decref(g);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_group_cancel(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *group_id = http_req_param(r, 0);
	json_t *g = NULL;
	struct db_page members = {0};
	struct db_page_req first = hc_first_page(r, 1);
	bool done;
	int n = 0;
	if (ids_check_run_id("group_id", group_id, strlen(group_id), &e) || hc_db(r, &c, &e) ||
	    db_group_get(c, group_id, &first, &g, &members, &done, &e) ||
	    db_group_cancel(c, group_id, &n, &e))
		goto out;
	http_reply_json(r, 200, json_pack("{s:i}", "cancelled", n));
out:
	db_page_cleanup(&members);
	json_decref(g);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_group_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *group_id = http_req_param(r, 0);
	if (ids_check_run_id("group_id", group_id, strlen(group_id), &e) || hc_db(r, &c, &e) ||
	    db_group_forget(c, group_id, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
