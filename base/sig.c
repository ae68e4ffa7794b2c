/* sig: Standard Webhooks signing, secret checks, memo tokens, constant-time compare, base64. */
#include "base/sig.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SECRET_PREFIX "whsec_"
#define SECRET_MIN_BYTES 16
#define SECRET_MAX_BYTES 64
#define SECRET_NEW_BYTES 32 /* generated secrets */

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct part {
	const void *data;
	size_t len;
};

static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* HMAC-SHA256 (RFC 2104) of the concatenation of `parts` under `key`,
 * written out over a SHA-256 fetched once: OpenSSL's EVP_MAC fetched and
 * set up its algorithm on every call, which cost more than the hashing.
 * Returns false when OpenSSL fails. */
static bool hmac_sha256(const unsigned char *key, size_t key_len, const struct part *parts,
			size_t nparts, unsigned char out[32])
{
	enum { BLOCK = 64 };
	unsigned char k[BLOCK] = {0}, pad[BLOCK], inner[32];
	unsigned int n = 0;
	bool ok = false;

	pthread_once(&sha256_once, fetch_sha256);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (sha256_md == NULL || c == NULL)
		goto out;
	if (key_len > BLOCK) {
		if (EVP_DigestInit_ex(c, sha256_md, NULL) != 1 ||
		    EVP_DigestUpdate(c, key, key_len) != 1 || EVP_DigestFinal_ex(c, k, &n) != 1)
			goto out;
	} else if (key_len > 0) {
		memcpy(k, key, key_len);
	}
	for (int i = 0; i < BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	if (EVP_DigestInit_ex(c, sha256_md, NULL) != 1 || EVP_DigestUpdate(c, pad, BLOCK) != 1)
		goto out;
	for (size_t i = 0; i < nparts; i++)
		if (parts[i].len > 0 && EVP_DigestUpdate(c, parts[i].data, parts[i].len) != 1)
			goto out;
	if (EVP_DigestFinal_ex(c, inner, &n) != 1)
		goto out;
	for (int i = 0; i < BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	if (EVP_DigestInit_ex(c, sha256_md, NULL) != 1 || EVP_DigestUpdate(c, pad, BLOCK) != 1 ||
	    EVP_DigestUpdate(c, inner, sizeof inner) != 1 || EVP_DigestFinal_ex(c, out, &n) != 1)
		goto out;
	ok = n == 32;
out:
	EVP_MD_CTX_free(c);
	OPENSSL_cleanse(k, sizeof k);
	OPENSSL_cleanse(pad, sizeof pad);
	OPENSSL_cleanse(inner, sizeof inner);
	return ok;
}

static void encode(const unsigned char *in, size_t len, char *out, const char *alphabet, bool pad)
{
	size_t o = 0, i = 0;

	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		if (pad) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		if (pad)
			out[o++] = '=';
	}
	out[o] = '\0';
}

void sig_base64(const unsigned char *in, size_t len, char *out)
{
	encode(in, len, out, b64_std, true);
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long sig_base64_decode(const char *in, unsigned char *out, size_t cap)
{
	size_t len, pads = 0, o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (in == NULL)
		return -1;
	len = strlen(in);
	while (len > 0 && in[len - 1] == '=' && pads < 2) {
		len--;
		pads++;
	}
	/* Padding, when present, must complete a 4-character group. */
	if (len % 4 == 1 || (pads > 0 && (len + pads) % 4 != 0))
		return -1;
	for (size_t i = 0; i < len; i++) {
		int v = b64_value(in[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= cap)
				return -1;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	return (long)o;
}

/* Decodes the key of a "whsec_" secret into `key`; -1 when it is malformed or
 * outside 16..64 bytes. */
static long secret_key(const char *secret, unsigned char key[SECRET_MAX_BYTES])
{
	size_t n = strlen(SECRET_PREFIX);
	long len;

	if (secret == NULL || strncmp(secret, SECRET_PREFIX, n) != 0)
		return -1;
	len = sig_base64_decode(secret + n, key, SECRET_MAX_BYTES);
	if (len < SECRET_MIN_BYTES)
		return -1;
	return len;
}

enum err_code sig_check_secret(const char *field, const char *secret, struct err *e)
{
	unsigned char key[SECRET_MAX_BYTES];
	size_t n = strlen(SECRET_PREFIX);
	enum err_code rc = ERR_OK;

	if (secret == NULL || strncmp(secret, SECRET_PREFIX, n) != 0)
		rc = err_set(e, ERR_INVALID, "%s: must start with %s", field, SECRET_PREFIX);
	else if (secret_key(secret, key) < 0)
		rc = err_set(e, ERR_INVALID,
			     "%s: must be %s followed by standard base64 of %d to %d bytes", field,
			     SECRET_PREFIX, SECRET_MIN_BYTES, SECRET_MAX_BYTES);
	OPENSSL_cleanse(key, sizeof key);
	return rc;
}

enum err_code sig_sign(const char *secret, const char *msg_id, int64_t ts, const char *body,
		       size_t body_len, char out[SIG_HEADER_MAX], struct err *e)
{
	unsigned char key[SECRET_MAX_BYTES], mac[32];
	char ts_text[24], b64[48];
	struct part parts[5];
	long key_len;
	enum err_code rc = ERR_OK;

	out[0] = '\0';
	key_len = secret_key(secret, key);
	if (key_len < 0) {
		rc = sig_check_secret("secret", secret, e);
		if (rc == ERR_OK)
			rc = err_set(e, ERR_INVALID, "secret: invalid");
		goto out;
	}
	snprintf(ts_text, sizeof ts_text, "%" PRId64, ts);
	parts[0] = (struct part){msg_id, strlen(msg_id)};
	parts[1] = (struct part){".", 1};
	parts[2] = (struct part){ts_text, strlen(ts_text)};
	parts[3] = (struct part){".", 1};
	parts[4] = (struct part){body, body_len};
	if (!hmac_sha256(key, (size_t)key_len, parts, 5, mac)) {
		rc = err_set(e, ERR_INTERNAL, "signing failed");
		goto out;
	}
	sig_base64(mac, sizeof mac, b64);
	snprintf(out, SIG_HEADER_MAX, "v1,%s", b64);
out:
	OPENSSL_cleanse(key, sizeof key);
	return rc;
}

enum err_code sig_sign_header(const char *secret, const char *previous, const char *msg_id,
			      int64_t ts, const char *body, size_t body_len,
			      char out[SIG_HEADER_MAX], struct err *e)
{
	char second[SIG_HEADER_MAX];
	_Static_assert(SIG_HEADER_MAX >= 2 * (3 + 44) + 2, "room for two signatures");

	if (sig_sign(secret, msg_id, ts, body, body_len, out, e))
		return e->code;
	if (previous == NULL || strcmp(previous, secret) == 0)
		return ERR_OK;
	if (sig_sign(previous, msg_id, ts, body, body_len, second, e)) {
		out[0] = '\0';
		return e->code;
	}
	size_t n = strlen(out);
	snprintf(out + n, SIG_HEADER_MAX - n, " %s", second);
	return ERR_OK;
}

enum err_code sig_new_secret(char out[SIG_SECRET_MAX + 1], struct err *e)
{
	unsigned char key[SECRET_NEW_BYTES];
	char b64[4 * ((SECRET_NEW_BYTES + 2) / 3) + 1];

	out[0] = '\0';
	if (RAND_bytes(key, sizeof key) != 1)
		return err_set(e, ERR_INTERNAL, "no random bytes for a new secret");
	sig_base64(key, sizeof key, b64);
	snprintf(out, SIG_SECRET_MAX + 1, "%s%s", SECRET_PREFIX, b64);
	OPENSSL_cleanse(key, sizeof key);
	OPENSSL_cleanse(b64, sizeof b64);
	return ERR_OK;
}

void sig_memo_token(const unsigned char *key, size_t key_len, const char *run_id,
		    char out[SIG_TOKEN_LEN + 1])
{
	unsigned char mac[32];
	struct part parts[2] = {{"memo:", 5}, {run_id, strlen(run_id)}};

	/* On failure the token is empty, which sig_equal never accepts. */
	if (!hmac_sha256(key, key_len, parts, 2, mac)) {
		out[0] = '\0';
		return;
	}
	encode(mac, sizeof mac, out, b64_url, false);
}

bool sig_hmac(const unsigned char *key, size_t key_len, const void *msg, size_t len,
	      unsigned char out[32])
{
	struct part parts[1] = {{msg, len}};
	return hmac_sha256(key, key_len, parts, 1, out);
}

void sig_base64url(const unsigned char *in, size_t len, char *out)
{
	encode(in, len, out, b64_url, false);
}

int sig_equal(const char *a, const char *b)
{
	unsigned char da[32], db[32];
	unsigned int la = 0, lb = 0;
	int eq = 0;

	if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0')
		return 0;
	pthread_once(&sha256_once, fetch_sha256);
	if (sha256_md == NULL || EVP_Digest(a, strlen(a), da, &la, sha256_md, NULL) != 1 ||
	    EVP_Digest(b, strlen(b), db, &lb, sha256_md, NULL) != 1)
		return 0;
	eq = CRYPTO_memcmp(da, db, sizeof da) == 0;
	return eq;
}
