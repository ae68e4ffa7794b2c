/* trace: W3C trace context parsing, span id derivation and formatting. */
#include "base/trace.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool trace_hex_id_valid(const char *s, size_t n)
{
	bool nonzero = false;
	for (size_t i = 0; i < n; i++) {
		if (!is_lower_hex(s[i]))
			return false;
		nonzero |= s[i] != '0';
	}
	return nonzero;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_lcalpha(char c)
{
	return c >= 'a' && c <= 'z';
}

static bool is_key_char(char c)
{
	return is_lcalpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' ||
	       c == '/';
}

/* A tracestate key (W3C trace-context, "Key"): simple-key, or
 * tenant-id "@" system-id. */
static bool key_valid(const char *k, size_t n)
{
	const char *at = memchr(k, '@', n);
	if (at == NULL) {
		if (n < 1 || n > 256 || !is_lcalpha(k[0]))
			return false;
		for (size_t i = 1; i < n; i++)
			if (!is_key_char(k[i]))
				return false;
		return true;
	}
	size_t tn = (size_t)(at - k), sn = n - tn - 1;
	if (tn < 1 || tn > 241 || sn < 1 || sn > 14)
		return false;
	if (!is_lcalpha(k[0]) && !(k[0] >= '0' && k[0] <= '9'))
		return false;
	for (size_t i = 1; i < tn; i++)
		if (!is_key_char(k[i]))
			return false;
	if (!is_lcalpha(at[1]))
		return false;
	for (size_t i = 2; i <= sn; i++)
		if (!is_key_char(at[i]))
			return false;
	return true;
}

/* A tracestate value: 1 to 256 printable ASCII characters other than ','
 * and '=', the last one not a space. */
static bool value_valid(const char *v, size_t n)
{
	if (n < 1 || n > 256 || v[n - 1] == ' ')
		return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=')
			return false;
	return true;
}

/* Checks tracestate `ts` and copies its members into out, joined with ","
 * (the white space around them and empty members left out: the same list,
 * in printable ASCII only). False (out "") when it is not a valid list, has
 * more than 32 members, repeats a key, or is longer than TRACE_STATE_MAX. */
static bool state_members(const char *ts, char out[TRACE_STATE_MAX + 1])
{
	out[0] = '\0';
	while (is_ows(*ts))
		ts++;
	size_t len = strlen(ts);
	while (len > 0 && is_ows(ts[len - 1]))
		len--;
	if (len == 0 || len > TRACE_STATE_MAX)
		return false;
	const char *keys[TRACE_STATE_MAX_MEMBERS];
	size_t key_lens[TRACE_STATE_MAX_MEMBERS];
	int members = 0;
	const char *p = ts, *end = ts + len;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *m_end = comma ? comma : end;
		const char *m = p;
		while (m < m_end && is_ows(*m))
			m++;
		const char *e = m_end;
		while (e > m && is_ows(e[-1]))
			e--;
		if (e > m) { /* an empty member is allowed and ignored */
			const char *eq = memchr(m, '=', (size_t)(e - m));
			if (eq == NULL || !key_valid(m, (size_t)(eq - m)) ||
			    !value_valid(eq + 1, (size_t)(e - eq - 1)) ||
			    members == TRACE_STATE_MAX_MEMBERS)
				return false;
			for (int i = 0; i < members; i++)
				if (key_lens[i] == (size_t)(eq - m) &&
				    memcmp(keys[i], m, key_lens[i]) == 0)
					return false;
			keys[members] = m;
			key_lens[members++] = (size_t)(eq - m);
			size_t at = strlen(out);
			if (at > 0)
				out[at++] = ',';
			memcpy(out + at, m, (size_t)(e - m));
			out[at + (size_t)(e - m)] = '\0';
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	if (members == 0) {
		out[0] = '\0';
		return false;
	}
	return true;
}

static bool state_parse(const char *ts, char out[TRACE_STATE_MAX + 1])
{
	if (state_members(ts, out))
		return true;
	out[0] = '\0';
	return false;
}

bool trace_parent_parse(const char *tp, const char *ts, struct trace_parent *out)
{
	memset(out, 0, sizeof *out);
	if (tp == NULL)
		return false;
	while (is_ows(*tp))
		tp++;
	size_t len = strlen(tp);
	while (len > 0 && is_ows(tp[len - 1]))
		len--;
	if (len < TRACE_PARENT_LEN || !is_lower_hex(tp[0]) || !is_lower_hex(tp[1]))
		return false;
	bool v00 = tp[0] == '0' && tp[1] == '0';
	if (tp[0] == 'f' && tp[1] == 'f')
		return false; /* version ff is invalid */
	if (v00 ? len != TRACE_PARENT_LEN : (len > TRACE_PARENT_LEN && tp[55] != '-'))
		return false;
	if (tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
		return false;
	if (!trace_hex_id_valid(tp + 3, TRACE_ID_HEX) ||
	    !trace_hex_id_valid(tp + 36, TRACE_SPAN_HEX) || !is_lower_hex(tp[53]) ||
	    !is_lower_hex(tp[54]))
		return false;
	memcpy(out->trace_id, tp + 3, TRACE_ID_HEX);
	memcpy(out->span_id, tp + 36, TRACE_SPAN_HEX);
	if (ts != NULL)
		state_parse(ts, out->tracestate);
	return true;
}

static void to_hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* A span id from 8 bytes, never all zero. */
static void span_set(const uint8_t *b, struct trace_span *out)
{
	bool zero = true;
	for (int i = 0; i < 8; i++) {
		out->raw[i] = b[i];
		zero &= b[i] == 0;
	}
	if (zero)
		out->raw[7] = 1;
	to_hex(out->raw, 8, out->hex);
}

/* SHA-256, fetched once: EVP_Digest with an EVP_MD already fetched costs a
 * third of SHA256(), which fetches it (under a lock) at every call. It stays
 * for the life of the process. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void trace_derive(const char *key, size_t len, struct trace_span *out)
{
	pthread_once(&sha256_once, fetch_sha256);
	unsigned char md[EVP_MAX_MD_SIZE] = {0};
	unsigned int n = 0;
	/* It fails only when OpenSSL cannot allocate: the span id is then
	 * that of an all-zero digest, still a valid id. */
	EVP_Digest(key, len, md, &n, sha256_md != NULL ? sha256_md : EVP_sha256(), NULL);
	span_set(md, out);
}

/* trace_derive of the printf-style key (keys are short: ids of at most 128
 * bytes). */
static void derive_fmt(struct trace_span *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void derive_fmt(struct trace_span *out, const char *fmt, ...)
{
	char key[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(key, sizeof key, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof key)
		n = sizeof key - 1;
	trace_derive(key, (size_t)n, out);
}

void trace_attempt_span(const char *trace_id, const char *run_id, int generation, int step,
			int attempt, struct trace_span *out)
{
	derive_fmt(out, "%s/%s/%d/%d/%d", trace_id, run_id, generation, step, attempt);
}

void trace_run_span(const char *trace_id, const char *run_id, int generation,
		    struct trace_span *out)
{
	derive_fmt(out, "%s/%s/%d/run", trace_id, run_id, generation);
}

void trace_callback_span(const char *trace_id, const char *run_id, int generation, int attempt,
			 struct trace_span *out)
{
	derive_fmt(out, "%s/%s/%d/callback/%d", trace_id, run_id, generation, attempt);
}

void trace_child_span(const char *span_hex, const char *what, struct trace_span *out)
{
	derive_fmt(out, "%s/%s", span_hex, what);
}

void trace_sibling_span(const struct trace_span *s, struct trace_span *out)
{
	static const uint8_t mask[8] = {0x5e, 0x77, 0x1e, 0x5e, 0x77, 0x1e, 0x5e, 0x77};
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = s->raw[i] ^ mask[i];
	span_set(b, out);
}

bool trace_id_read(const char *s, char out[TRACE_ID_HEX + 1])
{
	size_t n = 0;
	out[0] = '\0';
	if (s == NULL)
		return false;
	for (; *s != '\0'; s++) {
		if (*s == '-')
			continue;
		char c = *s >= 'A' && *s <= 'F' ? (char)(*s - 'A' + 'a') : *s;
		if (n == TRACE_ID_HEX || !is_lower_hex(c)) {
			out[0] = '\0';
			return false;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	if (n == TRACE_ID_HEX && trace_hex_id_valid(out, TRACE_ID_HEX))
		return true;
	out[0] = '\0';
	return false;
}

static void random_hex(size_t nbytes, char *out)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[16] = {0};
	for (;;) {
		if (RAND_bytes(b, (int)nbytes) != 1)
			b[nbytes - 1] ^= 1; /* no entropy: still a valid, non-zero id */
		bool zero = true;
		for (size_t i = 0; i < nbytes; i++)
			zero &= b[i] == 0;
		if (!zero)
			break;
	}
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

void trace_random_trace_id(char out[TRACE_ID_HEX + 1])
{
	random_hex(16, out);
}

void trace_random_span_id(char out[TRACE_SPAN_HEX + 1])
{
	random_hex(8, out);
}

void trace_format_parent(const char *trace_id, const char *span_id, char out[TRACE_PARENT_LEN + 1])
{
	snprintf(out, TRACE_PARENT_LEN + 1, "00-%.32s-%.16s-01", trace_id, span_id);
}

/* The value of each lowercase hex digit plus one; 0 for anything else. */
static const uint8_t hex_value[256] = {
	['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
	['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
	['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

bool trace_hex_decode(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t hi = hex_value[(unsigned char)hex[2 * i]];
		uint8_t lo = hi ? hex_value[(unsigned char)hex[2 * i + 1]] : 0;
		if (lo == 0)
			return false;
		out[i] = (uint8_t)((hi - 1) << 4 | (lo - 1));
	}
	return hex[2 * n] == '\0';
}
