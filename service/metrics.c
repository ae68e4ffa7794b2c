/* metrics: atomic counters and the webhook latency histogram. */
#include "service/metrics.h"

#include "base/timefmt.h"
#include "service/endpoints.h"

#include <stdatomic.h>

static atomic_llong steps_dispatched;
static atomic_llong callbacks_dispatched;
static atomic_llong step_results[MR__COUNT];
static atomic_llong callback_results[MR__COUNT];
static atomic_llong inflight;
static atomic_llong leases_expired;
static atomic_llong schedule_counts[3]; /* fires, skips, misses */
static atomic_llong claims_lost;
static atomic_llong spans_exported;
static atomic_llong spans_dropped[2]; /* enum metrics_span_drop */

static const int64_t buckets_ms[] = {5,    10,   25,   50,    100,   250,  500,
				     1000, 2500, 5000, 10000, 30000, 60000};
#define NBUCKETS (sizeof buckets_ms / sizeof buckets_ms[0])
static atomic_llong latency_buckets[NBUCKETS];
static atomic_llong latency_count;
static atomic_llong latency_sum_ms;

static const char *const result_names[MR__COUNT] = {
	"continue",        "succeed",         "fail",      "cancel",
	"transient_error", "permanent_error", "cancelled", "pending"};

void metrics_step_dispatched(void)
{
	atomic_fetch_add(&steps_dispatched, 1);
}
void metrics_callback_dispatched(void)
{
	atomic_fetch_add(&callbacks_dispatched, 1);
}
void metrics_step_result(enum metrics_result r)
{
	atomic_fetch_add(&step_results[r], 1);
}
enum metrics_result metrics_result_of(enum settle_result r)
{
	switch (r) {
	case SETTLE_CONTINUE:
		return MR_CONTINUE;
	case SETTLE_SUCCEED:
		return MR_SUCCEED;
	case SETTLE_FAIL:
		return MR_FAIL;
	case SETTLE_CANCEL:
		return MR_CANCEL;
	case SETTLE_TRANSIENT:
		return MR_TRANSIENT;
	case SETTLE_PENDING:
		return MR_PENDING;
	case SETTLE_PERMANENT:
	case SETTLE_DELIVERED: /* a callback's, never a step's */
		break;
	}
	return MR_PERMANENT;
}

void metrics_callback_result(enum metrics_result r)
{
	atomic_fetch_add(&callback_results[r], 1);
}
void metrics_inflight_add(int delta)
{
	atomic_fetch_add(&inflight, delta);
}
void metrics_schedules(int fired, int skipped, int missed)
{
	atomic_fetch_add(&schedule_counts[0], fired);
	atomic_fetch_add(&schedule_counts[1], skipped);
	atomic_fetch_add(&schedule_counts[2], missed);
}

void metrics_leases_expired(int n)
{
	atomic_fetch_add(&leases_expired, n);
}
void metrics_claims_lost(int n)
{
	atomic_fetch_add(&claims_lost, n);
}

void metrics_webhook_latency(int64_t ms)
{
	for (size_t i = 0; i < NBUCKETS; i++)
		if (ms <= buckets_ms[i])
			atomic_fetch_add(&latency_buckets[i], 1);
	atomic_fetch_add(&latency_count, 1);
	atomic_fetch_add(&latency_sum_ms, ms);
}

void metrics_spans_exported(int64_t n)
{
	atomic_fetch_add(&spans_exported, n);
}

void metrics_spans_dropped(enum metrics_span_drop why, int64_t n)
{
	atomic_fetch_add(&spans_dropped[why], n);
}

void metrics_render(struct strbuf *b)
{
	strbuf_puts(b, "# HELP hookflow_steps_dispatched_total Step calls started.\n"
		       "# TYPE hookflow_steps_dispatched_total counter\n");
	strbuf_printf(b, "hookflow_steps_dispatched_total %lld\n", atomic_load(&steps_dispatched));
	strbuf_puts(b,
		    "# HELP hookflow_callbacks_dispatched_total Terminal callback calls started.\n"
		    "# TYPE hookflow_callbacks_dispatched_total counter\n");
	strbuf_printf(b, "hookflow_callbacks_dispatched_total %lld\n",
		      atomic_load(&callbacks_dispatched));
	strbuf_puts(
		b,
		"# HELP hookflow_step_results_total Settled step calls by outcome or error class.\n"
		"# TYPE hookflow_step_results_total counter\n");
	for (int i = 0; i < MR__COUNT; i++)
		strbuf_printf(b, "hookflow_step_results_total{result=\"%s\"} %lld\n",
			      result_names[i], atomic_load(&step_results[i]));
	strbuf_puts(b, "# HELP hookflow_callback_results_total Settled callback calls by class.\n"
		       "# TYPE hookflow_callback_results_total counter\n");
	for (int i = 0; i < MR__COUNT; i++) {
		if (i != MR_SUCCEED && i != MR_TRANSIENT && i != MR_PERMANENT)
			continue;
		strbuf_printf(b, "hookflow_callback_results_total{result=\"%s\"} %lld\n",
			      i == MR_SUCCEED ? "ok" : result_names[i],
			      atomic_load(&callback_results[i]));
	}
	strbuf_puts(b, "# HELP hookflow_webhook_duration_seconds Duration of webhook calls.\n"
		       "# TYPE hookflow_webhook_duration_seconds histogram\n");
	for (size_t i = 0; i < NBUCKETS; i++)
		strbuf_printf(b, "hookflow_webhook_duration_seconds_bucket{le=\"%g\"} %lld\n",
			      (double)buckets_ms[i] / 1000.0, atomic_load(&latency_buckets[i]));
	strbuf_printf(b, "hookflow_webhook_duration_seconds_bucket{le=\"+Inf\"} %lld\n",
		      atomic_load(&latency_count));
	strbuf_printf(b, "hookflow_webhook_duration_seconds_sum %.3f\n",
		      (double)atomic_load(&latency_sum_ms) / 1000.0);
	strbuf_printf(b, "hookflow_webhook_duration_seconds_count %lld\n",
		      atomic_load(&latency_count));
	strbuf_puts(b, "# HELP hookflow_inflight_calls Webhook calls in flight in this instance.\n"
		       "# TYPE hookflow_inflight_calls gauge\n");
	strbuf_printf(b, "hookflow_inflight_calls %lld\n", atomic_load(&inflight));
	strbuf_puts(
		b, "# HELP hookflow_leases_expired_total Claims reaped after their lease expired.\n"
		   "# TYPE hookflow_leases_expired_total counter\n");
	strbuf_printf(b, "hookflow_leases_expired_total %lld\n", atomic_load(&leases_expired));
	strbuf_puts(b, "# HELP hookflow_claims_lost_total Settlements refused because the claim "
		       "was lost.\n"
		       "# TYPE hookflow_claims_lost_total counter\n");
	strbuf_printf(b, "hookflow_claims_lost_total %lld\n", atomic_load(&claims_lost));
	strbuf_puts(b, "# HELP hookflow_spans_exported_total Spans the OTLP collector took "
		       "(HOOKFLOW_OTLP_ENDPOINT).\n"
		       "# TYPE hookflow_spans_exported_total counter\n");
	strbuf_printf(b, "hookflow_spans_exported_total %lld\n", atomic_load(&spans_exported));
	strbuf_puts(b, "# HELP hookflow_spans_dropped_total Spans not exported: the queue was "
		       "full, or the collector did not take them.\n"
		       "# TYPE hookflow_spans_dropped_total counter\n");
	strbuf_printf(b, "hookflow_spans_dropped_total{reason=\"queue_full\"} %lld\n",
		      atomic_load(&spans_dropped[METRICS_SPAN_QUEUE_FULL]));
	strbuf_printf(b, "hookflow_spans_dropped_total{reason=\"export_failed\"} %lld\n",
		      atomic_load(&spans_dropped[METRICS_SPAN_EXPORT_FAILED]));
	static const char *const sched[3][2] = {
		{"fires", "Schedule fire times that started a run, fired by this instance."},
		{"skips", "Schedule fire times skipped by the overlap policy, by this instance."},
		{"misses",
		 "Schedule fire times older than the catch-up window, by this instance."}};
	for (int i = 0; i < 3; i++)
		strbuf_printf(b,
			      "# HELP hookflow_schedule_%s_total %s\n"
			      "# TYPE hookflow_schedule_%s_total counter\n"
			      "hookflow_schedule_%s_total %lld\n",
			      sched[i][0], sched[i][1], sched[i][0], sched[i][0],
			      atomic_load(&schedule_counts[i]));
}

void metrics_render_endpoints(struct strbuf *b, struct endpoints *eps)
{
	struct endpoint_info *v = NULL;
	size_t n = 0;
	struct err e = {0};
	if (endpoints_snapshot(eps, timefmt_mono_ms(), &v, &n, &e)) {
		b->oom = true;
		return;
	}
	static const struct {
		const char *name, *type, *help;
	} series[] = {
		{"hookflow_endpoint_allowance", "gauge",
		 "Calls an endpoint may have in flight from this instance (the cap when not "
		 "limited)."},
		{"hookflow_endpoint_inflight", "gauge", "Calls in flight to an endpoint."},
		{"hookflow_endpoint_open", "gauge",
		 "Circuit breaker: 0 closed, 1 open, 2 half-open (one probe call)."},
		{"hookflow_endpoint_error_rate", "gauge",
		 "Share of an endpoint's calls that were throttled or failed in the last minute."},
		{"hookflow_endpoint_calls_total", "counter", "Calls to an endpoint that ended."},
		{"hookflow_endpoint_throttled_total", "counter", "Answers 429 or 503."},
		{"hookflow_endpoint_failures_total", "counter",
		 "Failures the breaker counts (503, connection errors, timeouts, other 5xx)."},
		{"hookflow_endpoint_breaker_opens_total", "counter", "Times the breaker opened."},
	};
	for (size_t s = 0; s < sizeof series / sizeof series[0]; s++) {
		strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", series[s].name, series[s].help,
			      series[s].name, series[s].type);
		for (size_t i = 0; i < n; i++) {
			const struct endpoint_info *ep = &v[i];
			double x = 0;
			switch (s) {
			case 0:
				x = ep->allowance;
				break;
			case 1:
				x = ep->inflight;
				break;
			case 2:
				x = ep->state == ENDPOINT_OPEN        ? 1
				    : ep->state == ENDPOINT_HALF_OPEN ? 2
								      : 0;
				break;
			case 3:
				x = ep->error_rate;
				break;
			case 4:
				x = (double)ep->calls;
				break;
			case 5:
				x = (double)ep->throttled;
				break;
			case 6:
				x = (double)ep->failures;
				break;
			default:
				x = (double)ep->breaker_opens;
				break;
			}
			/* origins are scheme://host:port: no quote, backslash or newline */
			strbuf_printf(b, "%s{endpoint=\"%s\"} %.6g\n", series[s].name, ep->origin,
				      x);
		}
	}
	endpoints_snapshot_free(v);
}
