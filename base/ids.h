/* ids: identifier rules (run ids, group ids, workflow names, keys) and ULID
 * generation. Pure functions; ids_ulid_new is thread-safe. */
#ifndef HOOKFLOW_IDS_H
#define HOOKFLOW_IDS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define IDS_MAX_RUN_ID 128
#define IDS_MAX_NAME 128
#define IDS_MAX_KEY 512
#define IDS_MAX_CONCURRENCY_KEY 256
#define IDS_ULID_LEN 26

/* Checks a run id or group id: 1..128 bytes of [A-Za-z0-9_-]. On failure sets
 * ERR_INVALID with a message naming `field` and the reason ("must not be
 * empty", "exceeds maximum length of 128 bytes", "must contain only
 * [A-Za-z0-9_-]"). `s` is borrowed and need not be NUL-terminated. */
enum err_code ids_check_run_id(const char *field, const char *s, size_t len, struct err *e);

/* Checks a workflow name: 1..128 bytes of [A-Za-z0-9_.-]. Same error style. */
enum err_code ids_check_workflow_name(const char *field, const char *s, size_t len, struct err *e);

/* Checks a correlation key or KV key: 1..512 bytes of valid UTF-8 without NUL.
 * Same error style. */
enum err_code ids_check_key(const char *field, const char *s, size_t len, struct err *e);

/* Checks a run's flow-control key (concurrency_key): 1..256 bytes of valid
 * UTF-8 without control characters (U+0000..U+001F, U+007F..U+009F). Same
 * error style. */
enum err_code ids_check_concurrency_key(const char *field, const char *s, size_t len,
					struct err *e);

/* True when `s[0..len)` is well-formed UTF-8 (no overlongs, no surrogates, no
 * code points above U+10FFFF). */
bool ids_utf8_valid(const char *s, size_t len);

/* Writes a new ULID (26 Crockford base32 characters) and a NUL into `out`.
 * Within one process, ids are strictly increasing (monotonic ULID: the random
 * part is incremented when the millisecond repeats). Thread-safe. */
void ids_ulid_new(char out[IDS_ULID_LEN + 1]);

/* Writes the lowercase hex of `len` bytes of `bin` plus a NUL into `out`, which
 * must hold 2*len+1 bytes. */
void ids_hex(const unsigned char *bin, size_t len, char *out);

/* Writes a double-quoted, printable rendering of `s[0..len)` (borrowed, may be
 * NULL when len is 0) for error messages into `out` (`cap` >= 8 bytes, always
 * NUL-terminated): `"` and `\` are backslash-escaped, control bytes and bytes
 * of invalid UTF-8 are written as \xNN, valid UTF-8 is kept, and text that
 * does not fit is cut on a character boundary and ends in `..."`. */
void ids_quote(const char *s, size_t len, char *out, size_t cap);

#endif
