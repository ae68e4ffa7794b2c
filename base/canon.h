/* canon: canonical JSON (sorted keys, no insignificant white space, integral
 * reals written as integers) and its SHA-256, used to compare run inputs. */
#ifndef HOOKFLOW_CANON_H
#define HOOKFLOW_CANON_H

#include <jansson.h>
#include <stddef.h>

/* Returns a new malloc'd NUL-terminated canonical encoding of `v` (borrowed;
 * NULL is encoded as `null`), or NULL when out of memory. The caller frees it.
 * Rules: object keys sorted by byte order, no white space, strings with the
 * minimal JSON escaping (UTF-8 kept as is), integers in decimal, a real with
 * an integral value in [-2^53, 2^53] written as an integer (so 1.0 and 1
 * encode alike), other reals in the shortest of %.15g, %.16g and %.17g that
 * reads back as the same double. Control characters are escaped as \b \f \n
 * \r \t or \u00XX, `"` and `\` with a backslash; nothing else is escaped. */
char *canon_json_dumps(const json_t *v);

/* Writes the SHA-256 of canon_json_dumps(v) into `out`. Returns 0, or -1 when
 * out of memory. */
int canon_json_sha256(const json_t *v, unsigned char out[32]);

/* Writes the SHA-256 of `len` bytes of `data` into `out`. */
void canon_sha256(const void *data, size_t len, unsigned char out[32]);

#endif
