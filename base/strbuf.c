/* strbuf: growable byte buffer. */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reallocates the buffer to `cap` bytes; false (and oom set) when out of
 * memory. */
static bool resize(struct strbuf *b, size_t cap)
{
	char *p = realloc(b->data, cap);
	if (p == NULL) {
		b->oom = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

static bool reserve(struct strbuf *b, size_t extra)
{
	if (b->oom)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	return resize(b, cap);
}

void strbuf_reserve(struct strbuf *b, size_t n)
{
	if (!b->oom && b->len + n + 1 > b->cap)
		resize(b, b->len + n + 1);
}

void strbuf_add(struct strbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void strbuf_puts(struct strbuf *b, const char *s)
{
	strbuf_add(b, s, strlen(s));
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void strbuf_json_string(struct strbuf *b, const char *s)
{
	strbuf_add(b, "\"", 1);
	const char *run = s;
	for (const char *p = s; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch >= 0x20 && ch != '"' && ch != '\\')
			continue;
		strbuf_add(b, run, (size_t)(p - run));
		char esc[8];
		switch (ch) {
		case '"':
			strbuf_add(b, "\\\"", 2);
			break;
		case '\\':
			strbuf_add(b, "\\\\", 2);
			break;
		case '\n':
			strbuf_add(b, "\\n", 2);
			break;
		case '\r':
			strbuf_add(b, "\\r", 2);
			break;
		case '\t':
			strbuf_add(b, "\\t", 2);
			break;
		default:
			snprintf(esc, sizeof esc, "\\u%04x", ch);
			strbuf_add(b, esc, 6);
		}
		run = p + 1;
	}
	strbuf_puts(b, run);
	strbuf_add(b, "\"", 1);
}

char *strbuf_take(struct strbuf *b)
{
	if (b->oom) {
		strbuf_cleanup(b);
		return NULL;
	}
	char *s = b->data ? b->data : strdup("");
	b->data = NULL;
	b->len = b->cap = 0;
	return s;
}

void strbuf_cleanup(struct strbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}
