/* db/keys: SQL of the delivery-token keys. */
#include "db/keys.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypt.h"
#include "base/ids.h"
#include "base/sig.h"
#include "db/internal.h"

static const struct db_stmt q_load = {
	"keys_load",
	"SELECT kid, secret, coalesce(hf_ms(accepted_until) / 1000, 0) FROM hf_token_key"
	" WHERE accepted_until IS NULL OR accepted_until > now()"
	" ORDER BY accepted_until IS NULL, created_at, kid",
	0};
static const struct db_stmt q_retire = {"keys_retire",
					"UPDATE hf_token_key SET accepted_until = now() + "
					"make_interval(secs => $1::bigint / 1000.0)"
					" WHERE accepted_until IS NULL",
					1};
static const struct db_stmt q_forget = {
	"keys_forget", "DELETE FROM hf_token_key WHERE accepted_until <= now()", 0};
static const struct db_stmt q_insert = {
	"keys_insert", "INSERT INTO hf_token_key (kid, secret) VALUES ($1, $2)", 2};

/* Decodes a stored key (its base64, maybe sealed) into `k`. */
static enum err_code decode_key(const unsigned char *enc_key, const char *stored,
				struct token_key *k, struct err *e)
{
	char *b64 = NULL;
	if (crypt_reveal(enc_key, stored, &b64, e))
		return e->code;
	/* PostgreSQL's base64 may carry line breaks. */
	size_t w = 0;
	for (size_t r = 0; b64[r] != '\0'; r++)
		if (b64[r] != '\n' && b64[r] != '\r')
			b64[w++] = b64[r];
	b64[w] = '\0';
	long n = sig_base64_decode(b64, k->key, sizeof k->key);
	OPENSSL_cleanse(b64, strlen(b64));
	free(b64);
	if (n < 16)
		return err_set(e, ERR_INTERNAL, "token key %s: not the base64 of 16 to 64 bytes",
			       k->kid);
	k->len = (size_t)n;
	return ERR_OK;
}

enum err_code db_keys_load(struct db_conn *c, const unsigned char *enc_key, struct token_key **out,
			   size_t *n, struct err *e)
{
	*out = NULL;
	*n = 0;
	PGresult *r = db_exec(c, &q_load, NULL, e);
	if (r == NULL)
		return e->code;
	int rows = PQntuples(r);
	struct token_key *keys = rows > 0 ? calloc((size_t)rows, sizeof *keys) : NULL;
	if (rows > 0 && keys == NULL) {
		PQclear(r);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	for (int i = 0; i < rows; i++) {
		snprintf(keys[i].kid, sizeof keys[i].kid, "%s", PQgetvalue(r, i, 0));
		keys[i].accepted_until = db_i64(r, i, 2);
		if (decode_key(enc_key, PQgetvalue(r, i, 1), &keys[i], e))
			break;
	}
	PQclear(r);
	if (e->code == ERR_OK && (rows == 0 || keys[rows - 1].accepted_until != 0))
		err_set(e, ERR_INTERNAL, "no current delivery-token key: run hookflow rotate-keys");
	if (e->code) {
		if (keys != NULL)
			OPENSSL_cleanse(keys, (size_t)rows * sizeof *keys);
		free(keys);
		return e->code;
	}
	*out = keys;
	*n = (size_t)rows;
	return ERR_OK;
}

struct rotation {
	const char *kid;
	const char *secret;
	const char *grace;
};

static enum err_code rotate_tx(struct db_conn *c, void *arg, struct err *e)
{
	const struct rotation *rot = arg;
	const char *retire[1] = {rot->grace};
	const char *insert[2] = {rot->kid, rot->secret};
	PGresult *r;
	if ((r = db_exec(c, &q_retire, retire, e)) == NULL)
		return e->code;
	PQclear(r);
	if ((r = db_exec(c, &q_forget, NULL, e)) == NULL)
		return e->code;
	PQclear(r);
	if ((r = db_exec(c, &q_insert, insert, e)) == NULL)
		return e->code;
	PQclear(r);
	if ((r = db_exec_sql(c, "NOTIFY hookflow_keys", e)) == NULL)
		return e->code;
	PQclear(r);
	return ERR_OK;
}

enum err_code db_keys_rotate(struct db_conn *c, const unsigned char *enc_key, int64_t grace_ms,
			     char kid[TOKEN_KID_MAX + 1], struct err *e)
{
	unsigned char raw[32], id[6];
	char b64[48], grace[24];
	char *stored = NULL;
	if (RAND_bytes(raw, sizeof raw) != 1 || RAND_bytes(id, sizeof id) != 1)
		return err_set(e, ERR_INTERNAL, "no random bytes for a key");
	sig_base64(raw, sizeof raw, b64);
	OPENSSL_cleanse(raw, sizeof raw);
	kid[0] = 'k';
	ids_hex(id, sizeof id, kid + 1); /* "k" + 12 hex digits */
	if (enc_key != NULL && crypt_seal(enc_key, b64, strlen(b64), &stored, e)) {
		OPENSSL_cleanse(b64, sizeof b64);
		return e->code;
	}
	snprintf(grace, sizeof grace, "%" PRId64, grace_ms);
	struct rotation rot = {kid, stored ? stored : b64, grace};
	db_tx_run(c, rotate_tx, &rot, e);
	OPENSSL_cleanse(b64, sizeof b64);
	free(stored);
	return e->code;
}
