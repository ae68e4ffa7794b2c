/* Unit tests of netpolicy: CIDR parsing and the egress decision. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "base/netpolicy.h"

static bool allowed_why(const struct netpolicy *p, const char *ip, char *why, size_t cap)
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
	return netpolicy_allowed(p, (struct sockaddr *)&ss, why, cap);
}

static bool allowed(const struct netpolicy *p, const char *ip)
{
	char why[160];
	return allowed_why(p, ip, why, sizeof why);
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

/* One row: an address, the policy's lists, whether it may be connected to and
 * a piece of the refusal's message. */
struct row {
	const char *ip;
	const char *allow;
	const char *deny;
	bool ok;
	const char *why; /* in the message when refused */
};

static void check_rows(const struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct netpolicy p;
		struct err e = {0};
		assert_int_equal(netpolicy_init(&p, r->allow, r->deny, &e), ERR_OK);
		char why[160] = "";
		bool ok = allowed_why(&p, r->ip, why, sizeof why);
		if (ok != r->ok)
			fail_msg("%s (allow=%s deny=%s): %s, expected %s (%s)", r->ip,
				 r->allow ? r->allow : "-", r->deny ? r->deny : "-",
				 ok ? "allowed" : "refused", r->ok ? "allowed" : "refused", why);
		if (!ok && r->why != NULL && strstr(why, r->why) == NULL)
			fail_msg("%s: message \"%s\" lacks \"%s\"", r->ip, why, r->why);
	}
}

/* An allow list of everything: what is refused under it is always refused. */
#define ALL "0.0.0.0/0, ::/0"

static void test_tunnels_and_platform_addresses_always_refused(void **state)
{
	(void)state;
	static const struct row rows[] = {
		/* NAT64 (64:ff9b::/96) carries its IPv4 target in the last 32 bits. */
		{"64:ff9b::a9fe:a9fe", ALL, NULL, false, "NAT64 of 169.254.169.254"},
		{"64:ff9b::169.254.1.2", ALL, NULL, false, "always refused"},
		{"64:ff9b::6464:64c8", ALL, NULL, false, "NAT64 of 100.100.100.200"},
		{"64:ff9b::a83f:8110", ALL, NULL, false, "NAT64 of 168.63.129.16"},
		{"64:ff9b::1", ALL, NULL, false, "NAT64 of 0.0.0.1"},
		/* Local-use NAT64 (64:ff9b:1::/48): the IPv4 address cannot be found. */
		{"64:ff9b:1::a9fe:a9fe", ALL, NULL, false, "always refused"},
		{"64:ff9b:1:abcd::808:808", ALL, NULL, false, "always refused"},
		/* 6to4 (2002::/16) carries it in bits 16..47. */
		{"2002:a9fe:a9fe::1", ALL, NULL, false, "6to4 of 169.254.169.254"},
		{"2002:a83f:8110:1:2:3:4:5", ALL, NULL, false, "6to4 of 168.63.129.16"},
		/* IPv4-compatible (deprecated) ::a.b.c.d. */
		{"::169.254.169.254", ALL, NULL, false, "IPv4-compatible of 169.254.169.254"},
		/* IPv4-mapped: the kernel connects to the IPv4 address. */
		{"::ffff:169.254.169.254", ALL, NULL, false, "always refused"},
		{"::ffff:168.63.129.16", ALL, NULL, false, "always refused"},
		{"::ffff:0.0.0.0", ALL, NULL, false, "always refused"},
		/* Teredo (2001::/32) hides its IPv4 target. */
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", ALL, NULL, false, "always refused"},
		/* The Azure WireServer. */
		{"168.63.129.16", ALL, NULL, false, "always refused"},
		/* Neighbours of the refused blocks stay allowed. */
		{"168.63.129.15", ALL, NULL, true, NULL},
		{"64:ff9b::808:808", ALL, NULL, true, NULL},
		{"64:ff9b:0:0:0:1::1", ALL, NULL, true, NULL},
		{"2002:808:808::1", ALL, NULL, true, NULL},
		{"2001:db8::1", ALL, NULL, true, NULL},
		{"::ffff:8.8.8.8", ALL, NULL, true, NULL},
	};
	check_rows(rows, sizeof rows / sizeof rows[0]);
}

static void test_embedded_ipv4_is_checked_against_the_lists(void **state)
{
	(void)state;
	static const struct row rows[] = {
		/* The deny list refuses the IPv4 target behind NAT64, 6to4,
		 * IPv4-compatible and IPv4-mapped addresses. */
		{"64:ff9b::a00:1", NULL, "10.0.0.0/8", false, "(NAT64 of 10.0.0.1) is denied"},
		{"2002:a00:1::1", NULL, "10.0.0.0/8", false, "(6to4 of 10.0.0.1) is denied"},
		{"::10.0.0.1", NULL, "10.0.0.0/8", false, "HOOKFLOW_URL_DENY"},
		{"::ffff:10.0.0.1", NULL, "10.0.0.0/8", false, "HOOKFLOW_URL_DENY"},
		{"64:ff9b::7f00:1", NULL, "127.0.0.0/8", false, "HOOKFLOW_URL_DENY"},
		{"64:ff9b::b00:1", NULL, "10.0.0.0/8", true, NULL},
		/* Denying the IPv6 form refuses too. */
		{"64:ff9b::808:808", NULL, "64:ff9b::/96", false, "HOOKFLOW_URL_DENY"},
		{"2002:808:808::1", NULL, "2002::/16", false, "HOOKFLOW_URL_DENY"},
		/* An allow list listing either form allows. */
		{"64:ff9b::cb00:7107", "203.0.113.7", NULL, true, NULL},
		{"64:ff9b::cb00:7107", "64:ff9b::/96", NULL, true, NULL},
		{"64:ff9b::cb00:7108", "203.0.113.7", NULL, false, "HOOKFLOW_URL_ALLOW"},
		{"2002:cb00:7107::1", "203.0.113.7", NULL, true, NULL},
		/* ...but never past the always-refused list. */
		{"64:ff9b::a9fe:a9fe", "64:ff9b::/96", NULL, false, "always refused"},
		/* Loopback and ::1 keep their meaning (::1 is not IPv4-compatible). */
		{"::1", NULL, "0.0.0.0/8", true, NULL},
		{"::1", NULL, NULL, true, NULL},
		{"::", NULL, NULL, false, "always refused"},
	};
	check_rows(rows, sizeof rows / sizeof rows[0]);
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
		cmocka_unit_test(test_tunnels_and_platform_addresses_always_refused),
		cmocka_unit_test(test_embedded_ipv4_is_checked_against_the_lists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
