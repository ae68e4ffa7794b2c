/* trace: W3C trace context (https://www.w3.org/TR/trace-context/) for runs
 * (README "Traces"): the traceparent and tracestate a caller sends, validated
 * strictly; span ids derived from what they name, so that a redelivery of the
 * same attempt carries the same span id; the traceparent header hookflow
 * sends. Pure functions, thread-safe. */
#ifndef HOOKFLOW_TRACE_H
#define HOOKFLOW_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_ID_HEX 32      /* a trace id: 16 bytes in lowercase hex */
#define TRACE_SPAN_HEX 16    /* a span id: 8 bytes in lowercase hex */
#define TRACE_STATE_MAX 512  /* the tracestate kept and passed on, at most */
#define TRACE_PARENT_LEN 55  /* "00-" trace "-" span "-" flags */
#define TRACE_HEADER_MAX 600 /* longest traceparent or tracestate value read */
#define TRACE_STATE_MAX_MEMBERS 32

/* A caller's trace context, as parsed from its headers. */
struct trace_parent {
	char trace_id[TRACE_ID_HEX + 1]; /* "" when there is none */
	char span_id[TRACE_SPAN_HEX + 1];
	char tracestate[TRACE_STATE_MAX + 1]; /* "" when none (or not valid) */
};

/* Parses a W3C traceparent `tp` (NULL: none) and tracestate `ts` (NULL:
 * none; several tracestate headers joined with ","). A traceparent is valid
 * when it is version 00 of exactly 55 characters, or a later version (not ff)
 * of at least 55 whose 56th character, if any, is '-', with lowercase hex
 * fields and a trace id and parent id that are not all zero; spaces and tabs
 * around it are ignored. The tracestate is kept only with a valid
 * traceparent, when it is a valid list of at most 32 members and 512 bytes;
 * otherwise it is dropped (the traceparent stays). Returns true and fills
 * `out` when the traceparent is valid; false with `out` empty otherwise: W3C
 * says an invalid traceparent is ignored and a new trace started, so this is
 * never an error. */
bool trace_parent_parse(const char *tp, const char *ts, struct trace_parent *out);

/* True when `s` is `n` lowercase hex digits, not all zero. */
bool trace_hex_id_valid(const char *s, size_t n);

/* A span id, as its 8 bytes and as 16 lowercase hex digits. */
struct trace_span {
	uint8_t raw[8];
	char hex[TRACE_SPAN_HEX + 1];
};

/* The span id derived from `key` (`len` bytes): the first 8 bytes of its
 * SHA-256, 0000000000000001 should they all be zero. */
void trace_derive(const char *key, size_t len, struct trace_span *out);

/* The span of attempt `attempt` of step `step` of generation `generation`
 * of run `run_id` in trace `trace_id` (32 hex digits): trace_derive of
 * "<trace_id>/<run_id>/<generation>/<step>/<attempt>". The engine's
 * hf_attempt_span (db/engine/01_helpers.sql) computes the same. */
void trace_attempt_span(const char *trace_id, const char *run_id, int generation, int step,
			int attempt, struct trace_span *out);

/* The span of generation `generation` of run `run_id` (the run span):
 * trace_derive of "<trace_id>/<run_id>/<generation>/run" (the engine's
 * hf_run_span). */
void trace_run_span(const char *trace_id, const char *run_id, int generation,
		    struct trace_span *out);

/* The span of delivery attempt `attempt` of the callback of generation
 * `generation` of run `run_id`: trace_derive of
 * "<trace_id>/<run_id>/<generation>/callback/<attempt>". */
void trace_callback_span(const char *trace_id, const char *run_id, int generation, int attempt,
			 struct trace_span *out);

/* A span derived from another one and a word ("wait/3"): trace_derive of
 * "<span hex>/<what>". */
void trace_child_span(const char *span_hex, const char *what, struct trace_span *out);

/* A span tied to span `s` without hashing (an attempt's settlement): its
 * bytes XOR a constant, never all zero. */
void trace_sibling_span(const struct trace_span *s, struct trace_span *out);

/* Reads a trace id written as 32 hex digits, or as a uuid's text (with
 * dashes, as PostgreSQL shows the column), into 32 lowercase hex digits.
 * False (out "") when `s` is NULL or neither, or the id is all zero. */
bool trace_id_read(const char *s, char out[TRACE_ID_HEX + 1]);

/* A random trace id / span id (OpenSSL's RAND_bytes; never all zero). */
void trace_random_trace_id(char out[TRACE_ID_HEX + 1]);
void trace_random_span_id(char out[TRACE_SPAN_HEX + 1]);

/* Writes the traceparent "00-<trace_id>-<span_id>-01" (sampled) into out. */
void trace_format_parent(const char *trace_id, const char *span_id, char out[TRACE_PARENT_LEN + 1]);

/* Decodes `n` bytes of lowercase hex `hex` into `out`. False when `hex` is
 * not 2n hex digits. */
bool trace_hex_decode(const char *hex, uint8_t *out, size_t n);

#endif
