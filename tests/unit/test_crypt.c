/* test_crypt: secrets sealed with AES-256-GCM under HOOKFLOW_ENCRYPTION_KEY. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/crypt.h"

static const unsigned char key1[CRYPT_KEY_LEN] = "0123456789abcdef0123456789abcdef";
static const unsigned char key2[CRYPT_KEY_LEN] = "fedcba9876543210fedcba9876543210";

static void test_seal_then_open_gives_the_secret_back(void **state)
{
	(void)state;
	static const char *const secrets[] = {"whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=", "", "x"};
	for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
		struct err e = {0};
		char *sealed = NULL, *plain = NULL;
		size_t len = 0;
		assert_int_equal(crypt_seal(key1, secrets[i], strlen(secrets[i]), &sealed, &e),
				 ERR_OK);
		assert_true(crypt_is_sealed(sealed));
		/* The secret is not in the sealed text (a secret of a few characters
		 * could turn up in random base64 by chance: only the long one). */
		if (strlen(secrets[i]) > 16)
			assert_null(strstr(sealed, secrets[i]));
		assert_int_equal(crypt_open(key1, sealed, &plain, &len, &e), ERR_OK);
		assert_int_equal(len, strlen(secrets[i]));
		assert_string_equal(plain, secrets[i]);
		free(sealed);
		free(plain);
	}
}

static void test_sealing_twice_gives_two_different_values(void **state)
{
	(void)state;
	struct err e = {0};
	char *a = NULL, *b = NULL;
	assert_int_equal(crypt_seal(key1, "same", 4, &a, &e), ERR_OK);
	assert_int_equal(crypt_seal(key1, "same", 4, &b, &e), ERR_OK);
	assert_string_not_equal(a, b);
	free(a);
	free(b);
}

static void test_a_wrong_key_does_not_open(void **state)
{
	(void)state;
	struct err e = {0};
	char *sealed = NULL, *plain = NULL;
	assert_int_equal(crypt_seal(key1, "whsec_abc", 9, &sealed, &e), ERR_OK);
	assert_int_equal(crypt_open(key2, sealed, &plain, NULL, &e), ERR_FORBIDDEN);
	assert_null(plain);
	assert_non_null(strstr(e.msg, "HOOKFLOW_ENCRYPTION_KEY"));
	free(sealed);
}

static void test_a_changed_byte_does_not_open(void **state)
{
	(void)state;
	struct err e = {0};
	char *sealed = NULL, *plain = NULL;
	assert_int_equal(crypt_seal(key1, "whsec_abcdefgh", 14, &sealed, &e), ERR_OK);
	/* Every position of the base64 text, changed in turn. */
	size_t n = strlen(sealed);
	for (size_t i = strlen(CRYPT_PREFIX); i + 4 < n; i++) {
		char *copy = strdup(sealed);
		copy[i] = copy[i] == 'A' ? 'B' : 'A';
		struct err e2 = {0};
		assert_int_not_equal(crypt_open(key1, copy, &plain, NULL, &e2), ERR_OK);
		assert_null(plain);
		free(copy);
	}
	free(sealed);
}

static void test_malformed_sealed_values_are_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {"whsec_plain", "enc:v1:", "enc:v1:!!!!", "enc:v1:AAAA",
					  "enc:v2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e = {0};
		char *plain = NULL;
		assert_int_not_equal(crypt_open(key1, bad[i], &plain, NULL, &e), ERR_OK);
		assert_null(plain);
	}
}

static void test_reveal_copies_plain_values_and_opens_sealed_ones(void **state)
{
	(void)state;
	struct err e = {0};
	char *out = NULL, *sealed = NULL;
	assert_int_equal(crypt_reveal(NULL, "whsec_plain", &out, &e), ERR_OK);
	assert_string_equal(out, "whsec_plain");
	free(out);
	assert_int_equal(crypt_reveal(key1, NULL, &out, &e), ERR_OK);
	assert_null(out);
	assert_int_equal(crypt_seal(key1, "whsec_x", 7, &sealed, &e), ERR_OK);
	assert_int_equal(crypt_reveal(key1, sealed, &out, &e), ERR_OK);
	assert_string_equal(out, "whsec_x");
	free(out);
	struct err e2 = {0};
	assert_int_equal(crypt_reveal(NULL, sealed, &out, &e2), ERR_FORBIDDEN);
	assert_non_null(strstr(e2.msg, "not set"));
	free(sealed);
}

static void test_the_key_must_be_32_bytes_of_base64(void **state)
{
	(void)state;
	unsigned char k[CRYPT_KEY_LEN];
	struct err e = {0};
	assert_int_equal(crypt_parse_key("HOOKFLOW_ENCRYPTION_KEY",
					 "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", k, &e),
			 ERR_OK);
	assert_memory_equal(k, key1, CRYPT_KEY_LEN);
	static const char *const bad[] = {
		"", "short", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZQ==",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYx", "not base64!"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e2 = {0};
		assert_int_equal(crypt_parse_key("HOOKFLOW_ENCRYPTION_KEY", bad[i], k, &e2),
				 ERR_INVALID);
		assert_non_null(strstr(e2.msg, "HOOKFLOW_ENCRYPTION_KEY"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seal_then_open_gives_the_secret_back),
		cmocka_unit_test(test_sealing_twice_gives_two_different_values),
		cmocka_unit_test(test_a_wrong_key_does_not_open),
		cmocka_unit_test(test_a_changed_byte_does_not_open),
		cmocka_unit_test(test_malformed_sealed_values_are_refused),
		cmocka_unit_test(test_reveal_copies_plain_values_and_opens_sealed_ones),
		cmocka_unit_test(test_the_key_must_be_32_bytes_of_base64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
