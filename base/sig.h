/* sig: Standard Webhooks signatures (HMAC-SHA256 over "<id>.<ts>.<body>",
 * header "v1,<base64>"), signing-secret validation and the memo delivery token.
 * Pure apart from OpenSSL. */
#ifndef HOOKFLOW_SIG_H
#define HOOKFLOW_SIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SIG_HEADER_MAX 128 /* one signature "v1,<44>", or two separated by a space */
#define SIG_TOKEN_LEN 43   /* base64url of 32 bytes, unpadded */
#define SIG_SECRET_MAX 512 /* the longest secret text accepted from outside */

/* Checks a signing secret: "whsec_" followed by standard base64 that decodes to
 * 16..64 bytes. ERR_INVALID naming `field` otherwise. */
enum err_code sig_check_secret(const char *field, const char *secret, struct err *e);

/* Writes "v1,<base64 HMAC-SHA256(key, id "." ts "." body)>" into `out` (at
 * least SIG_HEADER_MAX bytes), where key is the base64-decoded part of `secret`
 * after "whsec_". All inputs borrowed. */
enum err_code sig_sign(const char *secret, const char *msg_id, int64_t ts, const char *body,
		       size_t body_len, char out[SIG_HEADER_MAX], struct err *e);

/* The value of the webhook-signature header: "v1,<sig under secret>", then,
 * when `previous` is not NULL (a rotation's grace period) and differs,
 * " v1,<sig under previous>" (Standard Webhooks: a space-separated list the
 * receiver accepts when any entry verifies). Into `out` (SIG_HEADER_MAX
 * bytes). All inputs borrowed. */
enum err_code sig_sign_header(const char *secret, const char *previous, const char *msg_id,
			      int64_t ts, const char *body, size_t body_len,
			      char out[SIG_HEADER_MAX], struct err *e);

/* A new signing secret: "whsec_" followed by the base64 of 32 bytes from
 * OpenSSL's CSPRNG, into `out`. ERR_INTERNAL when the generator fails (`out`
 * is then ""). */
enum err_code sig_new_secret(char out[SIG_SECRET_MAX + 1], struct err *e);

/* The delivery token release 0.1.0 issued for `run_id` (base/token.h
 * verifies it during the upgrade's grace period):
 * base64url(HMAC-SHA256(key, "memo:" run_id))
 * without padding, into `out` (SIG_TOKEN_LEN + 1 bytes). Deterministic for a
 * given key and run id. Should OpenSSL fail (out of memory) `out` is the empty
 * string, which sig_equal never accepts, so a failure never authorises. */
void sig_memo_token(const unsigned char *key, size_t key_len, const char *run_id,
		    char out[SIG_TOKEN_LEN + 1]);

/* HMAC-SHA256 of `len` bytes of `msg` under `key`, into `out`. False when
 * OpenSSL fails (out of memory). */
bool sig_hmac(const unsigned char *key, size_t key_len, const void *msg, size_t len,
	      unsigned char out[32]);

/* base64url without padding of `len` bytes into `out` (4*ceil(len/3)+1). */
void sig_base64url(const unsigned char *in, size_t len, char *out);

/* Constant-time comparison of two NUL-terminated strings: compares SHA-256
 * digests so neither content nor length leaks through timing. 1 when equal;
 * 0 otherwise, and always 0 when either is NULL or empty (an empty expected
 * token or secret must never match). */
int sig_equal(const char *a, const char *b);

/* Standard base64 encoding of `len` bytes into `out` (4*ceil(len/3)+1 bytes). */
void sig_base64(const unsigned char *in, size_t len, char *out);

/* Decodes standard base64 (padding optional). Returns the byte count, or -1 on
 * a bad character or when more than `cap` bytes would be written. */
long sig_base64_decode(const char *in, unsigned char *out, size_t cap);

#endif
