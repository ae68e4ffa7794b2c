/* test_table: aligned columns, cells made safe for a terminal, cutting on a
 * character boundary (base/table.c, the command line's tables). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/table.h"

static char *clean(const char *s, size_t max)
{
	struct strbuf b = {0};
	strbuf_puts(&b, "{");
	table_clean(s, max, &b);
	strbuf_puts(&b, "}");
	return strbuf_take(&b);
}

static void expect_clean(const char *in, size_t max, const char *want)
{
	char *got = clean(in, max);
	assert_string_equal(got, want);
	free(got);
}

static void test_columns_align_and_the_last_is_not_padded(void **state)
{
	(void)state;
	static const char *const head[] = {"ID", "STATUS", "ERROR"};
	struct table t;
	table_init(&t, 3, head, 40);
	static const char *const r1[] = {"run-1", "succeeded", NULL};
	static const char *const r2[] = {"r2", "failed", "card declined"};
	static const char *const r3[] = {"é-ü", "", ""};
	table_add_row(&t, r1);
	table_add_row(&t, r2);
	table_add_row(&t, r3);
	struct strbuf b = {0};
	table_render(&t, &b);
	assert_string_equal(b.data, "ID     STATUS     ERROR\n"
				    "run-1  succeeded  -\n"
				    "r2     failed     card declined\n"
				    "é-ü\n");
	strbuf_cleanup(&b);
	table_cleanup(&t);
	table_cleanup(&t); /* a zeroed table is a no-op */
}

static void test_control_characters_and_bad_utf8_are_neutralised(void **state)
{
	(void)state;
	expect_clean("\x1b[31mred\x1b[0m", 0, "{?[31mred?[0m}");
	expect_clean("a\tb\nc\rd", 0, "{a b c d}");
	expect_clean("bell\x07 del\x7f", 0, "{bell? del?}");
	expect_clean("c1 \xc2\x9b"
		     "31m",
		     0, "{c1 ?31m}");                                 /* U+009B, the 8-bit CSI */
	expect_clean("bad \xff\xfe end", 0, "{bad ?? end}");          /* not UTF-8 */
	expect_clean("cut \xe2\x82", 0, "{cut ??}");                  /* a sequence cut short */
	expect_clean("over \xc0\xaf", 0, "{over ??}");                /* an overlong '/' */
	expect_clean("surrogate \xed\xa0\x80", 0, "{surrogate ???}"); /* U+D800 */
	expect_clean("ok \xe2\x82\xac \xf0\x9f\x98\x80", 0, "{ok \xe2\x82\xac \xf0\x9f\x98\x80}");
	expect_clean(NULL, 0, "{-}");
}

static void test_long_cells_are_cut_on_a_character_boundary(void **state)
{
	(void)state;
	expect_clean("abcdefghij", 10, "{abcdefghij}");
	expect_clean("abcdefghijk", 10, "{abcdefg...}");
	expect_clean("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 5,
		     "{\xc3\xa9\xc3\xa9...}");
	expect_clean("abcd", 2, "{...}"); /* never more than the cell's own text is dropped */
	char *s = clean("abcdefghijk", 10);
	assert_int_equal(table_width(s) - 2, 10);
	free(s);

	static const char *const head[] = {"A", "B"};
	struct table t;
	table_init(&t, 2, head, 4);
	static const char *const row[] = {"123456789", "123456789012345678"};
	table_add_row(&t, row);
	struct strbuf b = {0};
	table_render(&t, &b);
	/* the last column may be four times as wide */
	assert_string_equal(b.data, "A     B\n1...  1234567890123...\n");
	strbuf_cleanup(&b);
	table_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_columns_align_and_the_last_is_not_padded),
		cmocka_unit_test(test_control_characters_and_bad_utf8_are_neutralised),
		cmocka_unit_test(test_long_cells_are_cut_on_a_character_boundary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
