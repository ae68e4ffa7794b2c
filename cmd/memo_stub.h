/* memo_stub: the memo endpoints of hookflow, served in memory by
 * `hookflow check-webhook` so that a webhook under test can use its run's
 * memo (the "memo" of a step request points here) and so that what it did
 * there can be seen: every memo call is recorded. Built on the service's own
 * HTTP server (service/http.c) with delivery tokens from a keyring of its
 * own: a call needs the token of its run (401 without one, 403 with another).
 * Nothing here touches hookflow's database.
 *
 * One stub per process (the handlers reach it through a file-level pointer).
 * Thread-safe: the server's threads record while the checker reads. */
#ifndef HOOKFLOW_CMD_MEMO_STUB_H
#define HOOKFLOW_CMD_MEMO_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/ids.h"
#include "base/token.h"

#define MEMO_STUB_MAX_KEY 128                   /* the part of a key kept in a record */
#define MEMO_STUB_MAX_OPS 4096                  /* calls recorded (and answered); more get 503 */
#define MEMO_STUB_MAX_BYTES (16L * 1024 * 1024) /* values held */

/* One memo call the webhook made. */
struct memo_op {
	char run_id[IDS_MAX_RUN_ID + 1];
	char method[8]; /* GET, PUT, DELETE */
	int scope;      /* -1: the run's scope; n >= 0: step n's */
	char key[MEMO_STUB_MAX_KEY + 1];
	int status; /* what the stub answered */
};

struct memo_stub;

/* Starts serving on `host` (borrowed: an IPv4 or IPv6 address) and `port`
 * (0: any free one). ERR_INVALID naming --memo-listen when the address is not
 * one or cannot be bound. On success *out is the stub (memo_stub_stop). */
enum err_code memo_stub_start(const char *host, int port, struct memo_stub **out, struct err *e);

/* The port the stub listens on. */
int memo_stub_port(const struct memo_stub *m);

/* The delivery token of (run_id, generation, step, attempt) valid until
 * `expires` (unix seconds) into `out`. False when it cannot be made. */
bool memo_stub_token(struct memo_stub *m, const char *run_id, int generation, int step, int attempt,
		     int64_t expires, char out[TOKEN_MAX]);

/* From now on every memo call of `run_id` (borrowed, copied) answers 503
 * unavailable, as hookflow does when its database is down. */
void memo_stub_fail_run(struct memo_stub *m, const char *run_id);

/* The calls recorded for `run_id` (borrowed) so far, oldest first: a malloc'd
 * array in *ops (the caller frees it; NULL when there is none) and its length
 * as the result. */
size_t memo_stub_ops(struct memo_stub *m, const char *run_id, struct memo_op **ops);

/* Stops serving and frees the stub. NULL is a no-op. */
void memo_stub_stop(struct memo_stub *m);

#endif
