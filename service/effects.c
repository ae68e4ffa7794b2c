/* effects: validation of the `kv` effects object shared by submissions and outcomes. */
#include "service/effects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"

/* Room for `<field>.put[<quoted key>]`: the key is shown cut short. */
#define LABEL_BYTES 160
#define QUOTED_KEY_BYTES 72

static bool reserved(const char *k, size_t len)
{
	size_t n = strlen(EFFECTS_RESERVED_PREFIX);

	return len >= n && memcmp(k, EFFECTS_RESERVED_PREFIX, n) == 0;
}

/* Checks one key (put or delete); `label` names it in messages. */
static enum err_code check_key(const char *label, const char *k, size_t len, struct err *e)
{
	if (ids_check_key(label, k, len, e) != ERR_OK)
		return e != NULL ? e->code : ERR_INVALID;
	if (reserved(k, len))
		return err_set(e, ERR_INVALID, "%s: key prefix %s is reserved", label,
			       EFFECTS_RESERVED_PREFIX);
	return ERR_OK;
}

static enum err_code check_put(const json_t *put, const char *field, struct err *e)
{
	char label[LABEL_BYTES], quoted[QUOTED_KEY_BYTES];
	const char *k;
	size_t klen;
	json_t *val;
	enum err_code rc = ERR_OK;

	if (!json_is_object(put))
		return err_set(e, ERR_INVALID, "%s.put: must be an object", field);
	json_object_keylen_foreach((json_t *)put, k, klen, val)
	{
		char *enc;
		size_t size;

		ids_quote(k, klen, quoted, sizeof quoted);
		snprintf(label, sizeof label, "%s.put[%s]", field, quoted);
		rc = check_key(label, k, klen, e);
		if (rc != ERR_OK)
			break;
		enc = canon_json_dumps(val);
		if (enc == NULL) {
			rc = err_set(e, ERR_INTERNAL, "%s: out of memory", label);
			break;
		}
		size = strlen(enc);
		free(enc);
		if (size > EFFECTS_MAX_VALUE_BYTES) {
			rc = err_set(e, ERR_INVALID, "%s: value exceeds maximum size of %d bytes",
				     label, EFFECTS_MAX_VALUE_BYTES);
			break;
		}
	}
	return rc;
}

static enum err_code check_delete(const json_t *del, const json_t *put, const char *field,
				  struct err *e)
{
	char label[LABEL_BYTES];

	if (!json_is_array(del))
		return err_set(e, ERR_INVALID, "%s.delete: must be an array of strings", field);
	for (size_t i = 0; i < json_array_size(del); i++) {
		const json_t *k = json_array_get(del, i);
		const char *s;
		size_t len;

		snprintf(label, sizeof label, "%s.delete[%zu]", field, i);
		if (!json_is_string(k))
			return err_set(e, ERR_INVALID, "%s: must be a string", label);
		s = json_string_value(k);
		len = json_string_length(k);
		if (check_key(label, s, len, e) != ERR_OK)
			return e != NULL ? e->code : ERR_INVALID;
		if (put != NULL && json_object_getn(put, s, len) != NULL)
			return err_set(e, ERR_INVALID, "%s: key is both put and deleted", label);
	}
	return ERR_OK;
}

enum err_code effects_parse(const json_t *kv, const char *field, struct effects *out, struct err *e)
{
	char quoted[QUOTED_KEY_BYTES];
	const char *k;
	size_t klen;
	json_t *val;
	const json_t *put, *del;
	enum err_code rc = ERR_OK;

	memset(out, 0, sizeof *out);
	if (kv == NULL || json_is_null(kv))
		return ERR_OK;
	if (!json_is_object(kv))
		return err_set(e, ERR_INVALID, "%s: must be an object", field);
	json_object_keylen_foreach((json_t *)kv, k, klen, val)
	{
		(void)val;
		if ((klen == 3 && memcmp(k, "put", 3) == 0) ||
		    (klen == 6 && memcmp(k, "delete", 6) == 0))
			continue;
		ids_quote(k, klen, quoted, sizeof quoted);
		return err_set(e, ERR_INVALID, "%s: unknown field %s (allowed: put, delete)", field,
			       quoted);
	}
	put = json_object_get(kv, "put");
	del = json_object_get(kv, "delete");
	if (put != NULL) {
		rc = check_put(put, field, e);
		if (rc != ERR_OK)
			return rc;
	}
	if (del != NULL) {
		rc = check_delete(del, put, field, e);
		if (rc != ERR_OK)
			return rc;
	}
	if (put != NULL && json_object_size(put) > 0)
		out->put = json_incref((json_t *)put);
	if (del != NULL && json_array_size(del) > 0)
		out->del = json_incref((json_t *)del);
	return ERR_OK;
}

int effects_empty(const struct effects *fx)
{
	return json_object_size(fx->put) == 0 && json_array_size(fx->del) == 0;
}

void effects_cleanup(struct effects *fx)
{
	if (fx == NULL)
		return;
	json_decref(fx->put);
	json_decref(fx->del);
	fx->put = NULL;
	fx->del = NULL;
}
