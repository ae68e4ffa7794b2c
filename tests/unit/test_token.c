/* test_token: delivery tokens bound to run, generation, step, attempt and an
 * expiry, signed with rotating keys; tokens of release 0.1.0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/sig.h"
#include "base/token.h"

#define NOW 1800000000

static struct token_key key(const char *kid, char fill, int64_t until)
{
	struct token_key k = {.len = 32, .accepted_until = until};
	snprintf(k.kid, sizeof k.kid, "%s", kid);
	memset(k.key, fill, k.len);
	return k;
}

static void test_a_token_verifies_for_its_run_and_says_what_it_binds(void **state)
{
	(void)state;
	struct token_key keys[1] = {key("k1", 'a', 0)};
	char t[TOKEN_MAX];
	assert_true(token_make(&keys[0], "run-1", 3, 7, 2, NOW + 60, t));
	assert_true(strncmp(t, "hf1.k1.3.7.2.", 13) == 0);
	struct token_claims c;
	struct err e = {0};
	assert_int_equal(token_verify(keys, 1, "run-1", t, NOW, &c, &e), ERR_OK);
	assert_int_equal(c.generation, 3);
	assert_int_equal(c.step, 7);
	assert_int_equal(c.attempt, 2);
	assert_int_equal(c.expires, NOW + 60);
}

static void test_a_token_is_refused_for_another_run_after_expiry_or_when_changed(void **state)
{
	(void)state;
	struct token_key keys[1] = {key("k1", 'a', 0)};
	char t[TOKEN_MAX];
	assert_true(token_make(&keys[0], "run-1", 1, 0, 1, NOW + 60, t));
	struct token_claims c;
	struct err e = {0};
	assert_int_equal(token_verify(keys, 1, "run-2", t, NOW, &c, &e), ERR_FORBIDDEN);
	assert_non_null(strstr(e.msg, "not for run run-2"));
	err_clear(&e);
	assert_int_equal(token_verify(keys, 1, "run-1", t, NOW + 60, &c, &e), ERR_FORBIDDEN);
	assert_string_equal(e.msg, "delivery token expired");
	/* Another generation, step, attempt or expiry written into the token. */
	static const char *const edits[][2] = {
		{".1.0.1.", ".2.0.1."}, {".1.0.1.", ".1.1.1."}, {".1.0.1.", ".1.0.2."}};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		char u[TOKEN_MAX];
		snprintf(u, sizeof u, "%s", t);
		char *at = strstr(u, edits[i][0]);
		assert_non_null(at);
		memcpy(at, edits[i][1], strlen(edits[i][1]));
		err_clear(&e);
		assert_int_equal(token_verify(keys, 1, "run-1", u, NOW, &c, &e), ERR_FORBIDDEN);
	}
	char later[TOKEN_MAX];
	assert_true(token_make(&keys[0], "run-1", 1, 0, 1, NOW + 3600, later));
	char forged[TOKEN_MAX];
	snprintf(forged, sizeof forged, "%.*s%s", (int)(strrchr(later, '.') - later), later,
		 strrchr(t, '.'));
	err_clear(&e);
	assert_int_equal(token_verify(keys, 1, "run-1", forged, NOW, &c, &e), ERR_FORBIDDEN);
}

static void test_keys_rotate_with_a_grace_period(void **state)
{
	(void)state;
	struct token_key old = key("k1", 'a', NOW + 100), cur = key("k2", 'b', 0);
	struct token_key keys[2] = {old, cur};
	char by_old[TOKEN_MAX], by_new[TOKEN_MAX];
	assert_true(token_make(&old, "r", 1, 0, 1, NOW + 1000, by_old));
	assert_true(token_make(&cur, "r", 1, 0, 1, NOW + 1000, by_new));
	struct token_claims c;
	struct err e = {0};
	assert_int_equal(token_verify(keys, 2, "r", by_old, NOW, &c, &e), ERR_OK);
	assert_int_equal(token_verify(keys, 2, "r", by_new, NOW, &c, &e), ERR_OK);
	/* After the grace period only the new key's tokens pass. */
	assert_int_equal(token_verify(keys, 2, "r", by_old, NOW + 100, &c, &e), ERR_FORBIDDEN);
	assert_non_null(strstr(e.msg, "retired key"));
	err_clear(&e);
	assert_int_equal(token_verify(keys, 2, "r", by_new, NOW + 100, &c, &e), ERR_OK);
	/* A key nobody knows. */
	struct token_key stranger = key("k9", 'a', 0);
	char by_stranger[TOKEN_MAX];
	assert_true(token_make(&stranger, "r", 1, 0, 1, NOW + 1000, by_stranger));
	assert_int_equal(token_verify(keys, 2, "r", by_stranger, NOW, &c, &e), ERR_FORBIDDEN);
}

static void test_release_0_1_tokens_pass_only_while_the_legacy_key_is_accepted(void **state)
{
	(void)state;
	struct token_key keys[2] = {key(TOKEN_LEGACY_KID, 'm', NOW + 100), key("k1", 'a', 0)};
	/* 0.1.0's token: base64url(HMAC(key, "memo:" run_id)). */
	unsigned char mac[32];
	assert_true(sig_hmac(keys[0].key, keys[0].len, "memo:run-1", 10, mac));
	char legacy[64];
	sig_base64url(mac, sizeof mac, legacy);
	assert_int_equal(strlen(legacy), 43);
	struct token_claims c;
	struct err e = {0};
	assert_int_equal(token_verify(keys, 2, "run-1", legacy, NOW, &c, &e), ERR_OK);
	assert_int_equal(c.generation, -1);
	assert_int_equal(token_verify(keys, 2, "run-2", legacy, NOW, &c, &e), ERR_FORBIDDEN);
	err_clear(&e);
	assert_int_equal(token_verify(keys, 2, "run-1", legacy, NOW + 100, &c, &e), ERR_FORBIDDEN);
	assert_non_null(strstr(e.msg, "earlier release"));
}

static void test_malformed_tokens_are_refused(void **state)
{
	(void)state;
	struct token_key keys[1] = {key("k1", 'a', 0)};
	static const char *const bad[] = {
		"",
		"hf1.",
		"hf2.k1.1.0.1.1900000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"hf1.k1.x.0.1.1900000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"hf1.k1.0.0.1.1900000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"hf1.k1.1.0.0.1900000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"hf1.k1.1.0.1.1900000000.short",
		"hf1..1.0.1.1900000000.AAAA",
		"hf1.averyveryverylongkeyid.1.0.1.1900000000."
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"hf1.k1.1.0.1.1900000000",
		"hf1.k1.1.0.1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct token_claims c;
		struct err e = {0};
		assert_int_equal(token_verify(keys, 1, "r", bad[i], NOW, &c, &e), ERR_FORBIDDEN);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_token_verifies_for_its_run_and_says_what_it_binds),
		cmocka_unit_test(
			test_a_token_is_refused_for_another_run_after_expiry_or_when_changed),
		cmocka_unit_test(test_keys_rotate_with_a_grace_period),
		cmocka_unit_test(
			test_release_0_1_tokens_pass_only_while_the_legacy_key_is_accepted),
		cmocka_unit_test(test_malformed_tokens_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
