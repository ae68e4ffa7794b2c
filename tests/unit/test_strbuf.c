/* test_strbuf: the growable buffer (base/strbuf.h), above all
 * strbuf_reserve, with which a text of known size is built in one
 * allocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

static void test_reserved_room_is_used_without_growing(void **state)
{
	(void)state;
	struct strbuf b = {0};
	strbuf_reserve(&b, 100000);
	assert_false(b.oom);
	assert_int_equal(b.cap, 100001);
	const char *data = b.data;
	char chunk[1000];
	memset(chunk, 'a', sizeof chunk);
	for (int i = 0; i < 100; i++)
		strbuf_add(&b, chunk, sizeof chunk);
	assert_ptr_equal(b.data, data);
	assert_int_equal(b.len, 100000);
	assert_int_equal(b.data[b.len], '\0');
	/* Past the reservation it grows as before. */
	strbuf_puts(&b, "z");
	assert_int_equal(b.len, 100001);
	assert_true(b.cap > 100002);
	assert_int_equal(b.data[100000], 'z');
	strbuf_cleanup(&b);
}

static void test_a_reservation_within_the_room_changes_nothing(void **state)
{
	(void)state;
	struct strbuf b = {0};
	strbuf_puts(&b, "hello");
	size_t cap = b.cap;
	const char *data = b.data;
	strbuf_reserve(&b, cap - b.len - 1);
	assert_int_equal(b.cap, cap);
	assert_ptr_equal(b.data, data);
	strbuf_reserve(&b, cap); /* more: exactly what it needs */
	assert_int_equal(b.cap, b.len + cap + 1);
	assert_string_equal(b.data, "hello");
	char *s = strbuf_take(&b);
	assert_string_equal(s, "hello");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserved_room_is_used_without_growing),
		cmocka_unit_test(test_a_reservation_within_the_room_changes_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
