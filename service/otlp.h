/* otlp: exports hookflow's spans (README "Traces") to an OpenTelemetry
 * collector over OTLP/HTTP with protobuf bodies
 * (POST <HOOKFLOW_OTLP_ENDPOINT>/v1/traces), off the hot path.
 *
 * Threads: one exporter thread, started by otlp_start when
 * HOOKFLOW_OTLP_ENDPOINT is set. Any thread hands it finished spans with
 * otlp_emit, which copies the span into a bounded queue of preallocated
 * slots (HOOKFLOW_OTLP_QUEUE of them) under a mutex held for that copy
 * only, and never waits for the collector: when the queue is full the span
 * is dropped and counted (hookflow_spans_dropped_total{reason="queue_full"}).
 * A batch keeps its slots while it is being sent (the exporter encodes it
 * in place), so a slow collector fills the queue and spans are dropped.
 * The exporter sends a batch when OTLP_BATCH spans are queued or a second
 * after the first one came; a batch the collector refuses or does not answer
 * is tried again a bounded number of times, then dropped and counted
 * (reason="export_failed"). Spans sent: hookflow_spans_exported_total.
 *
 * The module is process-wide, like the metrics: while it is not started
 * otlp_enabled() is false and callers build no span at all. */
#ifndef HOOKFLOW_OTLP_H
#define HOOKFLOW_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "base/strbuf.h"
#include "base/trace.h"

#define OTLP_BATCH 512 /* spans in one export request, at most */

enum otlp_kind { OTLP_INTERNAL = 1, OTLP_SERVER = 2, OTLP_CLIENT = 3 };
enum otlp_status { OTLP_UNSET = 0, OTLP_OK = 1, OTLP_ERROR = 2 };

/* One finished span. Ids are raw bytes; strings are copied into the
 * struct; an empty string is an attribute left out, as is a number below 0
 * (step, attempt, generation) or 0 (http_status). */
struct otlp_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_span_id[8]; /* all zero: a root span */
	char name[16];             /* run, step, settle, wait, callback */
	enum otlp_kind kind;
	int64_t start_ns; /* unix time, nanoseconds */
	int64_t end_ns;
	enum otlp_status status;
	char status_msg[200];
	/* attributes */
	char run_id[129];      /* hookflow.run_id */
	char workflow[129];    /* hookflow.workflow */
	int step;              /* hookflow.step */
	int attempt;           /* hookflow.attempt */
	int generation;        /* hookflow.generation */
	char outcome[24];      /* hookflow.outcome */
	int http_status;       /* http.response.status_code */
	char error_type[40];   /* error.type */
	char wait_kind[16];    /* hookflow.wait (signal, children, delay) */
	char signal_state[16]; /* hookflow.signal.status (delivered, timeout) */
};

/* An otlp_span with every attribute left out. */
void otlp_span_init(struct otlp_span *s, const char *name, enum otlp_kind kind);

/* Copies `src` (NULL: "") into the field `dst` of `cap` bytes, cut to fit:
 * what spans are filled with (cheaper than snprintf on the hot path). */
void otlp_set(char *dst, size_t cap, const char *src);

/* Starts the exporter for `cfg` (borrowed, outlives it) when
 * cfg->otlp_endpoint is set; `instance` (copied) is the resource's
 * service.instance.id. A no-op otherwise. Call once, before the threads
 * that emit spans start. */
enum err_code otlp_start(const struct config *cfg, const char *instance, struct err *e);

/* True while the exporter runs: build spans only then. */
bool otlp_enabled(void);

/* Queues a copy of `s` (borrowed) for export; never blocks. A full queue
 * drops it (counted). A no-op when not enabled. Thread-safe. */
void otlp_emit(const struct otlp_span *s);

/* A span the engine reported (db/db.h's span sink): `json` (borrowed, `len`
 * bytes) is hf_note_run_spans' object ({"span": "run", ...}). Thread-safe. */
void otlp_engine_span(const char *json, size_t len);

/* Stops the exporter: what is queued is sent (one attempt per batch, within
 * about two seconds), the rest dropped and counted. Call after every thread
 * that emits spans has stopped. */
void otlp_stop(void);

/* Appends the ExportTraceServiceRequest of spans v[0..n) for resource
 * (service.name "hookflow", `instance`) to `b` (protobuf). Pure; exposed for
 * the unit tests. */
void otlp_encode(struct strbuf *b, const char *instance, const struct otlp_span *v, size_t n);

/* The URL spans are POSTed to: `endpoint` with "/v1/traces" appended (one
 * "/" between them), as the OTLP exporter specification says for a base
 * endpoint. Writes at most `cap` bytes into out; false when it does not fit. */
bool otlp_traces_url(const char *endpoint, char *out, size_t cap);

#endif
