/* fuzz_signal: POST /v1/signals/{key} bodies through signals_parse_send, and
 * the memo and KV value bodies through hc_value_parse. */
#include "tests/fuzz/fuzz.h"

#include "handlers/common.h"
#include "handlers/parse.h"
#include "service/effects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = {0};
	char *text = NULL;
	json_t *body = fuzz_json_object(data, size);
	if (size == 0) {
		/* A signal without a body carries a null payload. */
		FUZZ_CHECK(signals_parse_send(NULL, &text, &e) == ERR_OK);
		FUZZ_CHECK(strcmp(text, "null") == 0);
		free(text);
		return 0;
	}
	if (body == NULL)
		return 0;
	enum err_code rc = signals_parse_send(body, &text, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
		FUZZ_CHECK(text == NULL);
	} else {
		fuzz_check_json_text(text);
	}
	free(text);
	text = NULL;

	err_clear(&e);
	rc = hc_value_parse(body, &text, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
		FUZZ_CHECK(text == NULL);
	} else {
		fuzz_check_json_text(text);
		FUZZ_CHECK(strlen(text) <= EFFECTS_MAX_VALUE_BYTES);
	}
	free(text);
	json_decref(body);
	return 0;
}
