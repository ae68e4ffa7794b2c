/* ids: identifier rules, UTF-8 validation, monotonic ULIDs and hex. */
#include "base/ids.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* The ULID generator: the last timestamp and random part handed out. This is
 * the module's only mutable state; `ulid_lock` guards it. */
static pthread_mutex_t ulid_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ulid_last_ms;
static unsigned char ulid_last_rand[10];

/* The length of the well-formed UTF-8 sequence at `p` (at most `n` bytes
 * available), or 0 when the bytes there are not one. */
static size_t utf8_seq_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80, hi = 0xBF;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90; /* overlong */
		else if (c == 0xF4)
			hi = 0x8F; /* above U+10FFFF */
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return len;
}

bool ids_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		/* Eight ASCII bytes at a time: the bulk of most texts. */
		while (len - i >= 8) {
			uint64_t w;
			memcpy(&w, p + i, 8);
			if (w & 0x8080808080808080ULL)
				break;
			i += 8;
		}
		if (i == len)
			break;
		size_t n = utf8_seq_len(p + i, len - i);
		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

/* Shared shape of the run id and workflow name checks. */
static enum err_code check_charset(const char *field, const char *s, size_t len, size_t max,
				   const char *extra, const char *shown, struct err *e)
{
	if (len == 0)
		return err_set(e, ERR_INVALID, "%s: must not be empty", field);
	if (len > max)
		return err_set(e, ERR_INVALID, "%s: exceeds maximum length of %zu bytes", field,
			       max);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c != '\0' && strchr(extra, c) != NULL)
			continue;
		return err_set(e, ERR_INVALID, "%s: must contain only %s", field, shown);
	}
	return ERR_OK;
}

enum err_code ids_check_run_id(const char *field, const char *s, size_t len, struct err *e)
{
	return check_charset(field, s, len, IDS_MAX_RUN_ID, "_-", "[A-Za-z0-9_-]", e);
}

enum err_code ids_check_workflow_name(const char *field, const char *s, size_t len, struct err *e)
{
	return check_charset(field, s, len, IDS_MAX_NAME, "_.-", "[A-Za-z0-9_.-]", e);
}

enum err_code ids_check_key(const char *field, const char *s, size_t len, struct err *e)
{
	if (len == 0)
		return err_set(e, ERR_INVALID, "%s: must not be empty", field);
	if (len > IDS_MAX_KEY)
		return err_set(e, ERR_INVALID, "%s: exceeds maximum length of %d bytes", field,
			       IDS_MAX_KEY);
	if (memchr(s, '\0', len) != NULL)
		return err_set(e, ERR_INVALID, "%s: must not contain NUL", field);
	if (!ids_utf8_valid(s, len))
		return err_set(e, ERR_INVALID, "%s: must be valid UTF-8", field);
	return ERR_OK;
}

enum err_code ids_check_concurrency_key(const char *field, const char *s, size_t len, struct err *e)
{
	const unsigned char *p = (const unsigned char *)s;

	if (len == 0)
		return err_set(e, ERR_INVALID, "%s: must not be empty", field);
	if (len > IDS_MAX_CONCURRENCY_KEY)
		return err_set(e, ERR_INVALID, "%s: exceeds maximum length of %d bytes", field,
			       IDS_MAX_CONCURRENCY_KEY);
	if (!ids_utf8_valid(s, len))
		return err_set(e, ERR_INVALID, "%s: must be valid UTF-8", field);
	for (size_t i = 0; i < len; i++) {
		/* C0 and DEL, and C1 (U+0080..U+009F: 0xC2 0x80..0x9F in UTF-8). */
		if (p[i] < 0x20 || p[i] == 0x7F ||
		    (p[i] == 0xC2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F))
			return err_set(e, ERR_INVALID, "%s: must not contain control characters",
				       field);
	}
	return ERR_OK;
}

static uint64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec < 0)
		return 0;
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) & 0xFFFFFFFFFFFFull;
}

/* Adds one to the 80-bit big-endian random part. Returns true when it wrapped
 * around to zero. */
static bool increment_random(unsigned char r[10])
{
	for (int i = 9; i >= 0; i--) {
		if (++r[i] != 0)
			return false;
	}
	return true;
}

static bool fill_random(unsigned char r[10])
{
	if (RAND_bytes(r, 10) == 1)
		return true;
	return getrandom(r, 10, 0) == 10;
}

void ids_ulid_new(char out[IDS_ULID_LEN + 1])
{
	unsigned char b[16];
	uint64_t now = realtime_ms();

	pthread_mutex_lock(&ulid_lock);
	if (now > ulid_last_ms && fill_random(ulid_last_rand)) {
		ulid_last_ms = now;
	} else {
		/* Same millisecond, clock went back, or no entropy: stay monotonic
		 * by counting up from the last id. */
		if (increment_random(ulid_last_rand))
			ulid_last_ms = (ulid_last_ms + 1) & 0xFFFFFFFFFFFFull;
		if (now > ulid_last_ms)
			ulid_last_ms = now;
	}
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)(ulid_last_ms >> (8 * (5 - i)));
	memcpy(b + 6, ulid_last_rand, 10);
	pthread_mutex_unlock(&ulid_lock);

	/* 26 groups of 5 bits over the 128-bit value with two leading zero bits. */
	for (int i = 0; i < IDS_ULID_LEN; i++) {
		unsigned v = 0;
		for (int j = 0; j < 5; j++) {
			int pos = 5 * i - 2 + j;
			unsigned bit = 0;
			if (pos >= 0)
				bit = (b[pos / 8] >> (7 - pos % 8)) & 1u;
			v = (v << 1) | bit;
		}
		out[i] = crockford[v];
	}
	out[IDS_ULID_LEN] = '\0';
}

void ids_hex(const unsigned char *bin, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[bin[i] >> 4];
		out[2 * i + 1] = digits[bin[i] & 0xF];
	}
	out[2 * len] = '\0';
}

/* The printable form of the character at `p` (`n` bytes left) for ids_quote:
 * writes it into `piece` (4 bytes), sets *used to the input bytes it covers and
 * returns its length. */
static size_t quote_piece(const unsigned char *p, size_t n, char piece[4], size_t *used)
{
	static const char digits[] = "0123456789abcdef";
	size_t len = utf8_seq_len(p, n);

	*used = len ? len : 1;
	if (len > 1) {
		memcpy(piece, p, len);
		return len;
	}
	if (len == 1 && p[0] >= 0x20 && p[0] != 0x7F) {
		if (p[0] == '"' || p[0] == '\\') {
			piece[0] = '\\';
			piece[1] = (char)p[0];
			return 2;
		}
		piece[0] = (char)p[0];
		return 1;
	}
	/* A control byte or a byte of invalid UTF-8. */
	piece[0] = '\\';
	piece[1] = 'x';
	piece[2] = digits[p[0] >> 4];
	piece[3] = digits[p[0] & 0xF];
	return 4;
}

void ids_quote(const char *s, size_t len, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	char piece[4];
	size_t o = 1, i = 0, total = 2, used, limit;

	if (cap < 8) {
		if (cap > 0)
			out[0] = '\0';
		return;
	}
	/* Whole text when it fits with its quotes and NUL, else as much as fits
	 * before `..."` and the NUL. */
	for (size_t j = 0; j < len; j += used)
		total += quote_piece(p + j, len - j, piece, &used);
	limit = total < cap ? cap - 2 : cap - 5;
	out[0] = '"';
	while (i < len) {
		size_t plen = quote_piece(p + i, len - i, piece, &used);
		if (o + plen > limit)
			break;
		memcpy(out + o, piece, plen);
		o += plen;
		i += used;
	}
	if (i < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
}
