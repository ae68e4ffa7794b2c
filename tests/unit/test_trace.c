/* test_trace: W3C traceparent and tracestate validation, derived span ids,
 * the traceparent hookflow sends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/trace.h"

#define TP_OK "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void test_valid_traceparent_is_read(void **state)
{
	struct trace_parent t;
	(void)state;
	assert_true(trace_parent_parse(TP_OK, NULL, &t));
	assert_string_equal(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_string_equal(t.span_id, "00f067aa0ba902b7");
	assert_string_equal(t.tracestate, "");
	/* not sampled is still a valid context; white space around is ignored */
	assert_true(trace_parent_parse(
		" \t00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ", NULL, &t));
	assert_string_equal(t.span_id, "00f067aa0ba902b7");
	/* a later version: the first 55 characters, then '-' and more */
	assert_true(trace_parent_parse(
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes", NULL, &t));
	assert_true(trace_parent_parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
				       NULL, &t));
}

static void test_invalid_traceparents_are_ignored(void **state)
{
	static const char *const bad[] = {
		"",
		"garbage",
		/* upper case hex */
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
		/* all-zero ids */
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		/* version ff, and 00 with anything after the flags */
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
		/* a later version followed by something other than '-' */
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		/* short fields, wrong separators, non-hex */
		"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
		"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bg-01",
		"0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct trace_parent t;
		memset(&t, 'x', sizeof t);
		if (trace_parent_parse(bad[i], "a=b", &t))
			fail_msg("accepted %s", bad[i]);
		assert_string_equal(t.trace_id, "");
		assert_string_equal(t.tracestate, "");
	}
	struct trace_parent t;
	assert_false(trace_parent_parse(NULL, "a=b", &t));
}

static void test_tracestate_is_kept_only_when_valid(void **state)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{"congo=t61rcWkgMzE", "congo=t61rcWkgMzE"},
		/* kept as its members joined with ",": the white space around
		 * them and empty members (allowed) left out */
		{" rojo=00f067aa0ba902b7 , congo=t61rcWkgMzE ",
		 "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"a=1,,b=2", "a=1,b=2"},
		{"a=1 \t,\tb=2", "a=1,b=2"},
		{"tenant1@vendor=x", "tenant1@vendor=x"},
		{"0tenant@v=x", "0tenant@v=x"},
		{"k=has space inside", "k=has space inside"},
		{"Upper=1", ""},               /* keys are lower case */
		{"a=1,a=2", ""},               /* a key twice */
		{"a", ""},                     /* no '=' */
		{"a=", ""},                    /* an empty value */
		{"a=x=y", ""},                 /* '=' in a value */
		{"a=trailing ", "a=trailing"}, /* the list's white space is trimmed */
		{"a=tab\tinside", ""},         /* control characters */
		{"a=\r\nX-Evil: 1", ""},       /* no header injection */
		{"0abc=1", ""},                /* a simple key starts with a letter */
		{"t@V=1", ""},                 /* a system id starts with a letter */
		{",,", ""},                    /* no member at all */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct trace_parent t;
		assert_true(trace_parent_parse(TP_OK, cases[i].in, &t));
		if (strcmp(t.tracestate, cases[i].want) != 0)
			fail_msg("%s: got \"%s\", want \"%s\"", cases[i].in, t.tracestate,
				 cases[i].want);
	}
}

static void test_tracestate_limits(void **state)
{
	char many[1024] = "";
	struct trace_parent t;
	(void)state;
	for (int i = 0; i < 32; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), "%sk%d=v", i ? "," : "",
			 i);
	assert_true(trace_parent_parse(TP_OK, many, &t));
	assert_string_equal(t.tracestate, many);
	strcat(many, ",k32=v"); /* 33 members */
	assert_true(trace_parent_parse(TP_OK, many, &t));
	assert_string_equal(t.tracestate, "");

	char big[TRACE_STATE_MAX + 8];
	memset(big, 'v', sizeof big);
	memcpy(big, "k=", 2);
	big[TRACE_STATE_MAX] = '\0'; /* 512 bytes, but a value over 256 */
	assert_true(trace_parent_parse(TP_OK, big, &t));
	assert_string_equal(t.tracestate, "");
	/* 512 bytes of valid members are kept, 513 are not: 16 members of 31
	 * characters and 15 commas, the last value one longer */
	char at[TRACE_STATE_MAX + 8] = "";
	for (int i = 0; i < 16; i++)
		snprintf(at + strlen(at), sizeof at - strlen(at),
			 "%sk%02d=vvvvvvvvvvvvvvvvvvvvvvvvvvv", i ? "," : "", i);
	strcat(at, "v");
	assert_int_equal(strlen(at), TRACE_STATE_MAX);
	assert_true(trace_parent_parse(TP_OK, at, &t));
	assert_string_equal(t.tracestate, at);
	strcat(at, "v");
	assert_true(trace_parent_parse(TP_OK, at, &t));
	assert_string_equal(t.tracestate, "");
}

static void test_span_ids_are_derived_and_stable(void **state)
{
	struct trace_span a, b;
	(void)state;
	/* the first 8 bytes of SHA-256("<trace>/<run>/<generation>/<step>/<attempt>"),
	 * as db/engine's hf_attempt_span computes them */
	trace_attempt_span("4bf92f3577b34da6a3ce929d0e0e4736", "order-42", 1, 2, 3, &a);
	assert_string_equal(a.hex, "d35c8cfa7ae52993");
	assert_int_equal(a.raw[0], 0xd3);
	assert_int_equal(a.raw[7], 0x93);
	trace_attempt_span("4bf92f3577b34da6a3ce929d0e0e4736", "order-42", 1, 2, 3, &b);
	assert_string_equal(a.hex, b.hex);
	trace_attempt_span("4bf92f3577b34da6a3ce929d0e0e4736", "order-42", 1, 2, 4, &b);
	assert_string_not_equal(a.hex, b.hex); /* a retry is another span */
	trace_callback_span("4bf92f3577b34da6a3ce929d0e0e4736", "order-42", 1, 2, &a);
	assert_string_equal(a.hex, "fb7ba60b2dfe38af");
	trace_run_span("4bf92f3577b34da6a3ce929d0e0e4736", "order-42", 1, &a);
	assert_string_equal(a.hex, "9b007c73aa54f81d"); /* hf_run_span */
	trace_child_span("00f067aa0ba902b7", "settle", &a);
	assert_string_equal(a.hex, "7892ebfd380df9c6");
	assert_true(trace_hex_id_valid(a.hex, TRACE_SPAN_HEX));
	/* a sibling: the bytes XOR 5e771e5e771e5e77, stable, another span */
	trace_sibling_span(&a, &b);
	assert_string_equal(b.hex, "26e5f5a34f13a7b1");
	trace_sibling_span(&b, &a);
	assert_string_equal(a.hex, "7892ebfd380df9c6");
	struct trace_span zero = {.raw = {0x5e, 0x77, 0x1e, 0x5e, 0x77, 0x1e, 0x5e, 0x77}};
	trace_sibling_span(&zero, &b); /* never all zero */
	assert_string_equal(b.hex, "0000000000000001");
}

static void test_random_ids_are_valid_and_differ(void **state)
{
	char t1[TRACE_ID_HEX + 1], t2[TRACE_ID_HEX + 1], s1[TRACE_SPAN_HEX + 1],
		s2[TRACE_SPAN_HEX + 1];
	(void)state;
	trace_random_trace_id(t1);
	trace_random_trace_id(t2);
	trace_random_span_id(s1);
	trace_random_span_id(s2);
	assert_true(trace_hex_id_valid(t1, TRACE_ID_HEX));
	assert_true(trace_hex_id_valid(s1, TRACE_SPAN_HEX));
	assert_int_equal(strlen(t1), TRACE_ID_HEX);
	assert_int_equal(strlen(s1), TRACE_SPAN_HEX);
	assert_string_not_equal(t1, t2);
	assert_string_not_equal(s1, s2);
}

static void test_format_and_decode(void **state)
{
	char tp[TRACE_PARENT_LEN + 1];
	uint8_t raw[16];
	struct trace_parent t;
	(void)state;
	trace_format_parent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", tp);
	assert_string_equal(tp, TP_OK);
	assert_true(trace_parent_parse(tp, NULL, &t)); /* what hookflow sends, it reads */
	assert_true(trace_hex_decode("00f067aa0ba902b7", raw, 8));
	assert_int_equal(raw[0], 0x00);
	assert_int_equal(raw[1], 0xf0);
	assert_int_equal(raw[7], 0xb7);
	assert_false(trace_hex_decode("00f067aa0ba902", raw, 8));
	assert_false(trace_hex_decode("00f067aa0ba902b7ff", raw, 8));
	assert_false(trace_hex_decode("00f067aa0ba902bZ", raw, 8));
	char id[TRACE_ID_HEX + 1];
	assert_true(trace_id_read("4bf92f35-77b3-4da6-a3ce-929d0e0e4736", id));
	assert_string_equal(id, "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_true(trace_id_read("4BF92F3577B34DA6A3CE929D0E0E4736", id));
	assert_string_equal(id, "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_false(trace_id_read("00000000-0000-0000-0000-000000000000", id));
	assert_string_equal(id, "");
	assert_false(trace_id_read("4bf92f35-77b3-4da6-a3ce-929d0e0e47", id));
	assert_false(trace_id_read("4bf92f35-77b3-4da6-a3ce-929d0e0e473600", id));
	assert_false(trace_id_read("4bf92f35-77b3-4da6-a3ce-929d0e0e473g", id));
	assert_false(trace_id_read(NULL, id));
	assert_false(trace_hex_id_valid("0000000000000000", 16));
	assert_false(trace_hex_id_valid("00000000000000A0", 16));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_traceparent_is_read),
		cmocka_unit_test(test_invalid_traceparents_are_ignored),
		cmocka_unit_test(test_tracestate_is_kept_only_when_valid),
		cmocka_unit_test(test_tracestate_limits),
		cmocka_unit_test(test_span_ids_are_derived_and_stable),
		cmocka_unit_test(test_random_ids_are_valid_and_differ),
		cmocka_unit_test(test_format_and_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
