/* test_effects: validation of the kv effects object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "service/effects.h"

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (v == NULL)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

/* A JSON string value whose canonical text is exactly `bytes` long. */
static json_t *string_of_encoded_size(size_t bytes)
{
	char *s = malloc(bytes - 1);
	json_t *v;

	assert_non_null(s);
	memset(s, 'v', bytes - 2);
	s[bytes - 2] = '\0';
	v = json_string(s);
	free(s);
	return v;
}

static void test_valid_kv_table(void **state)
{
	static const struct {
		const char *in;
		int has_put;
		int has_del;
	} cases[] = {
		{"null", 0, 0},
		{"{}", 0, 0},
		{"{\"put\":{}}", 0, 0},
		{"{\"delete\":[]}", 0, 0},
		{"{\"put\":{\"app/orders/42\":{\"state\":\"new\"}}}", 1, 0},
		{"{\"delete\":[\"app/tmp/42\"]}", 0, 1},
		{"{\"put\":{\"a\":1,\"b\":null},\"delete\":[\"c\",\"c\"]}", 1, 1},
		{"{\"put\":{\"caf\\u00e9\":[1,2]},\"delete\":[\"workflow\"]}", 1, 1},
		{"{\"put\":{\"Workflow/x\":true}}", 1, 0}, /* the prefix is case-sensitive */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *kv = parse(cases[i].in);
		struct effects fx;
		struct err e = {0};
		if (effects_parse(kv, "kv", &fx, &e) != ERR_OK)
			fail_msg("case %zu (%s) rejected: %s", i, cases[i].in, e.msg);
		assert_int_equal(fx.put != NULL, cases[i].has_put);
		assert_int_equal(fx.del != NULL, cases[i].has_del);
		assert_int_equal(effects_empty(&fx), !cases[i].has_put && !cases[i].has_del);
		effects_cleanup(&fx);
		assert_null(fx.put);
		assert_null(fx.del);
		json_decref(kv);
	}
}

static void test_missing_kv_is_empty(void **state)
{
	struct effects fx;
	struct err e = {0};
	(void)state;

	assert_int_equal(effects_parse(NULL, "kv", &fx, &e), ERR_OK);
	assert_true(effects_empty(&fx));
	effects_cleanup(&fx);
}

static void test_invalid_kv_table(void **state)
{
	static const struct {
		const char *in;
		const char *msg;
	} cases[] = {
		{"[]", "kv: must be an object"},
		{"\"put\"", "kv: must be an object"},
		{"{\"puts\":{}}", "kv: unknown field \"puts\" (allowed: put, delete)"},
		{"{\"put\":[]}", "kv.put: must be an object"},
		{"{\"put\":null}", "kv.put: must be an object"},
		{"{\"delete\":{}}", "kv.delete: must be an array of strings"},
		{"{\"delete\":[\"a\",1]}", "kv.delete[1]: must be a string"},
		{"{\"put\":{\"workflow/x\":1}}",
		 "kv.put[\"workflow/x\"]: key prefix workflow/ is reserved"},
		{"{\"put\":{\"workflow/\":1}}",
		 "kv.put[\"workflow/\"]: key prefix workflow/ is reserved"},
		{"{\"delete\":[\"ok\",\"workflow/runs/1\"]}",
		 "kv.delete[1]: key prefix workflow/ is reserved"},
		{"{\"put\":{\"\":1}}", "kv.put[\"\"]: must not be empty"},
		{"{\"delete\":[\"\"]}", "kv.delete[0]: must not be empty"},
		{"{\"put\":{\"k\":1,\"j\":2},\"delete\":[\"x\",\"k\"]}",
		 "kv.delete[1]: key is both put and deleted"},
		{"{\"put\":{\"a\\\"b\":1},\"delete\":[\"a\\\"b\"]}",
		 "kv.delete[0]: key is both put and deleted"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *kv = parse(cases[i].in);
		struct effects fx;
		struct err e = {0};
		enum err_code rc = effects_parse(kv, "kv", &fx, &e);
		json_decref(kv);
		if (rc != ERR_INVALID)
			fail_msg("case %zu (%s) accepted", i, cases[i].in);
		assert_string_equal(e.msg, cases[i].msg);
		assert_null(fx.put);
		assert_null(fx.del);
	}
}

static void test_field_name_prefixes_messages(void **state)
{
	json_t *kv = parse("{\"put\":{\"workflow/x\":1}}");
	struct effects fx;
	struct err e = {0};
	(void)state;

	assert_int_equal(effects_parse(kv, "members[2].kv", &fx, &e), ERR_INVALID);
	assert_string_equal(e.msg,
			    "members[2].kv.put[\"workflow/x\"]: key prefix workflow/ is reserved");
	json_decref(kv);
}

static void test_value_of_256_kib_is_accepted(void **state)
{
	json_t *kv = json_pack("{s:{s:o}}", "put", "big",
			       string_of_encoded_size(EFFECTS_MAX_VALUE_BYTES));
	struct effects fx;
	struct err e = {0};
	(void)state;

	assert_int_equal(effects_parse(kv, "kv", &fx, &e), ERR_OK);
	effects_cleanup(&fx);
	json_decref(kv);
}

static void test_value_over_256_kib_is_rejected(void **state)
{
	json_t *kv = json_pack("{s:{s:o}}", "put", "big",
			       string_of_encoded_size(EFFECTS_MAX_VALUE_BYTES + 1));
	struct effects fx;
	struct err e = {0};
	(void)state;

	assert_int_equal(effects_parse(kv, "kv", &fx, &e), ERR_INVALID);
	assert_string_equal(e.msg, "kv.put[\"big\"]: value exceeds maximum size of 262144 bytes");
	assert_null(fx.put);
	json_decref(kv);
}

static void test_key_over_512_bytes_is_rejected_with_short_label(void **state)
{
	char key[514];
	json_t *kv;
	struct effects fx;
	struct err e = {0};
	const char *tail = "...\"]: exceeds maximum length of 512 bytes";
	(void)state;

	memset(key, 'k', 513);
	key[513] = '\0';
	kv = json_pack("{s:{s:i}}", "put", key, 1);
	assert_int_equal(effects_parse(kv, "kv", &fx, &e), ERR_INVALID);
	assert_memory_equal(e.msg, "kv.put[\"kkk", 11);
	assert_true(strlen(e.msg) < 140);
	assert_string_equal(e.msg + strlen(e.msg) - strlen(tail), tail);
	json_decref(kv);
}

static void test_key_with_invalid_utf8_is_rejected(void **state)
{
	json_t *kv = json_object(), *put = json_object();
	struct effects fx;
	struct err e = {0};
	(void)state;

	/* Only the nocheck setter lets such a key into a jansson object. */
	json_object_set_new_nocheck(put, "bad\xff", json_true());
	json_object_set_new(kv, "put", put);
	assert_int_equal(effects_parse(kv, "kv", &fx, &e), ERR_INVALID);
	assert_string_equal(e.msg, "kv.put[\"bad\\xff\"]: must be valid UTF-8");
	json_decref(kv);
}

static void test_output_holds_new_references(void **state)
{
	json_t *kv = parse("{\"put\":{\"a\":1},\"delete\":[\"b\"]}");
	struct effects fx;
	struct err e = {0};
	(void)state;

	assert_int_equal(effects_parse(kv, "kv", &fx, &e), ERR_OK);
	json_decref(kv); /* the effects outlive the input */
	assert_int_equal(json_integer_value(json_object_get(fx.put, "a")), 1);
	assert_string_equal(json_string_value(json_array_get(fx.del, 0)), "b");
	effects_cleanup(&fx);
	effects_cleanup(&fx); /* a zeroed struct is a no-op */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_kv_table),
		cmocka_unit_test(test_missing_kv_is_empty),
		cmocka_unit_test(test_invalid_kv_table),
		cmocka_unit_test(test_field_name_prefixes_messages),
		cmocka_unit_test(test_value_of_256_kib_is_accepted),
		cmocka_unit_test(test_value_over_256_kib_is_rejected),
		cmocka_unit_test(test_key_over_512_bytes_is_rejected_with_short_label),
		cmocka_unit_test(test_key_with_invalid_utf8_is_rejected),
		cmocka_unit_test(test_output_holds_new_references),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
