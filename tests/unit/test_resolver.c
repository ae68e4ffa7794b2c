/* Unit tests of the resolver (the egress proxy's name lookups): answers come
 * back through resolver_dispatch once the eventfd is readable, waiters of one
 * name are answered together, answers are cached, a cancelled waiter is never
 * called. "localhost" is answered from /etc/hosts, so no DNS server is
 * needed. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "base/timefmt.h"
#include "service/resolver.h"

struct waiter {
	struct resolver_wait w;
	int calls;
	struct resolver_answer answer;
};

static void on_done(struct resolver_wait *w, const struct resolver_answer *a, void *arg)
{
	int *total = arg;
	struct waiter *me = (struct waiter *)w; /* w is the first member */
	me->calls++;
	me->answer = *a;
	(*total)++;
}

/* Dispatches until `want` answers arrived in all, or 10 s passed. */
static void dispatch_until(struct resolver *r, int *total, int want)
{
	int64_t deadline = timefmt_mono_ms() + 10000;
	while (*total < want) {
		int64_t left = deadline - timefmt_mono_ms();
		if (left <= 0)
			fail_msg("only %d of %d answers after 10 s", *total, want);
		struct pollfd p = {.fd = resolver_fd(r), .events = POLLIN};
		if (poll(&p, 1, (int)left) == 1)
			resolver_dispatch(r, on_done, total);
	}
}

static bool has_loopback(const struct resolver_answer *a)
{
	for (int i = 0; i < a->n; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&a->addrs[i];
		if (sa->sa_family == AF_INET &&
		    ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) == 0x7f000001)
			return true;
		if (sa->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
			return true;
	}
	return false;
}

static void test_waiters_of_one_name_are_answered_together_then_from_the_cache(void **state)
{
	(void)state;
	struct err e = {0};
	struct resolver *r = resolver_new(&e);
	assert_non_null(r);
	struct waiter a = {0}, b = {0}, c = {0};
	const struct resolver_answer *ans = NULL;
	int total = 0;
	assert_false(resolver_lookup(r, "localhost", &a.w, &ans));
	assert_false(resolver_lookup(r, "LocalHost", &b.w, &ans)); /* names ignore case */
	dispatch_until(r, &total, 2);
	assert_int_equal(a.calls, 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(a.answer.error, 0);
	assert_true(has_loopback(&a.answer));
	assert_true(has_loopback(&b.answer));
	/* Cached now: answered at once, c never registered. */
	assert_true(resolver_lookup(r, "localhost", &c.w, &ans));
	assert_int_equal(ans->error, 0);
	assert_true(has_loopback(ans));
	assert_null(c.w.entry);
	resolver_free(r);
}

static void test_a_cancelled_waiter_is_not_answered(void **state)
{
	(void)state;
	struct err e = {0};
	struct resolver *r = resolver_new(&e);
	assert_non_null(r);
	struct waiter gone = {0}, kept = {0};
	const struct resolver_answer *ans = NULL;
	int total = 0;
	assert_false(resolver_lookup(r, "localhost", &gone.w, &ans));
	assert_false(resolver_lookup(r, "localhost", &kept.w, &ans));
	resolver_cancel(r, &gone.w);
	assert_null(gone.w.entry);
	dispatch_until(r, &total, 1);
	assert_int_equal(kept.calls, 1);
	assert_int_equal(gone.calls, 0);
	assert_int_equal(total, 1);
	resolver_free(r);
}

static void test_a_name_no_host_can_have_fails_at_once(void **state)
{
	(void)state;
	struct err e = {0};
	struct resolver *r = resolver_new(&e);
	assert_non_null(r);
	char longname[RESOLVER_MAX_HOST + 2];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	struct waiter w = {0};
	const struct resolver_answer *ans = NULL;
	assert_true(resolver_lookup(r, longname, &w.w, &ans));
	assert_int_equal(ans->error, EAI_NONAME);
	assert_true(resolver_lookup(r, "", &w.w, &ans));
	assert_int_equal(ans->error, EAI_NONAME);
	assert_null(w.w.entry);
	resolver_free(r);
}

static void test_freeing_with_waiters_registered_forgets_them(void **state)
{
	(void)state;
	struct err e = {0};
	struct resolver *r = resolver_new(&e);
	assert_non_null(r);
	struct waiter w = {0};
	const struct resolver_answer *ans = NULL;
	assert_false(resolver_lookup(r, "localhost", &w.w, &ans));
	resolver_free(r); /* joins the helpers; w is never called (and nothing leaks) */
	assert_int_equal(w.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_waiters_of_one_name_are_answered_together_then_from_the_cache),
		cmocka_unit_test(test_a_cancelled_waiter_is_not_answered),
		cmocka_unit_test(test_a_name_no_host_can_have_fails_at_once),
		cmocka_unit_test(test_freeing_with_waiters_registered_forgets_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
