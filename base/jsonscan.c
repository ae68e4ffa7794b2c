/* jsonscan: see jsonscan.h. One pass over the text with an explicit stack of
 * open containers. Duplicate keys: the keys of the open objects are kept on
 * a stack (an object's keys above its parent's, dropped when it closes), and
 * a key is compared with its object's earlier keys there while the object
 * has at most SMALL_OBJECT of them, as typical JSON's objects have; an
 * object with more has its keys in one hash set tagged with the object's
 * number, so that duplicates are found in linear time whatever the sizes. */
#include "base/jsonscan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_OBJECT 16

struct key {
	size_t obj; /* the object's number, from 1; 0: a free slot (the hash set) */
	const unsigned char *p;
	size_t n;
};

struct scan {
	const unsigned char *p;
	size_t i, len;
	struct key *keys; /* the hash set: cap slots, a power of two */
	size_t cap, used;
	size_t objs;       /* objects opened so far */
	struct key *stack; /* the open objects' keys (obj unused), stack_cap slots: */
	size_t top, stack_cap;
	struct key local[32]; /* at first these, then malloc'd */
};

static inline void skip_ws(struct scan *s)
{
	/* Compact JSON has none: one test, inline, at every token. */
	if (s->i < s->len && s->p[s->i] > ' ')
		return;
	while (s->i < s->len) {
		unsigned char c = s->p[s->i];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			return;
		s->i++;
	}
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether a byte of w is zero; whether one is below n (n <= 128): the
 * classic word-at-a-time tests, exact as to whether any byte is. */
static uint64_t has_zero(uint64_t w)
{
	return (w - ONES) & ~w & HIGHS;
}

static uint64_t has_below(uint64_t w, unsigned n)
{
	return (w - ONES * n) & ~w & HIGHS;
}

/* The value of 4 hex digits at p[i..], or -1. */
static long hex4(const struct scan *s, size_t i)
{
	long v = 0;
	if (s->len - i < 4)
		return -1;
	for (size_t k = i; k < i + 4; k++) {
		unsigned char c = s->p[k];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* A \u escape at s->i: a character other than NUL, a surrogate only as the
 * first half of a pair (jansson refuses \u0000 and lone halves). */
static bool scan_u_escape(struct scan *s)
{
	long v = hex4(s, s->i + 2);
	if (v <= 0 || (v >= 0xDC00 && v <= 0xDFFF))
		return false;
	if (v >= 0xD800 && v <= 0xDBFF) {
		size_t j = s->i + 6;
		if (s->len - j < 6 || s->p[j] != '\\' || s->p[j + 1] != 'u')
			return false;
		long lo = hex4(s, j + 2);
		if (lo < 0xDC00 || lo > 0xDFFF)
			return false;
		s->i += 12;
		return true;
	}
	s->i += 6;
	return true;
}

/* A string from its opening quote; *plain tells whether it had no escape. */
static bool scan_string(struct scan *s, bool *plain)
{
	*plain = true;
	s->i++; /* the opening quote */
	for (;;) {
		/* Eight bytes at a time to the first that is '"', '\\' or a control
		 * character: past a long string's bulk, and straight to a short
		 * one's end (the lowest byte the tests flag is always exact, and
		 * the lowest address on a little-endian machine). */
		uint64_t m = 0;
		while (s->len - s->i >= 8) {
			uint64_t w;
			memcpy(&w, s->p + s->i, 8);
			m = has_zero(w ^ (ONES * '"')) | has_zero(w ^ (ONES * '\\')) |
			    has_below(w, 0x20);
			if (m != 0)
				break;
			s->i += 8;
		}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		if (m != 0)
			s->i += (size_t)__builtin_ctzll(m) / 8;
#endif
		if (s->i >= s->len)
			return false;
		unsigned char c = s->p[s->i];
		if (c == '"') {
			s->i++;
			return true;
		}
		if (c < 0x20)
			return false; /* a control character: jansson refuses it */
		if (c == '\\') {
			if (s->i + 1 >= s->len)
				return false;
			c = s->p[s->i + 1];
			*plain = false;
			if (c == 'u') {
				if (!scan_u_escape(s))
					return false;
				continue;
			}
			if (strchr("\"\\/bfnrt", c) == NULL || c == '\0')
				return false;
			s->i += 2;
			continue;
		}
		s->i++;
	}
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* A number, held to what jansson converts without an overflow: an integer
 * of at most 18 digits, or a real whose value is at most about 1e290 (at
 * most 40 digits before the point, an exponent of at most 250 in size;
 * jansson accepts an underflow). */
static bool scan_number(struct scan *s)
{
	size_t i = s->i, digits = 0, exp = 0;
	bool real = false;

	if (i < s->len && s->p[i] == '-')
		i++;
	if (i >= s->len || !is_digit(s->p[i]))
		return false;
	if (s->p[i] == '0') {
		i++;
		digits = 1;
		if (i < s->len && is_digit(s->p[i]))
			return false;
	} else {
		while (i < s->len && is_digit(s->p[i])) {
			i++;
			digits++;
		}
	}
	if (i < s->len && s->p[i] == '.') {
		real = true;
		i++;
		if (i >= s->len || !is_digit(s->p[i]))
			return false;
		while (i < s->len && is_digit(s->p[i]))
			i++;
	}
	if (i < s->len && (s->p[i] == 'e' || s->p[i] == 'E')) {
		real = true;
		i++;
		if (i < s->len && (s->p[i] == '+' || s->p[i] == '-'))
			i++;
		if (i >= s->len || !is_digit(s->p[i]))
			return false;
		while (i < s->len && is_digit(s->p[i])) {
			exp = exp * 10 + (size_t)(s->p[i] - '0');
			if (exp > 250)
				return false;
			i++;
		}
	}
	if (real ? digits > 40 : digits > 18)
		return false;
	s->i = i;
	return true;
}

static bool scan_word(struct scan *s, const char *w)
{
	size_t n = strlen(w);
	if (s->len - s->i < n || memcmp(s->p + s->i, w, n) != 0)
		return false;
	s->i += n;
	return true;
}

static uint64_t key_hash(size_t obj, const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)obj * 0x9E3779B97F4A7C15ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Adds key p[0..n) of object obj; false when the object has it already or
 * when out of memory. */
static bool add_key(struct scan *s, size_t obj, const unsigned char *p, size_t n)
{
	if ((s->used + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct key *t = calloc(cap, sizeof *t);
		if (t == NULL)
			return false;
		for (size_t k = 0; k < s->cap; k++) {
			if (s->keys[k].obj == 0)
				continue;
			size_t j = key_hash(s->keys[k].obj, s->keys[k].p, s->keys[k].n) & (cap - 1);
			while (t[j].obj != 0)
				j = (j + 1) & (cap - 1);
			t[j] = s->keys[k];
		}
		free(s->keys);
		s->keys = t;
		s->cap = cap;
	}
	size_t j = key_hash(obj, p, n) & (s->cap - 1);
	while (s->keys[j].obj != 0) {
		const struct key *k = &s->keys[j];
		if (k->obj == obj && k->n == n && memcmp(k->p, p, n) == 0)
			return false;
		j = (j + 1) & (s->cap - 1);
	}
	s->keys[j] = (struct key){.obj = obj, .p = p, .n = n};
	s->used++;
	return true;
}

/* Puts key p[0..n) on the key stack; false when out of memory. */
static bool push_key(struct scan *s, const unsigned char *p, size_t n)
{
	if (s->top == s->stack_cap) {
		size_t cap = s->stack_cap * 2;
		struct key *t = s->stack == s->local ? malloc(cap * sizeof *t)
						     : realloc(s->stack, cap * sizeof *t);
		if (t == NULL)
			return false;
		if (s->stack == s->local)
			memcpy(t, s->local, sizeof s->local);
		s->stack = t;
		s->stack_cap = cap;
	}
	s->stack[s->top++] = (struct key){.p = p, .n = n};
	return true;
}

/* Adds key p[0..n) to the open object obj whose keys begin at slot `from`
 * of the key stack: false when the object has it already or when out of
 * memory. Its first SMALL_OBJECT keys go on the stack and are compared there;
 * with the next one they all go into the hash set, and so do the later ones
 * (one more slot on the stack marks the object as hashed). */
static bool object_key(struct scan *s, size_t obj, size_t from, const unsigned char *p, size_t n)
{
	size_t had = s->top - from;
	if (had < SMALL_OBJECT) {
		for (size_t k = from; k < s->top; k++)
			if (s->stack[k].n == n && memcmp(s->stack[k].p, p, n) == 0)
				return false;
		return push_key(s, p, n);
	}
	if (had == SMALL_OBJECT) {
		for (size_t k = from; k < s->top; k++)
			if (!add_key(s, obj, s->stack[k].p, s->stack[k].n))
				return false;
		if (!push_key(s, NULL, 0))
			return false;
	}
	return add_key(s, obj, p, n);
}

/* The scan proper; spans as in jsonscan_object. */
static bool scan(struct scan *s, const char *const *names, size_t n, struct jsonscan_span *spans)
{
	char kind[JSONSCAN_MAX_DEPTH];   /* '{' or '[' for each open container */
	size_t obj[JSONSCAN_MAX_DEPTH];  /* an open object's number */
	size_t from[JSONSCAN_MAX_DEPTH]; /* where an open object's keys begin on the stack */
	size_t depth = 0;
	size_t member = SIZE_MAX; /* the named top-level member whose value is being read */
	bool plain;

	skip_ws(s);
value:
	if (s->i >= s->len)
		return false;
	switch (s->p[s->i]) {
	case '{':
	case '[': {
		char open = (char)s->p[s->i];
		if (depth == JSONSCAN_MAX_DEPTH)
			return false;
		kind[depth] = open;
		if (open == '{') {
			obj[depth] = ++s->objs;
			from[depth] = s->top;
		}
		depth++;
		s->i++;
		skip_ws(s);
		if (s->i < s->len && s->p[s->i] == (open == '{' ? '}' : ']')) {
			s->i++;
			depth--;
			goto done;
		}
		if (open == '{')
			goto key;
		goto value;
	}
	case '"':
		if (!scan_string(s, &plain))
			return false;
		goto done;
	case 't':
		if (!scan_word(s, "true"))
			return false;
		goto done;
	case 'f':
		if (!scan_word(s, "false"))
			return false;
		goto done;
	case 'n':
		if (!scan_word(s, "null"))
			return false;
		goto done;
	default:
		if (!scan_number(s))
			return false;
		goto done;
	}

key:
	if (s->i >= s->len || s->p[s->i] != '"')
		return false;
	{
		size_t k0 = s->i + 1;
		if (!scan_string(s, &plain) || !plain)
			return false; /* a key with an escape: jansson compares it decoded */
		const unsigned char *k = s->p + k0;
		size_t kn = s->i - 1 - k0;
		if (!object_key(s, obj[depth - 1], from[depth - 1], k, kn))
			return false;
		skip_ws(s);
		if (s->i >= s->len || s->p[s->i] != ':')
			return false;
		s->i++;
		skip_ws(s);
		if (depth == 1)
			for (size_t m = 0; m < n; m++)
				if (strlen(names[m]) == kn && memcmp(names[m], k, kn) == 0) {
					member = m;
					spans[m].off = s->i;
				}
	}
	goto value;

done:
	/* A value ended at s->i. */
	if (depth == 0) {
		skip_ws(s);
		return s->i == s->len;
	}
	if (depth == 1 && member != SIZE_MAX) {
		spans[member].len = s->i - spans[member].off;
		member = SIZE_MAX;
	}
	skip_ws(s);
	if (s->i >= s->len)
		return false;
	if (s->p[s->i] == ',') {
		s->i++;
		skip_ws(s);
		if (kind[depth - 1] == '{')
			goto key;
		goto value;
	}
	if (s->p[s->i] == (kind[depth - 1] == '{' ? '}' : ']')) {
		s->i++;
		depth--;
		if (kind[depth] == '{')
			s->top = from[depth];
		goto done;
	}
	return false;
}

bool jsonscan_object(const char *s, size_t len, const char *const *names, size_t n,
		     struct jsonscan_span *spans)
{
	struct scan sc = {.p = (const unsigned char *)s, .len = len};
	sc.stack = sc.local;
	sc.stack_cap = sizeof sc.local / sizeof sc.local[0];

	if (n > 0)
		memset(spans, 0, n * sizeof *spans);
	bool ok = scan(&sc, names, n, spans);
	free(sc.keys);
	if (sc.stack != sc.local)
		free(sc.stack);
	if (!ok && n > 0)
		memset(spans, 0, n * sizeof *spans);
	return ok;
}

char *jsonscan_append(const char *object, const char *members)
{
	size_t n = strlen(object), m = strlen(members);
	while (n > 0 && (object[n - 1] == ' ' || object[n - 1] == '\n'))
		n--;
	if (n < 2 || object[0] != '{' || object[n - 1] != '}')
		return NULL;
	bool empty = true; /* "{}", "{ }" */
	for (size_t i = 1; i < n - 1 && empty; i++)
		empty = object[i] == ' ' || object[i] == '\n';
	char *out = malloc(n + m + 2);
	if (out == NULL)
		return NULL;
	size_t k = n - 1;
	memcpy(out, object, k);
	if (!empty && m > 0)
		out[k++] = ',';
	memcpy(out + k, members, m);
	k += m;
	out[k++] = '}';
	out[k] = '\0';
	return out;
}
