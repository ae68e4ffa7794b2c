/* handlers/common: pooled connections, paging and field validation for handlers. */
#include "handlers/common.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"
#include "service/effects.h"

enum err_code hc_db(struct http_req *r, struct db_conn **c, struct err *e)
{
	return db_pool_acquire(http_req_app(r)->pool, HC_DB_WAIT_MS, c, e);
}

void hc_db_release(struct http_req *r, struct db_conn *c)
{
	db_pool_release(http_req_app(r)->pool, c);
}

enum err_code hc_query_int(struct http_req *r, const char *name, int64_t lo, int64_t hi,
			   int64_t def, int64_t *out, struct err *e)
{
	const char *v = http_req_query(r, name);
	if (v == NULL || *v == '\0') {
		*out = def;
		return ERR_OK;
	}
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < lo || n > hi)
		return err_set(e, ERR_INVALID, "%s: must be an integer between %lld and %lld", name,
			       (long long)lo, (long long)hi);
	*out = n;
	return ERR_OK;
}

enum err_code hc_paging(struct http_req *r, int def_limit, struct db_page_req *pg, struct err *e)
{
	int64_t n;
	*pg = hc_first_page(r, def_limit);
	if (hc_query_int(r, "limit", 1, HC_MAX_PAGE_LIMIT, def_limit, &n, e))
		return e->code;
	pg->limit = (int)n;
	pg->cursor = http_req_query(r, "cursor");
	if (pg->cursor != NULL && *pg->cursor == '\0')
		pg->cursor = NULL;
	return ERR_OK;
}

struct db_page_req hc_first_page(struct http_req *r, int limit)
{
	return (struct db_page_req){
		.limit = limit, .cursor = NULL, .max_bytes = http_req_app(r)->cfg->max_page_bytes};
}

void hc_reply_page(struct http_req *r, int status, json_t *head, const char *key,
		   const struct db_page *page)
{
	http_reply_page(r, status, head, key, page->items.data, page->items.len, page->next);
}

enum err_code hc_only_keys(const json_t *obj, const char *const *allowed, struct err *e)
{
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)obj, key, v) {
		bool ok = false;
		for (int i = 0; allowed[i] != NULL; i++)
			if (strcmp(allowed[i], key) == 0)
				ok = true;
		if (!ok) {
			char q[80];
			ids_quote(key, strlen(key), q, sizeof q);
			return err_set(e, ERR_INVALID, "%s: unknown field", q);
		}
	}
	return ERR_OK;
}

enum err_code hc_int(const json_t *obj, const char *name, int64_t lo, int64_t hi, int64_t def,
		     int64_t *out, struct err *e)
{
	json_t *v = json_object_get(obj, name);
	if (v == NULL || json_is_null(v)) {
		*out = def;
		return ERR_OK;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(e, ERR_INVALID, "%s: must be an integer between %lld and %lld", name,
			       (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return ERR_OK;
}

enum err_code hc_str(const json_t *obj, const char *name, size_t max, const char **out,
		     struct err *e)
{
	json_t *v = json_object_get(obj, name);
	*out = NULL;
	if (v == NULL || json_is_null(v))
		return ERR_OK;
	if (!json_is_string(v))
		return err_set(e, ERR_INVALID, "%s: must be a string", name);
	if (json_string_length(v) > max)
		return err_set(e, ERR_INVALID, "%s: longer than %zu bytes", name, max);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return err_set(e, ERR_INVALID, "%s: must not contain NUL", name);
	*out = json_string_value(v);
	return ERR_OK;
}

enum err_code hc_concurrency_key(const json_t *obj, const char *field, const char **out,
				 struct err *e)
{
	json_t *v = json_object_get(obj, "concurrency_key");
	*out = NULL;
	if (v == NULL || json_is_null(v))
		return ERR_OK;
	if (!json_is_string(v))
		return err_set(e, ERR_INVALID, "%s: must be a string", field);
	if (ids_check_concurrency_key(field, json_string_value(v), json_string_length(v), e))
		return e->code;
	*out = json_string_value(v);
	return ERR_OK;
}

enum err_code hc_bool(const json_t *obj, const char *name, bool def, bool *out, struct err *e)
{
	json_t *v = json_object_get(obj, name);
	if (v == NULL || json_is_null(v)) {
		*out = def;
		return ERR_OK;
	}
	if (!json_is_boolean(v))
		return err_set(e, ERR_INVALID, "%s: must be true or false", name);
	*out = json_is_true(v);
	return ERR_OK;
}

/* A host written as an IP address is checked against the egress policy now,
 * for early feedback; names are checked at call time, after DNS. */
static enum err_code check_literal_host(const struct netpolicy *egress, const char *field,
					const char *host, struct err *e)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	char h[INET6_ADDRSTRLEN + 2];
	size_t n = strlen(host);
	if (n >= sizeof h)
		return ERR_OK;
	memcpy(h, host, n + 1);
	if (h[0] == '[' && n > 2 && h[n - 1] == ']') {
		memmove(h, h + 1, n - 2);
		h[n - 2] = '\0';
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, h, &v4->sin_addr) == 1)
		v4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1)
		v6->sin6_family = AF_INET6;
	else
		return ERR_OK;
	char why[160];
	if (!netpolicy_allowed(egress, (struct sockaddr *)&ss, why, sizeof why))
		return err_set(e, ERR_INVALID, "%s: %s", field, why);
	return ERR_OK;
}

enum err_code hc_check_url(const struct netpolicy *egress, const char *field, const char *url,
			   struct err *e)
{
	if (strlen(url) > HC_MAX_URL)
		return err_set(e, ERR_INVALID, "%s: longer than %d bytes", field, HC_MAX_URL);
	CURLU *h = curl_url();
	if (h == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	enum err_code rc = ERR_OK;
	char *scheme = NULL, *host = NULL;
	if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0')
		rc = err_set(e, ERR_INVALID, "%s: must be an absolute http or https URL", field);
	else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		rc = err_set(e, ERR_INVALID, "%s: scheme must be http or https", field);
	else
		rc = check_literal_host(egress, field, host, e);
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(h);
	return rc;
}

enum err_code hc_step_param(struct http_req *r, int i, int *step, struct err *e)
{
	const char *s = http_req_param(r, i);
	char *end = NULL;
	errno = 0;
	long n = s != NULL ? strtol(s, &end, 10) : -1;
	if (s == NULL || errno != 0 || *end != '\0' || end == s || n < 0 || n > 2147483647L)
		return err_set(e, ERR_INVALID, "step: must be a non-negative integer");
	*step = (int)n;
	return ERR_OK;
}

enum err_code hc_value_parse(const json_t *body, char **text, struct err *e)
{
	static const char *const keys[] = {"value", NULL};
	char *canon = NULL;
	*text = NULL;
	if (hc_only_keys(body, keys, e))
		goto out;
	json_t *v = json_object_get(body, "value");
	if (v == NULL) {
		err_set(e, ERR_INVALID, "value: required");
		goto out;
	}
	canon = canon_json_dumps(v);
	if (canon == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (strlen(canon) > EFFECTS_MAX_VALUE_BYTES) {
		err_set(e, ERR_INVALID, "value: larger than %d bytes", EFFECTS_MAX_VALUE_BYTES);
		goto out;
	}
	*text = canon;
	canon = NULL;
out:
	free(canon);
	return e->code;
}

enum err_code hc_value_body(struct http_req *r, char **text, struct err *e)
{
	json_t *body = NULL;
	*text = NULL;
	if (http_req_json(r, &body, e) == ERR_OK)
		hc_value_parse(body, text, e);
	json_decref(body);
	return e->code;
}
