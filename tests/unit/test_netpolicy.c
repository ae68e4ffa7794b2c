/* Unit tests of netpolicy: CIDR parsing and the egress decision. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "base/netpolicy.h"

static bool allowed(const struct netpolicy *p, const char *ip)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1)
		v4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1)
		v6->sin6_family = AF_INET6;
	else
		fail_msg("bad test address %s", ip);
	char why[160];
	return netpolicy_allowed(p, (struct sockaddr *)&ss, why, sizeof why);
}

static void test_metadata_and_link_local_always_refused(void **state)
{
	(void)state;
	struct netpolicy p;
	struct err e = {0};
	assert_int_equal(netpolicy_init(&p, "0.0.0.0/0", NULL, &e), ERR_OK);
	assert_false(allowed(&p, "169.254.169.254"));
	assert_false(allowed(&p, "169.254.1.2"));
	assert_false(allowed(&p, "fe80::1"));
	assert_false(allowed(&p, "fd00:ec2::254"));
	assert_false(allowed(&p, "::ffff:169.254.169.254"));
	assert_false(allowed(&p, "100.100.100.200"));
	assert_false(allowed(&p, "0.0.0.0"));
}

static void test_default_allows_loopback_and_private(void **state)
{
	(void)state;
	struct netpolicy p;
	struct err e = {0};
	assert_int_equal(netpolicy_init(&p, NULL, NULL, &e), ERR_OK);
	assert_true(allowed(&p, "127.0.0.1"));
	assert_true(allowed(&p, "10.1.2.3"));
	assert_true(allowed(&p, "::1"));
}

static void test_deny_list_refuses_its_blocks(void **state)
{
	(void)state;
	struct netpolicy p;
	struct err e = {0};
	assert_int_equal(netpolicy_init(&p, NULL, "10.0.0.0/8, 192.168.0.0/16,fd00::/8", &e),
			 ERR_OK);
	assert_false(allowed(&p, "10.200.0.1"));
	assert_false(allowed(&p, "192.168.1.1"));
	assert_false(allowed(&p, "fd12::1"));
	assert_true(allowed(&p, "11.0.0.1"));
	assert_true(allowed(&p, "127.0.0.1"));
}

static void test_allow_list_allows_only_its_blocks(void **state)
{
	(void)state;
	struct netpolicy p;
	struct err e = {0};
	assert_int_equal(netpolicy_init(&p, "127.0.0.0/8,203.0.113.7", NULL, &e), ERR_OK);
	assert_true(allowed(&p, "127.0.0.5"));
	assert_true(allowed(&p, "203.0.113.7"));
	assert_false(allowed(&p, "203.0.113.8"));
	assert_false(allowed(&p, "::1"));
}

static void test_odd_prefix_lengths_mask_correctly(void **state)
{
	(void)state;
	struct netpolicy p;
	struct err e = {0};
	assert_int_equal(netpolicy_init(&p, NULL, "172.16.0.0/12", &e), ERR_OK);
	assert_false(allowed(&p, "172.31.255.255"));
	assert_true(allowed(&p, "172.32.0.0"));
}

static void test_bad_lists_name_the_variable(void **state)
{
	(void)state;
	const char *bad[] = {"10.0.0.0/33", "nonsense", "1.2.3.4/", "::/129", "1.2.3.4/x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct netpolicy p;
		struct err e = {0};
		assert_int_equal(netpolicy_init(&p, NULL, bad[i], &e), ERR_INVALID);
		assert_non_null(strstr(e.msg, "HOOKFLOW_URL_DENY"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metadata_and_link_local_always_refused),
		cmocka_unit_test(test_default_allows_loopback_and_private),
		cmocka_unit_test(test_deny_list_refuses_its_blocks),
		cmocka_unit_test(test_allow_list_allows_only_its_blocks),
		cmocka_unit_test(test_odd_prefix_lengths_mask_correctly),
		cmocka_unit_test(test_bad_lists_name_the_variable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
