/* tlsfiles: the PEM files of TLS material that configuration variables name
 * (HOOKFLOW_CA_FILE, HOOKFLOW_CLIENT_CERT, HOOKFLOW_CLIENT_KEY), read and
 * checked at start-up, so that a missing or broken file stops hookflow with
 * a message naming its variable instead of failing every call later. Pure
 * apart from reading the files and OpenSSL's parsers. */
#ifndef HOOKFLOW_TLSFILES_H
#define HOOKFLOW_TLSFILES_H

#include "base/err.h"

/* The largest file read (a CA bundle of every public root is ~220 KiB). */
#define TLSFILES_MAX_BYTES (1 << 20)
/* The longest path accepted. */
#define TLSFILES_MAX_PATH 4096

struct stack_st_X509; /* OpenSSL's STACK_OF(X509) */

/* Reads every certificate of the PEM file `path` (borrowed): there must be at
 * least one, and each must parse (other PEM blocks are skipped). On success
 * *out is a new stack owned by the caller (tlsfiles_free_cas); its
 * certificates may be shared read-only between threads. ERR_INVALID with a
 * message naming `var` (the variable that named the file) otherwise. */
enum err_code tlsfiles_read_cas(const char *var, const char *path, struct stack_st_X509 **out,
				struct err *e);

/* Frees a stack of tlsfiles_read_cas. NULL is a no-op. */
void tlsfiles_free_cas(struct stack_st_X509 *cas);

/* Checks a client certificate: `cert` (borrowed path, named by `cert_var`)
 * must hold a PEM certificate (its chain may follow), `key` (named by
 * `key_var`) a PEM private key that needs no passphrase, and the key must
 * be the certificate's. ERR_INVALID naming the variable otherwise. */
enum err_code tlsfiles_check_client(const char *cert_var, const char *cert, const char *key_var,
				    const char *key, struct err *e);

#endif
