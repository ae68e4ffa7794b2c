/* fuzz_effects: the `kv` effects object of submissions and outcomes
 * (effects_parse). The input is any JSON value. */
#include "tests/fuzz/fuzz.h"

#include "base/canon.h"
#include "service/effects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *kv = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
				NULL);
	if (kv == NULL)
		return 0;
	struct effects fx;
	struct err e = {0};
	enum err_code rc = effects_parse(kv, "kv", &fx, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
		FUZZ_CHECK(fx.put == NULL && fx.del == NULL);
	} else {
		const char *k;
		size_t klen, i;
		json_t *v;
		FUZZ_CHECK(fx.put == NULL || json_object_size(fx.put) > 0);
		FUZZ_CHECK(fx.del == NULL || json_array_size(fx.del) > 0);
		FUZZ_CHECK(effects_empty(&fx) == (fx.put == NULL && fx.del == NULL));
		json_object_keylen_foreach(fx.put, k, klen, v)
		{
			FUZZ_CHECK(ids_check_key("k", k, klen, NULL) == ERR_OK);
			FUZZ_CHECK(strncmp(k, EFFECTS_RESERVED_PREFIX, 9) != 0);
			char *c = canon_json_dumps(v);
			FUZZ_CHECK(c != NULL && strlen(c) <= EFFECTS_MAX_VALUE_BYTES);
			free(c);
		}
		json_array_foreach (fx.del, i, v) {
			const char *s = json_string_value(v);
			FUZZ_CHECK(s != NULL);
			FUZZ_CHECK(ids_check_key("k", s, json_string_length(v), NULL) == ERR_OK);
			FUZZ_CHECK(strncmp(s, EFFECTS_RESERVED_PREFIX, 9) != 0);
			FUZZ_CHECK(json_object_getn(fx.put, s, json_string_length(v)) == NULL);
		}
	}
	effects_cleanup(&fx);
	json_decref(kv);
	return 0;
}
