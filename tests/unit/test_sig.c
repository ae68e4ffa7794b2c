/* test_sig: Standard Webhooks signatures, secrets, memo tokens, constant-time compare, base64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/sig.h"

#define VECTOR_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define VECTOR_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define VECTOR_TS 1614265330
#define VECTOR_BODY "{\"test\": 2432232314}"
/* 84 base64 characters: 63 bytes. */
#define A42 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define A84 A42 A42
#define VECTOR_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void test_sign_reproduces_standard_webhooks_vector(void **state)
{
	char out[SIG_HEADER_MAX];
	struct err e = {0};
	(void)state;

	assert_int_equal(sig_sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY,
				  strlen(VECTOR_BODY), out, &e),
			 ERR_OK);
	assert_string_equal(out, VECTOR_SIG);
}

static void test_sign_changes_with_each_input(void **state)
{
	char a[SIG_HEADER_MAX], b[SIG_HEADER_MAX];
	struct err e = {0};
	const char *other_secret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
	(void)state;

	sig_sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY, strlen(VECTOR_BODY), a, &e);
	sig_sign(other_secret, VECTOR_ID, VECTOR_TS, VECTOR_BODY, strlen(VECTOR_BODY), b, &e);
	assert_string_not_equal(a, b);
	sig_sign(VECTOR_SECRET, "msg_other", VECTOR_TS, VECTOR_BODY, strlen(VECTOR_BODY), b, &e);
	assert_string_not_equal(a, b);
	sig_sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TS + 1, VECTOR_BODY, strlen(VECTOR_BODY), b, &e);
	assert_string_not_equal(a, b);
	/* Only body_len bytes are signed. */
	sig_sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY "trailing", strlen(VECTOR_BODY),
		 b, &e);
	assert_string_equal(a, b);
	assert_int_equal(e.code, ERR_OK);
}

static void test_sign_with_bad_secret_fails(void **state)
{
	char out[SIG_HEADER_MAX];
	struct err e = {0};
	(void)state;

	assert_int_equal(sig_sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", VECTOR_ID, VECTOR_TS,
				  VECTOR_BODY, strlen(VECTOR_BODY), out, &e),
			 ERR_INVALID);
	assert_string_equal(e.msg, "secret: must start with whsec_");
	assert_string_equal(out, "");
}

/* A rotation's grace period: the new secret's signature, then the previous
 * one's, space-separated (Standard Webhooks' list form). */
static void test_header_with_previous_lists_new_then_old(void **state)
{
	const char *newer = "whsec_" A84; /* the longest secret: 63 bytes */
	char one[SIG_HEADER_MAX], want[2 * SIG_HEADER_MAX], out[SIG_HEADER_MAX];
	struct err e = {0};
	(void)state;

	assert_int_equal(
		sig_sign(newer, VECTOR_ID, VECTOR_TS, VECTOR_BODY, strlen(VECTOR_BODY), one, &e),
		ERR_OK);
	snprintf(want, sizeof want, "%s %s", one, VECTOR_SIG);
	assert_int_equal(sig_sign_header(newer, VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY,
					 strlen(VECTOR_BODY), out, &e),
			 ERR_OK);
	assert_string_equal(out, want);
}

static void test_header_without_previous_is_one_signature(void **state)
{
	char out[SIG_HEADER_MAX];
	struct err e = {0};
	(void)state;

	assert_int_equal(sig_sign_header(VECTOR_SECRET, NULL, VECTOR_ID, VECTOR_TS, VECTOR_BODY,
					 strlen(VECTOR_BODY), out, &e),
			 ERR_OK);
	assert_string_equal(out, VECTOR_SIG);
	/* Rotated to the same secret: one signature, not the same one twice. */
	assert_int_equal(sig_sign_header(VECTOR_SECRET, VECTOR_SECRET, VECTOR_ID, VECTOR_TS,
					 VECTOR_BODY, strlen(VECTOR_BODY), out, &e),
			 ERR_OK);
	assert_string_equal(out, VECTOR_SIG);
}

static void test_header_with_bad_previous_fails_empty(void **state)
{
	char out[SIG_HEADER_MAX];
	struct err e = {0};
	(void)state;

	assert_int_equal(sig_sign_header(VECTOR_SECRET, "whsec_short", VECTOR_ID, VECTOR_TS,
					 VECTOR_BODY, strlen(VECTOR_BODY), out, &e),
			 ERR_INVALID);
	assert_string_equal(out, "");
}

static void test_new_secret_is_valid_random_and_32_bytes(void **state)
{
	char a[SIG_SECRET_MAX + 1], b[SIG_SECRET_MAX + 1];
	unsigned char key[64];
	struct err e = {0};
	(void)state;

	assert_int_equal(sig_new_secret(a, &e), ERR_OK);
	assert_int_equal(sig_new_secret(b, &e), ERR_OK);
	assert_int_equal(sig_check_secret("secret", a, &e), ERR_OK);
	assert_int_equal(strncmp(a, "whsec_", 6), 0);
	assert_int_equal(strlen(a), 6 + 44);
	assert_int_equal(sig_base64_decode(a + 6, key, sizeof key), 32);
	assert_string_not_equal(a, b);
}

static void test_secret_check_table(void **state)
{
	static const struct {
		const char *secret;
		const char *msg; /* NULL when valid */
	} cases[] = {
		{VECTOR_SECRET, NULL},
		{"whsec_AAAAAAAAAAAAAAAAAAAAAA==", NULL}, /* 16 bytes */
		{"whsec_AAAAAAAAAAAAAAAAAAAAAA", NULL},   /* padding optional */
		{"whsec_" A84 "AA==", NULL},              /* 64 bytes */
		{"", "secret: must start with whsec_"},
		{"whsec", "secret: must start with whsec_"},
		{"WHSEC_AAAAAAAAAAAAAAAAAAAAAA==", "secret: must start with whsec_"},
		{"whsec_", "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
		{"whsec_AAAAAAAAAAAAAAAAAAAA", /* 15 bytes */
		 "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
		{"whsec_" A84 "AAAA", /* 66 bytes */
		 "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!",
		 "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ",
		 "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
		{"whsec_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_",
		 "secret: must be whsec_ followed by standard base64 of 16 to 64 bytes"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct err e = {0};
		enum err_code rc = sig_check_secret("secret", cases[i].secret, &e);
		if (cases[i].msg == NULL) {
			if (rc != ERR_OK)
				fail_msg("case %zu rejected: %s", i, e.msg);
		} else {
			assert_int_equal(rc, ERR_INVALID);
			assert_string_equal(e.msg, cases[i].msg);
		}
	}
	{
		struct err e = {0};
		assert_int_equal(sig_check_secret("workflow.secret", NULL, &e), ERR_INVALID);
		assert_string_equal(e.msg, "workflow.secret: must start with whsec_");
	}
}

static void test_memo_token_is_deterministic_and_url_safe(void **state)
{
	const unsigned char key[] = "0123456789abcdef0123456789abcdef";
	char a[SIG_TOKEN_LEN + 1], b[SIG_TOKEN_LEN + 1];
	(void)state;

	sig_memo_token(key, 32, "order-42", a);
	sig_memo_token(key, 32, "order-42", b);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), SIG_TOKEN_LEN);
	assert_int_equal(
		strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
		SIG_TOKEN_LEN);
	sig_memo_token(key, 32, "order-43", b);
	assert_string_not_equal(a, b);
	sig_memo_token(key, 31, "order-42", b);
	assert_string_not_equal(a, b);
}

static void test_memo_token_matches_hmac_of_memo_prefix(void **state)
{
	/* Computed with openssl(1):
	 * printf 'memo:order-42' | openssl dgst -sha256 -mac HMAC -macopt key:k -binary |
	 *   basenc --base64url | tr -d = */
	char out[SIG_TOKEN_LEN + 1];
	(void)state;

	sig_memo_token((const unsigned char *)"k", 1, "order-42", out);
	assert_string_equal(out, "M0qoujFHUbO_dDkyhVam6evh-IhIXINK6N7zZZ7K_lA");
}

static void test_memo_token_hmac_keys_of_every_length_class(void **state)
{
	/* RFC 2104's cases: a key longer than SHA-256's 64-byte block is hashed
	 * first, one of exactly a block is used as is, an empty one is zeros.
	 * Expected values from Python's hmac module over "memo:order-42". */
	unsigned char long_key[131], block_key[64];
	char out[SIG_TOKEN_LEN + 1];
	(void)state;

	memset(long_key, 0xaa, sizeof long_key);
	memset(block_key, 0x0b, sizeof block_key);
	sig_memo_token(long_key, sizeof long_key, "order-42", out);
	assert_string_equal(out, "0Pw27O962aEdz7TIecZ-HkSarIUYDJX30L9ljvWIdo8");
	sig_memo_token(block_key, sizeof block_key, "order-42", out);
	assert_string_equal(out, "NfPe-Ib_L2WVaQ4OHWShU9Ji2nR_gB1uvKY4xvfDSmQ");
	sig_memo_token((const unsigned char *)"", 0, "order-42", out);
	assert_string_equal(out, "cnb-mRqsU1ZHCM-TFlUlh1OwrftfFfUv_EOL291JKT8");
}

static void test_equal_compares_whole_strings(void **state)
{
	(void)state;
	assert_int_equal(sig_equal("token-a", "token-a"), 1);
	assert_int_equal(sig_equal("token-a", "token-b"), 0);
	assert_int_equal(sig_equal("token", "token-a"), 0);
	assert_int_equal(sig_equal("token-a", "token"), 0);
	assert_int_equal(sig_equal("", ""), 0); /* an empty token never matches */
	assert_int_equal(sig_equal("", "x"), 0);
	assert_int_equal(sig_equal(NULL, "x"), 0);
	assert_int_equal(sig_equal("x", NULL), 0);
}

static void test_base64_rfc4648_vectors(void **state)
{
	static const struct {
		const char *plain;
		const char *b64;
	} cases[] = {
		{"", ""},
		{"f", "Zg=="},
		{"fo", "Zm8="},
		{"foo", "Zm9v"},
		{"foob", "Zm9vYg=="},
		{"fooba", "Zm9vYmE="},
		{"foobar", "Zm9vYmFy"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char enc[16];
		unsigned char dec[16];
		size_t n = strlen(cases[i].plain);
		sig_base64((const unsigned char *)cases[i].plain, n, enc);
		assert_string_equal(enc, cases[i].b64);
		assert_int_equal(sig_base64_decode(cases[i].b64, dec, sizeof dec), (long)n);
		assert_memory_equal(dec, cases[i].plain, n);
	}
}

static void test_base64_round_trips_all_lengths(void **state)
{
	unsigned char in[70], dec[70];
	char enc[100];
	(void)state;

	for (size_t i = 0; i < sizeof in; i++)
		in[i] = (unsigned char)(i * 37 + 250);
	for (size_t n = 0; n <= sizeof in; n++) {
		sig_base64(in, n, enc);
		assert_int_equal(strlen(enc), 4 * ((n + 2) / 3));
		assert_int_equal(sig_base64_decode(enc, dec, sizeof dec), (long)n);
		assert_memory_equal(dec, in, n);
	}
}

static void test_base64_decode_rejects_bad_input(void **state)
{
	unsigned char out[16];
	(void)state;

	assert_int_equal(sig_base64_decode("Zm9vYg", out, sizeof out), 4); /* unpadded */
	assert_int_equal(sig_base64_decode("Zm9v!mFy", out, sizeof out), -1);
	assert_int_equal(sig_base64_decode("Zm9v YmFy", out, sizeof out), -1);
	assert_int_equal(sig_base64_decode("Zm9vY", out, sizeof out), -1);   /* 1 char left */
	assert_int_equal(sig_base64_decode("Zm9vYg=", out, sizeof out), -1); /* half padding */
	assert_int_equal(sig_base64_decode("Zg===", out, sizeof out), -1);
	assert_int_equal(sig_base64_decode("Zm=9v", out, sizeof out), -1);
	assert_int_equal(sig_base64_decode("Zm9vYmFy", out, 5), -1); /* over cap */
	assert_int_equal(sig_base64_decode("Zm9vYmFy", out, 6), 6);
	assert_int_equal(sig_base64_decode(NULL, out, sizeof out), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_reproduces_standard_webhooks_vector),
		cmocka_unit_test(test_sign_changes_with_each_input),
		cmocka_unit_test(test_sign_with_bad_secret_fails),
		cmocka_unit_test(test_header_with_previous_lists_new_then_old),
		cmocka_unit_test(test_header_without_previous_is_one_signature),
		cmocka_unit_test(test_header_with_bad_previous_fails_empty),
		cmocka_unit_test(test_new_secret_is_valid_random_and_32_bytes),
		cmocka_unit_test(test_secret_check_table),
		cmocka_unit_test(test_memo_token_is_deterministic_and_url_safe),
		cmocka_unit_test(test_memo_token_matches_hmac_of_memo_prefix),
		cmocka_unit_test(test_memo_token_hmac_keys_of_every_length_class),
		cmocka_unit_test(test_equal_compares_whole_strings),
		cmocka_unit_test(test_base64_rfc4648_vectors),
		cmocka_unit_test(test_base64_round_trips_all_lengths),
		cmocka_unit_test(test_base64_decode_rejects_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
