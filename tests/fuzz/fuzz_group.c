/* fuzz_group: PUT /v1/groups/{id} bodies through groups_parse_put. */
#include "tests/fuzz/fuzz.h"

#include "handlers/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = fuzz_json_object(data, size);
	if (body == NULL)
		return 0;
	struct err e = {0};
	struct group_put g = {0};
	enum err_code rc = groups_parse_put("batch-7", body, &g, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
	} else {
		FUZZ_CHECK(g.workflow != NULL);
		FUZZ_CHECK(g.priority >= -1 && g.max_attempts >= -1 && g.max_attempts <= 1000);
		/* The member list db_group_submit takes: one object per member,
		 * each with a key and a 64-hex-digit run id. */
		json_t *members = json_loads(g.members_text, 0, NULL);
		FUZZ_CHECK(json_is_array(members) && json_array_size(members) > 0);
		size_t i;
		json_t *m;
		json_array_foreach (members, i, m) {
			const char *rid = json_string_value(json_object_get(m, "run_id"));
			FUZZ_CHECK(json_is_string(json_object_get(m, "key")));
			FUZZ_CHECK(rid != NULL && strlen(rid) == 64 &&
				   ids_check_run_id("r", rid, 64, NULL) == ERR_OK);
			FUZZ_CHECK(json_is_object(json_object_get(m, "headers")));
			json_t *ck = json_object_get(m, "concurrency_key");
			FUZZ_CHECK(ck == NULL || (json_is_string(ck) &&
						  ids_check_concurrency_key(
							  "k", json_string_value(ck),
							  json_string_length(ck), NULL) == ERR_OK));
		}
		json_decref(members);
	}
	groups_put_cleanup(&g);
	json_decref(body);
	return 0;
}
