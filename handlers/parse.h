/* handlers/parse: the parsers of request bodies and query values, as pure
 * functions: no HTTP request, no database. Each handler reads its body
 * (http_req_json), calls its parser, then the database; the fuzz targets of
 * tests/fuzz call the parsers directly. Each parser lives in the file of its
 * resource (runs.c, workflows.c, groups.c, signals.c); the field helpers they
 * share are in handlers/common.h.
 *
 * Every parser takes a decoded JSON object (borrowed), returns ERR_OK or
 * ERR_INVALID with a message naming the field ("run_id: ..."), ERR_INTERNAL
 * when out of memory; the first error wins. Out-structs are caller-owned: zero
 * them first; their cleanup function frees what they own, after a failure too,
 * and is a no-op on a zeroed struct. */
#ifndef HOOKFLOW_HANDLERS_PARSE_H
#define HOOKFLOW_HANDLERS_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/ids.h"
#include "base/netpolicy.h"
#include "base/strbuf.h"
#include "db/run.h"
#include "db/workflow.h"

/* ---- POST /v1/runs (runs.c) ---------------------------------------------- */

/* The texts a parsed submission owns; struct run_submit points into it. */
struct run_submit_buf {
	char *input_text;            /* JSON of the input ("null" when absent) */
	char *headers_text;          /* JSON object of the headers, NULL when absent */
	char *kv_text;               /* JSON of the validated kv effects, NULL when none */
	char ulid[IDS_ULID_LEN + 1]; /* the generated run id when the body has none */
};

/* Validates submission `body` into `out` (every field set, -1 or NULL for
 * what is absent). Strings of `out` are borrowed from `body` or owned by `buf`,
 * so both must outlive `out`. A missing run_id gets a new ULID. `egress`
 * (borrowed) refuses a callback_url whose host is a forbidden IP address.
 * Rules (schema RunSubmit of openapi/openapi.yaml): only its keys; workflow
 * required; run_id, workflow, headers and kv as it describes them; priority
 * 0..2^31-1; max_attempts 1..1000; delay_ms 0..VERDICT_MAX_DELAY_MS; run_at
 * RFC 3339 and not with delay_ms; callback_url an http(s) URL;
 * concurrency_key as ids_check_concurrency_key. */
enum err_code runs_parse_submit(const json_t *body, const struct netpolicy *egress,
				struct run_submit *out, struct run_submit_buf *buf, struct err *e);

/* Frees what `buf` owns and zeroes it. */
void runs_submit_buf_cleanup(struct run_submit_buf *buf);

/* ---- POST /v1/runs/{id}/rerun (runs.c) ----------------------------------- */

struct run_rerun {
	int from_step;                /* 0 when absent */
	char *input_text;             /* malloc'd JSON of the new input; NULL: keep the input */
	unsigned char input_hash[32]; /* SHA-256 of its canonical JSON, when input_text */
};

/* Validates a rerun body ({"from_step": N, "input": J}, both optional; input
 * only with step 0) into `out`. `body` NULL means the request had none. */
enum err_code runs_parse_rerun(const json_t *body, struct run_rerun *out, struct err *e);

/* Frees what `r` owns and zeroes it. */
void runs_rerun_cleanup(struct run_rerun *r);

/* ---- POST /v1/runs:cancel (runs.c) --------------------------------------- */

struct run_cancel_filter {
	const char *workflow;       /* borrowed from the body; NULL: any */
	const char *group_id;       /* borrowed; NULL: any */
	const char *created_before; /* borrowed, RFC 3339; NULL: any */
	struct strbuf statuses;     /* Postgres array literal in .data; .data NULL: any */
};

/* Validates a bulk-cancel body ({"workflow", "status": [...], "group_id",
 * "created_before"}, at least one of them) into `out`. */
enum err_code runs_parse_cancel_many(const json_t *body, struct run_cancel_filter *out,
				     struct err *e);

/* Frees what `f` owns and zeroes it. */
void runs_cancel_filter_cleanup(struct run_cancel_filter *f);

/* Turns the comma-separated run statuses `in` ("pending,failed", the status
 * query parameter of GET /v1/runs) into the array literal "{pending,failed}"
 * appended to `out`, after checking each one. */
enum err_code runs_parse_statuses(const char *in, struct strbuf *out, struct err *e);

/* ---- PUT /v1/workflows/{name} (workflows.c) ------------------------------ */

/* Validates workflow body `body` into `w`, filling in the defaults of schema
 * WorkflowInput (openapi/openapi.yaml).
 * w->name must already be set to the (checked) name from the path; a "name"
 * in the body must equal it. Strings are borrowed from `body`. `egress`
 * refuses a url or callback_url whose host is a forbidden IP address. The
 * secret is write-only: absent sets w->keep_secret (the stored secret stays),
 * null sets w->secret NULL (signing off), a string must be a valid secret. */
enum err_code workflows_parse_body(const json_t *body, const struct netpolicy *egress,
				   struct workflow_def *w, struct err *e);

/* ---- POST /v1/workflows/{name}/secret (workflows.c) ---------------------- */

#define WORKFLOW_GRACE_MAX_MS 2592000000LL   /* 30 days */
#define WORKFLOW_GRACE_DEFAULT_MS 86400000LL /* 24 hours */

struct workflow_rotate {
	const char *secret; /* borrowed from the body; NULL: generate one */
	int64_t grace_ms;   /* 0..WORKFLOW_GRACE_MAX_MS */
};

/* Validates a rotation body ({"secret": "whsec_...", "grace_ms": N}, both
 * optional, secret null as absent; `body` NULL when the request had none)
 * into `out` (schema SecretRotation of openapi/openapi.yaml). */
enum err_code workflows_parse_rotate(const json_t *body, struct workflow_rotate *out,
				     struct err *e);

/* ---- POST /v1/workflows/{name}/pause and /resume (workflows.c) ----------- */

/* Validates a pause or resume body: none (`body` NULL) or an empty object;
 * any field is unknown. */
enum err_code workflows_parse_pause(const json_t *body, struct err *e);

/* ---- PUT /v1/groups/{id} (groups.c) -------------------------------------- */

struct group_put {
	const char *workflow;       /* borrowed from the body */
	int priority;               /* -1: the workflow's */
	int max_attempts;           /* -1: the workflow's */
	unsigned char manifest[32]; /* SHA-256 over the ordered (key, input, headers,
				     * concurrency_key when set) list */
	char *members_text;         /* malloc'd JSON array of members for db_group_submit:
				     * {key, run_id, input, input_hash, headers,
				     * concurrency_key (only when set)} */
};

/* Validates group body `body` for group `group_id` (already checked with
 * ids_check_run_id) into `out`: members as schema GroupSubmit of
 * openapi/openapi.yaml describes them (1..10000, unique keys, headers merged
 * over the group's), each member's run id derived from the group id and its
 * key. */
enum err_code groups_parse_put(const char *group_id, const json_t *body, struct group_put *out,
			       struct err *e);

/* Frees what `g` owns and zeroes it. */
void groups_put_cleanup(struct group_put *g);

/* ---- POST /v1/signals/{key} (signals.c) ---------------------------------- */

/* Validates a signal body ({"payload": J}; `body` NULL when the request had
 * none) and returns the payload's JSON text (malloc'd, "null" when absent) in
 * *payload, NULL on failure. */
enum err_code signals_parse_send(const json_t *body, char **payload, struct err *e);

#endif
