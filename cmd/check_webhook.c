/* check_webhook: the conformance check of a step webhook. */
#include "cmd/check_webhook.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/log.h"
#include "base/sig.h"
#include "base/strbuf.h"
#include "base/table.h"
#include "base/timefmt.h"
#include "cmd/cli.h"
#include "cmd/client.h"
#include "cmd/memo_stub.h"
#include "service/stepreq.h"
#include "service/verdict.h"

#define CW_MAX_URL 2048
#define CW_MAX_RESPONSE (1024L * 1024) /* HOOKFLOW_MAX_RESPONSE_BYTES' default */
#define CW_STALE_S \
	600 /* a stale timestamp: 10 minutes old (the usual
					* tolerance of Standard Webhooks is 5) */
#define CW_MAX_ATTEMPTS 3
#define CW_DETAIL 1024

/* ---- items ------------------------------------------------------------ */

enum item_id {
	IT_VALID,
	IT_DEADLINE,
	IT_BAD_SIG,
	IT_STALE,
	IT_NO_SIG,
	IT_UNKNOWN,
	IT_SAME_ID,
	IT_MEMO_REUSE,
	IT_MEMO_OUTAGE,
	IT_ERROR,
	IT__COUNT
};

static const char *const item_names[IT__COUNT] = {
	"valid-answer",         "deadline",          "bad-signature",
	"stale-timestamp",      "missing-signature", "unknown-fields",
	"same-webhook-id",      "memo-reuse",        "memo-outage",
	"error-classification",
};

enum item_status { ST_PASS = 1, ST_FAIL, ST_SKIP };

struct item {
	enum item_status status;
	char detail[CW_DETAIL];
};

/* ---- the check's settings ------------------------------------------------ */

struct cw {
	const char *url;
	char secret[SIG_SECRET_MAX + 1]; /* "" when unsigned */
	long long timeout_ms;
	long long step;
	char *payload; /* JSON text */
	char *headers; /* JSON text of an object */
	const char *workflow;
	bool error_probe;
	long long error_step;
	char *error_payload; /* JSON text */
	char memo_host[64];
	long long memo_port;
	const char *memo_url;
	char memo_base[CW_MAX_URL + 1];
	bool json;
	char run_prefix[64];
	struct memo_stub *memo;
	struct item items[IT__COUNT];
	int64_t slowest_ms;
	const char *slowest;
};

enum sig_mode { SIG_GOOD, SIG_NONE, SIG_WRONG, SIG_STALE };

/* One step request and what came back. */
struct probe {
	const char *name; /* in the run id: "valid", "redelivery" */
	char run_id[IDS_MAX_RUN_ID + 1];
	char msg_id[33]; /* webhook-id */
	int step, attempt;
	const char *payload;
	enum sig_mode sig;
	bool unknown_fields;
	/* results */
	bool sent;
	struct client_reply reply;
	bool no_answer; /* transport failure (refused, reset, timeout, too large) */
	struct verdict v;
	char what[400]; /* "HTTP 200 continue in 512 ms" */
};

static void set_item(struct cw *c, enum item_id id, enum item_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set_item(struct cw *c, enum item_id id, enum item_status st, const char *fmt, ...)
{
	struct item *it = &c->items[id];
	it->status = st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(it->detail, sizeof it->detail, fmt, ap);
	va_end(ap);
}

static const char *kind_name(enum outcome_kind k)
{
	switch (k) {
	case OUTCOME_CONTINUE:
		return "continue";
	case OUTCOME_SUCCEED:
		return "succeed";
	case OUTCOME_FAIL:
		return "fail";
	case OUTCOME_CANCEL:
		return "cancel";
	case OUTCOME_PENDING:
		return "pending";
	}
	return "?";
}

static const char *trigger_name(const struct outcome *o)
{
	if (o->kind != OUTCOME_CONTINUE)
		return "";
	switch (o->trigger) {
	case TRIGGER_AFTER:
		return " after delay_ms";
	case TRIGGER_SIGNAL:
		return " waiting for a signal";
	case TRIGGER_AT:
		return " at run_at";
	default:
		return o->children != NULL ? " with children" : "";
	}
}

/* ---- sending ---------------------------------------------------------- */

static void random_hex(char *out, size_t bytes)
{
	unsigned char b[32];
	if (bytes > sizeof b)
		bytes = sizeof b;
	if (RAND_bytes(b, (int)bytes) != 1)
		memset(b, 0, sizeof b);
	ids_hex(b, bytes, out);
}

static void probe_init(struct cw *c, struct probe *p, const char *name, int step,
		       const char *payload)
{
	memset(p, 0, sizeof *p);
	p->name = name;
	snprintf(p->run_id, sizeof p->run_id, "%s-%s", c->run_prefix, name);
	random_hex(p->msg_id, 16);
	p->step = step;
	p->attempt = 1;
	p->payload = payload;
	p->sig = SIG_GOOD;
}

/* The body of `p`'s step request, as hookflow builds it (malloc'd). */
static char *probe_body(struct cw *c, struct probe *p, int64_t now_ms)
{
	char workflow[IDS_MAX_NAME + 1];
	snprintf(workflow, sizeof workflow, "%s", c->workflow);
	struct claimed_job j = {
		.kind = JOB_STEP,
		.id = p->msg_id,
		.run_id = p->run_id,
		.workflow = workflow,
		.step = p->step,
		.attempt = p->attempt,
		.max_attempts = CW_MAX_ATTEMPTS,
		.generation = 1,
		.payload = (char *)p->payload,
		.headers = c->headers,
		.timeout_ms = (int)c->timeout_ms,
		.now_ms = now_ms,
	};
	char token[TOKEN_MAX] = "";
	memo_stub_token(c->memo, p->run_id, 1, p->step, p->attempt,
			(now_ms + c->timeout_ms) / 1000 + 3600, token);
	char *body = stepreq_body(&j, c->memo_base, token, NULL);
	if (body == NULL || !p->unknown_fields)
		return body;
	/* Fields a later hookflow might add: at the top and inside "memo". */
	json_t *doc = json_loads(body, 0, NULL);
	free(body);
	if (doc == NULL)
		return NULL;
	json_object_set_new(doc, "x_check_webhook_unknown",
			    json_pack("{s:s,s:[i,s,n]}", "note",
				      "a field this webhook does not know", "nested", 1, "two"));
	json_object_set_new(json_object_get(doc, "memo"), "x_check_webhook_unknown", json_true());
	body = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return body;
}

/* Sends `p` and judges its answer as hookflow would. */
static enum err_code send_probe(struct cw *c, struct probe *p, struct err *e)
{
	int64_t now_ms = timefmt_now_ms();
	char *body = probe_body(c, p, now_ms);
	if (body == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	int64_t ts = now_ms / 1000 - (p->sig == SIG_STALE ? CW_STALE_S : 0);
	char id_h[64], ts_h[64], sig_h[SIG_HEADER_MAX + 32], sig[SIG_HEADER_MAX] = "";
	snprintf(id_h, sizeof id_h, "webhook-id: %s", p->msg_id);
	snprintf(ts_h, sizeof ts_h, "webhook-timestamp: %lld", (long long)ts);
	const char *headers[7] = {"Content-Type: application/json", "Expect:", id_h, ts_h, NULL};
	if (c->secret[0] != '\0' && p->sig != SIG_NONE) {
		char other[SIG_SECRET_MAX + 1];
		const char *key = c->secret;
		if (p->sig == SIG_WRONG) {
			if (sig_new_secret(other, e)) {
				free(body);
				return e->code;
			}
			key = other;
		}
		if (sig_sign_header(key, NULL, p->msg_id, ts, body, strlen(body), sig, e)) {
			free(body);
			return e->code;
		}
		snprintf(sig_h, sizeof sig_h, "webhook-signature: %s", sig);
		headers[4] = sig_h;
	}
	/* Wait past the deadline, so that a slow answer is still judged
	 * (and reported late by the deadline item) rather than cut off. */
	long cap = (long)(c->timeout_ms * 2 + 5000);
	struct client_request req = {
		.method = "POST",
		.url = c->url,
		.body = body,
		.body_len = strlen(body),
		.headers = headers,
		.timeout_ms = cap,
		.max_response = CW_MAX_RESPONSE,
		.use_env_proxy = false,
	};
	struct err te = {0};
	enum err_code rc = client_send(&req, &p->reply, &te);
	free(body);
	if (rc != ERR_OK && rc != ERR_UNAVAILABLE)
		return err_set(e, rc, "%s", te.msg);
	p->sent = true;
	p->no_answer = rc != ERR_OK;
	struct call_result cr = {
		.transport_error = p->no_answer && !p->reply.timed_out && !p->reply.too_large,
		.transport_msg = p->reply.error,
		.timed_out = p->reply.timed_out,
		.timeout_ms = cap,
		.too_large = p->reply.too_large,
		.max_response_bytes = CW_MAX_RESPONSE,
		.status = p->reply.status,
		.body = p->reply.body,
		.body_len = p->reply.len,
	};
	verdict_from_call(&cr, true, timefmt_now_ms(), &p->v);
	if (p->no_answer)
		snprintf(p->what, sizeof p->what, "%.300s after %lld ms", p->v.error,
			 (long long)p->reply.duration_ms);
	else if (p->v.kind == VERDICT_OK)
		snprintf(p->what, sizeof p->what, "HTTP %ld %s%s in %lld ms", p->reply.status,
			 kind_name(p->v.outcome.kind), trigger_name(&p->v.outcome),
			 (long long)p->reply.duration_ms);
	else
		snprintf(p->what, sizeof p->what, "%.300s (%s) in %lld ms", p->v.error,
			 p->v.kind == VERDICT_TRANSIENT ? "transient" : "permanent",
			 (long long)p->reply.duration_ms);
	/* Every correctly signed request counts for the deadline. */
	if (p->sig == SIG_GOOD && p->reply.duration_ms > c->slowest_ms) {
		c->slowest_ms = p->reply.duration_ms;
		c->slowest = p->name;
	}
	return ERR_OK;
}

static void probe_cleanup(struct probe *p)
{
	client_reply_cleanup(&p->reply);
	if (p->sent)
		verdict_cleanup(&p->v);
}

/* ---- judging ---------------------------------------------------------- */

static void judge_signature(struct cw *c, enum item_id id, const struct probe *p, const char *sent)
{
	if (p->no_answer)
		set_item(c, id, ST_FAIL, "%s: no answer (%s); a 4xx refuses it", sent, p->what);
	else if (p->reply.status >= 400 && p->reply.status <= 499)
		set_item(c, id, ST_PASS, "%s: refused with HTTP %ld", sent, p->reply.status);
	else if (p->reply.status >= 200 && p->reply.status <= 299)
		set_item(c, id, ST_FAIL, "%s: accepted with HTTP %ld, and perhaps acted on", sent,
			 p->reply.status);
	else
		set_item(c, id, ST_FAIL,
			 "%s: answered HTTP %ld; a 4xx refuses it (a 5xx asks for a "
			 "retry)",
			 sent, p->reply.status);
}

/* The error body's classification, as the protocol has it: "retryable: true",
 * "retryable: false", or why it is not one (into `why`). */
static int error_body_class(const struct probe *p, char *why, size_t n)
{
	json_t *doc = json_loadb(p->reply.body, p->reply.len, 0, NULL);
	json_t *err = json_object_get(doc, "error");
	json_t *retry = json_object_get(err, "retryable");
	int cls = -1;
	if (!json_is_object(err))
		snprintf(why, n, "no {\"error\": {\"message\", \"retryable\"}} body");
	else if (!json_is_string(json_object_get(err, "message")))
		snprintf(why, n, "error.message is not a string (hookflow ignores the body)");
	else if (!json_is_boolean(retry))
		snprintf(why, n, "error.retryable is %s, not a boolean (hookflow ignores the body)",
			 retry == NULL ? "missing" : "of another type");
	else
		cls = json_is_true(retry) ? 1 : 0;
	json_decref(doc);
	return cls;
}

static bool same_decision(const struct probe *a, const struct probe *b)
{
	const struct outcome *x = &a->v.outcome, *y = &b->v.outcome;
	if (x->kind != y->kind || x->trigger != y->trigger)
		return false;
	if (x->trigger == TRIGGER_SIGNAL)
		return x->correlation_key != NULL && y->correlation_key != NULL &&
		       strcmp(x->correlation_key, y->correlation_key) == 0;
	return true;
}

static void op_name(const struct memo_op *op, char *out, size_t n)
{
	if (op->scope < 0)
		snprintf(out, n, "%s", op->key);
	else
		snprintf(out, n, "step %d/%s", op->scope, op->key);
}

static bool op_same_key(const struct memo_op *a, const struct memo_op *b)
{
	return a->scope == b->scope && strcmp(a->key, b->key) == 0;
}

/* memo-reuse: what the two deliveries of one webhook-id did in the memo;
 * `first` of the `n` calls were made during delivery 1. */
static void judge_memo_reuse(struct cw *c, const struct memo_op *ops, size_t n, size_t first)
{
	if (n == 0) {
		set_item(c, IT_MEMO_REUSE, ST_SKIP,
			 "no memo call in either delivery: whether the work ran twice cannot be "
			 "seen from outside (delivery is at-least-once: keep costly work in the "
			 "memo or make it idempotent)");
		return;
	}
	size_t written = 0;
	char name[MEMO_STUB_MAX_KEY + 32] = "";
	for (size_t i = 0; i < first; i++)
		if (strcmp(ops[i].method, "PUT") == 0 && ops[i].status == 200) {
			if (written++ == 0)
				op_name(&ops[i], name, sizeof name);
		}
	if (written == 0) {
		set_item(c, IT_MEMO_REUSE, ST_SKIP,
			 "delivery 1 made %zu memo call(s) but memoized nothing: no reuse to see",
			 first);
		return;
	}
	size_t read_back = 0, rewritten = 0, other_writes = 0;
	char rname[MEMO_STUB_MAX_KEY + 32] = "", wname[MEMO_STUB_MAX_KEY + 32] = "";
	for (size_t i = first; i < n; i++) {
		bool known = false;
		for (size_t k = 0; k < first; k++)
			known |= strcmp(ops[k].method, "PUT") == 0 && ops[k].status == 200 &&
				 op_same_key(&ops[k], &ops[i]);
		if (strcmp(ops[i].method, "GET") == 0 && ops[i].status == 200 && known) {
			if (read_back++ == 0)
				op_name(&ops[i], rname, sizeof rname);
		} else if (strcmp(ops[i].method, "PUT") == 0) {
			if (known ? rewritten++ == 0 : other_writes++ == 0)
				op_name(&ops[i], wname, sizeof wname);
		}
	}
	if (rewritten > 0)
		set_item(c, IT_MEMO_REUSE, ST_FAIL,
			 "delivery 2 wrote %s again: the work delivery 1 memoized was done again",
			 wname);
	else if (read_back > 0 && other_writes == 0)
		set_item(c, IT_MEMO_REUSE, ST_PASS,
			 "delivery 2 read %s back from the memo and wrote nothing again", rname);
	else if (other_writes > 0)
		set_item(c, IT_MEMO_REUSE, ST_FAIL,
			 "delivery 2 wrote %s instead of reading %s back: the work was done again",
			 wname, name);
	else if (n == first)
		set_item(c, IT_MEMO_REUSE, ST_SKIP,
			 "delivery 1 memoized %s; delivery 2 made no memo call (it may keep its "
			 "own record of webhook-id): whether it did the work again cannot be seen",
			 name);
	else
		set_item(c, IT_MEMO_REUSE, ST_SKIP,
			 "delivery 1 memoized %s; delivery 2 did not read it back but wrote "
			 "nothing either",
			 name);
}

static void judge_memo_outage(struct cw *c, const struct probe *p, size_t nops)
{
	char why[160];
	if (nops == 0) {
		set_item(c, IT_MEMO_OUTAGE, ST_SKIP,
			 "the webhook made no memo call, so a failing memo could not be shown to "
			 "it");
	} else if (p->no_answer) {
		set_item(c, IT_MEMO_OUTAGE, ST_FAIL,
			 "its memo answered 503; the webhook gave no answer (%s)", p->what);
	} else if (p->v.kind == VERDICT_OK) {
		set_item(c, IT_MEMO_OUTAGE, ST_PASS,
			 "its memo answered 503; it answered a valid %s without it (%s)",
			 kind_name(p->v.outcome.kind), p->what);
	} else if (p->v.kind == VERDICT_TRANSIENT) {
		int cls = error_body_class(p, why, sizeof why);
		set_item(c, IT_MEMO_OUTAGE, ST_PASS,
			 "its memo answered 503; it answered HTTP %ld%s: transient, hookflow "
			 "retries the step",
			 p->reply.status, cls == 1 ? " with retryable: true" : " (by its status)");
	} else {
		set_item(c, IT_MEMO_OUTAGE, ST_FAIL,
			 "its memo answered 503 (a passing outage); it answered %s: permanent, "
			 "hookflow would fail the run (say \"retryable\": true, or answer 5xx)",
			 p->what);
	}
}

static void judge_error(struct cw *c, const struct probe *p)
{
	char why[160];
	if (p->no_answer) {
		set_item(c, IT_ERROR, ST_FAIL, "no answer: %s", p->what);
		return;
	}
	if (p->v.kind == VERDICT_OK) {
		enum outcome_kind k = p->v.outcome.kind;
		if (k == OUTCOME_FAIL || k == OUTCOME_CANCEL)
			set_item(c, IT_ERROR, ST_PASS,
				 "answered %s (\"%.200s\"): the run ends, no retry", kind_name(k),
				 p->v.outcome.reason ? p->v.outcome.reason : "");
		else
			set_item(
				c, IT_ERROR, ST_FAIL,
				"answered %s: the input meant to fail was not reported as an error",
				kind_name(k));
		return;
	}
	if (p->reply.status >= 200 && p->reply.status <= 299) {
		set_item(c, IT_ERROR, ST_FAIL, "%s", p->what);
		return;
	}
	int cls = error_body_class(p, why, sizeof why);
	if (cls < 0)
		set_item(c, IT_ERROR, ST_FAIL,
			 "answered HTTP %ld with %s: hookflow can only go by the status (%s)",
			 p->reply.status, why,
			 p->v.kind == VERDICT_TRANSIENT ? "transient" : "permanent");
	else
		set_item(c, IT_ERROR, ST_PASS, "answered HTTP %ld with retryable: %s (%s)",
			 p->reply.status, cls ? "true" : "false",
			 cls ? "transient: hookflow retries" : "permanent: the run fails");
}

/* ---- the battery ------------------------------------------------------ */

/* The probes that need a valid answer to the plain request first: unknown
 * fields (5), one step delivered twice (6-7: a retry, same webhook-id,
 * attempt 2) and a failing memo (8). */
static enum err_code more_probes(struct cw *c, struct probe *unknown, struct probe *first,
				 struct probe *second, struct probe *outage, struct err *e)
{
	int step = (int)c->step;
	probe_init(c, unknown, "unknown-fields", step, c->payload);
	unknown->unknown_fields = true;
	if (send_probe(c, unknown, e))
		return e->code;
	set_item(c, IT_UNKNOWN, unknown->v.kind == VERDICT_OK ? ST_PASS : ST_FAIL,
		 "with unknown fields at the top and in memo: %s", unknown->what);

	probe_init(c, first, "redelivery", step, c->payload);
	if (send_probe(c, first, e))
		return e->code;
	struct memo_op *ops = NULL;
	size_t n1 = memo_stub_ops(c->memo, first->run_id, &ops);
	free(ops);
	probe_init(c, second, "redelivery", step, c->payload);
	memcpy(second->msg_id, first->msg_id, sizeof second->msg_id);
	second->attempt = 2;
	if (send_probe(c, second, e))
		return e->code;
	size_t n2 = memo_stub_ops(c->memo, first->run_id, &ops);
	if (first->v.kind == VERDICT_OK && second->v.kind == VERDICT_OK &&
	    same_decision(first, second))
		set_item(c, IT_SAME_ID, ST_PASS, "webhook-id %s twice: %s, then %s", first->msg_id,
			 first->what, second->what);
	else
		set_item(c, IT_SAME_ID, ST_FAIL,
			 "webhook-id %s twice, another decision: %s, then %s", first->msg_id,
			 first->what, second->what);
	judge_memo_reuse(c, ops, n2, n1 < n2 ? n1 : n2);
	free(ops);

	probe_init(c, outage, "memo-outage", step, c->payload);
	memo_stub_fail_run(c->memo, outage->run_id);
	if (send_probe(c, outage, e))
		return e->code;
	size_t nout = memo_stub_ops(c->memo, outage->run_id, &ops);
	free(ops);
	judge_memo_outage(c, outage, nout);
	return ERR_OK;
}

static enum err_code battery(struct cw *c, int *exit_code, struct err *e)
{
	struct probe valid, bad, stale, nosig, unknown, first, second, outage, error;
	struct probe *all[] = {&valid, &bad,    &stale,  &nosig, &unknown,
			       &first, &second, &outage, &error};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		memset(all[i], 0, sizeof *all[i]);
	int step = (int)c->step;

	/* 1. A plain signed step request: a valid outcome, and can it be reached at all. */
	probe_init(c, &valid, "valid", step, c->payload);
	if (send_probe(c, &valid, e))
		goto out;
	if (valid.no_answer && !valid.reply.timed_out && !valid.reply.too_large) {
		fprintf(stderr, "hookflow: check-webhook: cannot reach %s: %s\n", c->url,
			valid.reply.error);
		*exit_code = CLI_UNREACHABLE;
		goto out;
	}
	bool ok = valid.v.kind == VERDICT_OK;
	if (ok) {
		set_item(c, IT_VALID, ST_PASS, "%s", valid.what);
	} else {
		const char *hint = "";
		if (valid.reply.status == 401 || valid.reply.status == 403)
			hint = c->secret[0] ? " (is --secret the workflow's secret?)"
					    : " (does it need --secret?)";
		else if (valid.reply.status >= 500 || valid.reply.status == 400)
			hint = " (does it expect another --step or --payload?)";
		set_item(c, IT_VALID, ST_FAIL, "%s%s", valid.what, hint);
	}

	/* 2-4. Forged, stale and unsigned requests. */
	if (c->secret[0] == '\0') {
		static const char skip[] =
			"no --secret: the requests are unsigned; give the workflow's secret to "
			"check that forged requests are refused";
		set_item(c, IT_BAD_SIG, ST_SKIP, "%s", skip);
		set_item(c, IT_STALE, ST_SKIP, "%s", skip);
		set_item(c, IT_NO_SIG, ST_SKIP, "%s", skip);
	} else {
		probe_init(c, &bad, "bad-signature", step, c->payload);
		bad.sig = SIG_WRONG;
		probe_init(c, &stale, "stale-timestamp", step, c->payload);
		stale.sig = SIG_STALE;
		probe_init(c, &nosig, "missing-signature", step, c->payload);
		nosig.sig = SIG_NONE;
		if (send_probe(c, &bad, e) || send_probe(c, &stale, e) || send_probe(c, &nosig, e))
			goto out;
		judge_signature(c, IT_BAD_SIG, &bad, "signed with another secret");
		judge_signature(c, IT_STALE, &stale, "signed, webhook-timestamp 10 minutes old");
		judge_signature(c, IT_NO_SIG, &nosig, "no webhook-signature");
	}

	if (!ok) {
		static const char skip[] = "the plain request got no valid answer (valid-answer)";
		set_item(c, IT_UNKNOWN, ST_SKIP, "%s", skip);
		set_item(c, IT_SAME_ID, ST_SKIP, "%s", skip);
		set_item(c, IT_MEMO_REUSE, ST_SKIP, "%s", skip);
		set_item(c, IT_MEMO_OUTAGE, ST_SKIP, "%s", skip);
	} else if (more_probes(c, &unknown, &first, &second, &outage, e)) {
		goto out;
	}

	/* 9. An input the user says it rejects. */
	if (!c->error_probe) {
		set_item(c, IT_ERROR, ST_SKIP,
			 "a caller cannot make a webhook fail: give --error-step or "
			 "--error-payload with a step your webhook rejects");
	} else {
		probe_init(c, &error, "error", (int)c->error_step, c->error_payload);
		if (send_probe(c, &error, e))
			goto out;
		judge_error(c, &error);
	}

	/* The deadline, over every correctly signed request. */
	if (c->slowest_ms > c->timeout_ms)
		set_item(c, IT_DEADLINE, ST_FAIL,
			 "the %s request took %lld ms; the deadline is %lld ms (hookflow would "
			 "have aborted the call and retried the step)",
			 c->slowest, (long long)c->slowest_ms, c->timeout_ms);
	else
		set_item(c, IT_DEADLINE, ST_PASS, "slowest answer %lld ms (%s) of %lld ms",
			 (long long)c->slowest_ms, c->slowest ? c->slowest : "-", c->timeout_ms);
out:
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		probe_cleanup(all[i]);
	return e->code;
}

/* ---- the report ------------------------------------------------------- */

static const char *status_name(enum item_status s)
{
	return s == ST_PASS ? "PASS" : s == ST_FAIL ? "FAIL" : "SKIP";
}

static int report(const struct cw *c)
{
	int passed = 0, failed = 0, skipped = 0;
	for (int i = 0; i < IT__COUNT; i++) {
		passed += c->items[i].status == ST_PASS;
		failed += c->items[i].status == ST_FAIL;
		skipped += c->items[i].status == ST_SKIP;
	}
	if (c->json) {
		json_t *items = json_array();
		for (int i = 0; i < IT__COUNT; i++) {
			enum item_status st = c->items[i].status;
			json_array_append_new(items, json_pack("{s:s,s:s,s:s}", "id", item_names[i],
							       "status",
							       st == ST_PASS   ? "pass"
							       : st == ST_FAIL ? "fail"
									       : "skip",
							       "detail", c->items[i].detail));
		}
		json_t *doc =
			json_pack("{s:s,s:b,s:I,s:s,s:o,s:i,s:i,s:i}", "url", c->url, "signed",
				  c->secret[0] != '\0', "timeout_ms", (json_int_t)c->timeout_ms,
				  "memo_url", c->memo_base, "items", items, "passed", passed,
				  "failed", failed, "skipped", skipped);
		char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		if (text != NULL)
			puts(text);
		free(text);
		json_decref(doc);
	} else {
		printf("check-webhook %s\n", c->url);
		printf("  %s, deadline %lld ms, memo served at %s\n\n",
		       c->secret[0] ? "signed with the given secret" : "unsigned (no --secret)",
		       c->timeout_ms, c->memo_base);
		static const char *const head[] = {"RESULT", "ITEM", "DETAIL"};
		struct table t;
		table_init(&t, 3, head, 40);
		for (int i = 0; i < IT__COUNT; i++) {
			const char *row[] = {status_name(c->items[i].status), item_names[i],
					     c->items[i].detail};
			table_add_row(&t, row);
		}
		struct strbuf b = {0};
		table_render(&t, &b);
		if (b.data != NULL)
			fputs(b.data, stdout);
		strbuf_cleanup(&b);
		table_cleanup(&t);
		printf("\n%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	}
	return failed > 0 ? CLI_FAILED : CLI_OK;
}

/* ---- the command line ------------------------------------------------- */

static enum err_code parse_memo_listen(struct cw *c, const char *v, struct err *e)
{
	const char *colon = strrchr(v, ':');
	if (colon == NULL || colon == v)
		return err_set(e, ERR_INVALID, "--memo-listen: must be HOST:PORT (127.0.0.1:0)");
	const char *h = v;
	size_t hl = (size_t)(colon - v);
	if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
		h++, hl -= 2;
	if (hl == 0 || hl >= sizeof c->memo_host)
		return err_set(e, ERR_INVALID, "--memo-listen: the host must be an IP address");
	memcpy(c->memo_host, h, hl);
	c->memo_host[hl] = '\0';
	return cli_parse_int("--memo-listen's port", colon + 1, 0, 65535, &c->memo_port, e);
}

static enum err_code check_url(const char *field, const char *v, struct err *e)
{
	size_t n = strlen(v);
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return err_set(e, ERR_INVALID, "%s: must start with http:// or https://", field);
	if (n > CW_MAX_URL)
		return err_set(e, ERR_INVALID, "%s: exceeds %d bytes", field, CW_MAX_URL);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f)
			return err_set(e, ERR_INVALID, "%s: must be visible ASCII (no spaces)",
				       field);
	const char *host = v + (v[4] == ':' ? 7 : 8);
	if (*host == '\0' || *host == '/')
		return err_set(e, ERR_INVALID, "%s: must name a host", field);
	return ERR_OK;
}

static enum err_code json_text(const char *field, const char *v, bool object, char **out,
			       struct err *e)
{
	json_t *doc = NULL;
	if (cli_parse_json(field, v, CLI_MAX_JSON_ARG, &doc, e))
		return e->code;
	if (object && verdict_check_headers(field, doc, e)) {
		json_decref(doc);
		return e->code;
	}
	*out = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(doc);
	return *out != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

static enum err_code read_secret(struct cw *c, const char *field, const char *v, bool file,
				 struct err *e)
{
	if (c->secret[0] != '\0')
		return err_set(e, ERR_INVALID, "%s: give one of --secret and --secret-file", field);
	char *text = NULL;
	if (file) {
		if (cli_read_file(field, v, SIG_SECRET_MAX + 2, &text, e))
			return e->code;
		size_t n = strlen(text);
		while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
			text[--n] = '\0';
		v = text;
	}
	enum err_code rc = sig_check_secret(field, v, e);
	if (rc == ERR_OK)
		snprintf(c->secret, sizeof c->secret, "%s", v);
	free(text);
	return rc;
}

static enum err_code parse_args(struct cw *c, int argc, char **argv, struct err *e)
{
	unsigned seen = 0;
	static const char *const names[] = {
		"--secret",        "--secret-file", "--timeout-ms", "--step",
		"--payload",       "--headers",     "--workflow",   "--error-step",
		"--error-payload", "--memo-listen", "--memo-url",   "--json",
	};
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] != '-') {
			if (c->url != NULL)
				return err_set(e, ERR_INVALID, "unexpected argument %.100s", a);
			if (check_url("URL", a, e))
				return e->code;
			c->url = a;
			continue;
		}
		size_t nl = strcspn(a, "=");
		int k = -1;
		for (int j = 0; j < (int)(sizeof names / sizeof *names); j++)
			if (strlen(names[j]) == nl && strncmp(names[j], a, nl) == 0)
				k = j;
		if (k < 0)
			return err_set(e, ERR_INVALID, "unknown option %.*s",
				       (int)(nl > 100 ? 100 : nl), a);
		if (seen & (1u << k))
			return err_set(e, ERR_INVALID, "%s: given twice", names[k]);
		seen |= 1u << k;
		const char *name = names[k];
		if (strcmp(name, "--json") == 0) {
			if (a[nl] == '=')
				return err_set(e, ERR_INVALID, "--json: takes no value");
			c->json = true;
			continue;
		}
		const char *v = a[nl] == '=' ? a + nl + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (v == NULL)
			return err_set(e, ERR_INVALID, "%s: needs a value", name);
		enum err_code rc = ERR_OK;
		if (strcmp(name, "--secret") == 0 || strcmp(name, "--secret-file") == 0)
			rc = read_secret(c, name, v, name[8] == '-', e);
		else if (strcmp(name, "--timeout-ms") == 0)
			rc = cli_parse_int(name, v, 1, 3600000, &c->timeout_ms, e);
		else if (strcmp(name, "--step") == 0)
			rc = cli_parse_int(name, v, 0, 2147483647, &c->step, e);
		else if (strcmp(name, "--error-step") == 0)
			rc = cli_parse_int(name, v, 0, 2147483647, &c->error_step, e);
		else if (strcmp(name, "--payload") == 0)
			rc = json_text(name, v, false, &c->payload, e);
		else if (strcmp(name, "--error-payload") == 0)
			rc = json_text(name, v, false, &c->error_payload, e);
		else if (strcmp(name, "--headers") == 0)
			rc = json_text(name, v, true, &c->headers, e);
		else if (strcmp(name, "--workflow") == 0)
			rc = ids_check_workflow_name(name, v, strlen(v), e);
		else if (strcmp(name, "--memo-listen") == 0)
			rc = parse_memo_listen(c, v, e);
		else if (strcmp(name, "--memo-url") == 0)
			rc = check_url(name, v, e);
		if (rc)
			return rc;
		if (strcmp(name, "--workflow") == 0)
			c->workflow = v;
		else if (strcmp(name, "--memo-url") == 0)
			c->memo_url = v;
		else if (strcmp(name, "--error-step") == 0 || strcmp(name, "--error-payload") == 0)
			c->error_probe = true;
	}
	if (c->url == NULL)
		return err_set(e, ERR_INVALID, "missing argument URL (the webhook's step URL)");
	if ((seen & (1u << 7)) == 0)
		c->error_step = c->step;
	return ERR_OK;
}

int check_webhook_main(int argc, char **argv)
{
	struct cw c = {
		.timeout_ms = 30000,
		.workflow = "check-webhook",
		.memo_host = "127.0.0.1",
	};
	struct err e = {0};
	int rc = CLI_OK;
	log_setup(LOG_ERROR, 0);
	signal(SIGPIPE, SIG_IGN);
	if (parse_args(&c, argc, argv, &e) == ERR_OK) {
		if (c.payload == NULL)
			c.payload = strdup("{}");
		if (c.headers == NULL)
			c.headers = strdup("{}");
		if (c.error_payload == NULL && c.payload != NULL)
			c.error_payload = strdup(c.payload);
		if (c.payload == NULL || c.headers == NULL || c.error_payload == NULL)
			err_set(&e, ERR_INTERNAL, "out of memory");
	}
	if (e.code == ERR_OK)
		memo_stub_start(c.memo_host, (int)c.memo_port, &c.memo, &e);
	if (e.code == ERR_OK) {
		bool wildcard =
			strcmp(c.memo_host, "0.0.0.0") == 0 || strcmp(c.memo_host, "::") == 0;
		if (c.memo_url != NULL) {
			size_t n = strlen(c.memo_url);
			while (n > 0 && c.memo_url[n - 1] == '/')
				n--;
			snprintf(c.memo_base, sizeof c.memo_base, "%.*s", (int)n, c.memo_url);
		} else if (wildcard) {
			err_set(&e, ERR_INVALID,
				"--memo-url: required with a wildcard --memo-listen (the URL the "
				"webhook reaches the memo at)");
		} else {
			bool v6 = strchr(c.memo_host, ':') != NULL;
			snprintf(c.memo_base, sizeof c.memo_base, "http://%s%s%s:%d", v6 ? "[" : "",
				 c.memo_host, v6 ? "]" : "", memo_stub_port(c.memo));
		}
	}
	if (e.code == ERR_OK) {
		ids_ulid_new(c.run_prefix + snprintf(c.run_prefix, sizeof c.run_prefix, "check-"));
		int exit_code = -1;
		if (battery(&c, &exit_code, &e) == ERR_OK)
			rc = exit_code >= 0 ? exit_code : report(&c);
		else
			rc = CLI_FAILED;
		if (e.code)
			fprintf(stderr, "hookflow: check-webhook: %s\n", e.msg);
	} else {
		fprintf(stderr,
			"hookflow: check-webhook: %s\nRun `hookflow help` for the commands and "
			"their "
			"options.\n",
			e.msg);
		rc = e.code == ERR_INVALID ? CLI_USAGE : CLI_FAILED;
	}
	fflush(stdout);
	memo_stub_stop(c.memo);
	free(c.payload);
	free(c.headers);
	free(c.error_payload);
	OPENSSL_cleanse(c.secret, sizeof c.secret);
	return rc;
}
