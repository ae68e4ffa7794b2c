/* dispatcher: worker threads that claim, call, keep leases alive and settle.
 *
 * Each worker loops on epoll: its eventfd (mailbox: wake, cancel, stop) and
 * the sockets of its webhook calls. Per iteration it applies cancels (abort the
 * matching calls), turns completed calls into settlement items and commits
 * them in one transaction per kind, renews every lease it holds in one
 * statement when due, and claims as many jobs as it has free capacity when
 * work may exist. "Work may exist" comes from NOTIFY (via the listener), from a
 * full claim batch, or from the HOOKFLOW_POLL_MS safety timer; there is no
 * polling per step. A settlement that fails because the database is away is
 * kept and retried; the lease decides who owns the job meanwhile. */
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
#include <unistd.h>

#include "db/jobs.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/sig.h"
#include "service/strbuf.h"
#include "service/timefmt.h"
#include "service/verdict.h"
#include "service/webhook.h"

#define CLAIM_BATCH 256
#define SETTLE_RETRY_MS 500
#define DB_RETRY_MS 1000

struct inflight {
	struct claimed_job job;
	struct webhook_call *call;
	struct inflight *prev;
	struct inflight *next;
	bool cancel_abort; /* aborted because its run was cancelled */
	bool lost;         /* claim lost: aborted, not settled */
	bool shutdown;     /* aborted by a drain: released, not settled */
	bool held;         /* seen in the latest lease renewal */
};

struct worker {
	struct dispatcher *d;
	int index;
	pthread_t thread;
	bool started;
	int epfd;
	int evfd;
	struct webhook_client *wc;
	struct db_conn *db;
	char owner[128];
	int capacity;
	struct inflight *head;
	int ninflight;

	pthread_mutex_t mu; /* guards the mailbox below */
	char **cancels;
	int ncancels;
	int capcancels;
	bool wake;
	bool stop;
	int grace_ms;

	json_t *outputs_out;   /* replay records to store before the settlements */
	json_t *steps_out;     /* pending step settlements */
	json_t *callbacks_out; /* pending callback settlements */
	int64_t settle_retry_at;
	int64_t next_renew;
	int64_t next_poll;
	int64_t db_retry_at;
};

struct dispatcher {
	const struct config *cfg;
	char *instance;
	unsigned char memo_key[64];
	size_t memo_key_len;
	int nworkers;
	struct worker *workers;
};

static void poke(struct worker *w)
{
	uint64_t one = 1;
	ssize_t r = write(w->evfd, &one, sizeof one);
	(void)r;
}

struct dispatcher *dispatcher_new(const struct config *cfg, const char *instance,
				  const unsigned char *memo_key, size_t memo_key_len)
{
	struct dispatcher *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->cfg = cfg;
	d->instance = strdup(instance);
	d->memo_key_len = memo_key_len < sizeof d->memo_key ? memo_key_len : sizeof d->memo_key;
	memcpy(d->memo_key, memo_key, d->memo_key_len);
	d->nworkers = cfg->workers;
	d->workers = calloc((size_t)d->nworkers, sizeof *d->workers);
	if (d->instance == NULL || d->workers == NULL) {
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
		snprintf(w->owner, sizeof w->owner, "%s/%d", instance, i);
		w->capacity = cfg->max_inflight / d->nworkers;
		if (i < cfg->max_inflight % d->nworkers)
			w->capacity++;
	}
	return d;
}

/* ---- building requests ------------------------------------------------- */

static char *step_body(const struct dispatcher *d, const struct claimed_job *j)
{
	struct strbuf b = {0};
	char deadline[TIMEFMT_RFC3339_LEN + 1];
	timefmt_rfc3339(j->now_ms + j->timeout_ms, deadline);
	char token[SIG_TOKEN_LEN + 1];
	sig_memo_token(d->memo_key, d->memo_key_len, j->run_id, token);

	strbuf_puts(&b, "{\"run_id\":");
	strbuf_json_string(&b, j->run_id);
	strbuf_puts(&b, ",\"workflow\":");
	strbuf_json_string(&b, j->workflow);
	strbuf_printf(&b, ",\"step\":%d,\"attempt\":%d,\"max_attempts\":%d,\"generation\":%d",
		      j->step, j->attempt, j->max_attempts, j->generation);
	strbuf_puts(&b, ",\"payload\":");
	strbuf_puts(&b, j->payload ? j->payload : "null");
	strbuf_puts(&b, ",\"headers\":");
	strbuf_puts(&b, j->headers ? j->headers : "{}");
	if (j->signal != NULL) {
		strbuf_puts(&b, ",\"signal\":");
		strbuf_puts(&b, j->signal);
	}
	if (j->group_id != NULL) {
		strbuf_puts(&b, ",\"group\":{\"id\":");
		strbuf_json_string(&b, j->group_id);
		strbuf_puts(&b, ",\"key\":");
		strbuf_json_string(&b, j->group_key ? j->group_key : "");
		strbuf_puts(&b, "}");
	}
	strbuf_puts(&b, ",\"deadline\":");
	strbuf_json_string(&b, deadline);
	strbuf_puts(&b, ",\"memo\":{\"url\":");
	struct strbuf url = {0};
	strbuf_printf(&url, "%s/v1/runs/%s", d->cfg->public_url, j->run_id);
	strbuf_json_string(&b, url.data ? url.data : "");
	strbuf_cleanup(&url);
	strbuf_puts(&b, ",\"token\":");
	strbuf_json_string(&b, token);
	strbuf_puts(&b, "}}");
	return strbuf_take(&b);
}

/* ---- settlement items -------------------------------------------------- */

static json_t *settle_base(const struct claimed_job *j)
{
	if (j->kind == JOB_STEP)
		return json_pack("{s:s, s:I}", "run_id", j->run_id, "claim_token",
				 (json_int_t)j->claim_token);
	return json_pack("{s:s, s:I}", "id", j->id, "claim_token", (json_int_t)j->claim_token);
}

static void add_effects(json_t *item, const struct effects *fx)
{
	if (effects_empty(fx))
		return;
	json_t *kv = json_object();
	if (fx->put)
		json_object_set(kv, "put", fx->put);
	if (fx->del)
		json_object_set(kv, "delete", fx->del);
	json_object_set_new(item, "kv", kv);
}

/* The settlement item of a step call that ended with verdict `v`. */
static json_t *step_item(const struct inflight *f, const struct verdict *v, long http_status)
{
	const struct claimed_job *j = &f->job;
	json_t *it = settle_base(j);
	if (http_status > 0)
		json_object_set_new(it, "http_status", json_integer(http_status));
	if (f->cancel_abort) {
		json_object_set_new(it, "result", json_string("transient_error"));
		json_object_set_new(it, "reason", json_string("call aborted: run cancelled"));
		metrics_step_result(MR_CANCELLED);
		return it;
	}
	if (v->kind == VERDICT_OK) {
		const struct outcome *o = &v->outcome;
		switch (o->kind) {
		case OUTCOME_CONTINUE:
			json_object_set_new(it, "result", json_string("continue"));
			json_object_set(it, "payload", o->payload ? o->payload : json_null());
			if (o->trigger == TRIGGER_AFTER)
				json_object_set_new(it, "delay_ms", json_integer(o->delay_ms));
			if (o->trigger == TRIGGER_SIGNAL) {
				json_object_set_new(it, "wait_key", json_string(o->correlation_key));
				json_object_set_new(it, "wait_timeout_ms", json_integer(o->timeout_ms));
			}
			metrics_step_result(MR_CONTINUE);
			break;
		case OUTCOME_SUCCEED:
			json_object_set_new(it, "result", json_string("succeed"));
			json_object_set(it, "value", o->result ? o->result : json_null());
			metrics_step_result(MR_SUCCEED);
			break;
		case OUTCOME_FAIL:
			json_object_set_new(it, "result", json_string("fail"));
			json_object_set_new(it, "reason", json_string(o->reason ? o->reason : ""));
			metrics_step_result(MR_FAIL);
			break;
		case OUTCOME_CANCEL:
			json_object_set_new(it, "result", json_string("cancel"));
			json_object_set_new(it, "reason", json_string(o->reason ? o->reason : ""));
			metrics_step_result(MR_CANCEL);
			break;
		}
		add_effects(it, &o->kv);
		return it;
	}
	bool transient = v->kind == VERDICT_TRANSIENT;
	json_object_set_new(it, "result",
			    json_string(transient ? "transient_error" : "permanent_error"));
	json_object_set_new(it, "reason", json_string(v->error));
	if (transient)
		json_object_set_new(it, "retry_delay_ms",
				    json_integer(verdict_retry_delay_ms(v, j->backoff_base_ms,
									j->backoff_max_ms, j->attempt)));
	metrics_step_result(transient ? MR_TRANSIENT : MR_PERMANENT);
	return it;
}

static json_t *callback_item(const struct inflight *f, const struct verdict *v, long http_status)
{
	const struct claimed_job *j = &f->job;
	json_t *it = settle_base(j);
	if (http_status > 0)
		json_object_set_new(it, "http_status", json_integer(http_status));
	if (v->kind == VERDICT_OK) {
		json_object_set_new(it, "result", json_string("ok"));
		metrics_callback_result(MR_SUCCEED);
		return it;
	}
	bool transient = v->kind == VERDICT_TRANSIENT;
	json_object_set_new(it, "result",
			    json_string(transient ? "transient_error" : "permanent_error"));
	json_object_set_new(it, "reason", json_string(v->error));
	if (transient)
		json_object_set_new(it, "retry_delay_ms",
				    json_integer(verdict_retry_delay_ms(v, j->backoff_base_ms,
									j->backoff_max_ms, j->attempt)));
	metrics_callback_result(transient ? MR_TRANSIENT : MR_PERMANENT);
	return it;
}

/* ---- in-flight bookkeeping --------------------------------------------- */

static void unlink_inflight(struct worker *w, struct inflight *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		w->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	w->ninflight--;
	metrics_inflight_add(-1);
}

static void free_inflight(struct inflight *f)
{
	db_claimed_job_cleanup(&f->job);
	free(f);
}

/* Turns one completed call into a settlement item (or drops it when the
 * claim was lost or the drain released it). */
static void complete(struct worker *w, struct webhook_call *call)
{
	struct inflight *f = webhook_call_user(call);
	struct call_result r;
	webhook_call_result(call, &r);
	int64_t ms = webhook_call_duration_ms(call);
	if (!webhook_call_aborted(call))
		metrics_webhook_latency(ms);
	unlink_inflight(w, f);
	if (f->lost || f->shutdown) {
		log_info("dispatcher", f->lost ? "call abandoned: claim lost" : "call interrupted by shutdown",
			 "run_id=%s job_id=%s step=%d attempt=%d", f->job.run_id, f->job.id, f->job.step,
			 f->job.attempt);
		webhook_call_free(call);
		free_inflight(f);
		return;
	}
	struct verdict v;
	verdict_from_call(&r, f->job.kind == JOB_STEP, timefmt_now_ms(), &v);
	long status = r.transport_error ? 0 : r.status;
	json_t *item;
	if (f->job.kind == JOB_STEP) {
		item = step_item(f, &v, status);
		json_array_append_new(w->steps_out, item);
		if (f->job.replay && v.kind == VERDICT_OK && !f->cancel_abort)
			json_array_append_new(w->outputs_out,
					      json_pack("{s:s, s:I, s:o}", "run_id", f->job.run_id,
							"claim_token", (json_int_t)f->job.claim_token,
							"outcome", outcome_to_json(&v.outcome)));
	} else {
		item = callback_item(f, &v, status);
		json_array_append_new(w->callbacks_out, item);
	}
	log_debug("dispatcher", "call done",
		  "kind=%s run_id=%s job_id=%s step=%d attempt=%d http_status=%ld duration_ms=%lld result=%s",
		  f->job.kind == JOB_STEP ? "step" : "callback", f->job.run_id, f->job.id, f->job.step,
		  f->job.attempt, status, (long long)ms,
		  json_string_value(json_object_get(item, "result")));
	verdict_cleanup(&v);
	webhook_call_free(call);
	free_inflight(f);
}

/* ---- database steps ----------------------------------------------------- */

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
		log_warn("dispatcher", "database unavailable", "worker=%d error=\"%s\"", w->index, e.msg);
		return false;
	}
	return true;
}

/* After a batch failed for a reason other than the database being away,
 * settles each item on its own so one bad item cannot hold the others back.
 * An item that still fails is dropped and logged: its claim's lease expires
 * and the job is delivered again. Returns how many claims were lost. */
static int settle_one_by_one(struct worker *w, enum job_kind kind, json_t *items)
{
	int lost = 0;
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) {
		json_t *one = json_array();
		json_array_append(one, it);
		struct err e = {0};
		int l = 0;
		if (db_jobs_settle(w->db, kind, one, &l, &e)) {
			const char *id = json_string_value(json_object_get(it, kind == JOB_STEP ? "run_id" : "id"));
			log_error("dispatcher", "settlement dropped; the job will be delivered again",
				  "worker=%d id=%s error=\"%s\"", w->index, id ? id : "?", e.msg);
		}
		lost += l;
		json_decref(one);
	}
	return lost;
}

/* Commits the pending settlements; returns true when it committed any (a
 * settled step may have made its next step claimable right away). */
static bool flush_settlements(struct worker *w)
{
	if (json_array_size(w->steps_out) == 0 && json_array_size(w->callbacks_out) == 0)
		return false;
	if (timefmt_mono_ms() < w->settle_retry_at || !ensure_db(w))
		return false;
	if (json_array_size(w->outputs_out) > 0) {
		/* Replay records commit before the settlements they describe, so a
		 * crash in between replays the answer instead of calling again. */
		struct err e = {0};
		if (db_jobs_store_outputs(w->db, w->outputs_out, &e)) {
			log_warn("dispatcher", "storing replay records failed, will retry",
				 "worker=%d error=\"%s\"", w->index, e.msg);
			w->settle_retry_at = timefmt_mono_ms() + SETTLE_RETRY_MS;
			return false;
		}
		json_array_clear(w->outputs_out);
	}
	if (json_array_size(w->steps_out) > 0 && w->d->cfg->test_fault != NULL &&
	    strcmp(w->d->cfg->test_fault, "exit_before_settle") == 0) {
		log_warn("dispatcher", "test fault: exiting before settlement", NULL);
		_exit(99);
	}
	json_t **queues[2] = {&w->steps_out, &w->callbacks_out};
	for (int k = 0; k < 2; k++) {
		if (json_array_size(*queues[k]) == 0)
			continue;
		struct err e = {0};
		enum job_kind kind = k == 0 ? JOB_STEP : JOB_CALLBACK;
		int lost = 0;
		if (db_jobs_settle(w->db, kind, *queues[k], &lost, &e)) {
			if (e.code == ERR_UNAVAILABLE) {
				log_warn("dispatcher", "settlement failed, will retry",
					 "worker=%d items=%zu error=\"%s\"", w->index,
					 json_array_size(*queues[k]), e.msg);
				w->settle_retry_at = timefmt_mono_ms() + SETTLE_RETRY_MS;
				return false;
			}
			lost = settle_one_by_one(w, kind, *queues[k]);
		}
		if (lost > 0) {
			metrics_claims_lost(lost);
			log_warn("dispatcher", "settlements refused: claim lost", "worker=%d count=%d",
				 w->index, lost);
		}
		json_array_clear(*queues[k]);
	}
	return true;
}

static void on_renewed(void *arg, enum job_kind kind, const char *id, bool cancel_requested)
{
	struct worker *w = arg;
	for (struct inflight *f = w->head; f != NULL; f = f->next) {
		const char *fid = kind == JOB_STEP ? f->job.run_id : f->job.id;
		if (f->job.kind != kind || strcmp(fid, id) != 0)
			continue;
		f->held = true;
		if (cancel_requested && !f->cancel_abort && kind == JOB_STEP) {
			f->cancel_abort = true;
			webhook_call_abort(w->wc, f->call);
		}
	}
}

static void renew(struct worker *w)
{
	int64_t now = timefmt_mono_ms();
	if (now < w->next_renew)
		return;
	w->next_renew = now + w->d->cfg->lease_ms / 3;
	if (w->head == NULL || !ensure_db(w))
		return;
	for (struct inflight *f = w->head; f != NULL; f = f->next)
		f->held = false;
	struct err e = {0};
	if (db_jobs_renew(w->db, w->owner, w->d->cfg->lease_ms, on_renewed, w, &e)) {
		log_warn("dispatcher", "lease renewal failed", "worker=%d error=\"%s\"", w->index, e.msg);
		w->next_renew = now + 1000;
		return;
	}
	for (struct inflight *f = w->head; f != NULL; f = f->next) {
		if (!f->held && !f->lost) {
			f->lost = true;
			log_warn("dispatcher", "claim lost, aborting call", "run_id=%s job_id=%s",
				 f->job.run_id, f->job.id);
			webhook_call_abort(w->wc, f->call);
		}
	}
}

static void start_call(struct worker *w, struct inflight *f)
{
	struct claimed_job *j = &f->job;
	char *body = j->kind == JOB_STEP ? step_body(w->d, j) : strdup(j->payload ? j->payload : "{}");
	struct webhook_request req = {
		.url = j->url,
		.body = body ? body : "",
		.body_len = body ? strlen(body) : 0,
		.msg_id = j->id,
		.secret = j->secret,
		.timeout_ms = j->timeout_ms,
		.user = f,
	};
	struct err e = {0};
	f->next = w->head;
	if (w->head)
		w->head->prev = f;
	w->head = f;
	w->ninflight++;
	metrics_inflight_add(1);
	if (body == NULL || webhook_call_start(w->wc, &req, &f->call, &e)) {
		/* Could not even start: settle as a transient error now. */
		unlink_inflight(w, f);
		struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = -1};
		snprintf(v.error, sizeof v.error, "call not started: %s", body ? e.msg : "out of memory");
		json_array_append_new(j->kind == JOB_STEP ? w->steps_out : w->callbacks_out,
				      j->kind == JOB_STEP ? step_item(f, &v, 0) : callback_item(f, &v, 0));
		free_inflight(f);
	} else if (j->kind == JOB_STEP) {
		metrics_step_dispatched();
	} else {
		metrics_callback_dispatched();
	}
	free(body);
}

/* Settles a claimed step from its replay record without calling the webhook,
 * with a delay or signal timeout shortened by the record's age. Returns false
 * when the record cannot be used (the webhook is called instead). */
static bool replay(struct worker *w, struct inflight *f)
{
	json_t *rec = json_loads(f->job.replayed, 0, NULL);
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
	log_info("dispatcher", "replaying stored step outcome", "run_id=%s job_id=%s step=%d age_ms=%lld",
		 f->job.run_id, f->job.id, f->job.step, (long long)age);
	json_array_append_new(w->steps_out, step_item(f, &v, 0));
	verdict_cleanup(&v);
	return true;
}

/* Claims as many jobs as there is room for; returns true when the batch was
 * full (more work may be waiting). */
static bool claim(struct worker *w)
{
	int room = w->capacity - w->ninflight;
	if (room <= 0 || !ensure_db(w))
		return room <= 0 ? false : true;
	int want = room < CLAIM_BATCH ? room : CLAIM_BATCH;
	struct claimed_job *jobs = NULL;
	int n = 0;
	struct err e = {0};
	if (db_jobs_claim(w->db, w->owner, want, w->d->cfg->lease_ms, &jobs, &n, &e)) {
		log_warn("dispatcher", "claim failed", "worker=%d error=\"%s\"", w->index, e.msg);
		if (e.code == ERR_UNAVAILABLE) {
			db_conn_free(w->db);
			w->db = NULL;
			w->db_retry_at = timefmt_mono_ms() + DB_RETRY_MS;
		}
		return false;
	}
	for (int i = 0; i < n; i++) {
		struct inflight *f = calloc(1, sizeof *f);
		if (f == NULL) {
			db_claimed_job_cleanup(&jobs[i]);
			continue; /* its lease will expire and it will be delivered again */
		}
		f->job = jobs[i];
		if (f->job.kind == JOB_STEP && f->job.replayed != NULL && !f->job.cancel_requested &&
		    replay(w, f)) {
			free_inflight(f);
			continue;
		}
		if (f->job.kind == JOB_STEP && f->job.cancel_requested) {
			/* Claimed after a cancel was recorded: settle cancelled, no call. */
			f->cancel_abort = true;
			struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = -1};
			json_array_append_new(w->steps_out, step_item(f, &v, 0));
			free_inflight(f);
			continue;
		}
		log_debug("dispatcher", "claimed", "kind=%s run_id=%s job_id=%s step=%d attempt=%d",
			  f->job.kind == JOB_STEP ? "step" : "callback", f->job.run_id, f->job.id,
			  f->job.step, f->job.attempt);
		start_call(w, f);
	}
	free(jobs);
	return n == want;
}

/* ---- the loop ----------------------------------------------------------- */

static void take_mailbox(struct worker *w, bool *wake, bool *stop, int *grace_ms, char ***cancels,
			 int *ncancels)
{
	pthread_mutex_lock(&w->mu);
	*wake = w->wake;
	w->wake = false;
	*stop = w->stop;
	*grace_ms = w->grace_ms;
	*cancels = w->cancels;
	*ncancels = w->ncancels;
	w->cancels = NULL;
	w->ncancels = w->capcancels = 0;
	pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct config *cfg = w->d->cfg;
	bool want_claim = true;
	bool draining = false;
	int64_t drain_deadline = 0;
	struct epoll_event evs[256];

	w->next_poll = timefmt_mono_ms() + cfg->poll_ms;
	for (;;) {
		bool wake, stop;
		int grace_ms, ncancels;
		char **cancels;
		take_mailbox(w, &wake, &stop, &grace_ms, &cancels, &ncancels);
		want_claim = want_claim || wake;
		for (int i = 0; i < ncancels; i++) {
			for (struct inflight *f = w->head; f != NULL; f = f->next) {
				if (f->job.kind == JOB_STEP && !f->cancel_abort &&
				    strcmp(f->job.run_id, cancels[i]) == 0) {
					f->cancel_abort = true;
					log_info("dispatcher", "aborting call: run cancelled",
						 "run_id=%s job_id=%s step=%d", f->job.run_id, f->job.id,
						 f->job.step);
					webhook_call_abort(w->wc, f->call);
				}
			}
			free(cancels[i]);
		}
		free(cancels);

		int64_t now = timefmt_mono_ms();
		if (stop && !draining) {
			draining = true;
			drain_deadline = now + grace_ms;
			log_info("dispatcher", "draining", "worker=%d inflight=%d grace_ms=%d", w->index,
				 w->ninflight, grace_ms);
		}
		if (draining && now >= drain_deadline) {
			for (struct inflight *f = w->head; f != NULL; f = f->next) {
				if (!f->shutdown) {
					f->shutdown = true;
					webhook_call_abort(w->wc, f->call);
				}
			}
		}

		struct webhook_call *call;
		while ((call = webhook_client_take_done(w->wc)) != NULL)
			complete(w, call);
		if (flush_settlements(w))
			want_claim = true; /* claim a next step without waiting for its NOTIFY */
		renew(w);

		if (!draining && want_claim)
			want_claim = claim(w);

		bool settled = json_array_size(w->steps_out) == 0 &&
			       json_array_size(w->callbacks_out) == 0;
		if (draining && w->ninflight == 0 && (settled || w->db == NULL))
			break;

		/* Sleep until the next thing to do. */
		now = timefmt_mono_ms();
		long timeout = cfg->poll_ms;
		long t = webhook_client_timeout_ms(w->wc);
		if (t >= 0 && t < timeout)
			timeout = t;
		if (w->head != NULL && w->next_renew - now < timeout)
			timeout = (long)(w->next_renew - now);
		if (!settled && w->settle_retry_at - now < timeout)
			timeout = (long)(w->settle_retry_at - now);
		if (draining && drain_deadline - now < timeout)
			timeout = (long)(drain_deadline - now);
		if (!draining && w->next_poll - now < timeout)
			timeout = (long)(w->next_poll - now);
		if (want_claim && !draining && w->ninflight < w->capacity)
			timeout = w->db == NULL ? (long)(w->db_retry_at - now) : 0;
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
		now = timefmt_mono_ms();
		if (now >= w->next_poll) {
			want_claim = true;
			w->next_poll = now + cfg->poll_ms;
		}
	}

	/* Claims this worker could not settle go back to the queue now rather
	 * than after their lease expires. */
	if (w->db != NULL) {
		struct err e = {0};
		int n = 0;
		if (db_jobs_reap(w->db, w->owner, 100000, &n, &e))
			log_warn("dispatcher", "could not release claims", "worker=%d error=\"%s\"",
				 w->index, e.msg);
		else if (n > 0)
			log_info("dispatcher", "released claims", "worker=%d count=%d", w->index, n);
	}
	log_info("dispatcher", "worker stopped", "worker=%d", w->index);
	return NULL;
}

enum err_code dispatcher_start(struct dispatcher *d, struct err *e)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		w->wc = w->epfd >= 0 ? webhook_client_new(w->epfd, d->cfg->max_response_bytes, &d->cfg->egress) : NULL;
		w->steps_out = json_array();
		w->outputs_out = json_array();
		w->callbacks_out = json_array();
		if (w->epfd < 0 || w->evfd < 0 || w->wc == NULL)
			return err_set(e, ERR_INTERNAL, "dispatcher: cannot create worker %d", i);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = w->evfd};
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev);
		w->wake = true;
		if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
			return err_set(e, ERR_INTERNAL, "dispatcher: cannot start worker %d", i);
		w->started = true;
	}
	log_info("dispatcher", "started", "workers=%d max_inflight=%d instance=%s", d->nworkers,
		 d->cfg->max_inflight, d->instance);
	return ERR_OK;
}

void dispatcher_wake(struct dispatcher *d)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		pthread_mutex_lock(&w->mu);
		bool was = w->wake;
		w->wake = true;
		pthread_mutex_unlock(&w->mu);
		if (!was && w->started)
			poke(w);
	}
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
		if (w->started)
			poke(w);
	}
}

void dispatcher_stop(struct dispatcher *d, int grace_ms)
{
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		w->grace_ms = grace_ms;
		pthread_mutex_unlock(&w->mu);
		if (w->started)
			poke(w);
	}
	for (int i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		if (w->started) {
			pthread_join(w->thread, NULL);
			w->started = false;
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
		webhook_client_free(w->wc);
		db_conn_free(w->db);
		json_decref(w->steps_out);
		json_decref(w->outputs_out);
		json_decref(w->callbacks_out);
		for (int k = 0; k < w->ncancels; k++)
			free(w->cancels[k]);
		free(w->cancels);
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->evfd >= 0)
			close(w->evfd);
		pthread_mutex_destroy(&w->mu);
	}
	free(d->workers);
	free(d->instance);
	free(d);
}
