/* db/secrets: secrets at rest (workflow signing secrets, delivery-token
 * keys) and HOOKFLOW_ENCRYPTION_KEY. With the key, every stored secret is
 * sealed (AES-256-GCM, base/crypt.h), so a dump of the database alone does not
 * reveal them; without it they are stored as given. */
#ifndef HOOKFLOW_DB_SECRETS_H
#define HOOKFLOW_DB_SECRETS_H

#include "base/err.h"
#include "db/db.h"

/* Brings the stored secrets in line with the configured key `enc_key` (NULL:
 * none), at start-up after the migrations. With a key: every sealed secret
 * must open with it (ERR_FORBIDDEN "... wrong key?" otherwise, and nothing is
 * changed), then every plain one is sealed; *sealed (may be NULL) counts
 * them. Without a key: ERR_FORBIDDEN when any secret is sealed. Safe to run
 * from several instances at once. */
enum err_code db_secrets_prepare(struct db_conn *c, const unsigned char *enc_key, int *sealed,
				 struct err *e);

#endif
