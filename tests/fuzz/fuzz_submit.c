/* fuzz_submit: POST /v1/runs bodies through runs_parse_submit. */
#include "tests/fuzz/fuzz.h"

#include "base/timefmt.h"
#include "db/run.h"
#include "handlers/parse.h"
#include "service/verdict.h"

static struct netpolicy egress;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct err e = {0};
	FUZZ_CHECK(netpolicy_init(&egress, NULL, "10.0.0.0/8, fd00::/8", &e) == ERR_OK);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = fuzz_json_object(data, size);
	if (body == NULL)
		return 0;
	struct err e = {0};
	struct run_submit s = {0};
	struct run_submit_buf buf = {0};
	enum err_code rc = runs_parse_submit(body, &egress, &s, &buf, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
	} else {
		/* What db_run_submit_item is promised. */
		FUZZ_CHECK(s.workflow != NULL && s.run_id != NULL);
		FUZZ_CHECK(ids_check_workflow_name("w", s.workflow, strlen(s.workflow), NULL) ==
			   ERR_OK);
		FUZZ_CHECK(ids_check_run_id("r", s.run_id, strlen(s.run_id), NULL) == ERR_OK);
		fuzz_check_json_text(s.input_json);
		fuzz_check_json_text(s.headers_json);
		if (s.kv_json != NULL)
			fuzz_check_json_text(s.kv_json);
		FUZZ_CHECK(s.priority >= -1 && s.max_attempts >= -1 && s.max_attempts <= 1000);
		FUZZ_CHECK(s.delay_ms >= -1 && s.delay_ms <= VERDICT_MAX_DELAY_MS);
		int64_t ms;
		FUZZ_CHECK(s.run_at == NULL ||
			   (s.delay_ms == -1 && timefmt_parse_rfc3339(s.run_at, &ms)));
		FUZZ_CHECK(s.group_id == NULL && s.group_key == NULL);
		FUZZ_CHECK(s.concurrency_key == NULL ||
			   ids_check_concurrency_key("k", s.concurrency_key,
						     strlen(s.concurrency_key), NULL) == ERR_OK);
		/* The submitter's batch item: one JSON object carrying the run. */
		char *item = db_run_submit_item(&s);
		FUZZ_CHECK(item != NULL);
		json_t *it = json_loads(item, 0, NULL);
		FUZZ_CHECK(json_is_object(it));
		FUZZ_CHECK(strcmp(json_string_value(json_object_get(it, "run_id")), s.run_id) == 0);
		FUZZ_CHECK(strcmp(json_string_value(json_object_get(it, "workflow")), s.workflow) ==
			   0);
		FUZZ_CHECK(strlen(json_string_value(json_object_get(it, "input_hash"))) == 64);
		FUZZ_CHECK(json_object_get(it, "input") != NULL);
		FUZZ_CHECK((json_object_get(it, "delay_ms") != NULL) == (s.delay_ms >= 0));
		FUZZ_CHECK((json_object_get(it, "concurrency_key") != NULL) ==
			   (s.concurrency_key != NULL));
		json_decref(it);
		free(item);
	}
	runs_submit_buf_cleanup(&buf);
	json_decref(body);
	return 0;
}
