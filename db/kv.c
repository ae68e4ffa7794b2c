/* db/kv: SQL of the application KV table. */
#include "db/kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/internal.h"

#define ITEM "jsonb_build_object('key', key, 'value', value, 'updated_at', hf_ts(updated_at))"

static const struct db_stmt q_get = {"kv_get", "SELECT " ITEM " FROM kv WHERE key = $1", 1};
/* The range lets the C-collated primary key serve the prefix scan. Keys are
 * at most 512 bytes, so every key starting with $1 sorts below $1 followed by
 * 128 copies of the largest code point (U+10FFFF, the largest UTF-8 bytes). */
static const struct db_stmt q_list = {
	"kv_list",
	DB_PAGE_SQL("SELECT " ITEM "::text AS item, 0::bigint AS ms, key AS id FROM kv"
		    " WHERE key >= $1 AND key < $1 || repeat(chr(1114111), 128)"
		    " AND starts_with(key, $1) AND ($2::text IS NULL OR key > $2) ORDER BY key",
		    "id", "$3", "$4"),
	4};
static const struct db_stmt q_put = {
	"kv_put",
	"INSERT INTO kv AS k (key, value) VALUES ($1, $2::jsonb) ON CONFLICT (key) DO UPDATE"
	" SET value = EXCLUDED.value, updated_at = now()"
	" RETURNING jsonb_build_object('key', k.key, 'value', k.value, 'updated_at', "
	"hf_ts(k.updated_at))",
	2};
static const struct db_stmt q_delete = {"kv_delete", "DELETE FROM kv WHERE key = $1 RETURNING 1",
					1};

enum err_code db_kv_get(struct db_conn *c, const char *key, json_t **item, struct err *e)
{
	*item = NULL;
	const char *p[1] = {key};
	PGresult *r = db_exec(c, &q_get, p, e);
	if (r == NULL)
		return e->code;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(e, ERR_NOT_FOUND, "key not found");
	}
	*item = db_json(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_kv_list(struct db_conn *c, const char *prefix, const struct db_page_req *pg,
			 struct db_page *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	char *after = NULL;
	int64_t ignored;
	if (pg->cursor != NULL && db_cursor_decode(pg->cursor, &ignored, &after, e))
		return e->code;
	struct db_page_params pp;
	db_page_params(pg, &pp);
	const char *p[4] = {prefix, after, pp.limit, pp.max_bytes};
	PGresult *r = db_exec(c, &q_list, p, e);
	free(after);
	if (r == NULL)
		return e->code;
	return db_page_read(r, out, e);
}

enum err_code db_kv_put(struct db_conn *c, const char *key, const char *value_json, json_t **item,
			struct err *e)
{
	*item = NULL;
	const char *p[2] = {key, value_json};
	PGresult *r = db_exec(c, &q_put, p, e);
	if (r == NULL)
		return e->code;
	*item = db_json(r, 0, 0);
	PQclear(r);
	return ERR_OK;
}

enum err_code db_kv_delete(struct db_conn *c, const char *key, bool *removed, struct err *e)
{
	const char *p[1] = {key};
	PGresult *r = db_exec(c, &q_delete, p, e);
	if (r == NULL)
		return e->code;
	*removed = PQntuples(r) > 0;
	PQclear(r);
	return ERR_OK;
}
