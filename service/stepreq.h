/* stepreq: the body of a step request (docs/webhook-protocol.md, section 1),
 * built from a claimed step. Pure: the dispatcher sends it, and `hookflow
 * check-webhook` builds its probes with it, so both send the same shape. */
#ifndef HOOKFLOW_STEPREQ_H
#define HOOKFLOW_STEPREQ_H

#include "db/jobs.h"

/* The JSON body of the step request of `j` (borrowed: run_id, workflow,
 * step, attempt, max_attempts, generation, payload and headers (JSON texts),
 * concurrency_key, and when set signal, children, last_heartbeat (JSON texts)
 * and group_id/group_key), with "deadline" at j->now_ms + j->timeout_ms and
 * "memo" {"url": "<public_url>/v1/runs/<run_id>", "token": `token`} (both
 * borrowed). Returns malloc'd NUL-terminated text, or NULL when out of
 * memory; its length in *len when len is not NULL. The body is built in one
 * allocation when j->payload_len is the payload's length (0 for a job built
 * by hand: then it is measured). */
char *stepreq_body(const struct claimed_job *j, const char *public_url, const char *token,
		   size_t *len);

#endif
