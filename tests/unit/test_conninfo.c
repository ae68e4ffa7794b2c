/* test_conninfo: the database URL completed with a connect timeout
 * (db/conninfo.h): added in the URI or key=value form when nothing sets one,
 * left alone when the URL, PGCONNECT_TIMEOUT or a service entry does, and a
 * string libpq cannot parse refused with a message naming the variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/conninfo.h"

static void expect_completed(const char *url, const char *want)
{
	struct err e = {0};
	char *out = NULL;
	assert_int_equal(db_conninfo_complete("HOOKFLOW_DATABASE_URL", url, &out, &e), ERR_OK);
	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
}

static void test_a_timeout_is_added_when_none_is_set(void **state)
{
	(void)state;
	unsetenv("PGCONNECT_TIMEOUT");
	expect_completed("postgresql://u@db/app", "postgresql://u@db/app?connect_timeout=5");
	expect_completed("postgres://u@db/app?sslmode=require",
			 "postgres://u@db/app?sslmode=require&connect_timeout=5");
	expect_completed("postgresql://u@a:5432,b:5433/app?target_session_attrs=read-write",
			 "postgresql://u@a:5432,b:5433/app?target_session_attrs=read-write&"
			 "connect_timeout=5");
	expect_completed("postgresql://u@db/app?", "postgresql://u@db/app?connect_timeout=5");
	expect_completed("host=a,b port=1,2 dbname=app",
			 "host=a,b port=1,2 dbname=app connect_timeout=5");
	expect_completed("", "connect_timeout=5");
}

static void test_a_timeout_already_set_is_kept(void **state)
{
	(void)state;
	unsetenv("PGCONNECT_TIMEOUT");
	expect_completed("postgresql://u@db/app?connect_timeout=30",
			 "postgresql://u@db/app?connect_timeout=30");
	expect_completed("host=db connect_timeout=2", "host=db connect_timeout=2");
	/* a service file entry may set one: not overridden */
	expect_completed("service=hookflow", "service=hookflow");
	setenv("PGCONNECT_TIMEOUT", "12", 1);
	expect_completed("postgresql://u@db/app", "postgresql://u@db/app");
	unsetenv("PGCONNECT_TIMEOUT");
}

static void test_a_string_libpq_cannot_parse_is_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {"postgresql://u@db/app?nosuchoption=1", "host",
					  "host='db", NULL};
	for (int i = 0; bad[i] != NULL; i++) {
		struct err e = {0};
		char *out = (char *)"untouched";
		assert_int_equal(db_conninfo_complete("HOOKFLOW_DATABASE_URL", bad[i], &out, &e),
				 ERR_INVALID);
		assert_null(out);
		assert_non_null(strstr(e.msg, "HOOKFLOW_DATABASE_URL"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_timeout_is_added_when_none_is_set),
		cmocka_unit_test(test_a_timeout_already_set_is_kept),
		cmocka_unit_test(test_a_string_libpq_cannot_parse_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
