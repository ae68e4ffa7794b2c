/* Unit tests of config: the settings for running behind PgBouncer
 * (HOOKFLOW_DATABASE_POOLER, HOOKFLOW_LISTEN_DATABASE_URL; README "PgBouncer"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"

#define POOLED "host=127.0.0.1 port=6432 dbname=hf"
#define DIRECT "host=127.0.0.1 port=5432 dbname=hf"

static int setup(void **state)
{
	(void)state;
	setenv("HOOKFLOW_DATABASE_URL", POOLED, 1);
	unsetenv("HOOKFLOW_DATABASE_POOLER");
	unsetenv("HOOKFLOW_LISTEN_DATABASE_URL");
	return 0;
}

static enum err_code load(struct config *c, struct err *e)
{
	memset(c, 0, sizeof *c);
	memset(e, 0, sizeof *e);
	return config_load(c, true, e);
}

static void test_without_a_pooler_listen_uses_the_main_url(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_false(c.db_transaction_pooler);
	assert_string_equal(c.listen_database_url, POOLED);
	config_cleanup(&c);

	setenv("HOOKFLOW_DATABASE_POOLER", "none", 1);
	setenv("HOOKFLOW_LISTEN_DATABASE_URL", DIRECT, 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_false(c.db_transaction_pooler);
	assert_string_equal(c.listen_database_url, DIRECT);
	assert_string_equal(c.database_url, POOLED);
	config_cleanup(&c);
}

static void test_transaction_pooler_takes_a_direct_listen_url(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	setenv("HOOKFLOW_DATABASE_POOLER", "transaction", 1);
	setenv("HOOKFLOW_LISTEN_DATABASE_URL", DIRECT, 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_true(c.db_transaction_pooler);
	assert_string_equal(c.database_url, POOLED);
	assert_string_equal(c.listen_database_url, DIRECT);
	config_cleanup(&c);
}

static void test_bad_pooler_settings_are_refused_naming_the_variable(void **state)
{
	(void)state;
	static const struct {
		const char *pooler;
		const char *listen_url; /* NULL: unset */
		const char *why;
	} cases[] = {
		{"session", DIRECT, "HOOKFLOW_DATABASE_POOLER: must be none or transaction"},
		{"Transaction", DIRECT, "HOOKFLOW_DATABASE_POOLER: must be none or transaction"},
		{"transaction", NULL,
		 "HOOKFLOW_LISTEN_DATABASE_URL: required with "
		 "HOOKFLOW_DATABASE_POOLER=transaction"},
		{"transaction", POOLED,
		 "HOOKFLOW_LISTEN_DATABASE_URL: must reach PostgreSQL directly"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct config c;
		struct err e;
		setenv("HOOKFLOW_DATABASE_POOLER", cases[i].pooler, 1);
		if (cases[i].listen_url != NULL)
			setenv("HOOKFLOW_LISTEN_DATABASE_URL", cases[i].listen_url, 1);
		else
			unsetenv("HOOKFLOW_LISTEN_DATABASE_URL");
		assert_int_equal(load(&c, &e), ERR_INVALID);
		if (strstr(e.msg, cases[i].why) == NULL)
			fail_msg("case %zu: %s", i, e.msg);
		config_cleanup(&c);
	}
}

static void test_a_long_listen_url_is_refused(void **state)
{
	(void)state;
	char big[CONFIG_MAX_DATABASE_URL + 2];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	setenv("HOOKFLOW_LISTEN_DATABASE_URL", big, 1);
	struct config c;
	struct err e;
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_LISTEN_DATABASE_URL: longer than 4096 bytes"));
	config_cleanup(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_without_a_pooler_listen_uses_the_main_url, setup),
		cmocka_unit_test_setup(test_transaction_pooler_takes_a_direct_listen_url, setup),
		cmocka_unit_test_setup(test_bad_pooler_settings_are_refused_naming_the_variable,
				       setup),
		cmocka_unit_test_setup(test_a_long_listen_url_is_refused, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
