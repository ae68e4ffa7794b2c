/* test_canon: canonical JSON text and the SHA-256 used to compare run inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (v == NULL)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

static void hash_text(const char *text, unsigned char out[32])
{
	json_t *v = parse(text);

	assert_int_equal(canon_json_sha256(v, out), 0);
	json_decref(v);
}

static void assert_same_hash(const char *a, const char *b)
{
	unsigned char ha[32], hb[32];

	hash_text(a, ha);
	hash_text(b, hb);
	if (memcmp(ha, hb, 32) != 0)
		fail_msg("%s and %s hash differently", a, b);
}

static void assert_different_hash(const char *a, const char *b)
{
	unsigned char ha[32], hb[32];

	hash_text(a, ha);
	hash_text(b, hb);
	if (memcmp(ha, hb, 32) == 0)
		fail_msg("%s and %s hash the same", a, b);
}

static void test_dumps_table(void **state)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{"null", "null"},
		{"true", "true"},
		{"false", "false"},
		{"{}", "{}"},
		{"[]", "[]"},
		{"0", "0"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"9223372036854775807", "9223372036854775807"},
		{"1.0", "1"},
		{"-0.0", "0"},
		{"1e2", "100"},
		{"2.5", "2.5"},
		{"-1.5", "-1.5"},
		{"0.1", "0.1"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"1e300", "1e+300"},
		{"5e-324", "4.94065645841247e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"9007199254740992.0", "9007199254740992"},
		{"-9007199254740992.0", "-9007199254740992"},
		{"18014398509481984.0", "18014398509481984"},
		{"1e20", "1e+20"},
		{"{ \"b\" : 1 , \"a\" : [ 1 , 2.5 , \"x\" ] }", "{\"a\":[1,2.5,\"x\"],\"b\":1}"},
		{"{\"b\":1,\"B\":2,\"\\u00e9\":3,\"a\":4,\"ab\":5}",
		 "{\"B\":2,\"a\":4,\"ab\":5,\"b\":1,\"\xc3\xa9\":3}"},
		{"{\"z\":{\"y\":{\"x\":[{\"b\":null,\"a\":true}]}}}",
		 "{\"z\":{\"y\":{\"x\":[{\"a\":true,\"b\":null}]}}}"},
		{"\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\\\/\\u001f\\u007f\"",
		 "\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\/\\u001f\x7f\""},
		{"\"\\u00e9\\u65e5\\ud83d\\ude00\"", "\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *v = parse(cases[i].in);
		char *s = canon_json_dumps(v), got[256];
		assert_non_null(s);
		snprintf(got, sizeof got, "%s", s);
		free(s);
		json_decref(v);
		if (strcmp(got, cases[i].want) != 0)
			fail_msg("case %zu: %s gave %s, want %s", i, cases[i].in, got,
				 cases[i].want);
	}
}

static void test_real_output_round_trips(void **state)
{
	static const double values[] = {
		0.1,        1.0 / 3, 2.0 / 3,           1e-7,
		123456.789, 1e21,    3.141592653589793, 2.2250738585072014e-308,
		-7.5e-12};
	(void)state;
	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		json_t *v = json_real(values[i]);
		char *s = canon_json_dumps(v);
		assert_non_null(s);
		assert_true(strtod(s, NULL) == values[i]);
		free(s);
		json_decref(v);
	}
}

static void test_dumps_null_pointer_is_null(void **state)
{
	char *s = canon_json_dumps(NULL);
	(void)state;
	assert_string_equal(s, "null");
	free(s);
}

static void test_keys_with_nul_sort_by_bytes(void **state)
{
	json_t *o = json_object();
	char *s;
	(void)state;

	json_object_setn_new(o, "a\0b", 3, json_integer(2));
	json_object_set_new(o, "a", json_integer(1));
	json_object_set_new(o, "a\x01", json_integer(3));
	s = canon_json_dumps(o);
	assert_string_equal(s, "{\"a\":1,\"a\\u0000b\":2,\"a\\u0001\":3}");
	free(s);
	json_decref(o);
}

static void test_key_order_does_not_change_hash(void **state)
{
	(void)state;
	assert_same_hash("{\"a\":1,\"b\":2,\"c\":3}", "{\"c\":3,\"a\":1,\"b\":2}");
}

static void test_whitespace_does_not_change_hash(void **state)
{
	(void)state;
	assert_same_hash("{\"a\":[1,2,{\"b\":null}]}",
			 "  {\n\t\"a\" : [ 1,\r\n 2 , { \"b\" :null } ]\n}  ");
}

static void test_integer_and_integral_real_hash_equal(void **state)
{
	(void)state;
	assert_same_hash("1", "1.0");
	assert_same_hash("{\"n\":100}", "{\"n\":1e2}");
	assert_same_hash("0", "-0.0");
	assert_same_hash("[9007199254740992]", "[9007199254740992.0]");
}

static void test_nested_key_order_does_not_change_hash(void **state)
{
	(void)state;
	assert_same_hash("{\"outer\":{\"y\":[{\"q\":1,\"p\":2}],\"x\":{\"b\":true,\"a\":false}}}",
			 "{\"outer\":{\"x\":{\"a\":false,\"b\":true},\"y\":[{\"p\":2,\"q\":1}]}}");
}

static void test_unicode_escape_and_raw_utf8_hash_equal(void **state)
{
	(void)state;
	assert_same_hash("{\"name\":\"caf\\u00e9\"}", "{\"name\":\"caf\xc3\xa9\"}");
	assert_same_hash("{\"caf\\u00e9\":1}", "{\"caf\xc3\xa9\":1}");
	assert_same_hash("\"\\u002f\"", "\"/\"");
}

static void test_different_values_hash_differently(void **state)
{
	(void)state;
	assert_different_hash("1", "\"1\"");
	assert_different_hash("[1,2]", "[2,1]");
	assert_different_hash("{\"a\":1}", "{\"a\":1,\"b\":null}");
	assert_different_hash("1", "1.5");
	assert_different_hash("null", "{}");
	assert_different_hash("\"a\"", "\"A\"");
}

static void test_sha256_matches_known_digest(void **state)
{
	unsigned char d[32];
	char hex[65];
	json_t *v = json_object();
	(void)state;

	canon_sha256("abc", 3, d);
	ids_hex(d, 32, hex);
	assert_string_equal(hex,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* The hash of a value is the hash of its canonical text. */
	json_object_set_new(v, "b", json_integer(1));
	json_object_set_new(v, "a", json_string("x"));
	assert_int_equal(canon_json_sha256(v, d), 0);
	ids_hex(d, 32, hex);
	{
		unsigned char want[32];
		char want_hex[65];
		const char *text = "{\"a\":\"x\",\"b\":1}";
		canon_sha256(text, strlen(text), want);
		ids_hex(want, 32, want_hex);
		assert_string_equal(hex, want_hex);
	}
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dumps_table),
		cmocka_unit_test(test_real_output_round_trips),
		cmocka_unit_test(test_dumps_null_pointer_is_null),
		cmocka_unit_test(test_keys_with_nul_sort_by_bytes),
		cmocka_unit_test(test_key_order_does_not_change_hash),
		cmocka_unit_test(test_whitespace_does_not_change_hash),
		cmocka_unit_test(test_integer_and_integral_real_hash_equal),
		cmocka_unit_test(test_nested_key_order_does_not_change_hash),
		cmocka_unit_test(test_unicode_escape_and_raw_utf8_hash_equal),
		cmocka_unit_test(test_different_values_hash_differently),
		cmocka_unit_test(test_sha256_matches_known_digest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
