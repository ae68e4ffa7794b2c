/* token: delivery tokens. A step request gives its webhook a token that
 * authorises calls back to hookflow for that run (the memo endpoints); it is
 * bound to the run, its generation, the step and attempt it was issued for,
 * and an expiry, and signed with one of the service's token keys, named by
 * the key's id so that keys can rotate. Pure apart from OpenSSL.
 *
 * Format: "hf1.<kid>.<generation>.<step>.<attempt>.<expiry>.<mac>", where
 * expiry is unix seconds and mac the base64url (unpadded) HMAC-SHA256 under
 * the key of "hf1" NUL run_id NUL generation NUL step NUL attempt NUL expiry.
 * Release 0.1.0 issued 43-character tokens (the HMAC of "memo:" run_id under
 * one key, no expiry); they verify only against the key with id "m0" while
 * that key is accepted (it was retired, with a grace period, when 0.2 came). */
#ifndef HOOKFLOW_TOKEN_H
#define HOOKFLOW_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define TOKEN_MAX 192
#define TOKEN_KID_MAX 16
#define TOKEN_KEY_MAX 64
#define TOKEN_LEGACY_KID "m0"

/* One token key. */
struct token_key {
	char kid[TOKEN_KID_MAX + 1]; /* [A-Za-z0-9_-]{1,16} */
	unsigned char key[TOKEN_KEY_MAX];
	size_t len;
	int64_t accepted_until; /* unix seconds; 0: the key is current, with no end */
};

/* What a verified token says. */
struct token_claims {
	int generation; /* -1 for a 0.1.0 token (any generation) */
	int step;       /* -1 for a 0.1.0 token */
	int attempt;    /* -1 for a 0.1.0 token */
	int64_t expires;
};

/* Writes the token of (run_id, generation, step, attempt) expiring at
 * `expires` (unix seconds), signed with `k`, into `out`. False when it does not
 * fit or OpenSSL fails (`out` is then empty). */
bool token_make(const struct token_key *k, const char *run_id, int generation, int step,
		int attempt, int64_t expires, char out[TOKEN_MAX]);

/* Verifies `token` for `run_id` at time `now` (unix seconds) against
 * keys[0..n): its key must be among them and still accepted
 * (accepted_until 0 or later than now), it must not have expired, and its MAC
 * must match. On success fills *claims. ERR_FORBIDDEN with the reason
 * otherwise ("delivery token expired", "... signed with an unknown or retired
 * key", "... malformed", "... not for run X"). Constant time in the MAC. */
enum err_code token_verify(const struct token_key *keys, size_t n, const char *run_id,
			   const char *token, int64_t now, struct token_claims *claims,
			   struct err *e);

#endif
