/* err: the one error currency of hookflow.
 *
 * Every fallible function returns an enum err_code (ERR_OK == 0) and takes a
 * `struct err *` as its last argument. The first error set wins: later
 * err_set() calls on an already-failed struct change nothing, so a cleanup path
 * cannot overwrite the cause. One table maps each code to its wire name and
 * HTTP status (see err_code_name / err_code_http_status). */
#ifndef HOOKFLOW_ERR_H
#define HOOKFLOW_ERR_H

#include <stdbool.h>

enum err_code {
	ERR_OK = 0,
	ERR_INVALID,           /* invalid_argument, 400 */
	ERR_UNAUTHENTICATED,   /* 401 */
	ERR_FORBIDDEN,         /* 403 */
	ERR_NOT_FOUND,         /* 404 */
	ERR_METHOD,            /* method_not_allowed, 405 */
	ERR_CONFLICT,          /* conflict, 409 (generic) */
	ERR_INPUT_MISMATCH,    /* 409 */
	ERR_ALREADY_TERMINAL,  /* 409 */
	ERR_RUN_ACTIVE,        /* 409 */
	ERR_GROUP_MISMATCH,    /* 409 */
	ERR_GROUP_ACTIVE,      /* 409 */
	ERR_WORKFLOW_IN_USE,   /* 409 */
	ERR_ALREADY_COMPLETED, /* 409: a pending step's attempt was already completed */
	ERR_STALE_ATTEMPT,     /* 409: a delivery token of an older attempt or generation */
	ERR_RUN_CANCELLED,     /* 409: the run was cancelled in that attempt */
	ERR_TOO_LARGE,         /* payload_too_large, 413 */
	ERR_MEDIA_TYPE,        /* unsupported_media_type, 415 */
	ERR_INTERNAL,          /* 500 */
	ERR_UNAVAILABLE,       /* 503 */
	ERR_BUSY,              /* unavailable, 503: the database aborted a transaction for a
		   * serialization failure or a deadlock; retried by db_tx_run */
	ERR__COUNT
};

struct err {
	enum err_code code;
	char msg[256];
};

/* Sets `e` to `code` with a printf-style message unless `e` already holds an
 * error (the first error wins). The message is cut to fit and kept valid
 * UTF-8: a byte that does not belong to a well-formed sequence becomes '?'. `e` may be NULL. Returns the code now held by
 * `e` (or `code` when `e` is NULL), so `return err_set(e, ...)` reads well. */
enum err_code err_set(struct err *e, enum err_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Resets `e` to ERR_OK with an empty message. */
void err_clear(struct err *e);

/* The snake_case wire name of `code` ("invalid_argument", "input_mismatch"...).
 * Returns a static string. */
const char *err_code_name(enum err_code code);

/* The HTTP status that carries `code`. */
int err_code_http_status(enum err_code code);

#endif
