/* db/secrets: the sealing pass over every column that holds a secret. */
#include "db/secrets.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypt.h"
#include "db/internal.h"

/* Every column that holds a secret: its rows (key, value), and the update
 * that replaces a value only if it is still the one read. */
static const struct secret_column {
	const char *what;
	struct db_stmt read;
	struct db_stmt write;
} columns[] = {
	{"workflow secret",
	 {"secrets_workflow_read", "SELECT name, secret FROM workflow WHERE secret IS NOT NULL", 0},
	 {"secrets_workflow_write",
	  "UPDATE workflow SET secret = $2 WHERE name = $1 AND secret = $3", 3}},
	{"workflow previous secret",
	 {"secrets_previous_read",
	  "SELECT name, secret_previous FROM workflow WHERE secret_previous IS NOT NULL", 0},
	 {"secrets_previous_write",
	  "UPDATE workflow SET secret_previous = $2 WHERE name = $1 AND secret_previous = $3", 3}},
	{"delivery-token key",
	 {"secrets_key_read", "SELECT kid, secret FROM hf_token_key", 0},
	 {"secrets_key_write", "UPDATE hf_token_key SET secret = $2 WHERE kid = $1 AND secret = $3",
	  3}},
};

#define NCOLUMNS (sizeof columns / sizeof columns[0])

/* Checks every sealed value of column `col` (read into `r`) against the key. */
static enum err_code check_sealed(const struct secret_column *col, PGresult *r,
				  const unsigned char *enc_key, struct err *e)
{
	for (int i = 0; i < PQntuples(r); i++) {
		const char *v = PQgetvalue(r, i, 1);
		if (!crypt_is_sealed(v))
			continue;
		if (enc_key == NULL)
			return err_set(e, ERR_FORBIDDEN,
				       "the stored secrets are sealed (%s %s): set "
				       "HOOKFLOW_ENCRYPTION_KEY to the key they were sealed with",
				       col->what, PQgetvalue(r, i, 0));
		char *plain = NULL;
		struct err oe = {0};
		if (crypt_open(enc_key, v, &plain, NULL, &oe)) {
			free(plain);
			return err_set(
				e, ERR_FORBIDDEN,
				"HOOKFLOW_ENCRYPTION_KEY does not open the stored secrets (%s "
				"%s): a wrong key?",
				col->what, PQgetvalue(r, i, 0));
		}
		OPENSSL_cleanse(plain, strlen(plain));
		free(plain);
	}
	return ERR_OK;
}

enum err_code db_secrets_prepare(struct db_conn *c, const unsigned char *enc_key, int *sealed,
				 struct err *e)
{
	int count = 0;
	PGresult *rows[NCOLUMNS] = {0};
	/* First every check, so that a wrong key changes nothing. */
	for (size_t k = 0; k < NCOLUMNS; k++) {
		if ((rows[k] = db_exec(c, &columns[k].read, NULL, e)) == NULL ||
		    check_sealed(&columns[k], rows[k], enc_key, e))
			goto out;
	}
	for (size_t k = 0; enc_key != NULL && k < NCOLUMNS; k++) {
		for (int i = 0; i < PQntuples(rows[k]); i++) {
			const char *v = PQgetvalue(rows[k], i, 1);
			if (crypt_is_sealed(v))
				continue;
			char *s = NULL;
			if (crypt_seal(enc_key, v, strlen(v), &s, e))
				goto out;
			const char *p[3] = {PQgetvalue(rows[k], i, 0), s, v};
			PGresult *u = db_exec(c, &columns[k].write, p, e);
			free(s);
			if (u == NULL)
				goto out;
			count += atoi(PQcmdTuples(u));
			PQclear(u);
		}
	}
out:
	for (size_t k = 0; k < NCOLUMNS; k++) {
		PQclear(rows[k]);
	}
	if (sealed)
		*sealed = count;
	return e->code;
}
