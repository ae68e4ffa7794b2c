/* jsonscan: a fast validity check of JSON text that builds nothing, so that a
 * large value (a step's payload, a run's result) can be passed on as the text
 * it came as instead of being decoded and encoded again.
 *
 * It vouches only for what it can tell exactly as jansson would: it returns
 * true only for text that json_loadb(s, len, JSON_REJECT_DUPLICATES |
 * JSON_DECODE_ANY, ...) accepts. Whenever it is not sure (the text is not
 * valid JSON, or jansson would refuse it: \u0000 or half a surrogate pair;
 * or only a decoding could tell: an object key with an escape, an integer
 * of more than 18 digits, a large exponent, nesting deeper than
 * JSONSCAN_MAX_DEPTH) it returns false, and the caller asks
 * jansson, which also words the error. tests/unit/test_jsonscan.c holds it
 * against jansson on hand-written and random texts. */
#ifndef HOOKFLOW_JSONSCAN_H
#define HOOKFLOW_JSONSCAN_H

#include <stdbool.h>
#include <stddef.h>

#define JSONSCAN_MAX_DEPTH 256

/* Where one member's value is in the text: bytes [off, off + len). len is 0
 * when the member is absent. */
struct jsonscan_span {
	size_t off;
	size_t len;
};

/* Checks that s[0..len) (borrowed; valid UTF-8, as ids_utf8_valid checks,
 * need not be NUL-terminated) is one JSON value jansson accepts (above).
 * When it is an object, spans[i] is set to where the value of its top-level
 * member names[i] is (n names, borrowed; spans zeroed first). Returns false
 * when it cannot vouch for the text, or when out of memory. */
bool jsonscan_object(const char *s, size_t len, const char *const *names, size_t n,
		     struct jsonscan_span *spans);

/* `object` (borrowed), the JSON text of an object as a JSON writer wrote it
 * ('{' first, '}' last but for trailing spaces and newlines), with the
 * text `members` (borrowed: "\"name\":value", comma-separated) added as
 * its last members. Malloc'd, the caller's; NULL when out of memory or when
 * `object` is not so. Neither text is checked further. */
char *jsonscan_append(const char *object, const char *members);

#endif
