/* keyring: the delivery-token keys this instance signs and verifies with,
 * shared by the dispatcher (which issues tokens in step requests), the HTTP
 * threads (which verify them) and the listener (which replaces the keys
 * when `hookflow rotate-keys` announces new ones). Thread-safe. */
#ifndef HOOKFLOW_KEYRING_H
#define HOOKFLOW_KEYRING_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/token.h"

struct keyring;

/* An empty keyring; NULL when out of memory. */
struct keyring *keyring_new(void);

/* Frees `k`; NULL is a no-op. */
void keyring_free(struct keyring *k);

/* Replaces the keys with keys[0..n) (taken: the keyring frees the array);
 * the last one is the current key, which signs. */
void keyring_replace(struct keyring *k, struct token_key *keys, size_t n);

/* Writes the token of (run_id, generation, step, attempt, expires) signed
 * with the current key into `out`. False when there is no key. */
bool keyring_make(struct keyring *k, const char *run_id, int generation, int step, int attempt,
		  int64_t expires, char out[TOKEN_MAX]);

/* token_verify against the keys held now, at the current time. */
enum err_code keyring_verify(struct keyring *k, const char *run_id, const char *token,
			     struct token_claims *claims, struct err *e);

#endif
