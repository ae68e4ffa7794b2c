/* test_version: how hookflow versions compare (the rule that makes an older
 * binary refuse a database a newer one upgraded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/version.h"

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

static void test_versions_compare_by_number_then_prerelease(void **state)
{
	(void)state;
	static const struct {
		const char *a, *b;
		int want;
	} cases[] = {
		{"0.1.0", "0.1.0", 0},          {"0.1.0", "0.2.0-dev", -1},
		{"0.2.0-dev", "0.2.0", -1},     {"0.2.0", "0.2.0-dev", 1},
		{"0.2.0-dev", "0.2.0-rc1", -1}, {"0.10.0", "0.9.9", 1},
		{"1.0.0", "0.99.99", 1},        {"0.2.1", "0.2.0", 1},
		{"2.0.0", "10.0.0", -1},        {"0.2.0-dev", "0.2.0-dev", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(sign(version_compare(cases[i].a, cases[i].b)), cases[i].want);
		assert_int_equal(sign(version_compare(cases[i].b, cases[i].a)), -cases[i].want);
	}
}

static void test_malformed_versions_are_older_than_any(void **state)
{
	(void)state;
	static const char *const bad[] = {"",       "1",       "1.2",    "1.2.x", "v1.2.3",
					  "1.2.3-", "1.2.3.4", "-1.0.0", NULL};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_true(version_compare(bad[i], "0.0.0") < 0);
		assert_true(version_compare("0.0.0", bad[i]) > 0);
		assert_int_equal(version_compare(bad[i], bad[i]), 0);
	}
}

static void test_this_build_has_a_well_formed_version(void **state)
{
	(void)state;
	assert_true(version_compare(HOOKFLOW_VERSION, "0.1.0") > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions_compare_by_number_then_prerelease),
		cmocka_unit_test(test_malformed_versions_are_older_than_any),
		cmocka_unit_test(test_this_build_has_a_well_formed_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
