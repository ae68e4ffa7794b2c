/* canon: canonical JSON encoding and SHA-256, so equal JSON values hash equal.
 *
 * The encoder is our own rather than json_dumps(JSON_SORT_KEYS|JSON_COMPACT):
 * jansson writes reals with a fixed precision and keeps 1.0 distinct from 1,
 * and neither is something we want the stored input hashes to depend on. It
 * writes into a growing buffer; the only failure is running out of memory. */
#include "base/canon.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO_POW_53 9007199254740992.0

struct buf {
	char *data;
	size_t len;
	size_t cap;
	bool failed;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->data, cap);
		if (p == NULL) {
			b->failed = true;
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void put_str(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void put_string(struct buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0; /* start of the pending stretch of bytes copied as is */

	put(b, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7];
		size_t n = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		esc[0] = '\\';
		switch (c) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xF];
			n = 6;
			break;
		}
		put(b, s + run, i - run);
		put(b, esc, n);
		run = i + 1;
	}
	put(b, s + run, len - run);
	put(b, "\"", 1);
}

static void put_real(struct buf *b, double d)
{
	char tmp[40];

	if (!isfinite(d)) {
		/* jansson never holds these; keep the output valid JSON anyway. */
		put_str(b, "null");
		return;
	}
	/* The range test comes first so the cast below is defined. */
	if (d >= -TWO_POW_53 && d <= TWO_POW_53 && d == (double)(long long)d) {
		snprintf(tmp, sizeof tmp, "%lld", (long long)d);
	} else {
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(tmp, sizeof tmp, "%.*g", prec, d);
			if (strtod(tmp, NULL) == d)
				break;
		}
	}
	put_str(b, tmp);
}

struct key {
	const char *s;
	size_t len;
	json_t *v;
};

static int key_cmp(const void *pa, const void *pb)
{
	const struct key *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->s, b->s, n);

	if (c != 0)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

static void put_value(struct buf *b, const json_t *v);

static void put_object(struct buf *b, const json_t *v)
{
	size_t n = json_object_size(v), i = 0;
	struct key *keys = NULL;
	const char *k;
	size_t klen;
	json_t *val;

	if (n == 0) {
		put(b, "{}", 2);
		return;
	}
	keys = calloc(n, sizeof *keys);
	if (keys == NULL) {
		b->failed = true;
		return;
	}
	json_object_keylen_foreach((json_t *)v, k, klen, val)
	{
		if (i < n)
			keys[i++] = (struct key){k, klen, val};
	}
	qsort(keys, i, sizeof *keys, key_cmp);
	put(b, "{", 1);
	for (size_t j = 0; j < i && !b->failed; j++) {
		if (j > 0)
			put(b, ",", 1);
		put_string(b, keys[j].s, keys[j].len);
		put(b, ":", 1);
		put_value(b, keys[j].v);
	}
	put(b, "}", 1);
	free(keys);
}

static void put_value(struct buf *b, const json_t *v)
{
	char tmp[32];

	if (b->failed)
		return;
	switch (v == NULL ? JSON_NULL : json_typeof(v)) {
	case JSON_OBJECT:
		put_object(b, v);
		break;
	case JSON_ARRAY:
		put(b, "[", 1);
		for (size_t i = 0; i < json_array_size(v) && !b->failed; i++) {
			if (i > 0)
				put(b, ",", 1);
			put_value(b, json_array_get(v, i));
		}
		put(b, "]", 1);
		break;
	case JSON_STRING:
		put_string(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		put_str(b, tmp);
		break;
	case JSON_REAL:
		put_real(b, json_real_value(v));
		break;
	case JSON_TRUE:
		put_str(b, "true");
		break;
	case JSON_FALSE:
		put_str(b, "false");
		break;
	case JSON_NULL:
	default:
		put_str(b, "null");
		break;
	}
}

char *canon_json_dumps(const json_t *v)
{
	struct buf b = {0};

	put_value(&b, v);
	if (b.failed) {
		free(b.data);
		return NULL;
	}
	return b.data;
}

int canon_json_sha256(const json_t *v, unsigned char out[32])
{
	char *s = canon_json_dumps(v);

	if (s == NULL)
		return -1;
	canon_sha256(s, strlen(s), out);
	free(s);
	return 0;
}

void canon_sha256(const void *data, size_t len, unsigned char out[32])
{
	/* EVP_Digest only fails when OpenSSL cannot allocate its context. A wrong
	 * digest would silently break input comparison and member ids, and this
	 * function has no error to return, so that case ends the process. */
	if (EVP_Digest(data, len, out, NULL, EVP_sha256(), NULL) != 1)
		abort();
}
