/* crypt: secrets sealed at rest with AES-256-GCM (HOOKFLOW_ENCRYPTION_KEY).
 *
 * A sealed value is text: "enc:v1:" then the base64 of a 12-byte random
 * nonce, the ciphertext and the 16-byte tag. Anything without that prefix is
 * a plain value. The format names its version so that the key or the cipher
 * can change later. Pure apart from OpenSSL (the nonce is random). */
#ifndef HOOKFLOW_CRYPT_H
#define HOOKFLOW_CRYPT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define CRYPT_KEY_LEN 32
#define CRYPT_PREFIX "enc:v1:"

/* Decodes HOOKFLOW_ENCRYPTION_KEY's value `b64` (standard base64 of exactly 32
 * bytes) into `key`. ERR_INVALID naming `field` otherwise. */
enum err_code crypt_parse_key(const char *field, const char *b64, unsigned char key[CRYPT_KEY_LEN],
			      struct err *e);

/* True when `s` is a sealed value. */
bool crypt_is_sealed(const char *s);

/* Seals `len` bytes of `plain` under `key`: a malloc'd sealed value in *out.
 * ERR_INTERNAL when OpenSSL fails. */
enum err_code crypt_seal(const unsigned char key[CRYPT_KEY_LEN], const void *plain, size_t len,
			 char **out, struct err *e);

/* Opens sealed value `sealed` under `key`: the plain bytes, malloc'd and
 * NUL-terminated, in *out and their count in *len (may be NULL).
 * ERR_INVALID "not a sealed value"; ERR_FORBIDDEN when the key does not open it
 * (a wrong key, or a value changed since it was sealed). */
enum err_code crypt_open(const unsigned char key[CRYPT_KEY_LEN], const char *sealed, char **out,
			 size_t *len, struct err *e);

/* For a value read from the database: opens it when it is sealed (which
 * needs `key`, or fails with ERR_FORBIDDEN when `key` is NULL), else copies
 * it. NULL `value` gives NULL. */
enum err_code crypt_reveal(const unsigned char *key, const char *value, char **out, struct err *e);

#endif
