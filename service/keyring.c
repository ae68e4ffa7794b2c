/* keyring: delivery-token keys behind a read-write lock. */
#include "service/keyring.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct keyring {
	pthread_rwlock_t lock;
	struct token_key *keys;
	size_t n;
};

struct keyring *keyring_new(void)
{
	struct keyring *k = calloc(1, sizeof *k);
	if (k != NULL)
		pthread_rwlock_init(&k->lock, NULL);
	return k;
}

static void wipe(struct token_key *keys, size_t n)
{
	if (keys != NULL)
		OPENSSL_cleanse(keys, n * sizeof *keys);
	free(keys);
}

void keyring_free(struct keyring *k)
{
	if (k == NULL)
		return;
	wipe(k->keys, k->n);
	pthread_rwlock_destroy(&k->lock);
	free(k);
}

void keyring_replace(struct keyring *k, struct token_key *keys, size_t n)
{
	pthread_rwlock_wrlock(&k->lock);
	struct token_key *old = k->keys;
	size_t oldn = k->n;
	k->keys = keys;
	k->n = n;
	pthread_rwlock_unlock(&k->lock);
	wipe(old, oldn);
}

bool keyring_make(struct keyring *k, const char *run_id, int generation, int step, int attempt,
		  int64_t expires, char out[TOKEN_MAX])
{
	pthread_rwlock_rdlock(&k->lock);
	bool ok = k->n > 0 &&
		  token_make(&k->keys[k->n - 1], run_id, generation, step, attempt, expires, out);
	pthread_rwlock_unlock(&k->lock);
	if (!ok)
		out[0] = '\0';
	return ok;
}

enum err_code keyring_verify(struct keyring *k, const char *run_id, const char *token,
			     struct token_claims *claims, struct err *e)
{
	pthread_rwlock_rdlock(&k->lock);
	enum err_code rc =
		token_verify(k->keys, k->n, run_id, token, (int64_t)time(NULL), claims, e);
	pthread_rwlock_unlock(&k->lock);
	return rc;
}
