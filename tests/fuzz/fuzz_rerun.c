/* fuzz_rerun: POST /v1/runs/{id}/rerun bodies through runs_parse_rerun. */
#include "tests/fuzz/fuzz.h"

#include "base/canon.h"
#include "handlers/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = {0};
	struct run_rerun rr = {0};
	if (size == 0) {
		/* No body: the same input from step 0. */
		FUZZ_CHECK(runs_parse_rerun(NULL, &rr, &e) == ERR_OK);
		FUZZ_CHECK(rr.from_step == 0 && rr.input_text == NULL);
		return 0;
	}
	json_t *body = fuzz_json_object(data, size);
	if (body == NULL)
		return 0;
	enum err_code rc = runs_parse_rerun(body, &rr, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
	} else {
		FUZZ_CHECK(rr.from_step >= 0);
		if (rr.input_text != NULL) {
			/* The hash is the hash of the input the text carries. */
			FUZZ_CHECK(rr.from_step == 0);
			json_t *v = json_loads(rr.input_text, JSON_DECODE_ANY, NULL);
			unsigned char h[32];
			FUZZ_CHECK(v != NULL && canon_json_sha256(v, h) == 0);
			FUZZ_CHECK(memcmp(h, rr.input_hash, 32) == 0);
			json_decref(v);
		}
	}
	runs_rerun_cleanup(&rr);
	json_decref(body);
	return 0;
}
