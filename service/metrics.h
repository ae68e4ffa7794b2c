/* metrics: process-wide counters and histograms (lock-free atomics) and the
 * Prometheus text rendering of /metrics. Database-derived gauges (runs by
 * status, jobs by state) are passed in by the caller at render time. */
#ifndef HOOKFLOW_METRICS_H
#define HOOKFLOW_METRICS_H

#include <stdint.h>

#include "base/strbuf.h"
#include "db/jobs.h"

enum metrics_result {
	MR_CONTINUE,
	MR_SUCCEED,
	MR_FAIL,
	MR_CANCEL,
	MR_TRANSIENT,
	MR_PERMANENT,
	MR_CANCELLED,
	MR_PENDING, /* a step answered pending (it stays open) */
	MR__COUNT
};

void metrics_step_dispatched(void);
void metrics_callback_dispatched(void);
void metrics_step_result(enum metrics_result r);
/* The result a settlement of a step counts as (a completion's). */
enum metrics_result metrics_result_of(enum settle_result r);
void metrics_callback_result(enum metrics_result r);
void metrics_webhook_latency(int64_t ms);
void metrics_inflight_add(int delta);
void metrics_leases_expired(int n);
/* Counts a scheduler pass's fire times: started, skipped, missed. */
void metrics_schedules(int fired, int skipped, int missed);
void metrics_claims_lost(int n);

/* Why spans were dropped (service/otlp.c). */
enum metrics_span_drop { METRICS_SPAN_QUEUE_FULL, METRICS_SPAN_EXPORT_FAILED };
/* Counts spans the collector took, and spans dropped. */
void metrics_spans_exported(int64_t n);
void metrics_spans_dropped(enum metrics_span_drop why, int64_t n);

/* Appends the process metrics to `b` in Prometheus text format. */
void metrics_render(struct strbuf *b);

struct endpoints;

/* Appends the endpoint table's gauges and counters (allowance, calls in
 * flight, breaker state, error rate, calls, throttled, failures, breaker
 * openings per endpoint) to `b`; `eps` borrowed. */
void metrics_render_endpoints(struct strbuf *b, struct endpoints *eps);

#endif
