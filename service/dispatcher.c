/* dispatcher: worker threads that claim, call, keep leases alive and settle.
 *
 * Each worker is a pair of threads, so that no database round trip ever
 * delays a webhook call's I/O (an answer that arrived in time must not time
 * out while its thread waits on PostgreSQL):
 *
 *  - the I/O thread loops on epoll: its eventfd (mailbox) and the sockets of
 *    its webhook calls (curl multi). It starts the calls the database thread
 *    claimed, aborts calls whose run was cancelled or whose claim was lost,
 *    and turns every completed call into a settlement item for the database
 *    thread. It never touches the database.
 *  - the database thread owns the worker's connection and runs cycles: one
 *    transaction (hf_cycle) that commits the pending settlements and claims
 *    as many jobs as there is room for, the steps those settlements queued
 *    included, so a step transition costs one commit and one round trip
 *    (replay records, when a workflow keeps them, commit just before). It
 *    renews every lease the worker holds in one statement when due. A cycle
 *    runs when there are settlements or when work may exist: NOTIFY (via the
 *    listener), a full claim batch, or the HOOKFLOW_POLL_MS safety timer;
 *    there is no polling per step.
 *
 * The two meet in the worker's mutex-guarded exchange (new jobs one way,
 * settlement items and renewal results the other). A settlement that fails
 * because the database is away is kept and retried; the lease decides who
 * owns the job meanwhile. */
#include "service/dispatcher.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/crypt.h"
#include "base/log.h"
#include "base/sig.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "base/trace.h"
#include "db/jobs.h"
#include "service/endpoints.h"
#include "service/keyring.h"
#include "service/metrics.h"
#include "service/otlp.h"
#include "service/stepreq.h"
#include "service/verdict.h"
#include "service/waiters.h"
#include "service/webhook.h"

#define CLAIM_BATCH 256
/* The most payload bytes one claim takes, at the last claim's average job
 * size (claim_batch_size): a claim's result and the jobs copied from it are
 * all held until the I/O thread has built their requests; with 100 KB
 * payloads a full batch made 50 MB of such transients at once, a fifth of
 * hookflow's peak memory (BENCHMARKS.md). A worker's first claim, which
 * knows no size yet, takes at most 32 jobs. A job's fields other than its
 * payload are counted as CLAIM_JOB_OVERHEAD bytes. */
#define CLAIM_BATCH_BYTES (8u << 20)
#define CLAIM_JOB_OVERHEAD 1024u
/* The most answer bytes one cycle settles (beyond one answer): a cycle's
 * statement carries its settlements' payloads, copied into the statement and
 * into libpq's buffer, which keeps the largest it sent; with 100 KB payloads
 * and hundreds of calls ending together, settling them all at once made the
 * peak of hookflow's memory (BENCHMARKS.md). The rest waits for the next
 * cycle, which follows at once. */
#define SETTLE_BATCH_BYTES (8u << 20)
#define SETTLE_RETRY_MS 500
#define DB_RETRY_MS 1000

struct inflight {
	struct claimed_job job;
	struct webhook_call *call;
	struct inflight *prev;
	struct inflight *next;
	uint64_t claim_seq; /* the database thread's claim counter when claimed */
	bool cancel_abort;  /* aborted because its run was cancelled */
	bool lost;          /* claim lost: aborted, not settled */
	bool shutdown;      /* aborted by a drain: released, not settled */
	/* The endpoint allowance the call counts in (NULL: none), and its token. */
	struct endpoints *eps;
	uint64_t ep_token;
	/* The attempt's span (README "Traces"): the run's trace ("" when it has
	 * none), the span id, the run's span (only when spans are exported),
	 * when the call started (unix ns; 0 unless spans are exported). The
	 * traceparent the call carries and the trace's bytes are made from
	 * them when needed, not kept for the whole call. */
	char trace_id[TRACE_ID_HEX + 1];
	struct trace_span span;
	struct trace_span run_span;
	int64_t start_ns;
};

/* The trace fields of a job's log lines. */
#define TRACE_KV "trace_id=%s span_id=%s"
#define TRACE_OF(f) (f)->trace_id, (f)->span.hex

/* A renewal's answer, for the I/O thread: the claims still held. */
struct renewal {
	uint64_t claim_seq; /* claims made up to this number were known to it */
	json_t *held;       /* object "s:<run_id>" / "c:<id>" -> cancel_requested */
	struct renewal *next;
};

struct worker {
	struct dispatcher *d;
	int index;
	char owner[128];
	int capacity;

	/* I/O thread only */
	pthread_t io_thread;
	bool io_started;
	int epfd;
	int evfd;
	struct webhook_client *wc;
	struct inflight *head;
	int ninflight;

	/* database thread only */
	pthread_t db_thread;
	bool db_started;
	struct db_conn *db;
	uint64_t claims; /* claim counter */
	int64_t next_renew;
	int64_t next_poll;
	int64_t db_retry_at;
	int64_t settle_retry_at;
	int64_t late_until;      /* HOOKFLOW_TEST_FAULT=settle_late: settlements held until then */
	struct settlements work; /* settlements being committed */
	struct claim_lane lane;  /* where the last claim stopped (fair share) */
	size_t job_bytes;        /* a job's bytes, on average, in the last claim that took any */

	/* the exchange, guarded by mu */
	pthread_mutex_t mu;
	pthread_cond_t db_cv;   /* wakes the database thread */
	struct inflight *to_io; /* claimed jobs for the I/O thread (a list) */
	struct inflight *to_io_tail;
	struct renewal *renewals;
	struct settlements out; /* ended calls, for the database thread */
	int outstanding;        /* jobs claimed and not yet completed */
	bool want_claim;
	int64_t reopen_at; /* claim again then: an endpoint opens (0: none) */
	bool stop;
	int grace_ms;
	bool io_done; /* the I/O thread finished: nothing more will come */
	char **cancels;
	int ncancels;
	int capcancels;
};

struct dispatcher {
	const struct config *cfg;
	atomic_bool refusing; /* a newer hookflow took the database: claim nothing */
	char *instance;
	struct keyring *keyring; /* signs delivery tokens */
	struct waiters *ws;      /* this process's long-polls; may be NULL */
	struct endpoints *eps;   /* allowance and breaker per endpoint (owned) */
	int nworkers;
	struct worker *workers;
};

/* Wakes the I/O thread. */
static void poke_io(struct worker *w)
{
	uint64_t one = 1;
	ssize_t r = write(w->evfd, &one, sizeof one);
	(void)r;
}

struct dispatcher *dispatcher_new(const struct config *cfg, const char *instance,
				  struct keyring *keyring, struct waiters *ws)
{
	struct dispatcher *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->cfg = cfg;
	d->instance = strdup(instance);
	d->keyring = keyring;
	d->ws = ws;
	d->nworkers = cfg->workers;
	d->workers = calloc((size_t)d->nworkers, sizeof *d->workers);
	struct endpoints_config ec = endpoints_config_default();
	ec.enabled = cfg->endpoint_control;
	ec.max_inflight = cfg->endpoint_max_inflight;
	ec.breaker_threshold = cfg->breaker_threshold;
	ec.breaker_window_ms = cfg->breaker_window_ms;
	ec.cooldown_ms = cfg->breaker_cooldown_ms;
	ec.cooldown_max_ms = cfg->breaker_cooldown_max_ms;
	struct err e = {0};
	d->eps = endpoints_new(&ec, &e);
	if (d->eps == NULL)
		log_error("dispatcher", "cannot create the endpoint table", "error=\"%s\"", e.msg);
	if (d->instance == NULL || d->workers == NULL || d->eps == NULL) {
		dispatcher_free(d);
		return NULL;
	}
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		w->d = d;
		w->index = i;
		w->epfd = -1;
		w->evfd = -1;
		pthread_mutex_init(&w->mu, NULL);
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->db_cv, &ca);
		pthread_condattr_destroy(&ca);
		snprintf(w->owner, sizeof w->owner, "%s/%d", instance, i);
		w->capacity = cfg->max_inflight / d->nworkers;
		w->job_bytes = CLAIM_BATCH_BYTES / 32; /* the first claim: 32 jobs at most */
		if (i < cfg->max_inflight % d->nworkers)
			w->capacity++;
	}
	return d;
}

/* ---- building requests ------------------------------------------------- */

static char *step_body(const struct dispatcher *d, const struct claimed_job *j, size_t *len)
{
	/* The delivery token lasts as long as the step may: its call's
	 * deadline, plus the lease (a call a dead instance held is not
	 * redelivered before), plus the time it may stay pending after
	 * (completed or kept alive with this token). */
	char token[TOKEN_MAX];
	keyring_make(d->keyring, j->run_id, j->generation, j->step, j->attempt,
		     (j->now_ms + j->timeout_ms + d->cfg->lease_ms + j->max_pending_ms) / 1000 + 1,
		     token);
	return stepreq_body(j, d->cfg->public_url, token, len);
}

/* ---- settlements ------------------------------------------------------ */

static void settle_base(const struct claimed_job *j, long http_status, struct settlement *s)
{
	memset(s, 0, sizeof *s);
	s->kind = j->kind;
	s->id = strdup(j->kind == JOB_STEP ? j->run_id : j->id);
	s->claim_token = j->claim_token;
	s->http_status = http_status > 0 ? (int)http_status : 0;
}

/* An error settlement of the job's call: transient (with its retry delay) or
 * permanent, with the verdict's error text. */
static void settle_error(const struct claimed_job *j, const struct verdict *v, struct settlement *s)
{
	bool transient = v->kind == VERDICT_TRANSIENT;
	s->result = transient ? SETTLE_TRANSIENT : SETTLE_PERMANENT;
	s->reason = strdup(v->error);
	if (transient)
		s->retry_delay_ms = verdict_retry_delay_ms(v, j->backoff_base_ms, j->backoff_max_ms,
							   j->attempt);
}

/* The settlement of a step call that ended with verdict `v`: it takes the
 * outcome's payload and result texts (outcome_settlement) and shares its
 * JSON. */
static void step_settlement(const struct worker *w, const struct inflight *f, struct verdict *v,
			    long http_status, struct settlement *s)
{
	const struct claimed_job *j = &f->job;
	settle_base(j, http_status, s);
	s->max_children = w->d->cfg->max_children;
	s->max_depth = w->d->cfg->max_child_depth;
	if (f->cancel_abort) {
		s->result = SETTLE_TRANSIENT;
		s->reason = strdup("call aborted: run cancelled");
		metrics_step_result(MR_CANCELLED);
		return;
	}
	if (v->kind != VERDICT_OK) {
		settle_error(j, v, s);
		metrics_step_result(v->kind == VERDICT_TRANSIENT ? MR_TRANSIENT : MR_PERMANENT);
		return;
	}
	/* Out of memory: the answer cannot be settled as it is; the step is
	 * retried like after any transient error. */
	if (!outcome_settlement(&v->outcome, j->max_pending_ms, s)) {
		settlement_cleanup(s);
		settle_base(j, http_status, s);
		s->result = SETTLE_TRANSIENT;
		s->reason = strdup("out of memory settling the answer");
		s->retry_delay_ms =
			verdict_backoff_ms(j->backoff_base_ms, j->backoff_max_ms, j->attempt);
		metrics_step_result(MR_TRANSIENT);
		return;
	}
	static const enum metrics_result by_kind[] = {
		[OUTCOME_CONTINUE] = MR_CONTINUE, [OUTCOME_SUCCEED] = MR_SUCCEED,
		[OUTCOME_FAIL] = MR_FAIL,         [OUTCOME_CANCEL] = MR_CANCEL,
		[OUTCOME_PENDING] = MR_PENDING,
	};
	metrics_step_result(by_kind[v->outcome.kind]);
}

static void callback_settlement(const struct inflight *f, const struct verdict *v, long http_status,
				struct settlement *s)
{
	settle_base(&f->job, http_status, s);
	if (v->kind == VERDICT_OK) {
		s->result = SETTLE_DELIVERED;
		metrics_callback_result(MR_SUCCEED);
		return;
	}
	settle_error(&f->job, v, s);
	metrics_callback_result(v->kind == VERDICT_TRANSIENT ? MR_TRANSIENT : MR_PERMANENT);
}

/* ---- spans (README "Traces") ------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The attempt's span id, when its run has a trace: a step
 * attempt's derived from (trace, run, generation, step, attempt), a
 * callback delivery's from (trace, run, generation, attempt), so a
 * redelivery of the same attempt carries the same ones; with spans
 * exported, the run's span too (their parent), derived from (trace, run,
 * generation). */
static void trace_attempt(struct inflight *f)
{
	const struct claimed_job *j = &f->job;
	if (!trace_id_read(j->trace_id, f->trace_id))
		return;
	if (j->kind == JOB_STEP)
		trace_attempt_span(f->trace_id, j->run_id, j->generation, j->step, j->attempt,
				   &f->span);
	else
		trace_callback_span(f->trace_id, j->run_id, j->generation, j->attempt, &f->span);
	if (otlp_enabled())
		trace_run_span(f->trace_id, j->run_id, j->generation, &f->run_span);
}

/* A span of the job of `f` (trace and parent: its run's), its attributes
 * set. */
static void job_span(const struct inflight *f, const char *name, enum otlp_kind kind,
		     struct otlp_span *s)
{
	const struct claimed_job *j = &f->job;
	otlp_span_init(s, name, kind);
	if (!trace_hex_decode(f->trace_id, s->trace_id, sizeof s->trace_id))
		memset(s->trace_id, 0, sizeof s->trace_id);
	memcpy(s->parent_span_id, f->run_span.raw, sizeof s->parent_span_id);
	otlp_set(s->run_id, sizeof s->run_id, j->run_id);
	otlp_set(s->workflow, sizeof s->workflow, j->workflow);
	s->generation = j->generation;
	if (j->kind == JOB_STEP)
		s->step = j->step;
	s->attempt = j->attempt;
}

/* error.type of a call that did not end well: a low-cardinality class. */
static const char *error_type(const struct inflight *f, const struct call_result *r,
			      const struct verdict *v, char buf[16])
{
	if (f->cancel_abort)
		return "cancelled";
	if (v->kind == VERDICT_OK)
		return "";
	if (r == NULL)
		return "not_started";
	if (r->refused != NULL)
		return "egress_refused";
	if (r->timed_out)
		return "timeout";
	if (r->too_large)
		return "response_too_large";
	if (r->transport_error)
		return "transport";
	if (r->status >= 200 && r->status < 300)
		return "invalid_response";
	snprintf(buf, 16, "%ld", r->status);
	return buf;
}

/* Emits the span of the call of `f` (`r` NULL: it never started), which
 * ended with verdict `v` and settlement `st`, and gives `st` the span of its
 * settlement, emitted once that commits (emit_settle_spans). */
static void emit_call_span(const struct inflight *f, const struct call_result *r,
			   const struct verdict *v, long http_status, struct settlement *st)
{
	if (!otlp_enabled() || f->trace_id[0] == '\0')
		return;
	const struct claimed_job *j = &f->job;
	struct otlp_span s;
	job_span(f, j->kind == JOB_STEP ? "step" : "callback", OTLP_CLIENT, &s);
	memcpy(s.span_id, f->span.raw, sizeof s.span_id);
	s.end_ns = now_ns();
	s.start_ns = f->start_ns > 0 ? f->start_ns : s.end_ns;
	otlp_set(s.outcome, sizeof s.outcome,
		 f->cancel_abort ? "cancelled" : db_settle_result_name(st->result));
	s.http_status = (int)http_status;
	char buf[16];
	otlp_set(s.error_type, sizeof s.error_type, error_type(f, r, v, buf));
	if (v->kind != VERDICT_OK && !f->cancel_abort) {
		s.status = OTLP_ERROR;
		otlp_set(s.status_msg, sizeof s.status_msg, v->error);
	}
	otlp_emit(&s);

	struct otlp_span *settle = malloc(sizeof *settle);
	if (settle == NULL)
		return;
	job_span(f, "settle", OTLP_INTERNAL, settle);
	memcpy(settle->parent_span_id, f->span.raw, sizeof settle->parent_span_id);
	struct trace_span sib;
	trace_sibling_span(&f->span, &sib);
	memcpy(settle->span_id, sib.raw, sizeof settle->span_id);
	memcpy(settle->outcome, s.outcome, sizeof settle->outcome);
	st->span = settle;
}

/* Emits the settle spans of the settlements v[0..n) that carry one, which
 * committed between start_ns and end_ns; refused[i] (may be NULL): v[i]'s
 * claim was lost, so it settled nothing. */
static void emit_settle_spans(struct settlement *v, size_t n, const bool *refused, int64_t start_ns,
			      int64_t end_ns)
{
	for (size_t i = 0; i < n; i++) {
		struct otlp_span *s = v[i].span;
		if (s == NULL)
			continue;
		s->start_ns = start_ns;
		s->end_ns = end_ns;
		if (refused != NULL && refused[i]) {
			otlp_set(s->outcome, sizeof s->outcome, "claim_lost");
			otlp_set(s->error_type, sizeof s->error_type, "claim_lost");
			s->status = OTLP_ERROR;
			snprintf(s->status_msg, sizeof s->status_msg,
				 "settlement refused: the claim was lost");
		}
		otlp_emit(s);
	}
}

/* Emits the span of the wait that ended before the first attempt of a
 * step (a signal, children, a delay), from when it began (run.waited_since:
 * the settlement that started it, or a submission due later) to when the
 * step came due. */
static void emit_wait_span(const struct inflight *f)
{
	const struct claimed_job *j = &f->job;
	if (!otlp_enabled() || j->kind != JOB_STEP || j->wait_from_ms <= 0 || j->due_ms <= 0 ||
	    j->due_ms < j->wait_from_ms || f->trace_id[0] == '\0')
		return;
	const char *kind = j->signal != NULL             ? "signal"
			   : j->children != NULL         ? "children"
			   : j->due_ms > j->wait_from_ms ? "delay"
							 : NULL;
	if (kind == NULL)
		return;
	struct otlp_span s;
	job_span(f, "wait", OTLP_INTERNAL, &s);
	s.attempt = -1;
	char what[32];
	snprintf(what, sizeof what, "wait/%d", j->step);
	struct trace_span w;
	trace_child_span(f->run_span.hex, what, &w);
	memcpy(s.span_id, w.raw, sizeof s.span_id);
	s.start_ns = j->wait_from_ms * 1000000;
	s.end_ns = j->due_ms * 1000000;
	otlp_set(s.wait_kind, sizeof s.wait_kind, kind);
	if (j->signal != NULL) {
		json_t *sig = json_loads(j->signal, 0, NULL);
		const char *st = json_string_value(json_object_get(sig, "status"));
		otlp_set(s.signal_state, sizeof s.signal_state, st);
		json_decref(sig);
	}
	otlp_emit(&s);
}

/* ---- the I/O thread ----------------------------------------------------- */

static void unlink_inflight(struct worker *w, struct inflight *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		w->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	f->prev = f->next = NULL;
	w->ninflight--;
	metrics_inflight_add(-1);
}

/* Ends the call's count in its endpoint's allowance, once: `r` is how the
 * call ended (ENDPOINT_IGNORED when it was not made or its answer does not
 * speak for the endpoint). */
static void end_endpoint(struct inflight *f, enum endpoint_result r, int64_t retry_after_ms,
			 const char *error)
{
	if (f->eps == NULL)
		return;
	endpoints_finished(f->eps, f->job.endpoint, f->ep_token, r, retry_after_ms, error,
			   timefmt_mono_ms());
	f->eps = NULL;
}

static void free_inflight(struct inflight *f)
{
	end_endpoint(f, ENDPOINT_IGNORED, -1, NULL);
	db_claimed_job_cleanup(&f->job);
	free(f);
}

/* Hands the settlements in `done` to the database thread (the list is left
 * empty); `ended` jobs no longer count against the worker's room. Each
 * settlement owns its JSON and the I/O thread keeps no reference to it, so
 * once the database thread takes it, it is its only user. A settlement that
 * cannot be handed over (out of memory) is dropped: its lease expires and the
 * job is delivered again. */
static void post_settlements(struct worker *w, struct settlements *done, int ended)
{
	pthread_mutex_lock(&w->mu);
	if (!settlements_take(&w->out, done)) {
		log_error("dispatcher", "out of memory: settlements dropped, will be redelivered",
			  "worker=%d count=%zu", w->index, done->n);
		settlements_clear(done);
	}
	w->outstanding -= ended;
	pthread_cond_signal(&w->db_cv);
	pthread_mutex_unlock(&w->mu);
}

/* Turns one completed call into a settlement in `done` (none when the claim
 * was lost or a drain released it). */
static void complete(struct worker *w, struct webhook_call *call, struct settlements *done)
{
	struct inflight *f = webhook_call_user(call);
	struct call_result r;
	webhook_call_result(call, &r);
	int64_t ms = webhook_call_duration_ms(call);
	if (!webhook_call_aborted(call))
		metrics_webhook_latency(ms);
	unlink_inflight(w, f);
	if (f->lost || f->shutdown) {
		log_info("dispatcher",
			 f->lost ? "call abandoned: claim lost" : "call interrupted by shutdown",
			 "run_id=%s job_id=%s step=%d attempt=%d " TRACE_KV, f->job.run_id,
			 f->job.id, f->job.step, f->job.attempt, TRACE_OF(f));
		webhook_call_free(call);
		free_inflight(f);
		return;
	}
	struct verdict v;
	verdict_from_call(&r, f->job.kind == JOB_STEP, timefmt_now_ms(), &v);
	/* A Retry-After pauses the endpoint as long as it delays this run's
	 * retry: capped at the workflow's retry_backoff max_ms (SPEC). */
	int64_t pause_ms = v.retry_after_ms >= 0
				   ? verdict_retry_delay_ms(&v, f->job.backoff_base_ms,
							    f->job.backoff_max_ms, f->job.attempt)
				   : -1;
	end_endpoint(f, f->cancel_abort ? ENDPOINT_IGNORED : endpoints_result_of_call(&r), pause_ms,
		     v.error);
	long status = r.transport_error ? 0 : r.status;
	struct settlement st;
	if (f->job.kind == JOB_STEP) {
		/* The replay record first: the settlement takes the texts. */
		json_t *replay = f->job.replay && v.kind == VERDICT_OK && !f->cancel_abort
					 ? outcome_to_json(&v.outcome)
					 : NULL;
		step_settlement(w, f, &v, status, &st);
		st.replay_outcome = replay;
	} else {
		callback_settlement(f, &v, status, &st);
	}
	st.size = r.body_len;
	emit_call_span(f, &r, &v, status, &st);
	enum settle_result res = st.result;
	log_debug("dispatcher", "call done",
		  "kind=%s run_id=%s job_id=%s step=%d attempt=%d http_status=%ld duration_ms=%lld "
		  "result=%s " TRACE_KV,
		  f->job.kind == JOB_STEP ? "step" : "callback", f->job.run_id, f->job.id,
		  f->job.step, f->job.attempt, status, (long long)ms, db_settle_result_name(res),
		  TRACE_OF(f));
	settlements_push(done, &st);
	verdict_cleanup(&v);
	webhook_call_free(call);
	free_inflight(f);
}

/* Frees what of a claimed job only its request read (the call holds its
 * own copies now): with thousands of calls in flight, every byte kept per
 * call counts. What the call's end reads stays: ids, step, attempt,
 * generation, backoff, endpoint, workflow (spans). */
static void drop_request_fields(struct claimed_job *j)
{
	char **fields[] = {&j->url,
			   &j->secret,
			   &j->secret_previous,
			   &j->headers,
			   &j->signal,
			   &j->group_id,
			   &j->group_key,
			   &j->replayed,
			   &j->concurrency_key,
			   &j->last_heartbeat,
			   &j->children,
			   &j->trace_id,
			   &j->tracestate};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		free(*fields[i]);
		*fields[i] = NULL;
	}
}

/* Starts the call of a claimed job; a job that cannot even start is settled
 * as a transient error at once. */
static void start_call(struct worker *w, struct inflight *f, struct settlements *done)
{
	struct claimed_job *j = &f->job;
	size_t body_len = 0;
	char *body = NULL;
	if (j->kind == JOB_STEP) {
		body = step_body(w->d, j, &body_len);
	} else {
		body = j->payload;
		body_len = j->payload_len;
		j->payload = NULL;
		if (body == NULL && (body = strdup("{}")) != NULL)
			body_len = 2;
	}
	/* The body holds the payload now: the job's copy is not read again,
	 * and with large payloads and many calls in flight it was a third of
	 * the memory. */
	free(j->payload);
	j->payload = NULL;
	/* The body lives as long as the call: at its length, not the capacity
	 * it was built with. */
	char *fit = body ? realloc(body, body_len + 1) : NULL;
	if (fit != NULL)
		body = fit;
	char traceparent[TRACE_PARENT_LEN + 1] = "";
	if (f->trace_id[0] != '\0')
		trace_format_parent(f->trace_id, f->span.hex, traceparent);
	struct webhook_request req = {
		.url = j->url,
		.body = body,
		.body_len = body_len,
		.msg_id = j->id,
		.secret = j->secret,
		.secret_previous = j->secret_previous,
		.timeout_ms = j->timeout_ms,
		.user = f,
		.traceparent = traceparent[0] ? traceparent : NULL,
		.tracestate = j->tracestate,
	};
	if (otlp_enabled())
		f->start_ns = now_ns();
	struct err e = {0};
	f->next = w->head;
	if (w->head)
		w->head->prev = f;
	w->head = f;
	w->ninflight++;
	metrics_inflight_add(1);
	if (body == NULL || webhook_call_start(w->wc, &req, &f->call, &e)) {
		unlink_inflight(w, f);
		struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = -1};
		snprintf(v.error, sizeof v.error, "call not started: %s",
			 body ? e.msg : "out of memory");
		struct settlement st;
		if (j->kind == JOB_STEP)
			step_settlement(w, f, &v, 0, &st);
		else
			callback_settlement(f, &v, 0, &st);
		emit_call_span(f, NULL, &v, 0, &st);
		settlements_push(done, &st);
		free_inflight(f);
	} else {
		drop_request_fields(j);
		if (j->kind == JOB_STEP)
			metrics_step_dispatched();
		else
			metrics_callback_dispatched();
	}
}

static void abort_call(struct worker *w, struct inflight *f)
{
	if (f->call != NULL)
		webhook_call_abort(w->wc, f->call);
}

/* Applies a renewal: claims it did not return were lost (someone else owns
 * the job now); runs whose cancel it reports are aborted. */
static void apply_renewal(struct worker *w, const struct renewal *rn)
{
	for (struct inflight *f = w->head; f != NULL; f = f->next) {
		if (f->claim_seq > rn->claim_seq || f->lost || f->shutdown)
			continue;
		char key[200];
		snprintf(key, sizeof key, "%s:%s", f->job.kind == JOB_STEP ? "s" : "c",
			 f->job.kind == JOB_STEP ? f->job.run_id : f->job.id);
		json_t *c = json_object_get(rn->held, key);
		if (c == NULL) {
			f->lost = true;
			log_warn("dispatcher", "claim lost, aborting call",
				 "run_id=%s job_id=%s step=%d attempt=%d " TRACE_KV, f->job.run_id,
				 f->job.id, f->job.step, f->job.attempt, TRACE_OF(f));
			abort_call(w, f);
		} else if (json_is_true(c) && f->job.kind == JOB_STEP && !f->cancel_abort) {
			f->cancel_abort = true;
			abort_call(w, f);
		}
	}
}

static void *io_main(void *arg)
{
	struct worker *w = arg;
	bool draining = false;
	int64_t drain_deadline = 0;
	struct epoll_event evs[256];
	struct settlements done = {0};

	for (;;) {
		/* Take what the other threads left in the exchange. */
		pthread_mutex_lock(&w->mu);
		struct inflight *fresh = w->to_io;
		w->to_io = w->to_io_tail = NULL;
		struct renewal *rn = w->renewals;
		w->renewals = NULL;
		char **cancels = w->cancels;
		int ncancels = w->ncancels;
		w->cancels = NULL;
		w->ncancels = w->capcancels = 0;
		bool stop = w->stop;
		int grace_ms = w->grace_ms;
		pthread_mutex_unlock(&w->mu);

		int64_t now = timefmt_mono_ms();
		if (stop && !draining) {
			draining = true;
			drain_deadline = now + grace_ms;
			log_info("dispatcher", "draining", "worker=%d inflight=%d grace_ms=%d",
				 w->index, w->ninflight, grace_ms);
		}
		int dropped = 0;
		while (fresh != NULL) {
			struct inflight *f = fresh;
			fresh = f->next;
			f->next = NULL;
			if (draining) {
				/* Claimed but never started: released with the claims. */
				free_inflight(f);
				dropped++;
				continue;
			}
			log_debug("dispatcher", "claimed",
				  "kind=%s run_id=%s job_id=%s step=%d attempt=%d " TRACE_KV,
				  f->job.kind == JOB_STEP ? "step" : "callback", f->job.run_id,
				  f->job.id, f->job.step, f->job.attempt, TRACE_OF(f));
			start_call(w, f, &done);
		}
		while (rn != NULL) {
			struct renewal *next = rn->next;
			apply_renewal(w, rn);
			json_decref(rn->held);
			free(rn);
			rn = next;
		}
		for (int i = 0; i < ncancels; i++) {
			for (struct inflight *f = w->head; f != NULL; f = f->next) {
				if (f->job.kind == JOB_STEP && !f->cancel_abort &&
				    strcmp(f->job.run_id, cancels[i]) == 0) {
					f->cancel_abort = true;
					log_info("dispatcher", "aborting call: run cancelled",
						 "run_id=%s job_id=%s step=%d attempt=%d " TRACE_KV,
						 f->job.run_id, f->job.id, f->job.step,
						 f->job.attempt, TRACE_OF(f));
					abort_call(w, f);
				}
			}
			free(cancels[i]);
		}
		free(cancels);
		if (draining && now >= drain_deadline) {
			for (struct inflight *f = w->head; f != NULL; f = f->next) {
				if (!f->shutdown) {
					f->shutdown = true;
					abort_call(w, f);
				}
			}
		}

		int ended = dropped;
		struct webhook_call *call;
		while ((call = webhook_client_take_done(w->wc)) != NULL) {
			complete(w, call, &done);
			ended++;
		}
		if (ended > 0 || done.n > 0)
			post_settlements(w, &done, ended);
		if (draining && w->ninflight == 0)
			break;

		long timeout = w->d->cfg->poll_ms;
		long t = webhook_client_timeout_ms(w->wc);
		if (t >= 0 && t < timeout)
			timeout = t;
		if (draining && drain_deadline - now < timeout)
			timeout = (long)(drain_deadline - now);
		if (timeout < 0)
			timeout = 0;
		int n = epoll_wait(w->epfd, evs, (int)(sizeof evs / sizeof evs[0]), (int)timeout);
		if (n < 0 && errno != EINTR) {
			log_error("dispatcher", "epoll_wait failed", "errno=%d", errno);
			n = 0;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == w->evfd) {
				uint64_t v;
				ssize_t r = read(w->evfd, &v, sizeof v);
				(void)r;
			} else {
				webhook_client_socket_event(w->wc, evs[i].data.fd, evs[i].events);
			}
		}
		if (webhook_client_timeout_ms(w->wc) == 0)
			webhook_client_timeout(w->wc);
	}
	settlements_cleanup(&done);
	pthread_mutex_lock(&w->mu);
	w->io_done = true;
	pthread_cond_signal(&w->db_cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- the database thread ------------------------------------------------ */

static bool ensure_db(struct worker *w)
{
	if (w->db != NULL)
		return true;
	int64_t now = timefmt_mono_ms();
	if (now < w->db_retry_at)
		return false;
	struct err e = {0};
	if (db_conn_open(w->d->cfg->database_url, &w->db, &e)) {
		w->db_retry_at = now + DB_RETRY_MS;
		log_warn("dispatcher", "database unavailable", "worker=%d error=\"%s\"", w->index,
			 e.msg);
		return false;
	}
	return true;
}

/* Drops the connection after it failed, so the next use reconnects. */
static void lost_db(struct worker *w, const struct err *e)
{
	if (e->code != ERR_UNAVAILABLE)
		return;
	db_conn_free(w->db);
	w->db = NULL;
	w->db_retry_at = timefmt_mono_ms() + DB_RETRY_MS;
}

/* After a batch failed for a reason other than the database being away,
 * settles each item on its own so one bad item cannot hold the others back.
 * An item that still fails is dropped and logged: its claim's lease expires
 * and the job is delivered again. Returns how many claims were lost. */
static int settle_one_by_one(struct worker *w)
{
	int lost = 0;
	for (size_t i = 0; i < w->work.n; i++) {
		struct err e = {0};
		int l = 0;
		int64_t t0 = w->work.v[i].span != NULL ? now_ns() : 0;
		if (db_jobs_settle(w->db, &w->work.v[i], 1, &l, &e)) {
			log_error("dispatcher",
				  "settlement dropped; the job will be delivered again",
				  "worker=%d id=%s error=\"%s\"", w->index, w->work.v[i].id, e.msg);
		} else if (t0 > 0) {
			bool refused = l > 0;
			emit_settle_spans(&w->work.v[i], 1, &refused, t0, now_ns());
		}
		lost += l;
	}
	return lost;
}

static void on_renewed(void *arg, enum job_kind kind, const char *id, bool cancel_requested)
{
	json_t *held = arg;
	char key[200];
	snprintf(key, sizeof key, "%s:%s", kind == JOB_STEP ? "s" : "c", id);
	json_object_set_new(held, key, json_boolean(cancel_requested));
}

/* Extends every lease of this worker and passes the answer to the I/O
 * thread. */
static void renew(struct worker *w, bool any_outstanding)
{
	int64_t now = timefmt_mono_ms();
	if (now < w->next_renew)
		return;
	w->next_renew = now + w->d->cfg->lease_ms / 3;
	if (!any_outstanding || !ensure_db(w))
		return;
	struct renewal *rn = calloc(1, sizeof *rn);
	if (rn == NULL)
		return;
	rn->claim_seq = w->claims;
	rn->held = json_object();
	struct err e = {0};
	if (db_jobs_renew(w->db, w->owner, w->d->cfg->lease_ms, on_renewed, rn->held, &e)) {
		log_warn("dispatcher", "lease renewal failed", "worker=%d error=\"%s\"", w->index,
			 e.msg);
		w->next_renew = now + 1000;
		lost_db(w, &e);
		json_decref(rn->held);
		free(rn);
		return;
	}
	pthread_mutex_lock(&w->mu);
	rn->next = w->renewals;
	w->renewals = rn;
	pthread_mutex_unlock(&w->mu);
	poke_io(w);
}

/* Settles a claimed step from its replay record without calling the webhook,
 * with a delay or signal timeout shortened by the record's age. Returns false
 * when the record cannot be used (the webhook is called instead). */
static bool replay(struct worker *w, struct inflight *f)
{
	json_t *rec = db_json_parse(f->job.replayed, strlen(f->job.replayed));
	json_t *o = json_object_get(rec, "outcome");
	int64_t age = json_integer_value(json_object_get(rec, "age_ms"));
	struct verdict v = {.kind = VERDICT_OK, .retry_after_ms = -1};
	struct err e = {0};
	bool ok = o != NULL && outcome_from_json(o, &v.outcome, &e) == ERR_OK;
	json_decref(rec);
	if (!ok) {
		log_warn("dispatcher", "unusable replay record", "run_id=%s step=%d error=\"%s\"",
			 f->job.run_id, f->job.step, e.msg);
		return false;
	}
	if (age < 0)
		age = 0;
	if (v.outcome.trigger == TRIGGER_AFTER)
		v.outcome.delay_ms = v.outcome.delay_ms > age ? v.outcome.delay_ms - age : 0;
	if (v.outcome.trigger == TRIGGER_SIGNAL)
		v.outcome.timeout_ms = v.outcome.timeout_ms > age ? v.outcome.timeout_ms - age : 0;
	json_t *wait_to = json_object_get(v.outcome.wait_children, "timeout_ms");
	if (json_is_integer(wait_to)) {
		json_int_t t = json_integer_value(wait_to);
		json_integer_set(wait_to, t > age ? t - age : 0);
	}
	log_info("dispatcher", "replaying stored step outcome",
		 "run_id=%s job_id=%s step=%d attempt=%d age_ms=%lld " TRACE_KV, f->job.run_id,
		 f->job.id, f->job.step, f->job.attempt, (long long)age, TRACE_OF(f));
	struct settlement st;
	step_settlement(w, f, &v, 0, &st);
	settlements_push(&w->work, &st);
	verdict_cleanup(&v);
	return true;
}

/* Secrets are stored sealed when HOOKFLOW_ENCRYPTION_KEY is set: the
 * claimed job's are opened here, the one place a stored secret is read for
 * use. A secret that does not open fails the call as a transient error (the
 * key was checked at start-up, so this is a changed database). Returns true
 * when the job was settled so. */
static bool reveal_secrets(struct worker *w, struct inflight *f)
{
	char **secrets[2] = {&f->job.secret, &f->job.secret_previous};
	struct err e = {0};
	for (int i = 0; i < 2 && e.code == ERR_OK; i++) {
		char *plain = NULL;
		if (!crypt_is_sealed(*secrets[i]) ||
		    crypt_reveal(config_encryption_key(w->d->cfg), *secrets[i], &plain, &e))
			continue;
		free(*secrets[i]);
		*secrets[i] = plain;
	}
	if (e.code == ERR_OK)
		return false;
	log_error("dispatcher", "cannot open the workflow's sealed secret",
		  "run_id=%s error=\"%s\"", f->job.run_id, e.msg);
	struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = -1};
	snprintf(v.error, sizeof v.error, "call not started: %s", e.msg);
	struct settlement st;
	if (f->job.kind == JOB_STEP)
		step_settlement(w, f, &v, 0, &st);
	else
		callback_settlement(f, &v, 0, &st);
	settlements_push(&w->work, &st);
	return true;
}

/* Hands claimed jobs to the I/O thread; replays and claims after a cancel
 * are settled here without a call. Takes ownership of `jobs`. */
static void dispatch(struct worker *w, struct claimed_job *jobs, int n)
{
	struct inflight *list = NULL, *tail = NULL;
	int started = 0;
	for (int i = 0; i < n; i++) {
		struct inflight *f = calloc(1, sizeof *f);
		if (f == NULL) {
			db_claimed_job_cleanup(&jobs[i]);
			continue; /* its lease will expire and it will be delivered again */
		}
		f->job = jobs[i];
		f->claim_seq = ++w->claims;
		trace_attempt(f);
		emit_wait_span(f);
		if (f->job.kind == JOB_STEP && f->job.replayed != NULL &&
		    !f->job.cancel_requested && replay(w, f)) {
			free_inflight(f);
			continue;
		}
		if (f->job.kind == JOB_STEP && f->job.cancel_requested) {
			/* Claimed after a cancel was recorded: settle cancelled, no call. */
			f->cancel_abort = true;
			struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = -1};
			struct settlement st;
			step_settlement(w, f, &v, 0, &st);
			settlements_push(&w->work, &st);
			free_inflight(f);
			continue;
		}
		if (reveal_secrets(w, f)) {
			free_inflight(f);
			continue;
		}
		if (f->job.kind == JOB_STEP && f->job.endpoint != NULL) {
			struct err e = {0};
			if (endpoints_started(w->d->eps, f->job.endpoint, 1, timefmt_mono_ms(),
					      &f->ep_token, &e) == ERR_OK)
				f->eps = w->d->eps;
		}
		if (tail)
			tail->next = f;
		else
			list = f;
		tail = f;
		started++;
	}
	free(jobs);
	if (list != NULL) {
		pthread_mutex_lock(&w->mu);
		if (w->to_io_tail)
			w->to_io_tail->next = list;
		else
			w->to_io = list;
		w->to_io_tail = tail;
		w->outstanding += started;
		pthread_mutex_unlock(&w->mu);
		poke_io(w);
	}
}

static void note_lost(struct worker *w, int lost)
{
	if (lost <= 0)
		return;
	metrics_claims_lost(lost);
	log_warn("dispatcher", "settlements refused: claim lost", "worker=%d count=%d", w->index,
		 lost);
}

static bool work_pending(const struct worker *w)
{
	return w->work.n > 0;
}

/* Whether the worker holds claims to keep alive: calls not yet ended, and
 * ended ones whose settlements wait for a cycle (in the work list, or in
 * the exchange behind a bounded cycle). Called with w->mu held. */
static bool holds_claims(const struct worker *w)
{
	return w->outstanding > 0 || w->out.n > 0 || work_pending(w);
}

/* The jobs the worker may claim now: its capacity less the jobs it holds,
 * calls in flight and ended calls whose settlements wait in the exchange
 * (each holds its answer's payload until it is settled; counted only as
 * calls, a backlog of settlements behind bounded cycles grew without
 * bound). Settlements in the work list are settled by the next cycle before
 * it claims: cycle() counts them when it cannot settle them. Called with
 * w->mu held. */
static int room_of(const struct worker *w)
{
	return w->capacity - w->outstanding - (int)w->out.n;
}

/* Stores the replay records of the pending settlements (those that carry
 * one), before the settlements they describe commit, so a crash in between
 * replays the answer instead of calling again. */
static enum err_code store_outputs(struct worker *w, struct err *e)
{
	bool any = false;
	for (size_t i = 0; i < w->work.n && !any; i++)
		any = w->work.v[i].replay_outcome != NULL;
	if (!any || db_jobs_store_outputs(w->db, w->work.v, w->work.n, e))
		return e->code;
	for (size_t i = 0; i < w->work.n; i++) {
		json_decref(w->work.v[i].replay_outcome);
		w->work.v[i].replay_outcome = NULL;
	}
	return ERR_OK;
}

/* The room of the endpoints that limit calls now, for the claim: JSON text
 * {"<endpoint>": n} (malloc'd), or NULL when none does. Notes in
 * w->reopen_at when an endpoint with no room opens again by itself (a
 * Retry-After pause or a breaker's cool-down ending), so the claim is tried
 * again then. */
static char *endpoint_rooms(struct worker *w)
{
	struct endpoint_room *v = NULL;
	size_t n = 0;
	struct err e = {0};
	int64_t now = timefmt_mono_ms();
	if (endpoints_limited(w->d->eps, now, &v, &n, &e) || n == 0)
		return NULL;
	json_t *o = json_object();
	int64_t reopen = 0;
	for (size_t i = 0; o != NULL && i < n; i++) {
		json_object_set_new(o, v[i].origin, json_integer(v[i].room));
		if (v[i].reopen_ms > 0 && (reopen == 0 || v[i].reopen_ms < reopen))
			reopen = v[i].reopen_ms;
	}
	free(v);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	pthread_mutex_lock(&w->mu);
	if (reopen > 0 && (w->reopen_at == 0 || reopen < w->reopen_at))
		w->reopen_at = reopen;
	pthread_mutex_unlock(&w->mu);
	return text;
}

/* One cycle in one transaction: commits the settlements taken from the
 * exchange and claims up to `room` jobs (0: none), which includes the steps
 * the settlement just queued, and hands them to the I/O thread. Returns true
 * when work may be waiting: the claim batch was full, or the database was
 * away or busy (the claim is retried later). Settlements that fail because
 * the database is away or busy stay in the work list for a retry; a busy
 * database keeps its connection. */
static bool cycle(struct worker *w, int room)
{
	bool settling = work_pending(w) && timefmt_mono_ms() >= w->settle_retry_at;
	if (settling && w->d->cfg->test_fault != NULL &&
	    strcmp(w->d->cfg->test_fault, "settle_late") == 0) {
		/* Settlements wait 2 s before they are settled, claims go on. */
		int64_t now = timefmt_mono_ms();
		if (w->late_until == 0)
			w->late_until = now + 2000;
		if (now < w->late_until) {
			w->settle_retry_at = w->late_until;
			settling = false;
		} else {
			w->late_until = 0;
		}
	}
	if (!settling)
		room -= (int)w->work.n; /* they hold their jobs' room until settled */
	if (!settling && room <= 0)
		return false;
	if (!ensure_db(w))
		return room > 0; /* claim once it is back (ensure_db paces the retries) */
	struct err e = {0};
	if (settling && store_outputs(w, &e)) {
		log_warn("dispatcher", "storing replay records failed, will retry",
			 "worker=%d error=\"%s\"", w->index, e.msg);
		w->settle_retry_at = timefmt_mono_ms() + SETTLE_RETRY_MS;
		lost_db(w, &e);
		return false;
	}
	if (settling && w->d->cfg->test_fault != NULL &&
	    strcmp(w->d->cfg->test_fault, "exit_before_settle") == 0) {
		for (size_t i = 0; i < w->work.n; i++) {
			if (w->work.v[i].kind == JOB_STEP) {
				log_warn("dispatcher", "test fault: exiting before settlement",
					 NULL);
				_exit(99);
			}
		}
	}
	int want = claim_batch_size(room, CLAIM_BATCH, w->job_bytes, CLAIM_BATCH_BYTES);
	struct claimed_job *jobs = NULL;
	int n = 0, lost = 0;
	size_t nsettle = settling ? w->work.n : 0;
	char *rooms = want > 0 ? endpoint_rooms(w) : NULL;
	/* With spans exported, the settlements' settle spans cover this
	 * transaction and say which ones were refused. */
	bool *refused = nsettle > 0 && otlp_enabled() ? calloc(nsettle, sizeof *refused) : NULL;
	/* The runs it ends: their long-polls here are answered at once. */
	bool *ended = nsettle > 0 && w->d->ws != NULL ? calloc(nsettle, sizeof *ended) : NULL;
	int64_t t0 = refused != NULL ? now_ns() : 0;
	enum err_code rc =
		db_jobs_cycle(w->db, w->work.v, nsettle, refused, ended, w->owner, want,
			      w->d->cfg->lease_ms, &w->lane, rooms, &jobs, &n, &lost, &e);
	free(rooms);
	if (rc == ERR_OK && refused != NULL)
		emit_settle_spans(w->work.v, nsettle, refused, t0, now_ns());
	for (size_t i = 0; rc == ERR_OK && ended != NULL && i < nsettle; i++)
		if (ended[i])
			waiters_notify(w->d->ws, w->work.v[i].id);
	free(refused);
	free(ended);
	if (rc == ERR_UNAVAILABLE || rc == ERR_BUSY) {
		log_warn("dispatcher", "cycle failed, will retry",
			 "worker=%d settlements=%zu error=\"%s\"", w->index, nsettle, e.msg);
		if (settling)
			w->settle_retry_at = timefmt_mono_ms() + SETTLE_RETRY_MS;
		lost_db(w, &e);
		return want > 0;
	}
	if (rc != ERR_OK) {
		log_warn("dispatcher", "cycle failed", "worker=%d error=\"%s\"", w->index, e.msg);
		if (!settling)
			return false;
		/* One bad settlement must not hold back the others, nor the
		 * claims: settle each on its own, then claim on the next cycle. */
		lost = settle_one_by_one(w);
		settlements_clear(&w->work);
		note_lost(w, lost);
		return want > 0;
	}
	if (settling)
		settlements_clear(&w->work);
	note_lost(w, lost);
	if (n > 0) {
		size_t bytes = 0;
		for (int i = 0; i < n; i++)
			bytes += jobs[i].payload_len + CLAIM_JOB_OVERHEAD;
		w->job_bytes = bytes / (size_t)n;
	}
	dispatch(w, jobs, n);
	return want > 0 && n == want;
}

/* Moves the settlements of the exchange into the work list, up to a
 * cycle's worth of answer bytes (SETTLE_BATCH_BYTES). */
static void take_settlements(struct worker *w)
{
	if (!settlements_take_upto(&w->work, &w->out, SETTLE_BATCH_BYTES))
		log_error("dispatcher", "out of memory taking settlements, will retry",
			  "worker=%d count=%zu", w->index, w->out.n);
}

static void *db_main(void *arg)
{
	struct worker *w = arg;
	const struct config *cfg = w->d->cfg;
	w->next_poll = timefmt_mono_ms() + cfg->poll_ms;
	for (;;) {
		int64_t now = timefmt_mono_ms();
		pthread_mutex_lock(&w->mu);
		for (;;) {
			take_settlements(w);
			bool stopping = w->stop;
			int room = room_of(w);
			bool claimable = !stopping && !atomic_load(&w->d->refusing) &&
					 w->want_claim && room > 0 &&
					 (w->db != NULL || now >= w->db_retry_at);
			bool settle = work_pending(w) && now >= w->settle_retry_at;
			bool renew_due = holds_claims(w) && now >= w->next_renew;
			bool poll_due = !stopping && now >= w->next_poll;
			if (w->reopen_at > 0 && now >= w->reopen_at) {
				w->reopen_at = 0;
				w->want_claim = true;
				continue;
			}
			if (claimable || settle || renew_due || poll_due ||
			    (stopping && w->io_done && !work_pending(w)) ||
			    (stopping && w->io_done && w->db == NULL && now >= w->db_retry_at))
				break;
			/* Sleep until signalled or the next timer. */
			int64_t wake = w->next_poll;
			if (holds_claims(w) && w->next_renew < wake)
				wake = w->next_renew;
			if (work_pending(w) && w->settle_retry_at < wake)
				wake = w->settle_retry_at;
			if (w->db == NULL && w->db_retry_at < wake)
				wake = w->db_retry_at;
			if (w->reopen_at > 0 && w->reopen_at < wake)
				wake = w->reopen_at;
			if (stopping && (wake > now + 1000 || wake < now))
				wake = now + 1000;
			struct timespec ts = {.tv_sec = (time_t)(wake / 1000),
					      .tv_nsec = (long)(wake % 1000) * 1000000L};
			pthread_cond_timedwait(&w->db_cv, &w->mu, &ts);
			now = timefmt_mono_ms();
		}
		bool stopping = w->stop;
		bool io_done = w->io_done;
		bool any_outstanding = holds_claims(w);
		int room = room_of(w);
		if (now >= w->next_poll) {
			w->next_poll = now + cfg->poll_ms;
			w->want_claim = !stopping;
		}
		/* The wake is consumed only when there is room to act on it; a
		 * wake that arrives during the claim sets it again. */
		bool want = w->want_claim && !stopping && room > 0;
		if (want)
			w->want_claim = false;
		pthread_mutex_unlock(&w->mu);

		/* Every settlement claims too: the steps it queues are taken in
		 * the same transaction (hf_cycle wakes the others only when the
		 * claim was full). */
		bool claiming = !stopping && !atomic_load(&w->d->refusing);
		bool again = cycle(w, (want || work_pending(w)) && claiming ? room : 0);
		renew(w, any_outstanding);
		if (again) {
			pthread_mutex_lock(&w->mu);
			if (!w->stop)
				w->want_claim = true;
			pthread_mutex_unlock(&w->mu);
		}
		if (stopping && io_done) {
			pthread_mutex_lock(&w->mu);
			take_settlements(w);
			pthread_mutex_unlock(&w->mu);
			cycle(w, 0);
			pthread_mutex_lock(&w->mu);
			bool left = w->out.n > 0;
			pthread_mutex_unlock(&w->mu);
			if ((!work_pending(w) && !left) || w->db == NULL)
				break;
		}
	}

	/* Claims this worker could not settle go back to the queue now rather
	 * than after their lease expires. */
	if (ensure_db(w)) {
		struct err e = {0};
		int n = 0;
		if (db_jobs_reap(w->db, w->owner, 100000, &n, &e))
			log_warn("dispatcher", "could not release claims", "worker=%d error=\"%s\"",
				 w->index, e.msg);
		else if (n > 0)
			log_info("dispatcher", "released claims", "worker=%d count=%d", w->index,
				 n);
	}
	log_info("dispatcher", "worker stopped", "worker=%d", w->index);
	return NULL;
}

/* ---- public --------------------------------------------------------------- */

enum err_code dispatcher_start(struct dispatcher *d, struct err *e)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		struct webhook_tls tls = {.extra_cas = d->cfg->extra_cas,
					  .client_cert = d->cfg->client_cert,
					  .client_key = d->cfg->client_key};
		w->wc = w->epfd >= 0
				? webhook_client_new(w->epfd, d->cfg->max_response_bytes,
						     &d->cfg->egress, d->cfg->egress_proxy, &tls)
				: NULL;
		if (w->epfd < 0 || w->evfd < 0 || w->wc == NULL)
			return err_set(e, ERR_INTERNAL, "dispatcher: cannot create worker %d", i);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = w->evfd};
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev);
		w->want_claim = true;
		if (pthread_create(&w->io_thread, NULL, io_main, w) != 0)
			return err_set(e, ERR_INTERNAL, "dispatcher: cannot start worker %d", i);
		w->io_started = true;
		if (pthread_create(&w->db_thread, NULL, db_main, w) != 0)
			return err_set(e, ERR_INTERNAL, "dispatcher: cannot start worker %d", i);
		w->db_started = true;
	}
	log_info("dispatcher", "started", "workers=%d max_inflight=%d instance=%s", d->nworkers,
		 d->cfg->max_inflight, d->instance);
	return ERR_OK;
}

struct endpoints *dispatcher_endpoints(struct dispatcher *d)
{
	return d->eps;
}

const char *dispatcher_instance(const struct dispatcher *d)
{
	return d->instance;
}

void dispatcher_wake(struct dispatcher *d)
{
	if (atomic_load(&d->refusing)) {
		log_debug("dispatcher", "wake ignored: a newer hookflow upgraded the database",
			  NULL);
		return;
	}
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		pthread_mutex_lock(&w->mu);
		if (!w->want_claim) {
			w->want_claim = true;
			pthread_cond_signal(&w->db_cv);
		}
		pthread_mutex_unlock(&w->mu);
	}
}

void dispatcher_refuse(struct dispatcher *d)
{
	if (!atomic_exchange(&d->refusing, true))
		log_error("dispatcher", "a newer hookflow upgraded the database: claiming stopped",
			  "instance=%s", d->instance);
}

bool dispatcher_refusing(struct dispatcher *d)
{
	return atomic_load(&d->refusing);
}

void dispatcher_cancel(struct dispatcher *d, const char *run_id)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		char *copy = strdup(run_id);
		if (copy == NULL)
			continue;
		pthread_mutex_lock(&w->mu);
		if (w->ncancels == w->capcancels) {
			int cap = w->capcancels ? w->capcancels * 2 : 8;
			char **p = realloc(w->cancels, (size_t)cap * sizeof *p);
			if (p == NULL) {
				pthread_mutex_unlock(&w->mu);
				free(copy);
				continue;
			}
			w->cancels = p;
			w->capcancels = cap;
		}
		w->cancels[w->ncancels++] = copy;
		pthread_mutex_unlock(&w->mu);
		if (w->io_started)
			poke_io(w);
	}
}

void dispatcher_stop(struct dispatcher *d, int grace_ms)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		w->grace_ms = grace_ms;
		if (!w->io_started)
			w->io_done = true;
		pthread_cond_signal(&w->db_cv);
		pthread_mutex_unlock(&w->mu);
		if (w->io_started)
			poke_io(w);
	}
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		if (w->io_started) {
			pthread_join(w->io_thread, NULL);
			w->io_started = false;
		}
		if (w->db_started) {
			pthread_join(w->db_thread, NULL);
			w->db_started = false;
		}
	}
}

void dispatcher_free(struct dispatcher *d)
{
	if (d == NULL)
		return;
	for (int i = 0; d->workers != NULL && i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		while (w->head != NULL) {
			struct inflight *f = w->head;
			w->head = f->next;
			free_inflight(f);
		}
		while (w->to_io != NULL) {
			struct inflight *f = w->to_io;
			w->to_io = f->next;
			free_inflight(f);
		}
		while (w->renewals != NULL) {
			struct renewal *rn = w->renewals;
			w->renewals = rn->next;
			json_decref(rn->held);
			free(rn);
		}
		webhook_client_free(w->wc);
		db_conn_free(w->db);
		settlements_cleanup(&w->out);
		settlements_cleanup(&w->work);
		claim_lane_cleanup(&w->lane);
		for (int k = 0; k < w->ncancels; k++)
			free(w->cancels[k]);
		free(w->cancels);
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->evfd >= 0)
			close(w->evfd);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->db_cv);
	}
	free(d->workers);
	endpoints_free(d->eps);
	free(d->instance);
	free(d);
}
