/* handlers/common: what every handler shares: borrowing a database
 * connection, list paging parameters and strict JSON field validation whose
 * messages name the field. */
#ifndef HOOKFLOW_HANDLERS_COMMON_H
#define HOOKFLOW_HANDLERS_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/netpolicy.h"
#include "db/db.h"
#include "service/http.h"

#define HC_DB_WAIT_MS 5000
#define HC_MAX_URL 2048
#define HC_PAGE_LIMIT 100        /* default `limit` of a list */
#define HC_STEPS_PAGE_LIMIT 1000 /* default `limit` of a run's history */
#define HC_MAX_PAGE_LIMIT 1000   /* largest `limit` of any list */

/* Borrows a pooled connection for the request; release with hc_db_release. */
enum err_code hc_db(struct http_req *r, struct db_conn **c, struct err *e);
void hc_db_release(struct http_req *r, struct db_conn *c);

/* The page a list request asks for: `limit` (1..HC_MAX_PAGE_LIMIT, default
 * `def_limit`) and `cursor` (borrowed from the request, NULL when absent or
 * empty) from the query string, and the service's byte cap of an answer
 * (HOOKFLOW_MAX_PAGE_BYTES). */
enum err_code hc_paging(struct http_req *r, int def_limit, struct db_page_req *pg, struct err *e);

/* The first page of at most `limit` items, within the byte cap. */
struct db_page_req hc_first_page(struct http_req *r, int limit);

/* The one way a list is answered: `status` with the object `head` (stolen;
 * NULL for a plain list) plus "<key>": the items of `page` (borrowed; their
 * JSON text is copied, not parsed) and "next_cursor". */
void hc_reply_page(struct http_req *r, int status, json_t *head, const char *key,
		   const struct db_page *page);

/* ERR_INVALID naming the first key of `obj` not in the NULL-terminated
 * `allowed` list. */
enum err_code hc_only_keys(const json_t *obj, const char *const *allowed, struct err *e);

/* Reads integer field `name` of `obj` into *out: `def` when absent (or JSON
 * null when `null_ok`), ERR_INVALID unless an integer in [lo, hi]. */
enum err_code hc_int(const json_t *obj, const char *name, int64_t lo, int64_t hi, int64_t def,
		     int64_t *out, struct err *e);

/* Reads string field `name` (borrowed from `obj`, NULL when absent or null),
 * ERR_INVALID when it is another type or longer than `max` bytes. */
enum err_code hc_str(const json_t *obj, const char *name, size_t max, const char **out,
		     struct err *e);

/* Reads the optional "concurrency_key" of `obj` (borrowed from it; NULL when
 * absent or null): a string that passes ids_check_concurrency_key, else
 * ERR_INVALID naming `field` ("concurrency_key", "members[3].concurrency_key"). */
enum err_code hc_concurrency_key(const json_t *obj, const char *field, const char **out,
				 struct err *e);

/* Reads boolean field `name` (`def` when absent). */
enum err_code hc_bool(const json_t *obj, const char *name, bool def, bool *out, struct err *e);

/* Validates an http(s) URL (absolute, with a host, at most HC_MAX_URL bytes)
 * named `field`; a host given as an IP address must pass `egress`. */
enum err_code hc_check_url(const struct netpolicy *egress, const char *field, const char *url,
			   struct err *e);

/* Parses query parameter `name` as an integer in [lo, hi] (`def` when
 * absent). */
enum err_code hc_query_int(struct http_req *r, const char *name, int64_t lo, int64_t hi,
			   int64_t def, int64_t *out, struct err *e);

/* Path parameter `i` of `r` as a step number (0..2^31-1) into *step;
 * ERR_INVALID "step: ..." otherwise. */
enum err_code hc_step_param(struct http_req *r, int i, int *step, struct err *e);

/* Reads a body {"value": <json>} (`value` required; other keys rejected) and
 * returns the value's JSON text (malloc'd) in *text; ERR_INVALID when the
 * value's canonical JSON exceeds 256 KiB. */
enum err_code hc_value_body(struct http_req *r, char **text, struct err *e);

/* The parser behind hc_value_body, for an already-decoded body object
 * (borrowed): *text is malloc'd canonical JSON of the value, NULL on failure. */
enum err_code hc_value_parse(const json_t *body, char **text, struct err *e);

#endif
