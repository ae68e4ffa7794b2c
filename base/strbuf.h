/* strbuf: a growable byte buffer for building bodies and texts. */
#ifndef HOOKFLOW_STRBUF_H
#define HOOKFLOW_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
	char *data; /* NUL-terminated when len > 0; owned */
	size_t len;
	size_t cap;
	bool oom; /* an allocation failed: contents are incomplete */
};

/* Makes room for `n` more bytes (and the NUL) in one allocation of exactly
 * that size, unless there is room already: a text whose size is known is
 * then built without growing. Sets b->oom when out of memory. */
void strbuf_reserve(struct strbuf *b, size_t n);

/* Appends `n` bytes of `s`. */
void strbuf_add(struct strbuf *b, const char *s, size_t n);

/* Appends a NUL-terminated string. */
void strbuf_puts(struct strbuf *b, const char *s);

/* Appends printf-style text. */
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends `s` as a quoted JSON string (escaping quotes, backslashes and
 * control characters; UTF-8 kept as is). */
void strbuf_json_string(struct strbuf *b, const char *s);

/* Takes the contents (malloc'd, NUL-terminated, never NULL unless oom) and
 * resets `b`. */
char *strbuf_take(struct strbuf *b);

/* Frees the contents and zeroes `b`. A zeroed struct is a no-op. */
void strbuf_cleanup(struct strbuf *b);

#endif
