/* test_ids: run id, workflow name and key rules, UTF-8 validation, ULIDs, hex, quoting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ids.h"

#define ULID_THREADS 4
#define ULID_PER_THREAD 5000

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* A string of `n` copies of `c` (caller frees). */
static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void expect_invalid(enum err_code rc, const struct err *e, const char *msg)
{
	assert_int_equal(rc, ERR_INVALID);
	assert_int_equal(e->code, ERR_INVALID);
	assert_string_equal(e->msg, msg);
}

/* ---- run ids and group ids ---- */

static void test_run_id_accepts_allowed_chars(void **state)
{
	static const char *ok[] = {"a", "order-42", "ORDER_42", "01JDQ2ZK9X3V5B7N8M4P6R0T2W",
				   "-_-"};
	(void)state;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct err e = {0};
		assert_int_equal(ids_check_run_id("run_id", ok[i], strlen(ok[i]), &e), ERR_OK);
		assert_int_equal(e.code, ERR_OK);
	}
}

static void test_run_id_rejects_empty(void **state)
{
	struct err e = {0};
	(void)state;
	expect_invalid(ids_check_run_id("run_id", "", 0, &e), &e, "run_id: must not be empty");
}

static void test_run_id_accepts_128_bytes(void **state)
{
	struct err e = {0};
	char *s = repeat('a', 128);
	(void)state;
	assert_int_equal(ids_check_run_id("run_id", s, 128, &e), ERR_OK);
	free(s);
}

static void test_run_id_rejects_129_bytes(void **state)
{
	struct err e = {0};
	char *s = repeat('a', 129);
	(void)state;
	expect_invalid(ids_check_run_id("run_id", s, 129, &e), &e,
		       "run_id: exceeds maximum length of 128 bytes");
	free(s);
}

static void test_run_id_rejects_chars_outside_set(void **state)
{
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
		{"a.b", 3},  {"a b", 3}, {"a/b", 3}, {"a:b", 3}, {"caf\xc3\xa9", 5},
		{"a\0b", 3}, {"a+b", 3}, {"%41", 3}, {"a\n", 2},
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e = {0};
		expect_invalid(ids_check_run_id("group_id", bad[i].s, bad[i].len, &e), &e,
			       "group_id: must contain only [A-Za-z0-9_-]");
	}
}

static void test_run_id_reads_only_len_bytes(void **state)
{
	struct err e = {0};
	(void)state;
	/* Not NUL-terminated after the first 3 bytes: the '.' is outside. */
	assert_int_equal(ids_check_run_id("run_id", "abc.def", 3, &e), ERR_OK);
}

static void test_check_keeps_first_error(void **state)
{
	struct err e = {0};
	(void)state;
	err_set(&e, ERR_NOT_FOUND, "earlier");
	assert_int_equal(ids_check_run_id("run_id", "", 0, &e), ERR_NOT_FOUND);
	assert_string_equal(e.msg, "earlier");
}

/* ---- workflow names ---- */

static void test_workflow_name_accepts_dots(void **state)
{
	static const char *ok[] = {"orders", "orders.v2", "a-b_c.d", "."};
	(void)state;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct err e = {0};
		assert_int_equal(ids_check_workflow_name("name", ok[i], strlen(ok[i]), &e), ERR_OK);
	}
}

static void test_workflow_name_rules(void **state)
{
	char *max = repeat('n', 128), *over = repeat('n', 129);
	struct err e = {0};
	(void)state;

	assert_int_equal(ids_check_workflow_name("name", max, 128, &e), ERR_OK);
	expect_invalid(ids_check_workflow_name("name", over, 129, &e), &e,
		       "name: exceeds maximum length of 128 bytes");
	err_clear(&e);
	expect_invalid(ids_check_workflow_name("name", "", 0, &e), &e, "name: must not be empty");
	err_clear(&e);
	expect_invalid(ids_check_workflow_name("workflow", "a/b", 3, &e), &e,
		       "workflow: must contain only [A-Za-z0-9_.-]");
	free(max);
	free(over);
}

/* ---- keys ---- */

static void test_key_accepts_utf8_and_punctuation(void **state)
{
	static const char *ok[] = {"payment:42",
				   "app/orders/42",
				   "caf\xc3\xa9",
				   "\xe6\x97\xa5\xe6\x9c\xac",
				   "\xf0\x9f\x98\x80 emoji",
				   " "};
	(void)state;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct err e = {0};
		assert_int_equal(ids_check_key("key", ok[i], strlen(ok[i]), &e), ERR_OK);
	}
}

static void test_key_length_limits(void **state)
{
	char *max = repeat('k', 512), *over = repeat('k', 513);
	struct err e = {0};
	(void)state;

	assert_int_equal(ids_check_key("key", max, 512, &e), ERR_OK);
	expect_invalid(ids_check_key("key", over, 513, &e), &e,
		       "key: exceeds maximum length of 512 bytes");
	err_clear(&e);
	expect_invalid(ids_check_key("correlation_key", "", 0, &e), &e,
		       "correlation_key: must not be empty");
	free(max);
	free(over);
}

static void test_key_rejects_invalid_utf8(void **state)
{
	static const char *bad[] = {"\xff",         "abc\xc3",          "\xc0\xaf",
				    "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80",
				    "a\xe2\x82"};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e = {0};
		expect_invalid(ids_check_key("key", bad[i], strlen(bad[i]), &e), &e,
			       "key: must be valid UTF-8");
	}
}

static void test_key_rejects_nul(void **state)
{
	struct err e = {0};
	(void)state;
	expect_invalid(ids_check_key("key", "a\0b", 3, &e), &e, "key: must not contain NUL");
}

/* ---- concurrency keys ---- */

static void test_concurrency_key_accepts_utf8_up_to_256_bytes(void **state)
{
	static const char *ok[] = {"customer-42",      "caf\xc3\xa9 / \xe6\x97\xa5",
				   "\xf0\x9f\x98\x80", " ",
				   "\xc2\xa0nbsp",     "k"};
	char *max = repeat('k', 256);
	struct err e = {0};
	(void)state;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		assert_int_equal(
			ids_check_concurrency_key("concurrency_key", ok[i], strlen(ok[i]), &e),
			ERR_OK);
	assert_int_equal(ids_check_concurrency_key("concurrency_key", max, 256, &e), ERR_OK);
	free(max);
}

static void test_concurrency_key_rejects_empty_long_and_invalid(void **state)
{
	char *over = repeat('k', 257);
	struct err e = {0};
	(void)state;
	expect_invalid(ids_check_concurrency_key("concurrency_key", "", 0, &e), &e,
		       "concurrency_key: must not be empty");
	err_clear(&e);
	expect_invalid(ids_check_concurrency_key("concurrency_key", over, 257, &e), &e,
		       "concurrency_key: exceeds maximum length of 256 bytes");
	err_clear(&e);
	expect_invalid(ids_check_concurrency_key("members[2].concurrency_key",
						 "a\xff"
						 "b",
						 3, &e),
		       &e, "members[2].concurrency_key: must be valid UTF-8");
	free(over);
}

static void test_concurrency_key_rejects_control_characters(void **state)
{
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {{"a\0b", 3},    {"tab\there", 8},   {"new\nline", 8},  {"\x01", 1},
		   {"del\x7f", 4}, {"c1 \xc2\x80", 5}, {"c1 \xc2\x9f", 5}};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e = {0};
		expect_invalid(
			ids_check_concurrency_key("concurrency_key", bad[i].s, bad[i].len, &e), &e,
			"concurrency_key: must not contain control characters");
	}
}

/* ---- UTF-8 ---- */

static void test_utf8_validation_table(void **state)
{
	static const struct {
		const char *s;
		size_t len;
		bool ok;
	} cases[] = {
		{"", 0, true},
		{"plain ascii", 11, true},
		{"\x7f", 1, true},
		{"\xc2\x80", 2, true},          /* U+0080 */
		{"\xdf\xbf", 2, true},          /* U+07FF */
		{"\xe0\xa0\x80", 3, true},      /* U+0800 */
		{"\xed\x9f\xbf", 3, true},      /* U+D7FF */
		{"\xee\x80\x80", 3, true},      /* U+E000 */
		{"\xef\xbf\xbf", 3, true},      /* U+FFFF */
		{"\xf0\x90\x80\x80", 4, true},  /* U+10000 */
		{"\xf4\x8f\xbf\xbf", 4, true},  /* U+10FFFF */
		{"\0", 1, true},                /* NUL is UTF-8; keys reject it separately */
		{"\x80", 1, false},             /* lone continuation */
		{"\xc0\x80", 2, false},         /* overlong NUL */
		{"\xc1\xbf", 2, false},         /* overlong */
		{"\xe0\x9f\xbf", 3, false},     /* overlong */
		{"\xf0\x8f\xbf\xbf", 4, false}, /* overlong */
		{"\xed\xa0\x80", 3, false},     /* surrogate U+D800 */
		{"\xed\xbf\xbf", 3, false},     /* surrogate U+DFFF */
		{"\xf4\x90\x80\x80", 4, false}, /* U+110000 */
		{"\xf5\x80\x80\x80", 4, false},
		{"\xff", 1, false},
		{"\xc3", 1, false},         /* truncated */
		{"\xe2\x82", 2, false},     /* truncated */
		{"\xf0\x9f\x98", 3, false}, /* truncated */
		{"\xc3\x28", 2, false},     /* bad continuation */
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (ids_utf8_valid(cases[i].s, cases[i].len) != cases[i].ok)
			fail_msg("case %zu: expected %s", i, cases[i].ok ? "valid" : "invalid");
	}
}

/* ---- ULIDs ---- */

static int64_t ulid_ms(const char *u)
{
	int64_t ms = 0;

	for (int i = 0; i < 10; i++)
		ms = ms * 32 + (strchr(crockford, u[i]) - crockford);
	return ms;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_ulid_is_26_crockford_chars(void **state)
{
	char u[IDS_ULID_LEN + 1];
	struct err e = {0};
	(void)state;

	ids_ulid_new(u);
	assert_int_equal(strlen(u), 26);
	for (int i = 0; i < 26; i++)
		assert_non_null(strchr(crockford, u[i]));
	assert_true(u[0] <= '7'); /* 128 bits in 130: the first char carries 3 bits */
	/* A ULID is a valid run id. */
	assert_int_equal(ids_check_run_id("run_id", u, strlen(u), &e), ERR_OK);
}

static void test_ulid_encodes_current_time(void **state)
{
	char u[IDS_ULID_LEN + 1];
	int64_t before, after, ms;
	(void)state;

	before = wall_ms();
	ids_ulid_new(u);
	after = wall_ms();
	ms = ulid_ms(u);
	/* Monotonic ids may run ahead of the clock by the ms they counted up. */
	assert_true(ms >= before);
	assert_true(ms <= after + 1);
}

static void test_ulid_is_strictly_increasing(void **state)
{
	char prev[IDS_ULID_LEN + 1], cur[IDS_ULID_LEN + 1];
	(void)state;

	ids_ulid_new(prev);
	for (int i = 0; i < 100000; i++) {
		ids_ulid_new(cur);
		if (strcmp(prev, cur) >= 0)
			fail_msg("not increasing: %s then %s", prev, cur);
		memcpy(prev, cur, sizeof cur);
	}
}

struct ulid_batch {
	char ids[ULID_PER_THREAD][IDS_ULID_LEN + 1];
};

static void *ulid_worker(void *arg)
{
	struct ulid_batch *b = arg;

	for (int i = 0; i < ULID_PER_THREAD; i++)
		ids_ulid_new(b->ids[i]);
	return NULL;
}

static int cmp_ulid(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void test_ulid_is_unique_across_threads(void **state)
{
	pthread_t th[ULID_THREADS];
	struct ulid_batch *b = calloc(ULID_THREADS, sizeof *b);
	(void)state;

	assert_non_null(b);
	for (int t = 0; t < ULID_THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, ulid_worker, &b[t]), 0);
	for (int t = 0; t < ULID_THREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < ULID_THREADS; t++)
		for (int i = 1; i < ULID_PER_THREAD; i++)
			assert_true(strcmp(b[t].ids[i - 1], b[t].ids[i]) < 0);
	/* The batches are contiguous, so the whole block sorts as one array. */
	qsort(b, (size_t)ULID_THREADS * ULID_PER_THREAD, IDS_ULID_LEN + 1, cmp_ulid);
	for (size_t i = 1; i < (size_t)ULID_THREADS * ULID_PER_THREAD; i++) {
		const char *ids = (const char *)b;
		assert_true(strcmp(ids + (i - 1) * (IDS_ULID_LEN + 1),
				   ids + i * (IDS_ULID_LEN + 1)) < 0);
	}
	free(b);
}

/* ---- hex and quoting ---- */

static void test_hex_is_lowercase(void **state)
{
	const unsigned char bin[] = {0x00, 0x01, 0xab, 0xcd, 0xef, 0xff};
	char out[2 * sizeof bin + 1];
	(void)state;

	ids_hex(bin, sizeof bin, out);
	assert_string_equal(out, "0001abcdefff");
	ids_hex(bin, 0, out);
	assert_string_equal(out, "");
}

static void test_quote_escapes_and_cuts(void **state)
{
	static const struct {
		const char *s;
		size_t len;
		size_t cap;
		const char *want;
	} cases[] = {
		{"plain", 5, 64, "\"plain\""},
		{"", 0, 64, "\"\""},
		{"a\"b\\c", 5, 64, "\"a\\\"b\\\\c\""},
		{"tab\there\n", 9, 64, "\"tab\\x09here\\x0a\""},
		{"caf\xc3\xa9", 5, 64, "\"caf\xc3\xa9\""},
		{"bad\xff", 4, 64, "\"bad\\xff\""},
		{"a\0b", 3, 64, "\"a\\x00b\""},
		{"abcdefghij", 10, 12, "\"abcdef...\""},
		{"abcdefghi", 9, 12, "\"abcdefghi\""},
		{"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8, 10, "\"\xc3\xa9\xc3\xa9...\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[64];
		ids_quote(cases[i].s, cases[i].len, out, cases[i].cap);
		assert_true(strlen(out) < cases[i].cap);
		assert_string_equal(out, cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_id_accepts_allowed_chars),
		cmocka_unit_test(test_run_id_rejects_empty),
		cmocka_unit_test(test_run_id_accepts_128_bytes),
		cmocka_unit_test(test_run_id_rejects_129_bytes),
		cmocka_unit_test(test_run_id_rejects_chars_outside_set),
		cmocka_unit_test(test_run_id_reads_only_len_bytes),
		cmocka_unit_test(test_check_keeps_first_error),
		cmocka_unit_test(test_workflow_name_accepts_dots),
		cmocka_unit_test(test_workflow_name_rules),
		cmocka_unit_test(test_key_accepts_utf8_and_punctuation),
		cmocka_unit_test(test_key_length_limits),
		cmocka_unit_test(test_key_rejects_invalid_utf8),
		cmocka_unit_test(test_key_rejects_nul),
		cmocka_unit_test(test_concurrency_key_accepts_utf8_up_to_256_bytes),
		cmocka_unit_test(test_concurrency_key_rejects_empty_long_and_invalid),
		cmocka_unit_test(test_concurrency_key_rejects_control_characters),
		cmocka_unit_test(test_utf8_validation_table),
		cmocka_unit_test(test_ulid_is_26_crockford_chars),
		cmocka_unit_test(test_ulid_encodes_current_time),
		cmocka_unit_test(test_ulid_is_strictly_increasing),
		cmocka_unit_test(test_ulid_is_unique_across_threads),
		cmocka_unit_test(test_hex_is_lowercase),
		cmocka_unit_test(test_quote_escapes_and_cuts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
