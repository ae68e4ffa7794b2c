/* tlsfiles: PEM files of TLS material, read and checked at start-up. */
#include "base/tlsfiles.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads the file `path` whole into *buf (malloc'd, *len bytes, NUL after
 * them): at most TLSFILES_MAX_BYTES. */
static enum err_code read_file(const char *var, const char *path, char **buf, size_t *len,
			       struct err *e)
{
	*buf = NULL;
	*len = 0;
	if (strlen(path) > TLSFILES_MAX_PATH)
		return err_set(e, ERR_INVALID, "%s: the path is longer than %d bytes", var,
			       TLSFILES_MAX_PATH);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return err_set(e, ERR_INVALID, "%s: cannot read %s: %s", var, path,
			       strerror(errno));
	char *b = malloc(TLSFILES_MAX_BYTES + 1);
	if (b == NULL) {
		fclose(f);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	size_t n = fread(b, 1, TLSFILES_MAX_BYTES + 1, f);
	int failed = ferror(f);
	int saved = errno;
	fclose(f);
	if (failed || n > TLSFILES_MAX_BYTES) {
		OPENSSL_cleanse(b, n);
		free(b);
		if (failed)
			return err_set(e, ERR_INVALID, "%s: cannot read %s: %s", var, path,
				       strerror(saved));
		return err_set(e, ERR_INVALID, "%s: %s is larger than %d bytes", var, path,
			       TLSFILES_MAX_BYTES);
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return ERR_OK;
}

/* Frees a buffer of read_file, wiping it first (it may hold a key). */
static void free_file(char *buf, size_t len)
{
	if (buf != NULL)
		OPENSSL_cleanse(buf, len);
	free(buf);
}

/* OpenSSL's reason for the last failure, for a message. */
static const char *ssl_reason(void)
{
	const char *r = ERR_reason_error_string(ERR_peek_last_error());
	return r != NULL ? r : "unknown error";
}

/* True when the last PEM read failed only because no further block of the
 * wanted kind was left. */
static bool pem_ended(void)
{
	unsigned long err = ERR_peek_last_error();
	return ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
}

enum err_code tlsfiles_read_cas(const char *var, const char *path, struct stack_st_X509 **out,
				struct err *e)
{
	*out = NULL;
	char *buf;
	size_t len;
	if (read_file(var, path, &buf, &len, e))
		return e->code;
	STACK_OF(X509) *cas = sk_X509_new_null();
	BIO *bio = BIO_new_mem_buf(buf, (int)len);
	if (cas == NULL || bio == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (;;) {
		ERR_clear_error();
		X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		if (x == NULL) {
			if (!pem_ended())
				err_set(e, ERR_INVALID,
					"%s: certificate %d of %s cannot be parsed (%s)", var,
					sk_X509_num(cas) + 1, path, ssl_reason());
			else if (sk_X509_num(cas) == 0)
				err_set(e, ERR_INVALID, "%s: %s holds no PEM certificate", var,
					path);
			break;
		}
		/* Computes and caches the certificate's extensions now, while
		 * one thread holds it. */
		X509_check_ca(x);
		if (!sk_X509_push(cas, x)) {
			X509_free(x);
			err_set(e, ERR_INTERNAL, "out of memory");
			break;
		}
	}
out:
	ERR_clear_error();
	BIO_free(bio);
	free_file(buf, len);
	if (e->code != ERR_OK) {
		tlsfiles_free_cas(cas);
		return e->code;
	}
	*out = cas;
	return ERR_OK;
}

void tlsfiles_free_cas(struct stack_st_X509 *cas)
{
	if (cas != NULL)
		sk_X509_pop_free(cas, X509_free);
}

enum key_kind { KEY_NONE, KEY_PLAIN, KEY_ENCRYPTED };

/* What the first PEM block of a private key ("PRIVATE KEY", "RSA PRIVATE
 * KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"...) read from `bio` is. */
static enum key_kind key_kind(BIO *bio)
{
	char *name = NULL, *header = NULL;
	unsigned char *data = NULL;
	long len = 0;
	enum key_kind kind = KEY_NONE;
	while (kind == KEY_NONE && PEM_read_bio(bio, &name, &header, &data, &len) == 1) {
		size_t n = strlen(name);
		if (n >= 11 && strcmp(name + n - 11, "PRIVATE KEY") == 0)
			kind = strcmp(name, "ENCRYPTED PRIVATE KEY") == 0 ||
					       strstr(header, "ENCRYPTED") != NULL
				       ? KEY_ENCRYPTED
				       : KEY_PLAIN;
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_clear_free(data, (size_t)len);
	}
	ERR_clear_error();
	return kind;
}

/* PEM password callback: no passphrase (an encrypted key fails to load). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

enum err_code tlsfiles_check_client(const char *cert_var, const char *cert, const char *key_var,
				    const char *key, struct err *e)
{
	char *cbuf = NULL, *kbuf = NULL;
	size_t clen = 0, klen = 0;
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	BIO *bio = NULL;
	if (read_file(cert_var, cert, &cbuf, &clen, e) || read_file(key_var, key, &kbuf, &klen, e))
		goto out;
	ERR_clear_error();
	bio = BIO_new_mem_buf(cbuf, (int)clen);
	if (bio == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	if (x == NULL) {
		if (pem_ended())
			err_set(e, ERR_INVALID, "%s: %s holds no PEM certificate", cert_var, cert);
		else
			err_set(e, ERR_INVALID, "%s: the certificate in %s cannot be parsed (%s)",
				cert_var, cert, ssl_reason());
		goto out;
	}
	BIO_free(bio);
	ERR_clear_error();
	bio = BIO_new_mem_buf(kbuf, (int)klen);
	if (bio == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	switch (key_kind(bio)) {
	case KEY_NONE:
		err_set(e, ERR_INVALID, "%s: %s holds no PEM private key", key_var, key);
		goto out;
	case KEY_ENCRYPTED:
		err_set(e, ERR_INVALID,
			"%s: the private key in %s is encrypted: a key with a passphrase is not "
			"supported",
			key_var, key);
		goto out;
	case KEY_PLAIN:
		break;
	}
	BIO_free(bio);
	ERR_clear_error();
	bio = BIO_new_mem_buf(kbuf, (int)klen);
	pk = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	if (pk == NULL) {
		err_set(e, ERR_INVALID, "%s: the private key in %s cannot be parsed (%s)", key_var,
			key, ssl_reason());
		goto out;
	}
	if (X509_check_private_key(x, pk) != 1)
		err_set(e, ERR_INVALID, "%s: the key in %s is not the key of %s's certificate",
			key_var, key, cert_var);
out:
	ERR_clear_error();
	BIO_free(bio);
	X509_free(x);
	EVP_PKEY_free(pk);
	free_file(cbuf, clen);
	free_file(kbuf, klen);
	return e->code;
}
