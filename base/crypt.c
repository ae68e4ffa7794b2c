/* crypt: AES-256-GCM sealing of secrets at rest. */
#include "base/crypt.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "base/sig.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define MAX_PLAIN 4096 /* secrets and keys are small; anything larger is not ours */

enum err_code crypt_parse_key(const char *field, const char *b64, unsigned char key[CRYPT_KEY_LEN],
			      struct err *e)
{
	unsigned char buf[CRYPT_KEY_LEN + 4];
	long n = b64 ? sig_base64_decode(b64, buf, sizeof buf) : -1;
	if (n != CRYPT_KEY_LEN) {
		OPENSSL_cleanse(buf, sizeof buf);
		return err_set(e, ERR_INVALID,
			       "%s: must be the standard base64 of 32 random bytes "
			       "(make one with: openssl rand -base64 32)",
			       field);
	}
	memcpy(key, buf, CRYPT_KEY_LEN);
	OPENSSL_cleanse(buf, sizeof buf);
	return ERR_OK;
}

bool crypt_is_sealed(const char *s)
{
	return s != NULL && strncmp(s, CRYPT_PREFIX, sizeof CRYPT_PREFIX - 1) == 0;
}

enum err_code crypt_seal(const unsigned char key[CRYPT_KEY_LEN], const void *plain, size_t len,
			 char **out, struct err *e)
{
	*out = NULL;
	if (len > MAX_PLAIN)
		return err_set(e, ERR_INVALID, "secret too large to seal");
	size_t raw_len = NONCE_LEN + len + TAG_LEN;
	unsigned char *raw = malloc(raw_len);
	char *text = malloc(sizeof CRYPT_PREFIX + 4 * ((raw_len + 2) / 3) + 1);
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n = 0, fin = 0;
	enum err_code rc = ERR_OK;
	if (raw == NULL || text == NULL || c == NULL || RAND_bytes(raw, NONCE_LEN) != 1 ||
	    EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    EVP_EncryptUpdate(c, raw + NONCE_LEN, &n, plain, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(c, raw + NONCE_LEN + n, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, raw + NONCE_LEN + len) != 1) {
		rc = err_set(e, ERR_INTERNAL, "sealing a secret failed");
		free(text);
		text = NULL;
	} else {
		memcpy(text, CRYPT_PREFIX, sizeof CRYPT_PREFIX - 1);
		sig_base64(raw, raw_len, text + sizeof CRYPT_PREFIX - 1);
	}
	EVP_CIPHER_CTX_free(c);
	if (raw != NULL)
		OPENSSL_cleanse(raw, raw_len);
	free(raw);
	*out = text;
	return rc;
}

enum err_code crypt_open(const unsigned char key[CRYPT_KEY_LEN], const char *sealed, char **out,
			 size_t *len, struct err *e)
{
	*out = NULL;
	if (len)
		*len = 0;
	if (!crypt_is_sealed(sealed))
		return err_set(e, ERR_INVALID, "not a sealed value");
	const char *b64 = sealed + sizeof CRYPT_PREFIX - 1;
	size_t cap = strlen(b64) / 4 * 3 + 3;
	if (cap > NONCE_LEN + TAG_LEN + MAX_PLAIN + 3)
		return err_set(e, ERR_INVALID, "not a sealed value: too long");
	unsigned char *raw = malloc(cap);
	long n = raw ? sig_base64_decode(b64, raw, cap) : -1;
	if (n < NONCE_LEN + TAG_LEN) {
		free(raw);
		return err_set(e, raw ? ERR_INVALID : ERR_INTERNAL, "not a sealed value");
	}
	size_t plen = (size_t)n - NONCE_LEN - TAG_LEN;
	char *plain = malloc(plen + 1);
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int m = 0, fin = 0;
	enum err_code rc = ERR_OK;
	if (plain == NULL || c == NULL ||
	    EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, raw) != 1 ||
	    EVP_DecryptUpdate(c, (unsigned char *)plain, &m, raw + NONCE_LEN, (int)plen) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, raw + NONCE_LEN + plen) != 1) {
		rc = err_set(e, ERR_INTERNAL, "opening a sealed secret failed");
	} else if (EVP_DecryptFinal_ex(c, (unsigned char *)plain + m, &fin) != 1) {
		rc = err_set(e, ERR_FORBIDDEN,
			     "a sealed secret does not open with HOOKFLOW_ENCRYPTION_KEY (a wrong "
			     "key?)");
	}
	EVP_CIPHER_CTX_free(c);
	OPENSSL_cleanse(raw, cap);
	free(raw);
	if (rc != ERR_OK) {
		if (plain != NULL)
			OPENSSL_cleanse(plain, plen + 1);
		free(plain);
		return rc;
	}
	plain[plen] = '\0';
	*out = plain;
	if (len)
		*len = plen;
	return ERR_OK;
}

enum err_code crypt_reveal(const unsigned char *key, const char *value, char **out, struct err *e)
{
	*out = NULL;
	if (value == NULL)
		return ERR_OK;
	if (!crypt_is_sealed(value)) {
		*out = strdup(value);
		return *out ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
	}
	if (key == NULL)
		return err_set(e, ERR_FORBIDDEN,
			       "a secret is sealed but HOOKFLOW_ENCRYPTION_KEY is not set");
	return crypt_open(key, value, out, NULL, e);
}
