/* Unit tests of config: HOOKFLOW_API_TOKENS with scopes, the limits of
 * issue 12 (HOOKFLOW_MAX_CONNS_PER_IP, HOOKFLOW_REQUEST_TIMEOUT_MS), and the
 * command line client's HOOKFLOW_URL and HOOKFLOW_TOKEN. */
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

static void test_client_defaults_and_needs_nothing_else(void **state)
{
	(void)state;
	struct client_config c = {0};
	struct err e = {0};
	unsetenv("HOOKFLOW_URL");
	unsetenv("HOOKFLOW_TOKEN");
	setenv("HOOKFLOW_DATABASE_URL", "", 1);
	assert_int_equal(config_client_load(&c, &e), ERR_OK);
	assert_string_equal(c.url, "http://127.0.0.1:8080");
	assert_null(c.token);
	config_client_cleanup(&c);
	assert_null(c.url);
	setenv("HOOKFLOW_URL", "https://hookflow.example.com/base///", 1);
	setenv("HOOKFLOW_TOKEN", "tok-" T16, 1);
	assert_int_equal(config_client_load(&c, &e), ERR_OK);
	assert_string_equal(c.url, "https://hookflow.example.com/base");
	assert_string_equal(c.token, "tok-" T16);
	config_client_cleanup(&c);
	unsetenv("HOOKFLOW_URL");
	unsetenv("HOOKFLOW_TOKEN");
	unsetenv("HOOKFLOW_DATABASE_URL");
}

static void test_client_refuses_bad_values_naming_the_variable(void **state)
{
	(void)state;
	static const struct {
		const char *url, *token, *why;
	} cases[] = {
		{"127.0.0.1:8080", NULL, "HOOKFLOW_URL: must start with http:// or https://"},
		{"http://", NULL, "HOOKFLOW_URL: must name a host"},
		{"http:///x", NULL, "HOOKFLOW_URL: must name a host"},
		{"http://a b", NULL, "HOOKFLOW_URL: must be at most 2048 bytes of visible ASCII"},
		{"http://h/?q=1", NULL, "HOOKFLOW_URL: must be a base URL without a query"},
		{"http://h\n", NULL, "HOOKFLOW_URL: must be at most"},
		{"http://h", "two words",
		 "HOOKFLOW_TOKEN: must be at most 512 bytes of visible ASCII"},
		{"http://h", "line\r\nX-Evil: 1", "HOOKFLOW_TOKEN: must be"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct client_config c = {0};
		struct err e = {0};
		setenv("HOOKFLOW_URL", cases[i].url, 1);
		if (cases[i].token)
			setenv("HOOKFLOW_TOKEN", cases[i].token, 1);
		else
			unsetenv("HOOKFLOW_TOKEN");
		assert_int_equal(config_client_load(&c, &e), ERR_INVALID);
		assert_non_null(strstr(e.msg, cases[i].why));
		assert_null(c.url);
		assert_null(c.token);
	}
	static char long_url[2100];
	memcpy(long_url, "http://", 7);
	memset(long_url + 7, 'a', 2090);
	long_url[2097] = '\0';
	setenv("HOOKFLOW_URL", long_url, 1);
	unsetenv("HOOKFLOW_TOKEN");
	struct client_config c = {0};
	struct err e = {0};
	assert_int_equal(config_client_load(&c, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "HOOKFLOW_URL: must be at most 2048 bytes"));
	unsetenv("HOOKFLOW_URL");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_tokens_carry_a_scope_admin_by_default, setup),
		cmocka_unit_test_setup(test_bad_entries_are_refused_without_quoting_the_token,
				       setup),
		cmocka_unit_test_setup(test_a_long_token_is_refused, setup),
		cmocka_unit_test_setup(test_connection_limits_default_and_are_validated, setup),
		cmocka_unit_test(test_client_defaults_and_needs_nothing_else),
		cmocka_unit_test(test_client_refuses_bad_values_naming_the_variable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
