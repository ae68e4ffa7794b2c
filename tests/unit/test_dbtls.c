/* Unit tests of db_tls_failure (issue 17): which of libpq's connection errors
 * say that TLS was refused, so that start-up stops at once naming the
 * certificate problem instead of waiting for a database that will never
 * verify. The texts are libpq 15's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/db.h"

#define AT "connection to server at \"localhost\" (127.0.0.1), port 5432 failed: "

static void test_certificate_and_tls_problems_are_tls_failures(void **state)
{
	(void)state;
	static const char *const msgs[] = {
		AT "server certificate for \"wrong.example\" does not match host name "
		   "\"localhost\"\n",
		AT "server certificate for \"db\" (and 1 other name) does not match host name "
		   "\"x\"\n",
		AT "SSL error: certificate verify failed\n",
		AT "root certificate file \"/nonexistent\" does not exist\nEither provide the "
		   "file or change sslmode to disable server certificate verification.\n",
		AT "could not read root certificate file \"/etc/ca.pem\": no certificate or "
		   "crl found\n",
		AT "server does not support SSL, but SSL was required\n",
		AT "SSL error: tlsv1 alert unknown ca\n",
		AT "private key file \"/k.pem\" has group or world access; file must have "
		   "permissions u=rw (0600) or less if owned by the current user\n",
	};
	for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
		char line[300] = "";
		if (!db_tls_failure(msgs[i], line, sizeof line))
			fail_msg("not taken for a TLS failure: %s", msgs[i]);
		/* The line that says so, without the newline. */
		assert_non_null(strstr(msgs[i], line));
		assert_null(strchr(line, '\n'));
		assert_non_null(strstr(line, "failed: "));
	}
}

static void test_the_tls_line_is_found_after_another_address_failed(void **state)
{
	(void)state;
	/* localhost tried at ::1 first (refused), then at 127.0.0.1. */
	const char *msg =
		"connection to server at \"localhost\" (::1), port 5432 failed: Connection "
		"refused\n\tIs the server running on that host and accepting TCP/IP "
		"connections?\n" AT "server certificate for \"wrong.example\" does not match "
		"host name \"localhost\"\n";
	char line[300];
	assert_true(db_tls_failure(msg, line, sizeof line));
	assert_string_equal(line, AT "server certificate for \"wrong.example\" does not match "
				     "host name \"localhost\"");
}

static void test_other_failures_are_not_tls_failures(void **state)
{
	(void)state;
	static const char *const msgs[] = {
		AT "Connection refused\n\tIs the server running on that host and accepting "
		   "TCP/IP connections?\n",
		AT "FATAL:  password authentication failed for user \"hookflow\"\n",
		AT "FATAL:  the database system is starting up\n",
		/* The server went away in the middle of the handshake: it may come back. */
		AT "SSL SYSCALL error: EOF detected\n",
		AT "SSL error: unexpected eof while reading\n",
		"could not translate host name \"db\" to address: Name or service not known\n",
		"",
	};
	for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
		char line[300] = "untouched";
		if (db_tls_failure(msgs[i], line, sizeof line))
			fail_msg("taken for a TLS failure: %s", msgs[i]);
		assert_string_equal(line, "untouched");
	}
	assert_false(db_tls_failure(NULL, NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_certificate_and_tls_problems_are_tls_failures),
		cmocka_unit_test(test_the_tls_line_is_found_after_another_address_failed),
		cmocka_unit_test(test_other_failures_are_not_tls_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
