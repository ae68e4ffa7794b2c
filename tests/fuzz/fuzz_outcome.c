/* fuzz_outcome: step answers. The input is an outcome body (outcome_parse,
 * with a round trip through outcome_to_json), then the body of a webhook
 * answer with status 200, 503 and 404 (verdict_from_call). */
#include "tests/fuzz/fuzz.h"

#include "base/jsonscan.h"
#include "service/verdict.h"

#define NOW_MS 1764669600000LL /* 2025-12-02T10:00:00Z */

/* A payload or result kept as text: JSON that jansson reads. */
static void check_text(const char *text)
{
	if (text == NULL)
		return;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	FUZZ_CHECK(v != NULL);
	json_decref(v);
}

static void check_outcome(const struct outcome *o)
{
	FUZZ_CHECK(o->kind >= OUTCOME_CONTINUE && o->kind <= OUTCOME_PENDING);
	FUZZ_CHECK(o->kind == OUTCOME_CONTINUE ||
		   (o->children == NULL && o->wait_children == NULL));
	switch (o->kind) {
	case OUTCOME_CONTINUE:
		/* the payload decoded, or as the text it came as (then valid JSON) */
		FUZZ_CHECK((o->payload != NULL) != (o->payload_text != NULL));
		FUZZ_CHECK(o->result == NULL && o->result_text == NULL && o->reason == NULL);
		check_text(o->payload_text);
		if (o->trigger == TRIGGER_AFTER)
			FUZZ_CHECK(o->delay_ms > 0 && o->delay_ms <= VERDICT_MAX_DELAY_MS);
		if (o->trigger == TRIGGER_SIGNAL) {
			FUZZ_CHECK(o->correlation_key != NULL);
			FUZZ_CHECK(ids_check_key("k", o->correlation_key,
						 strlen(o->correlation_key), NULL) == ERR_OK);
			FUZZ_CHECK(o->timeout_ms >= 1 && o->timeout_ms <= VERDICT_MAX_DELAY_MS);
			/* several keys: 1..16, the first is correlation_key */
			if (o->correlation_keys != NULL) {
				size_t n = json_array_size(o->correlation_keys);
				FUZZ_CHECK(n >= 1 && n <= VERDICT_MAX_WAIT_KEYS);
				FUZZ_CHECK(strcmp(json_string_value(
							  json_array_get(o->correlation_keys, 0)),
						  o->correlation_key) == 0);
			}
		} else {
			FUZZ_CHECK(o->correlation_key == NULL && o->correlation_keys == NULL);
		}
		/* children only with no other trigger, 1..VERDICT_MAX_CHILDREN of them */
		if (o->children != NULL)
			FUZZ_CHECK(o->trigger == TRIGGER_NOW && json_array_size(o->children) >= 1 &&
				   json_array_size(o->children) <= VERDICT_MAX_CHILDREN);
		FUZZ_CHECK(o->wait_children == NULL || o->children != NULL);
		break;
	case OUTCOME_PENDING:
		FUZZ_CHECK(o->payload == NULL && o->result == NULL && o->reason == NULL);
		FUZZ_CHECK(o->payload_text == NULL && o->result_text == NULL);
		FUZZ_CHECK(o->kv.put == NULL && o->kv.del == NULL);
		FUZZ_CHECK(o->timeout_ms >= 0 && o->timeout_ms <= VERDICT_MAX_DELAY_MS);
		FUZZ_CHECK(o->heartbeat_timeout_ms >= 0 &&
			   o->heartbeat_timeout_ms <= VERDICT_MAX_DELAY_MS);
		break;
	case OUTCOME_SUCCEED:
		FUZZ_CHECK((o->result != NULL) != (o->result_text != NULL));
		FUZZ_CHECK(o->payload == NULL && o->payload_text == NULL && o->reason == NULL);
		check_text(o->result_text);
		break;
	case OUTCOME_FAIL:
	case OUTCOME_CANCEL:
		FUZZ_CHECK(o->reason != NULL && o->payload == NULL && o->result == NULL);
		FUZZ_CHECK(o->payload_text == NULL && o->result_text == NULL);
		FUZZ_CHECK(strlen(o->reason) <= VERDICT_MAX_REASON_BYTES);
		FUZZ_CHECK(ids_utf8_valid(o->reason, strlen(o->reason)));
		break;
	}
}

/* An outcome encoded with outcome_to_json parses back to the same outcome
 * (a pending one is never encoded: never replayed). */
static void check_round_trip(const struct outcome *o)
{
	struct outcome again;
	struct err e = {0};
	if (o->kind == OUTCOME_PENDING) {
		FUZZ_CHECK(outcome_to_json(o) == NULL);
		return;
	}
	json_t *j = outcome_to_json(o);
	FUZZ_CHECK(j != NULL);
	char *text = json_dumps(j, JSON_COMPACT);
	FUZZ_CHECK(text != NULL);
	if (outcome_parse(text, strlen(text), &again, &e) != ERR_OK) {
		fprintf(stderr, "round trip: %s\n  of %s\n", e.msg, text);
		abort();
	}
	FUZZ_CHECK(again.kind == o->kind && again.trigger == o->trigger);
	FUZZ_CHECK(again.delay_ms == o->delay_ms && again.timeout_ms == o->timeout_ms);
	FUZZ_CHECK(again.run_at_ms == o->run_at_ms);
	json_t *j2 = outcome_to_json(&again);
	FUZZ_CHECK(json_equal(j, j2));
	json_decref(j2);
	outcome_cleanup(&again);
	free(text);
	json_decref(j);
}

/* The run's error text: stored as Postgres text and shown in JSON. */
static void check_error_text(const struct verdict *v)
{
	size_t n = strnlen(v->error, sizeof v->error);
	FUZZ_CHECK(n < sizeof v->error);
	FUZZ_CHECK(ids_utf8_valid(v->error, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct err e = {0};
	struct outcome o;
	/* jsonscan vouches only for what jansson accepts. */
	if (ids_utf8_valid(body, size) && jsonscan_object(body, size, NULL, 0, NULL)) {
		json_t *any =
			json_loadb(body, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
		FUZZ_CHECK(any != NULL);
		json_decref(any);
	}
	enum err_code rc = outcome_parse(body, size, &o, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
		FUZZ_CHECK(o.kind == 0 && o.payload == NULL && o.reason == NULL &&
			   o.kv.put == NULL && o.payload_text == NULL && o.result_text == NULL);
	} else {
		check_outcome(&o);
		check_round_trip(&o);
	}
	outcome_cleanup(&o);

	struct verdict v;
	struct call_result cr = {.status = 200, .body = body, .body_len = size};
	verdict_from_call(&cr, true, NOW_MS, &v);
	FUZZ_CHECK((v.kind == VERDICT_OK) == (rc == ERR_OK));
	if (v.kind == VERDICT_OK) {
		check_outcome(&v.outcome);
	} else {
		FUZZ_CHECK(v.kind == VERDICT_PERMANENT);
		FUZZ_CHECK(strncmp(v.error, "invalid step response: ", 23) == 0);
	}
	check_error_text(&v);
	verdict_cleanup(&v);

	verdict_from_call(&cr, false, NOW_MS, &v); /* a callback: any 2xx acknowledges */
	FUZZ_CHECK(v.kind == VERDICT_OK);
	verdict_cleanup(&v);

	cr.status = 503;
	cr.retry_after = "120";
	verdict_from_call(&cr, true, NOW_MS, &v);
	FUZZ_CHECK(v.kind == VERDICT_TRANSIENT || v.kind == VERDICT_PERMANENT);
	FUZZ_CHECK(strncmp(v.error, "HTTP 503", 8) == 0);
	FUZZ_CHECK(v.retry_after_ms == (v.kind == VERDICT_TRANSIENT ? 120000 : -1));
	check_error_text(&v);
	enum verdict_kind k503 = v.kind;
	verdict_cleanup(&v);

	/* The error-body override decides alike whatever the status class. */
	cr.status = 404;
	verdict_from_call(&cr, true, NOW_MS, &v);
	FUZZ_CHECK(strncmp(v.error, "HTTP 404", 8) == 0);
	FUZZ_CHECK(v.kind == k503 || (k503 == VERDICT_TRANSIENT && v.kind == VERDICT_PERMANENT));
	check_error_text(&v);
	verdict_cleanup(&v);
	return 0;
}
