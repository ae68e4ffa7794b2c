/* fuzz_workflow: PUT /v1/workflows/{name} bodies through workflows_parse_body,
 * and the same input as a POST /v1/workflows/{name}/secret body through
 * workflows_parse_rotate and as a pause or resume body through
 * workflows_parse_pause. */
#include "tests/fuzz/fuzz.h"

#include "base/sig.h"
#include "handlers/parse.h"

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
	struct workflow_def w = {.name = "orders"};
	enum err_code rc = workflows_parse_body(body, &egress, &w, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
	} else {
		/* What db_workflow_put is promised (the ranges of schema
		 * WorkflowInput, openapi/openapi.yaml). */
		FUZZ_CHECK(strcmp(w.name, "orders") == 0);
		FUZZ_CHECK(w.url != NULL && strlen(w.url) <= 2048);
		FUZZ_CHECK(w.timeout_ms >= 1 && w.timeout_ms <= 3600000);
		FUZZ_CHECK(w.max_attempts >= 1 && w.max_attempts <= 1000);
		FUZZ_CHECK(w.priority >= 0);
		FUZZ_CHECK(w.max_concurrency >= 0 && w.max_concurrency <= 1000000);
		FUZZ_CHECK(w.key_concurrency >= 0 && w.key_concurrency <= 1000000);
		FUZZ_CHECK(w.backoff_base_ms >= 0 && w.backoff_base_ms <= w.backoff_max_ms &&
			   w.backoff_max_ms <= 86400000);
		FUZZ_CHECK(w.secret == NULL ||
			   sig_check_secret("secret", w.secret, NULL) == ERR_OK);
		/* Absent keeps the stored secret; null or a string replaces it. */
		FUZZ_CHECK(w.keep_secret == (json_object_get(body, "secret") == NULL));
		FUZZ_CHECK(!w.keep_secret || w.secret == NULL);
	}
	struct err re = {0};
	struct workflow_rotate rot = {0};
	rc = workflows_parse_rotate(body, &rot, &re);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &re);
	} else {
		FUZZ_CHECK(rot.grace_ms >= 0 && rot.grace_ms <= WORKFLOW_GRACE_MAX_MS);
		FUZZ_CHECK(rot.secret == NULL ||
			   sig_check_secret("secret", rot.secret, NULL) == ERR_OK);
	}
	/* A pause or resume body: only the empty object. */
	struct err pe = {0};
	rc = workflows_parse_pause(body, &pe);
	if (rc != ERR_OK)
		fuzz_check_err(rc, &pe);
	else
		FUZZ_CHECK(json_object_size(body) == 0);
	json_decref(body);
	return 0;
}
