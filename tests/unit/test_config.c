/* Unit tests of config: HOOKFLOW_API_TOKENS with scopes, the limits of
 * issue 12 (HOOKFLOW_MAX_CONNS_PER_IP, HOOKFLOW_REQUEST_TIMEOUT_MS), and the
 * span export of issue 18 (HOOKFLOW_OTLP_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"

#define T16 "0123456789abcdef"

static int setup(void **state)
{
	(void)state;
	unsetenv("HOOKFLOW_API_TOKENS");
	unsetenv("HOOKFLOW_MAX_CONNS_PER_IP");
	unsetenv("HOOKFLOW_REQUEST_TIMEOUT_MS");
	unsetenv("HOOKFLOW_OTLP_ENDPOINT");
	unsetenv("HOOKFLOW_OTLP_QUEUE");
	unsetenv("HOOKFLOW_OTLP_TIMEOUT_MS");
	return 0;
}

static enum err_code load(struct config *c, struct err *e)
{
	memset(c, 0, sizeof *c);
	memset(e, 0, sizeof *e);
	return config_load(c, false, e);
}

static void test_tokens_carry_a_scope_admin_by_default(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	setenv("HOOKFLOW_API_TOKENS", " plain-" T16 ", read:r-" T16 ",admin:a:" T16 ",, ", 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_int_equal(c.ntokens, 3);
	assert_string_equal(c.tokens[0], "plain-" T16);
	assert_int_equal(c.token_scopes[0], TOKEN_SCOPE_ADMIN);
	assert_string_equal(c.tokens[1], "r-" T16);
	assert_int_equal(c.token_scopes[1], TOKEN_SCOPE_READ);
	assert_string_equal(c.tokens[2], "a:" T16); /* a token with a ':' of its own */
	assert_int_equal(c.token_scopes[2], TOKEN_SCOPE_ADMIN);
	config_cleanup(&c);
}

static void test_bad_entries_are_refused_without_quoting_the_token(void **state)
{
	(void)state;
	static const struct {
		const char *value;
		const char *why;
	} cases[] = {
		{"raed:secret-" T16, "entry 1: unknown scope \"raed\""},
		{"ok-" T16 ",Read:secret-" T16, "entry 2: unknown scope"},
		{"read:secret", "entry 1: each token needs 16 to 512"},
		{"admin:", "entry 1: each token needs"},
		{"secret " T16, "visible ASCII"},
		{"secret-" T16 ",read:secret-" T16, "entry 2 repeats the token of entry 1"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct config c;
		struct err e;
		setenv("HOOKFLOW_API_TOKENS", cases[i].value, 1);
		assert_int_equal(load(&c, &e), ERR_INVALID);
		if (strstr(e.msg, "HOOKFLOW_API_TOKENS") == NULL ||
		    strstr(e.msg, cases[i].why) == NULL)
			fail_msg("%s: %s", cases[i].value, e.msg);
		if (strstr(e.msg, "secret") != NULL)
			fail_msg("the message quotes the token: %s", e.msg);
		config_cleanup(&c);
	}
}

static void test_a_long_token_is_refused(void **state)
{
	(void)state;
	char big[600];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	struct config c;
	struct err e;
	setenv("HOOKFLOW_API_TOKENS", big, 1);
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "512"));
	config_cleanup(&c);
}

static void test_connection_limits_default_and_are_validated(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_int_equal(c.max_conns_per_ip, 256);
	assert_int_equal(c.request_timeout_ms, 60000);
	config_cleanup(&c);
	setenv("HOOKFLOW_MAX_CONNS_PER_IP", "0", 1);
	setenv("HOOKFLOW_REQUEST_TIMEOUT_MS", "1500", 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_int_equal(c.max_conns_per_ip, 0);
	assert_int_equal(c.request_timeout_ms, 1500);
	config_cleanup(&c);
	setenv("HOOKFLOW_MAX_CONNS_PER_IP", "-1", 1);
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_MAX_CONNS_PER_IP"));
	config_cleanup(&c);
	unsetenv("HOOKFLOW_MAX_CONNS_PER_IP");
	setenv("HOOKFLOW_REQUEST_TIMEOUT_MS", "10", 1);
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_REQUEST_TIMEOUT_MS"));
	config_cleanup(&c);
}

static void test_otlp_settings_default_and_are_validated(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_null(c.otlp_endpoint); /* no export, no span built */
	assert_int_equal(c.otlp_queue, 8192);
	assert_int_equal(c.otlp_timeout_ms, 10000);
	config_cleanup(&c);
	setenv("HOOKFLOW_OTLP_ENDPOINT", "http://127.0.0.1:4318/", 1);
	setenv("HOOKFLOW_OTLP_QUEUE", "16", 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_string_equal(c.otlp_endpoint, "http://127.0.0.1:4318/");
	assert_int_equal(c.otlp_queue, 16);
	config_cleanup(&c);
	static const char *const bad[] = {
		"127.0.0.1:4318",                 /* no scheme */
		"grpc://127.0.0.1:4317",          /* OTLP/HTTP only */
		"http://",                        /* no host */
		"http://user:pw@collector:4318",  /* credentials */
		"http://collector:4318/?x=1",     /* a query */
		"http://collector:4318/a b",      /* white space */
		"http://collector:4318/\r\nX: 1", /* control characters */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		setenv("HOOKFLOW_OTLP_ENDPOINT", bad[i], 1);
		assert_int_equal(load(&c, &e), ERR_INVALID);
		assert_non_null(strstr(e.msg, "HOOKFLOW_OTLP_ENDPOINT"));
		config_cleanup(&c);
	}
	unsetenv("HOOKFLOW_OTLP_ENDPOINT");
	setenv("HOOKFLOW_OTLP_QUEUE", "15", 1);
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_OTLP_QUEUE"));
	config_cleanup(&c);
	unsetenv("HOOKFLOW_OTLP_QUEUE");
	setenv("HOOKFLOW_OTLP_TIMEOUT_MS", "99", 1);
	assert_int_equal(load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_OTLP_TIMEOUT_MS"));
	config_cleanup(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_tokens_carry_a_scope_admin_by_default, setup),
		cmocka_unit_test_setup(test_bad_entries_are_refused_without_quoting_the_token,
				       setup),
		cmocka_unit_test_setup(test_a_long_token_is_refused, setup),
		cmocka_unit_test_setup(test_connection_limits_default_and_are_validated, setup),
		cmocka_unit_test_setup(test_otlp_settings_default_and_are_validated, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
