/* Unit tests of config: HOOKFLOW_API_TOKENS with scopes, the limits of
 * issue 12 (HOOKFLOW_MAX_CONNS_PER_IP, HOOKFLOW_REQUEST_TIMEOUT_MS), and the
 * TLS files of issue 17 (HOOKFLOW_CA_FILE, HOOKFLOW_CLIENT_CERT,
 * HOOKFLOW_CLIENT_KEY), and the command line client's HOOKFLOW_URL and
 * HOOKFLOW_TOKEN, and the span export of issue 18 (HOOKFLOW_OTLP_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/x509.h>

#include "base/config.h"
#include "base/tlsfiles.h"

#define T16 "0123456789abcdef"

static int setup(void **state)
{
	(void)state;
	unsetenv("HOOKFLOW_API_TOKENS");
	unsetenv("HOOKFLOW_MAX_CONNS_PER_IP");
	unsetenv("HOOKFLOW_REQUEST_TIMEOUT_MS");
	unsetenv("HOOKFLOW_CA_FILE");
	unsetenv("HOOKFLOW_CLIENT_CERT");
	unsetenv("HOOKFLOW_CLIENT_KEY");
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

/* ---- TLS files (issue 17) ----------------------------------------------
 * Two self-signed EC certificates made with the openssl command line, the
 * key of the first, the first key encrypted (passphrase "secret") and the
 * second certificate's key. */

#define CERT_A                                                               \
	"-----BEGIN CERTIFICATE-----\n"                                      \
	"MIIBeTCCAR+gAwIBAgIUE8vOz+92rHQn0TcjmRsnhrbW1a0wCgYIKoZIzj0EAwIw\n" \
	"ETEPMA0GA1UEAwwGdW5pdC1hMCAXDTI2MTIwMzE4Mzk1NFoYDzIxMjYxMTA5MTgz\n" \
	"OTU0WjARMQ8wDQYDVQQDDAZ1bml0LWEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n" \
	"AASvwCmHKx8YmVzBwLwN5P86AXWrl4AkiQzcs+c0qPEah7/wM+TBFwsFAJJbvQqP\n" \
	"hKxQIp3i+BIgERe7N3L8sxRXo1MwUTAdBgNVHQ4EFgQUSNDd+ald1M4+PvEjdKWS\n" \
	"t5cuOhUwHwYDVR0jBBgwFoAUSNDd+ald1M4+PvEjdKWSt5cuOhUwDwYDVR0TAQH/\n" \
	"BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBTKc2i3E0M6s4vdkOuUMnK33Rp5wDi\n" \
	"3LHsRmM7g/wepwIhAJ271nYrty+mrY+nnEnbcra1maq4ZZX8Uvf4/fPn0jSX\n"     \
	"-----END CERTIFICATE-----\n"

#define KEY_A                                                                \
	"-----BEGIN PRIVATE KEY-----\n"                                      \
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgxYp91gFs9k7ufG5C\n" \
	"j5jNP5YxzlEQHfZcbMS9nm2dnymhRANCAASvwCmHKx8YmVzBwLwN5P86AXWrl4Ak\n" \
	"iQzcs+c0qPEah7/wM+TBFwsFAJJbvQqPhKxQIp3i+BIgERe7N3L8sxRX\n"         \
	"-----END PRIVATE KEY-----\n"

#define CERT_B                                                               \
	"-----BEGIN CERTIFICATE-----\n"                                      \
	"MIIBeTCCAR+gAwIBAgIUIjD3P6V66phoCupJXaS1SkHoAsUwCgYIKoZIzj0EAwIw\n" \
	"ETEPMA0GA1UEAwwGdW5pdC1iMCAXDTI2MTIwMzE4Mzk1NFoYDzIxMjYxMTA5MTgz\n" \
	"OTU0WjARMQ8wDQYDVQQDDAZ1bml0LWIwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n" \
	"AAR/QZ4LnhOAnB7lgpgaTUGuRL5MyoYHrc6XDc0r154snGrkdxlCczlA3uYjHcQ5\n" \
	"9K4HEhq0KTxiUx0IiDYJYktFo1MwUTAdBgNVHQ4EFgQUU2ZABoQtDdr+jAzUIli1\n" \
	"xjkX4kwwHwYDVR0jBBgwFoAUU2ZABoQtDdr+jAzUIli1xjkX4kwwDwYDVR0TAQH/\n" \
	"BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiA827b2b861Vwrtw3Zi7T0w6t3P5/Yt\n" \
	"HlbedX9ifvLPnAIhAL/EyMeRuyKolS6nZkPjrd92Ns7X1u27rz1gNm2Fvyyz\n"     \
	"-----END CERTIFICATE-----\n"

#define KEY_A_ENCRYPTED                                                      \
	"-----BEGIN ENCRYPTED PRIVATE KEY-----\n"                            \
	"MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAjP1xL9KltGtgICCAAw\n" \
	"DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEOe2WO76vmn64PTfp5CWErkEgZCm\n" \
	"Gwm54x/5VGjtDjf19r4fhMayGrkniFB+huPMI3hkKRUvnLVNhJ+fxGkphsUltL/t\n" \
	"atw5JuAzxzYOC7NuD9m0tgH8t0XlJsDyhN9lJBs2t9FTRuT631fNRhnLkt5LItJ2\n" \
	"M25z3z0bEBolcaeEzZfq9jwM0yMCebhnJQ4nk6r9WXksYU3Nx2L8EL6sqIynt3Y=\n" \
	"-----END ENCRYPTED PRIVATE KEY-----\n"

/* Temporary files of one test, removed by its teardown. */
static char tmp_paths[8][64];
static int ntmp;

/* Writes `len` bytes of `text` to a new temporary file; returns its path. */
static const char *tmp_file_n(const char *text, size_t len)
{
	assert_true(ntmp < 8);
	char *path = tmp_paths[ntmp++];
	snprintf(path, sizeof tmp_paths[0], "/tmp/hookflow-test-config-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);
		assert_true(n > 0);
		done += (size_t)n;
	}
	close(fd);
	return path;
}

static const char *tmp_file(const char *text)
{
	return tmp_file_n(text, strlen(text));
}

static int teardown_files(void **state)
{
	(void)state;
	for (int i = 0; i < ntmp; i++)
		unlink(tmp_paths[i]);
	ntmp = 0;
	return setup(state);
}

/* Loads the configuration expecting ERR_INVALID with a message holding both
 * `var` and `why`. */
static void expect_invalid(const char *var, const char *why)
{
	struct config c;
	struct err e;
	assert_int_equal(load(&c, &e), ERR_INVALID);
	if (strstr(e.msg, var) == NULL || strstr(e.msg, why) == NULL)
		fail_msg("expected \"%s\" and \"%s\" in: %s", var, why, e.msg);
	config_cleanup(&c);
}

static void test_tls_files_are_optional(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	setenv("HOOKFLOW_CA_FILE", "", 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_null(c.ca_file);
	assert_null(c.extra_cas);
	assert_null(c.client_cert);
	assert_null(c.client_key);
	config_cleanup(&c);
}

static void test_a_ca_file_keeps_each_of_its_certificates(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	/* Text around the blocks and a key among them are skipped, as openssl does. */
	const char *ca = tmp_file("# two CAs\n" CERT_A KEY_A "\n" CERT_B "# end\n");
	setenv("HOOKFLOW_CA_FILE", ca, 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_string_equal(c.ca_file, ca);
	assert_non_null(c.extra_cas);
	assert_int_equal(sk_X509_num(c.extra_cas), 2);
	char cn[32];
	X509_NAME_get_text_by_NID(X509_get_subject_name(sk_X509_value(c.extra_cas, 1)),
				  NID_commonName, cn, sizeof cn);
	assert_string_equal(cn, "unit-b");
	config_cleanup(&c);
}

static void test_a_bad_ca_file_is_refused_naming_the_variable(void **state)
{
	(void)state;
	setenv("HOOKFLOW_CA_FILE", "/nonexistent/ca.pem", 1);
	expect_invalid("HOOKFLOW_CA_FILE", "cannot read /nonexistent/ca.pem");
	setenv("HOOKFLOW_CA_FILE", tmp_file(""), 1);
	expect_invalid("HOOKFLOW_CA_FILE", "holds no PEM certificate");
	setenv("HOOKFLOW_CA_FILE", tmp_file(KEY_A), 1);
	expect_invalid("HOOKFLOW_CA_FILE", "holds no PEM certificate");
	/* The second certificate's base64 is broken: the whole file is refused. */
	char broken[] = CERT_A CERT_B;
	char *second = strstr(strstr(broken, "END CERTIFICATE"), "MIIB");
	second[5] = '*';
	setenv("HOOKFLOW_CA_FILE", tmp_file(broken), 1);
	expect_invalid("HOOKFLOW_CA_FILE", "certificate 2 of ");
	/* Larger than the cap: refused without being parsed. */
	size_t big_len = TLSFILES_MAX_BYTES + 1;
	char *big = malloc(big_len);
	assert_non_null(big);
	memset(big, '#', big_len);
	setenv("HOOKFLOW_CA_FILE", tmp_file_n(big, big_len), 1);
	free(big);
	expect_invalid("HOOKFLOW_CA_FILE", "is larger than 1048576 bytes");
	char path[TLSFILES_MAX_PATH + 2];
	memset(path, 'a', sizeof path - 1);
	path[sizeof path - 1] = '\0';
	setenv("HOOKFLOW_CA_FILE", path, 1);
	expect_invalid("HOOKFLOW_CA_FILE", "the path is longer than 4096 bytes");
}

static void test_a_client_certificate_needs_its_key(void **state)
{
	(void)state;
	struct config c;
	struct err e;
	const char *cert = tmp_file(CERT_A), *key = tmp_file(KEY_A);
	setenv("HOOKFLOW_CLIENT_CERT", cert, 1);
	setenv("HOOKFLOW_CLIENT_KEY", key, 1);
	assert_int_equal(load(&c, &e), ERR_OK);
	assert_string_equal(c.client_cert, cert);
	assert_string_equal(c.client_key, key);
	config_cleanup(&c);

	unsetenv("HOOKFLOW_CLIENT_KEY");
	expect_invalid("HOOKFLOW_CLIENT_KEY", "required with HOOKFLOW_CLIENT_CERT");
	unsetenv("HOOKFLOW_CLIENT_CERT");
	setenv("HOOKFLOW_CLIENT_KEY", key, 1);
	expect_invalid("HOOKFLOW_CLIENT_CERT", "required with HOOKFLOW_CLIENT_KEY");
}

static void test_a_bad_client_certificate_or_key_is_refused_naming_it(void **state)
{
	(void)state;
	const char *cert = tmp_file(CERT_A), *key = tmp_file(KEY_A);
	setenv("HOOKFLOW_CLIENT_CERT", "/nonexistent/client.pem", 1);
	setenv("HOOKFLOW_CLIENT_KEY", key, 1);
	expect_invalid("HOOKFLOW_CLIENT_CERT", "cannot read /nonexistent/client.pem");
	setenv("HOOKFLOW_CLIENT_CERT", key, 1); /* a key where the certificate should be */
	expect_invalid("HOOKFLOW_CLIENT_CERT", "holds no PEM certificate");
	setenv("HOOKFLOW_CLIENT_CERT", cert, 1);
	setenv("HOOKFLOW_CLIENT_KEY", cert, 1); /* a certificate where the key should be */
	expect_invalid("HOOKFLOW_CLIENT_KEY", "holds no PEM private key");
	setenv("HOOKFLOW_CLIENT_KEY", tmp_file(KEY_A_ENCRYPTED), 1);
	expect_invalid("HOOKFLOW_CLIENT_KEY",
		       "encrypted: a key with a passphrase is not supported");
	/* Certificate B with the key of A. */
	setenv("HOOKFLOW_CLIENT_CERT", tmp_file(CERT_B), 1);
	setenv("HOOKFLOW_CLIENT_KEY", key, 1);
	expect_invalid("HOOKFLOW_CLIENT_KEY",
		       "is not the key of HOOKFLOW_CLIENT_CERT's certificate");
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
		cmocka_unit_test_setup_teardown(test_tls_files_are_optional, setup, teardown_files),
		cmocka_unit_test_setup_teardown(test_a_ca_file_keeps_each_of_its_certificates,
						setup, teardown_files),
		cmocka_unit_test_setup_teardown(test_a_bad_ca_file_is_refused_naming_the_variable,
						setup, teardown_files),
		cmocka_unit_test_setup_teardown(test_a_client_certificate_needs_its_key, setup,
						teardown_files),
		cmocka_unit_test_setup_teardown(
			test_a_bad_client_certificate_or_key_is_refused_naming_it, setup,
			teardown_files),
		cmocka_unit_test(test_client_defaults_and_needs_nothing_else),
		cmocka_unit_test(test_client_refuses_bad_values_naming_the_variable),
		cmocka_unit_test_setup(test_otlp_settings_default_and_are_validated, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
