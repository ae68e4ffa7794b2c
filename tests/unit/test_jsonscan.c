/* test_jsonscan: the fast JSON check vouches only for what jansson accepts
 * (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY), and finds top-level members. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/jsonscan.h"

static bool jansson_accepts(const char *s, size_t len)
{
	json_t *v = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	json_decref(v);
	return v != NULL;
}

static bool scan(const char *s)
{
	struct jsonscan_span sp;
	const char *name = "payload";
	return jsonscan_object(s, strlen(s), &name, 1, &sp);
}

/* Texts it vouches for: jansson accepts each. */
static void test_vouches_for_valid_json(void **state)
{
	(void)state;
	static const char *const ok[] = {
		"{}",
		"[]",
		" {\"a\": [1, -2, 3.5, -0, 0.25e10, 1E-5, 2e+3, true, false, null]} ",
		"\"text with \\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
		"\"\\u00e9 and \\uD83D\\uDE00\"",
		"\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
		"{\"a\":{\"a\":{\"a\":1}},\"b\":[{\"a\":1},{\"a\":2}]}",
		"123456789012345678",
		"-123456789012345678",
		"1e250",
		"1.5e-200",
		"\"\x7f\"",
		"{\"outcome\":\"continue\",\"payload\":{\"x\":[1,2,{\"y\":\"z\"}]}}",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		if (!scan(ok[i]))
			fail_msg("jsonscan refused %s", ok[i]);
		assert_true(jansson_accepts(ok[i], strlen(ok[i])));
	}
}

/* Texts it does not vouch for: jansson's refusals, and what only a decoding
 * could tell. */
static void test_unsure_of_what_jansson_decides(void **state)
{
	(void)state;
	static const char *const unsure[] = {
		"",
		" ",
		"{",
		"}",
		"[1,]",
		"{\"a\":1,}",
		"{\"a\" 1}",
		"{a:1}",
		"[1 2]",
		"01",
		"-",
		"1.",
		"1e",
		".5",
		"+1",
		"1.5.3",
		"truex",
		"nul",
		"[true false]",
		"\"open",
		"\"tab\there\"",
		"\"\\x\"",
		"\"\\u12\"",
		"\"\\u0000\"",
		"\"\\uD800\"",
		"\"\\uDC00\"",
		"\"\\uD800\\u0041\"",
		"{\"a\":1,\"a\":2}",
		"{\"a\":{\"b\":1,\"b\":2}}",
		"{\"\\u0061\":1,\"a\":2}",
		"{\"a\\n\":1}",
		"1234567890123456789",
		"1e251",
		"1e-251",
		"12345678901234567890123456789012345678901e2",
		"1 2",
		"[1] x",
		"{\"a\":1}}",
	};
	for (size_t i = 0; i < sizeof unsure / sizeof unsure[0]; i++)
		if (scan(unsure[i]))
			fail_msg("jsonscan vouched for %s", unsure[i]);
	/* Nesting past JSONSCAN_MAX_DEPTH. */
	char deep[2 * JSONSCAN_MAX_DEPTH + 3];
	memset(deep, '[', JSONSCAN_MAX_DEPTH + 1);
	memset(deep + JSONSCAN_MAX_DEPTH + 1, ']', JSONSCAN_MAX_DEPTH + 1);
	deep[2 * JSONSCAN_MAX_DEPTH + 2] = '\0';
	assert_false(scan(deep));
	deep[JSONSCAN_MAX_DEPTH] = ' ';
	deep[JSONSCAN_MAX_DEPTH + 1] = ' ';
	assert_true(scan(deep));
	/* A NUL byte, in a string or outside. */
	assert_false(jsonscan_object("\"a\0b\"", 5, NULL, 0, NULL));
	assert_false(jsonscan_object("1\0", 2, NULL, 0, NULL));
}

/* Long strings (read eight bytes at a time) with the byte that matters at
 * every offset: a quote ends them, an escape or a control character is seen. */
static void test_long_strings_at_every_offset(void **state)
{
	(void)state;
	char s[64];
	for (size_t k = 1; k < 40; k++) {
		memset(s, 'x', sizeof s);
		s[0] = '"';
		s[k] = '"';
		s[k + 1] = '\0';
		assert_true(jsonscan_object(s, k + 1, NULL, 0, NULL));
		memset(s, 'x', sizeof s);
		s[0] = '"';
		s[k] = '\\';
		s[k + 1] = 'n';
		s[50] = '"';
		assert_true(jsonscan_object(s, 51, NULL, 0, NULL));
		s[k + 1] = 'q';
		assert_false(jsonscan_object(s, 51, NULL, 0, NULL));
		s[k] = '\x1f';
		assert_false(jsonscan_object(s, 51, NULL, 0, NULL));
		assert_false(jansson_accepts(s, 51));
		s[k] = '\x7f';
		assert_true(jsonscan_object(s, 51, NULL, 0, NULL));
		s[k] = '"'; /* the string ends early: what follows is not JSON */
		assert_false(jsonscan_object(s, 51, NULL, 0, NULL));
	}
}

/* Many keys in one object: the duplicate among them is found. */
static void test_duplicates_among_many_keys(void **state)
{
	(void)state;
	size_t cap = 256 * 1024;
	char *s = malloc(cap);
	size_t o = (size_t)sprintf(s, "{");
	for (int i = 0; i < 5000; i++)
		o += (size_t)sprintf(s + o, "%s\"k%d\":{\"k%d\":%d}", i ? "," : "", i, i, i);
	strcpy(s + o, "}");
	assert_true(scan(s));
	strcpy(s + o, ",\"k4321\":0}");
	assert_false(scan(s));
	assert_false(jansson_accepts(s, strlen(s)));
	free(s);
}

/* Duplicates at every size of an object, on both sides of the point where
 * its keys go from the key stack to the hash set (16), and keys that are
 * not duplicates: the same names in nested, sibling and parent objects. */
static void test_duplicates_at_every_object_size(void **state)
{
	(void)state;
	char s[4096];
	for (int nkeys = 1; nkeys <= 40; nkeys++) {
		for (int dup = -1; dup < nkeys; dup++) {
			/* {"k0":{"k0":0,"k1":1},"k1":[{"k0":0}],...,"k<nkeys-1>":...}
			 * then, when dup >= 0, "k<dup>" again; every value an object
			 * or an array of one, with the same names as its parent. */
			size_t o = (size_t)sprintf(s, "{");
			for (int i = 0; i < nkeys; i++)
				o += (size_t)sprintf(s + o,
						     i % 2 ? "%s\"k%d\":[{\"k0\":0},{\"k0\":1}]"
							   : "%s\"k%d\":{\"k0\":0,\"k1\":1}",
						     i ? "," : "", i);
			if (dup >= 0)
				o += (size_t)sprintf(s + o, ",\"k%d\":null", dup);
			strcpy(s + o, "}");
			o++;
			bool want = dup < 0;
			if (scan(s) != want)
				fail_msg("jsonscan %s %s", want ? "refused" : "vouched for", s);
			assert_true(jansson_accepts(s, o) == want);
		}
	}
	/* A large object inside small ones and between siblings of its own. */
	size_t o = (size_t)sprintf(s, "{\"a\":{\"a\":1},\"b\":{");
	for (int i = 0; i < 30; i++)
		o += (size_t)sprintf(s + o, "%s\"a%d\":{\"a\":%d,\"b\":{\"a\":1}}", i ? "," : "", i,
				     i);
	o += (size_t)sprintf(s + o, "},\"c\":{\"a\":2,\"b\":3},\"d\":1}");
	assert_true(scan(s));
	strcpy(s + o - 1, ",\"b\":0}");
	assert_false(scan(s));
	assert_false(jansson_accepts(s, strlen(s)));
}

static void test_member_spans(void **state)
{
	(void)state;
	const char *s = "{ \"outcome\" : \"continue\", \"kv\":{\"payload\":1},"
			"\"payload\" :\t{\"a\": [1, {\"b\": null}]} , \"result\":7}";
	const char *names[] = {"payload", "result", "absent"};
	struct jsonscan_span sp[3];
	assert_true(jsonscan_object(s, strlen(s), names, 3, sp));
	assert_int_equal(sp[0].len, strlen("{\"a\": [1, {\"b\": null}]}"));
	assert_memory_equal(s + sp[0].off, "{\"a\": [1, {\"b\": null}]}", sp[0].len);
	assert_int_equal(sp[1].len, 1);
	assert_memory_equal(s + sp[1].off, "7", 1);
	assert_int_equal(sp[2].len, 0);
	/* Not an object: nothing found, and still valid. */
	assert_true(jsonscan_object("[{\"payload\":1}]", 15, names, 3, sp));
	assert_int_equal(sp[0].len, 0);
}

/* Random texts from JSON's pieces: whatever it vouches for, jansson accepts;
 * and it vouches for most of what jansson's own encoder writes. */
static void test_random_texts_against_jansson(void **state)
{
	(void)state;
	static const char *const pieces[] = {
		"{",           "}",
		"[",           "]",
		",",           ":",
		"\"a\"",       "\"b\"",
		"\"a\"",       "1",
		"-2.5",        "1e3",
		"0",           "true",
		"null",        " ",
		"\"\\n\"",     "\"\\u00e9\"",
		"\"\\u0000\"", "\"x\\uD800\"",
		"01",          "\"\xc3\xa9\"",
		"\t",          "false",
	};
	size_t np = sizeof pieces / sizeof pieces[0];
	unsigned long x = 2463534242UL;
	char buf[512];
	int vouched = 0;
	for (int round = 0; round < 200000; round++) {
		size_t o = 0;
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		int n = 1 + (int)(x % 14);
		for (int k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			const char *p = pieces[x % np];
			size_t pl = strlen(p);
			memcpy(buf + o, p, pl);
			o += pl;
		}
		buf[o] = '\0';
		if (!ids_utf8_valid(buf, o))
			continue;
		if (jsonscan_object(buf, o, NULL, 0, NULL)) {
			vouched++;
			if (!jansson_accepts(buf, o))
				fail_msg("jsonscan vouched for %s, jansson refuses it", buf);
		}
	}
	assert_true(vouched > 1000);

	/* jansson's own output of nested values. */
	for (int round = 0; round < 2000; round++) {
		json_t *v = json_pack("{s:[i, f, s, b, n], s:{s:s, s:[]}, s:i}", "list", round,
				      round * 0.5, "text \xc3\xa9 \"q\"\n", round % 2, "obj", "k",
				      "v", "empty", "n", -round);
		char *t = json_dumps(v, round % 2 ? JSON_COMPACT : JSON_INDENT(2));
		assert_true(scan(t));
		free(t);
		json_decref(v);
	}
}

/* jsonscan_append: members go last, with a comma only after a member. */
static void test_append_members(void **state)
{
	(void)state;
	static const struct {
		const char *object, *members, *want;
	} cases[] = {
		{"{\"a\":1}", "\"b\":true", "{\"a\":1,\"b\":true}"},
		{"{}", "\"b\":[1]", "{\"b\":[1]}"},
		{"{ }\n", "\"b\":null", "{ \"b\":null}"},
		{"{\"a\": {\"x\": \"}\"}}\n", "\"i\":{\"k\":2}",
		 "{\"a\": {\"x\": \"}\"},\"i\":{\"k\":2}}"},
		{"{\"a\":1}", "", "{\"a\":1}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *got = jsonscan_append(cases[i].object, cases[i].members);
		assert_non_null(got);
		assert_string_equal(got, cases[i].want);
		json_t *v = json_loads(got, 0, NULL);
		assert_non_null(v); /* still one JSON object */
		json_decref(v);
		free(got);
	}
	/* Not an object: refused, not mangled. */
	assert_null(jsonscan_append("[1]", "\"b\":1"));
	assert_null(jsonscan_append("", "\"b\":1"));
	assert_null(jsonscan_append("{", "\"b\":1"));
	assert_null(jsonscan_append("null", "\"b\":1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vouches_for_valid_json),
		cmocka_unit_test(test_unsure_of_what_jansson_decides),
		cmocka_unit_test(test_long_strings_at_every_offset),
		cmocka_unit_test(test_duplicates_among_many_keys),
		cmocka_unit_test(test_duplicates_at_every_object_size),
		cmocka_unit_test(test_member_spans),
		cmocka_unit_test(test_random_texts_against_jansson),
		cmocka_unit_test(test_append_members),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
