/* token: making and verifying delivery tokens. */
#include "base/token.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sig.h"

#define MAC_B64_LEN 43

/* The signed message of a token: "hf1" NUL run_id NUL gen NUL step NUL
 * attempt NUL expires. Returns its length, or 0 when it does not fit. */
static size_t message(char *buf, size_t cap, const char *run_id, int generation, int step,
		      int attempt, int64_t expires)
{
	int n = snprintf(buf, cap, "hf1%c%s%c%d%c%d%c%d%c%" PRId64, 0, run_id, 0, generation, 0,
			 step, 0, attempt, 0, expires);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static bool mac_of(const struct token_key *k, const char *msg, size_t len,
		   char out[MAC_B64_LEN + 1])
{
	unsigned char mac[32];
	if (!sig_hmac(k->key, k->len, msg, len, mac))
		return false;
	sig_base64url(mac, sizeof mac, out);
	return true;
}

bool token_make(const struct token_key *k, const char *run_id, int generation, int step,
		int attempt, int64_t expires, char out[TOKEN_MAX])
{
	char msg[512], mac[MAC_B64_LEN + 1];
	size_t len = message(msg, sizeof msg, run_id, generation, step, attempt, expires);
	out[0] = '\0';
	if (len == 0 || !mac_of(k, msg, len, mac))
		return false;
	int n = snprintf(out, TOKEN_MAX, "hf1.%s.%d.%d.%d.%" PRId64 ".%s", k->kid, generation, step,
			 attempt, expires, mac);
	if (n <= 0 || n >= TOKEN_MAX) {
		out[0] = '\0';
		return false;
	}
	return true;
}

static const struct token_key *find_key(const struct token_key *keys, size_t n, const char *kid,
					int64_t now)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i].kid, kid) == 0)
			return keys[i].accepted_until == 0 || keys[i].accepted_until > now
				       ? &keys[i]
				       : NULL;
	return NULL;
}

/* Reads a decimal integer, optionally negative, ending at '.'; advances *p
 * past it and the dot. */
static bool field(const char **p, int64_t *v)
{
	const char *s = *p;
	char *end = NULL;
	if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return false;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno != 0 || end - s > 20 || *end != '.')
		return false;
	*v = x;
	*p = end + 1;
	return true;
}

enum err_code token_verify(const struct token_key *keys, size_t n, const char *run_id,
			   const char *token, int64_t now, struct token_claims *claims,
			   struct err *e)
{
	memset(claims, 0, sizeof *claims);
	if (token == NULL || strlen(token) >= TOKEN_MAX)
		return err_set(e, ERR_FORBIDDEN, "delivery token malformed");
	if (strchr(token, '.') == NULL) {
		/* A token of release 0.1.0: the run's HMAC under the legacy key. */
		const struct token_key *k = find_key(keys, n, TOKEN_LEGACY_KID, now);
		if (k == NULL)
			return err_set(e, ERR_FORBIDDEN,
				       "delivery token of an earlier release, no longer accepted");
		char mac[SIG_TOKEN_LEN + 1];
		sig_memo_token(k->key, k->len, run_id, mac);
		if (!sig_equal(token, mac))
			return err_set(e, ERR_FORBIDDEN, "delivery token not for run %.128s",
				       run_id);
		claims->generation = claims->step = claims->attempt = -1;
		claims->expires = k->accepted_until;
		return ERR_OK;
	}
	if (strncmp(token, "hf1.", 4) != 0)
		return err_set(e, ERR_FORBIDDEN, "delivery token malformed");
	const char *p = token + 4;
	const char *dot = strchr(p, '.');
	if (dot == NULL || dot == p || dot - p > TOKEN_KID_MAX)
		return err_set(e, ERR_FORBIDDEN, "delivery token malformed");
	char kid[TOKEN_KID_MAX + 1];
	memcpy(kid, p, (size_t)(dot - p));
	kid[dot - p] = '\0';
	p = dot + 1;
	int64_t gen, step, attempt, expires;
	if (!field(&p, &gen) || !field(&p, &step) || !field(&p, &attempt) || !field(&p, &expires) ||
	    gen < 1 || gen > INT32_MAX || step < 0 || step > INT32_MAX || attempt < 1 ||
	    attempt > INT32_MAX || strlen(p) != MAC_B64_LEN)
		return err_set(e, ERR_FORBIDDEN, "delivery token malformed");
	const struct token_key *k = find_key(keys, n, kid, now);
	if (k == NULL)
		return err_set(e, ERR_FORBIDDEN,
			       "delivery token signed with an unknown or retired key");
	char msg[512], mac[MAC_B64_LEN + 1];
	size_t len = message(msg, sizeof msg, run_id, (int)gen, (int)step, (int)attempt, expires);
	if (len == 0 || !mac_of(k, msg, len, mac) || !sig_equal(p, mac))
		return err_set(e, ERR_FORBIDDEN, "delivery token not for run %.128s", run_id);
	if (expires <= now)
		return err_set(e, ERR_FORBIDDEN, "delivery token expired");
	claims->generation = (int)gen;
	claims->step = (int)step;
	claims->attempt = (int)attempt;
	claims->expires = expires;
	return ERR_OK;
}
