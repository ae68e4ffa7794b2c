/* test_settlements: the dispatcher's settlement lists (db/jobs.h), above all
 * settlements_take_upto, which bounds the answer bytes one cycle settles, and
 * claim_batch_size, which bounds the payload bytes one cycle claims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/jobs.h"

/* Appends a settlement named `id` of `size` answer bytes to `l`. */
static void add(struct settlements *l, const char *id, size_t size)
{
	struct settlement s = {.kind = JOB_STEP, .id = strdup(id), .size = size};
	assert_non_null(s.id);
	assert_true(settlements_push(l, &s));
}

/* The ids of `l`, in order, joined by spaces. */
static void ids_of(const struct settlements *l, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < l->n; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? " " : "", l->v[i].id);
}

static void expect(const struct settlements *l, const char *want)
{
	char got[256];
	ids_of(l, got, sizeof got);
	assert_string_equal(got, want);
}

static void test_takes_a_prefix_up_to_the_size(void **state)
{
	(void)state;
	struct settlements to = {0}, from = {0};
	add(&from, "a", 3);
	add(&from, "b", 3);
	add(&from, "c", 3);
	add(&from, "d", 1);
	assert_true(settlements_take_upto(&to, &from, 7));
	expect(&to, "a b");
	expect(&from, "c d");
	/* `to` already holds 6: c (3) would pass 7, so nothing moves... */
	assert_true(settlements_take_upto(&to, &from, 7));
	expect(&to, "a b");
	expect(&from, "c d");
	/* ...and once it is settled (cleared), c and d go. */
	settlements_clear(&to);
	assert_true(settlements_take_upto(&to, &from, 7));
	expect(&to, "c d");
	expect(&from, "");
	settlements_cleanup(&to);
	settlements_cleanup(&from);
}

static void test_one_item_goes_whatever_its_size(void **state)
{
	(void)state;
	struct settlements to = {0}, from = {0};
	add(&from, "big", 100);
	add(&from, "small", 1);
	assert_true(settlements_take_upto(&to, &from, 10));
	expect(&to, "big");
	expect(&from, "small");
	settlements_cleanup(&to);
	settlements_cleanup(&from);
}

static void test_sizeless_items_and_no_limit(void **state)
{
	(void)state;
	struct settlements to = {0}, from = {0};
	/* Settlements without an answer (an expired lease, a cancel) weigh 0. */
	for (int i = 0; i < 100; i++) {
		char id[8];
		snprintf(id, sizeof id, "%d", i);
		add(&from, id, 0);
	}
	assert_true(settlements_take_upto(&to, &from, 0));
	assert_int_equal(to.n, 100);
	assert_int_equal(from.n, 0);
	assert_string_equal(to.v[99].id, "99");
	/* Nothing to take: nothing moves, and it is not a failure. */
	assert_true(settlements_take_upto(&to, &from, 5));
	assert_int_equal(to.n, 100);
	settlements_clear(&to);
	add(&from, "x", 5);
	add(&from, "y", SIZE_MAX / 2);
	assert_true(settlements_take_upto(&to, &from, SIZE_MAX));
	expect(&to, "x y");
	settlements_cleanup(&to);
	settlements_cleanup(&from);
}

static void test_claim_batch_size(void **state)
{
	(void)state;
	const size_t mib8 = 8u << 20;
	/* No room, no claim; otherwise the room, at most the batch. */
	assert_int_equal(claim_batch_size(0, 256, 1024, mib8), 0);
	assert_int_equal(claim_batch_size(-3, 256, 1024, mib8), 0);
	assert_int_equal(claim_batch_size(10, 256, 1024, mib8), 10);
	assert_int_equal(claim_batch_size(1024, 256, 1024, mib8), 256);
	/* Small jobs: the batch; a size not known: the batch. */
	assert_int_equal(claim_batch_size(1024, 256, 1124, mib8), 256);
	assert_int_equal(claim_batch_size(1024, 256, 0, mib8), 256);
	/* 100 KB jobs: as many as 8 MiB holds (81). */
	assert_int_equal(claim_batch_size(1024, 256, 102400 + 1024, mib8), 81);
	assert_int_equal(claim_batch_size(1024, 256, 102400, mib8), 81);
	assert_int_equal(claim_batch_size(50, 256, 102400, mib8), 50);
	/* Exactly the bound: 256 jobs of 32 KiB. */
	assert_int_equal(claim_batch_size(1024, 256, 32768, mib8), 256);
	assert_int_equal(claim_batch_size(1024, 256, 32769, mib8), 255);
	/* A job larger than the bound: one at a time, never none. */
	assert_int_equal(claim_batch_size(1024, 256, mib8 * 3, mib8), 1);
	assert_int_equal(claim_batch_size(1, 256, SIZE_MAX, mib8), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_takes_a_prefix_up_to_the_size),
		cmocka_unit_test(test_one_item_goes_whatever_its_size),
		cmocka_unit_test(test_sizeless_items_and_no_limit),
		cmocka_unit_test(test_claim_batch_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
