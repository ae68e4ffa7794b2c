/* test_verdict: status classes, error bodies, Retry-After, backoff and outcome bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/canon.h"
#include "base/ids.h"
#include "service/verdict.h"

#define NOW_MS 1445412450000LL /* 30 s before Wed, 21 Oct 2015 07:28:00 GMT */
#define MAX_DELAY "31622400000"
#define GOOD_BODY "{\"outcome\":\"continue\",\"payload\":{\"n\":1}}"
#define OVERRIDE_FALSE "{\"error\":{\"message\":\"card declined\",\"retryable\":false}}"
#define OVERRIDE_TRUE "{\"error\":{\"message\":\"try later\",\"retryable\":true}}"

/* ---- the status-class table ---- */

struct call_case {
	const char *name;
	long status;
	const char *body;
	bool callback; /* expect_outcome false */
	int transport_error;
	const char *transport_msg;
	bool timed_out;
	bool too_large;
	const char *retry_after;
	enum verdict_kind kind;
	const char *error;      /* exact, or a prefix when it ends in "*" */
	int64_t retry_after_ms; /* 0 in the table means -1: set only where a test wants it */
};

static const struct call_case call_cases[] = {
	{.name = "200 with a valid outcome is ok",
	 .status = 200,
	 .body = GOOD_BODY,
	 .kind = VERDICT_OK,
	 .error = ""},
	{.name = "201 with a valid outcome is ok",
	 .status = 201,
	 .body = GOOD_BODY,
	 .kind = VERDICT_OK,
	 .error = ""},
	{.name = "200 with an empty body is permanent",
	 .status = 200,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "invalid step response: empty body"},
	{.name = "204 on a step call is permanent",
	 .status = 204,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "invalid step response: empty body"},
	{.name = "200 with text is permanent",
	 .status = 200,
	 .body = "OK",
	 .kind = VERDICT_PERMANENT,
	 .error = "invalid step response: body: invalid JSON: *"},
	{.name = "200 with a bad outcome is permanent",
	 .status = 200,
	 .body = "{\"outcome\":\"done\"}",
	 .kind = VERDICT_PERMANENT,
	 .error = "invalid step response: outcome: must be one of continue, succeed, fail, cancel, "
		  "pending"},
	{.name = "200 with an error body is still an invalid step response",
	 .status = 200,
	 .body = OVERRIDE_TRUE,
	 .kind = VERDICT_PERMANENT,
	 .error = "invalid step response: outcome: is required"},
	{.name = "204 on a callback is ok",
	 .status = 204,
	 .body = "",
	 .callback = true,
	 .kind = VERDICT_OK,
	 .error = ""},
	{.name = "200 with text on a callback is ok",
	 .status = 200,
	 .body = "thanks",
	 .callback = true,
	 .kind = VERDICT_OK,
	 .error = ""},
	{.name = "100 is permanent",
	 .status = 100,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 100"},
	{.name = "101 is permanent",
	 .status = 101,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 101"},
	{.name = "301 is permanent",
	 .status = 301,
	 .body = "moved",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 301: moved"},
	{.name = "307 is permanent",
	 .status = 307,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 307"},
	{.name = "400 is permanent",
	 .status = 400,
	 .body = "bad input",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 400: bad input"},
	{.name = "401 is permanent",
	 .status = 401,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 401"},
	{.name = "404 is permanent",
	 .status = 404,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 404"},
	{.name = "408 is transient",
	 .status = 408,
	 .body = "",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 408"},
	{.name = "409 is permanent",
	 .status = 409,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 409"},
	{.name = "422 is permanent",
	 .status = 422,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 422"},
	{.name = "425 is transient",
	 .status = 425,
	 .body = "",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 425"},
	{.name = "429 is transient",
	 .status = 429,
	 .body = "slow down",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 429: slow down"},
	{.name = "499 is permanent",
	 .status = 499,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 499"},
	{.name = "500 is transient",
	 .status = 500,
	 .body = "boom\n",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 500: boom"},
	{.name = "502 is transient",
	 .status = 502,
	 .body = "",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 502"},
	{.name = "503 is transient",
	 .status = 503,
	 .body = "",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 503"},
	{.name = "599 is transient",
	 .status = 599,
	 .body = "",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 599"},
	{.name = "600 is permanent",
	 .status = 600,
	 .body = "",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 600"},
	{.name = "connection refused is transient",
	 .transport_error = 7,
	 .transport_msg = "Connection refused",
	 .kind = VERDICT_TRANSIENT,
	 .error = "connection failed: Connection refused"},
	{.name = "DNS failure is transient",
	 .transport_error = 6,
	 .transport_msg = "Could not resolve host: nowhere.invalid",
	 .kind = VERDICT_TRANSIENT,
	 .error = "connection failed: Could not resolve host: nowhere.invalid"},
	{.name = "transport error without text is transient",
	 .transport_error = 35,
	 .kind = VERDICT_TRANSIENT,
	 .error = "connection failed: transport error 35"},
	{.name = "timeout is transient",
	 .transport_error = 28,
	 .transport_msg = "Timeout",
	 .timed_out = true,
	 .kind = VERDICT_TRANSIENT,
	 .error = "timed out after 2000 ms"},
	{.name = "too large 200 is permanent",
	 .status = 200,
	 .body = "{",
	 .too_large = true,
	 .kind = VERDICT_PERMANENT,
	 .error = "response body exceeds 1048576 bytes"},
	{.name = "too large 503 is permanent",
	 .status = 503,
	 .body = "x",
	 .too_large = true,
	 .kind = VERDICT_PERMANENT,
	 .error = "response body exceeds 1048576 bytes"},
	{.name = "override retryable false makes 500 permanent",
	 .status = 500,
	 .body = OVERRIDE_FALSE,
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 500: " OVERRIDE_FALSE},
	{.name = "override retryable false makes 429 permanent",
	 .status = 429,
	 .body = OVERRIDE_FALSE,
	 .retry_after = "5",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 429: " OVERRIDE_FALSE},
	{.name = "override retryable true makes 400 transient",
	 .status = 400,
	 .body = OVERRIDE_TRUE,
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 400: " OVERRIDE_TRUE},
	{.name = "override retryable true makes 301 transient",
	 .status = 301,
	 .body = OVERRIDE_TRUE,
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 301: " OVERRIDE_TRUE},
	{.name = "override with extra members still applies",
	 .status = 400,
	 .body = "{\"error\":{\"code\":\"busy\",\"message\":\"m\",\"retryable\":true}}",
	 .kind = VERDICT_TRANSIENT,
	 .error = "*"},
	{.name = "override with a string retryable is ignored",
	 .status = 503,
	 .body = "{\"error\":{\"message\":\"m\",\"retryable\":\"false\"}}",
	 .kind = VERDICT_TRANSIENT,
	 .error = "*"},
	{.name = "override without message is ignored",
	 .status = 400,
	 .body = "{\"error\":{\"retryable\":true}}",
	 .kind = VERDICT_PERMANENT,
	 .error = "*"},
	{.name = "override with a string error is ignored",
	 .status = 400,
	 .body = "{\"error\":\"retryable\"}",
	 .kind = VERDICT_PERMANENT,
	 .error = "*"},
	{.name = "override with retryable outside error is ignored",
	 .status = 400,
	 .body = "{\"error\":{\"message\":\"m\"},\"retryable\":true}",
	 .kind = VERDICT_PERMANENT,
	 .error = "*"},
	{.name = "truncated override is ignored",
	 .status = 400,
	 .body = "{\"error\":{\"message\":\"m\",\"retryable\":tr",
	 .kind = VERDICT_PERMANENT,
	 .error = "*"},
	{.name = "429 with Retry-After seconds is transient with a delay",
	 .status = 429,
	 .body = "",
	 .retry_after = "120",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 429",
	 .retry_after_ms = 120000},
	{.name = "503 with a future Retry-After date waits until then",
	 .status = 503,
	 .body = "",
	 .retry_after = "Wed, 21 Oct 2015 07:28:00 GMT",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 503",
	 .retry_after_ms = 30000},
	{.name = "503 with a past Retry-After date retries at once",
	 .status = 503,
	 .body = "",
	 .retry_after = "Wed, 21 Oct 2015 07:00:00 GMT",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 503",
	 .retry_after_ms = -2 /* 0 */},
	{.name = "503 with a garbage Retry-After is ignored",
	 .status = 503,
	 .body = "",
	 .retry_after = "in a while",
	 .kind = VERDICT_TRANSIENT,
	 .error = "HTTP 503"},
	{.name = "400 ignores Retry-After",
	 .status = 400,
	 .body = "",
	 .retry_after = "120",
	 .kind = VERDICT_PERMANENT,
	 .error = "HTTP 400"},
	{.name = "overridden 400 honours Retry-After",
	 .status = 400,
	 .body = OVERRIDE_TRUE,
	 .retry_after = "5",
	 .kind = VERDICT_TRANSIENT,
	 .error = "*",
	 .retry_after_ms = 5000},
	{.name = "transport error ignores Retry-After",
	 .transport_error = 7,
	 .transport_msg = "Connection reset by peer",
	 .retry_after = "5",
	 .kind = VERDICT_TRANSIENT,
	 .error = "connection failed: Connection reset by peer"},
};

static void run_call_case(const struct call_case *c, struct verdict *v)
{
	struct call_result r = {
		.transport_error = c->transport_error,
		.transport_msg = c->transport_msg,
		.timed_out = c->timed_out,
		.timeout_ms = 2000,
		.too_large = c->too_large,
		.max_response_bytes = 1048576,
		.status = c->status,
		.body = c->body,
		.body_len = c->body ? strlen(c->body) : 0,
		.retry_after = c->retry_after,
	};

	verdict_from_call(&r, !c->callback, NOW_MS, v);
}

static void test_status_class_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof call_cases / sizeof call_cases[0]; i++) {
		const struct call_case *c = &call_cases[i];
		struct verdict v;
		char error[sizeof v.error];
		enum verdict_kind kind;
		int64_t ra, want_ra = c->retry_after_ms == 0    ? -1
				      : c->retry_after_ms == -2 ? 0
								: c->retry_after_ms;
		size_t n = strlen(c->error);
		bool prefix = n > 0 && c->error[n - 1] == '*';

		run_call_case(c, &v);
		kind = v.kind;
		ra = v.retry_after_ms;
		memcpy(error, v.error, sizeof error);
		if (kind == VERDICT_OK && !c->callback)
			assert_int_equal(v.outcome.kind, OUTCOME_CONTINUE);
		verdict_cleanup(&v);
		if (kind != c->kind)
			fail_msg("%s: kind %d, want %d (%s)", c->name, kind, c->kind, error);
		if (prefix ? strncmp(error, c->error, n - 1) != 0 : strcmp(error, c->error) != 0)
			fail_msg("%s: error \"%s\", want \"%s\"", c->name, error, c->error);
		if (ra != want_ra)
			fail_msg("%s: retry_after_ms %lld, want %lld", c->name, (long long)ra,
				 (long long)want_ra);
	}
}

static void test_ok_step_carries_parsed_outcome(void **state)
{
	const char *body = "{\"outcome\":\"succeed\",\"result\":{\"total\":3}}";
	struct call_result r = {.status = 200, .body = body, .body_len = strlen(body)};
	struct verdict v;
	(void)state;

	verdict_from_call(&r, true, NOW_MS, &v);
	assert_int_equal(v.kind, VERDICT_OK);
	assert_int_equal(v.outcome.kind, OUTCOME_SUCCEED);
	/* The result is passed on as the text it came as. */
	assert_null(v.outcome.result);
	assert_string_equal(v.outcome.result_text, "{\"total\":3}");
	assert_int_equal(v.retry_after_ms, -1);
	verdict_cleanup(&v);
}

/* ---- error text ---- */

static void error_for(long status, const char *body, size_t len, char *out, size_t cap)
{
	struct call_result r = {.status = status, .body = body, .body_len = len};
	struct verdict v;

	verdict_from_call(&r, true, NOW_MS, &v);
	snprintf(out, cap, "%s", v.error);
	verdict_cleanup(&v);
}

static void test_error_text_keeps_first_200_bytes(void **state)
{
	char body[301], want[256], got[512];
	(void)state;

	memset(body, 'a', 300);
	body[300] = '\0';
	snprintf(want, sizeof want, "HTTP 500: %.200s", body);
	error_for(500, body, 300, got, sizeof got);
	assert_string_equal(got, want);
}

static void test_error_text_cuts_on_utf8_boundary(void **state)
{
	char body[256], want[256], got[512];
	(void)state;

	/* 199 bytes then a 2-byte character straddling byte 200: dropped. */
	memset(body, 'a', 199);
	memcpy(body + 199, "\xc3\xa9zzz", 6);
	snprintf(want, sizeof want, "HTTP 500: %.199s", body);
	error_for(500, body, 204, got, sizeof got);
	assert_string_equal(got, want);

	/* 198 bytes then the character ends exactly at byte 200: kept. */
	memset(body, 'a', 198);
	memcpy(body + 198, "\xc3\xa9zzz", 6);
	snprintf(want, sizeof want, "HTTP 500: %.200s", body);
	error_for(500, body, 203, got, sizeof got);
	assert_string_equal(got, want);
	assert_true(ids_utf8_valid(got, strlen(got)));
}

static void test_error_text_replaces_invalid_utf8(void **state)
{
	char got[512];
	(void)state;

	error_for(502,
		  "ab\xff"
		  "cd",
		  5, got, sizeof got);
	assert_string_equal(got, "HTTP 502: ab\xef\xbf\xbd"
				 "cd");
	error_for(502, "a\0b", 3, got, sizeof got);
	assert_string_equal(got, "HTTP 502: a\xef\xbf\xbd"
				 "b");
	error_for(502, "\xed\xa0\x80", 3, got, sizeof got); /* a surrogate: 3 bad bytes */
	assert_string_equal(got, "HTTP 502: \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

static void test_error_text_of_200_bad_bytes_fits(void **state)
{
	char body[200], got[512];
	(void)state;

	memset(body, 0xff, sizeof body);
	error_for(500, body, sizeof body, got, sizeof got);
	assert_true(strlen(got) < 512);
	assert_true(ids_utf8_valid(got, strlen(got)));
	assert_memory_equal(got, "HTTP 500: \xef\xbf\xbd", 13);
}

static void test_error_text_reads_only_body_len(void **state)
{
	char got[512];
	(void)state;

	error_for(404, "not found and more", 9, got, sizeof got);
	assert_string_equal(got, "HTTP 404: not found");
	error_for(404, "  \r\n", 4, got, sizeof got); /* white space only */
	assert_string_equal(got, "HTTP 404");
}

/* ---- Retry-After ---- */

static void test_retry_after_parse_table(void **state)
{
	static const struct {
		const char *value;
		bool ok;
		int64_t ms;
	} cases[] = {
		{"0", true, 0},
		{"120", true, 120000},
		{" 5\t", true, 5000},
		{"Wed, 21 Oct 2015 07:28:00 GMT", true, 30000},
		{"Wednesday, 21-Oct-15 07:28:00 GMT", true, 30000},
		{"Wed Oct 21 07:28:00 2015", true, 30000},
		{"Wed, 21 Oct 2015 07:27:30 GMT", true, 0}, /* exactly now */
		{"Thu, 01 Jan 1970 00:00:00 GMT", true, 0}, /* the past */
		{"", false, 0},
		{"   ", false, 0},
		{"-5", false, 0},
		{"1.5", false, 0},
		{"5s", false, 0},
		{"+5", false, 0},
		{"soon", false, 0},
		{"Wed, 21 Oct 2015 07:28:00", false, 0},
		{"2015-10-21T07:28:00Z", false, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t ms = -99;
		bool ok = verdict_parse_retry_after(cases[i].value, NOW_MS, &ms);
		if (ok != cases[i].ok)
			fail_msg("\"%s\": %s", cases[i].value, ok ? "accepted" : "rejected");
		if (ok && ms != cases[i].ms)
			fail_msg("\"%s\": %lld ms, want %lld", cases[i].value, (long long)ms,
				 (long long)cases[i].ms);
	}
	assert_false(verdict_parse_retry_after(NULL, NOW_MS, &(int64_t){0}));
}

static void test_retry_after_huge_seconds_saturates(void **state)
{
	int64_t ms = 0;
	(void)state;

	assert_true(verdict_parse_retry_after("99999999999999999999999999", NOW_MS, &ms));
	assert_true(ms >= INT64_MAX / 1000);
}

static void test_retry_delay_caps_retry_after_at_max(void **state)
{
	struct verdict v = {.kind = VERDICT_TRANSIENT, .retry_after_ms = 600000};
	(void)state;

	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 1), 300000);
	v.retry_after_ms = 5000;
	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 9), 5000);
	v.retry_after_ms = 0;
	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 3), 0);
	v.retry_after_ms = -1;
	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 3), 4000);
	v.retry_after_ms = INT64_MAX;
	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 1), 300000);
}

static void test_retry_delay_from_a_429_call(void **state)
{
	struct call_result r = {.status = 429, .body = "", .retry_after = "3600"};
	struct verdict v;
	(void)state;

	verdict_from_call(&r, true, NOW_MS, &v);
	assert_int_equal(v.kind, VERDICT_TRANSIENT);
	assert_int_equal(verdict_retry_delay_ms(&v, 1000, 300000, 1), 300000);
	verdict_cleanup(&v);
}

/* ---- backoff ---- */

static void test_backoff_table(void **state)
{
	static const struct {
		int64_t base, max;
		int attempt;
		int64_t want;
	} cases[] = {
		{1000, 300000, 1, 1000},
		{1000, 300000, 2, 2000},
		{1000, 300000, 3, 4000},
		{1000, 300000, 9, 256000},
		{1000, 300000, 10, 300000},
		{1000, 300000, 64, 300000},
		{1000, 300000, 1000, 300000},
		{1000, 300000, 2147483647, 300000},
		{1000, 300000, 0, 1000}, /* attempts count from 1 */
		{1000, 300000, -5, 1000},
		{0, 300000, 5, 0},
		{1000, 500, 1, 500}, /* base above max */
		{1000, 0, 3, 0},
		{1, INT64_MAX, 63, INT64_C(1) << 62},
		{1, INT64_MAX, 64, INT64_MAX},
		{INT64_MAX / 2, INT64_MAX, 2, INT64_MAX - 1},
		{INT64_MAX / 2, INT64_MAX, 3, INT64_MAX},
		{INT64_MAX, INT64_MAX, 1000, INT64_MAX},
		{3, 1000000, 20, 1000000},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t got = verdict_backoff_ms(cases[i].base, cases[i].max, cases[i].attempt);
		if (got != cases[i].want)
			fail_msg("case %zu: backoff(%lld, %lld, %d) = %lld, want %lld", i,
				 (long long)cases[i].base, (long long)cases[i].max,
				 cases[i].attempt, (long long)got, (long long)cases[i].want);
	}
}

static void test_backoff_never_decreases_up_to_attempt_1000(void **state)
{
	int64_t prev = 0;
	(void)state;

	for (int a = 1; a <= 1000; a++) {
		int64_t d = verdict_backoff_ms(1000, 86400000, a);
		assert_true(d >= prev);
		assert_true(d <= 86400000);
		prev = d;
	}
	assert_int_equal(prev, 86400000);
}

/* ---- outcome bodies ---- */

struct valid_case {
	const char *body;
	enum outcome_kind kind;
	enum trigger_kind trigger;
	int64_t delay_ms;
	const char *key;
	int64_t timeout_ms;
	const char *reason;
	const char *canonical; /* canon_json_dumps(outcome_to_json(parsed)) */
};

static const struct valid_case valid_cases[] = {
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":[\"paid\",\"gone\"],"
	 "\"timeout_ms\":5}}",
	 OUTCOME_CONTINUE, TRIGGER_SIGNAL, 0, "paid", 5, NULL,
	 "{\"outcome\":\"continue\",\"payload\":null,\"wait_for_signal\":{\"correlation_keys\":"
	 "[\"paid\",\"gone\"],\"timeout_ms\":5}}"},
	{"{\"outcome\":\"continue\",\"run_at\":\"2026-12-02T10:15:00Z\"}", OUTCOME_CONTINUE,
	 TRIGGER_AT, 0, NULL, 0, NULL,
	 "{\"outcome\":\"continue\",\"payload\":null,\"run_at\":\"2026-12-02T10:15:00.000Z\"}"},
	{"{\"outcome\":\"continue\",\"payload\":{\"n\":1}}", OUTCOME_CONTINUE, TRIGGER_NOW, 0, NULL,
	 0, NULL, "{\"outcome\":\"continue\",\"payload\":{\"n\":1}}"},
	{"{\"outcome\":\"continue\"}", OUTCOME_CONTINUE, TRIGGER_NOW, 0, NULL, 0, NULL,
	 "{\"outcome\":\"continue\",\"payload\":null}"},
	{" {\"payload\":[1,2.0],\"outcome\":\"continue\"} \n", OUTCOME_CONTINUE, TRIGGER_NOW, 0,
	 NULL, 0, NULL, "{\"outcome\":\"continue\",\"payload\":[1,2]}"},
	{"{\"outcome\":\"continue\",\"payload\":\"x\",\"delay_ms\":60000}", OUTCOME_CONTINUE,
	 TRIGGER_AFTER, 60000, NULL, 0, NULL,
	 "{\"delay_ms\":60000,\"outcome\":\"continue\",\"payload\":\"x\"}"},
	{"{\"outcome\":\"continue\",\"payload\":null,\"delay_ms\":0}", OUTCOME_CONTINUE,
	 TRIGGER_NOW, 0, NULL, 0, NULL, "{\"outcome\":\"continue\",\"payload\":null}"},
	{"{\"outcome\":\"continue\",\"delay_ms\":" MAX_DELAY "}", OUTCOME_CONTINUE, TRIGGER_AFTER,
	 31622400000, NULL, 0, NULL,
	 "{\"delay_ms\":" MAX_DELAY ",\"outcome\":\"continue\",\"payload\":null}"},
	{"{\"outcome\":\"continue\",\"payload\":1,\"wait_for_signal\":"
	 "{\"correlation_key\":\"payment:42\",\"timeout_ms\":604800000}}",
	 OUTCOME_CONTINUE, TRIGGER_SIGNAL, 0, "payment:42", 604800000, NULL,
	 "{\"outcome\":\"continue\",\"payload\":1,\"wait_for_signal\":"
	 "{\"correlation_key\":\"payment:42\",\"timeout_ms\":604800000}}"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":"
	 "{\"timeout_ms\":1,\"correlation_key\":\"caf\\u00e9\"}}",
	 OUTCOME_CONTINUE, TRIGGER_SIGNAL, 0, "caf\xc3\xa9", 1, NULL,
	 "{\"outcome\":\"continue\",\"payload\":null,\"wait_for_signal\":"
	 "{\"correlation_key\":\"caf\xc3\xa9\",\"timeout_ms\":1}}"},
	{"{\"outcome\":\"succeed\",\"result\":{\"total\":3}}", OUTCOME_SUCCEED, TRIGGER_NOW, 0,
	 NULL, 0, NULL, "{\"outcome\":\"succeed\",\"result\":{\"total\":3}}"},
	{"{\"outcome\":\"succeed\"}", OUTCOME_SUCCEED, TRIGGER_NOW, 0, NULL, 0, NULL,
	 "{\"outcome\":\"succeed\",\"result\":null}"},
	{"{\"outcome\":\"fail\",\"reason\":\"card declined\"}", OUTCOME_FAIL, TRIGGER_NOW, 0, NULL,
	 0, "card declined", "{\"outcome\":\"fail\",\"reason\":\"card declined\"}"},
	{"{\"outcome\":\"fail\",\"reason\":\"\"}", OUTCOME_FAIL, TRIGGER_NOW, 0, NULL, 0, "",
	 "{\"outcome\":\"fail\",\"reason\":\"\"}"},
	{"{\"outcome\":\"cancel\",\"reason\":\"user left\"}", OUTCOME_CANCEL, TRIGGER_NOW, 0, NULL,
	 0, "user left", "{\"outcome\":\"cancel\",\"reason\":\"user left\"}"},
	{"{\"outcome\":\"continue\",\"payload\":2,\"kv\":"
	 "{\"put\":{\"app/a\":{\"s\":1}},\"delete\":[\"app/b\"]}}",
	 OUTCOME_CONTINUE, TRIGGER_NOW, 0, NULL, 0, NULL,
	 "{\"kv\":{\"delete\":[\"app/b\"],\"put\":{\"app/a\":{\"s\":1}}},"
	 "\"outcome\":\"continue\",\"payload\":2}"},
	{"{\"outcome\":\"succeed\",\"kv\":{\"put\":{\"k\":1}}}", OUTCOME_SUCCEED, TRIGGER_NOW, 0,
	 NULL, 0, NULL, "{\"kv\":{\"put\":{\"k\":1}},\"outcome\":\"succeed\",\"result\":null}"},
	{"{\"outcome\":\"fail\",\"reason\":\"r\",\"kv\":{\"delete\":[\"k\"]}}", OUTCOME_FAIL,
	 TRIGGER_NOW, 0, NULL, 0, "r",
	 "{\"kv\":{\"delete\":[\"k\"]},\"outcome\":\"fail\",\"reason\":\"r\"}"},
	{"{\"outcome\":\"cancel\",\"reason\":\"r\",\"kv\":{}}", OUTCOME_CANCEL, TRIGGER_NOW, 0,
	 NULL, 0, "r", "{\"outcome\":\"cancel\",\"reason\":\"r\"}"},
	{"{\"outcome\":\"cancel\",\"reason\":\"r\",\"kv\":null}", OUTCOME_CANCEL, TRIGGER_NOW, 0,
	 NULL, 0, "r", "{\"outcome\":\"cancel\",\"reason\":\"r\"}"},
};

static char *canon_of_outcome(const struct outcome *o)
{
	json_t *j = outcome_to_json(o);
	char *s;

	assert_non_null(j);
	s = canon_json_dumps(j);
	json_decref(j);
	assert_non_null(s);
	return s;
}

/* A payload is passed on as the text it came as when jsonscan vouches for
 * the body, and decoded when only jansson can tell; either way the same
 * bodies are refused with jansson's words. */
static void test_payload_kept_as_text_or_decoded(void **state)
{
	(void)state;
	struct outcome o;
	struct err e = {0};
	const char *plain =
		"{\"payload\" : {\"b\": [1, 2.50, \"\\u00e9\"]},\"outcome\":\"continue\"}";
	assert_int_equal(outcome_parse(plain, strlen(plain), &o, &e), ERR_OK);
	assert_null(o.payload);
	assert_string_equal(o.payload_text, "{\"b\": [1, 2.50, \"\\u00e9\"]}");
	outcome_cleanup(&o);

	/* An escaped key: only a decoding can tell it from another key. */
	const char *escaped = "{\"outcome\":\"continue\",\"payload\":{\"\\u0061\":1}}";
	assert_int_equal(outcome_parse(escaped, strlen(escaped), &o, &e), ERR_OK);
	assert_null(o.payload_text);
	assert_int_equal(json_integer_value(json_object_get(o.payload, "a")), 1);
	outcome_cleanup(&o);

	static const char *const refused[] = {
		"{\"outcome\":\"continue\",\"payload\":{\"a\":1,\"\\u0061\":2}}",
		"{\"outcome\":\"continue\",\"payload\":{\"a\":1,\"a\":2}}",
		"{\"outcome\":\"continue\",\"payload\":\"\\u0000\"}",
		"{\"outcome\":\"continue\",\"payload\":[1,]}",
		"{\"outcome\":\"succeed\",\"result\":1,\"payload\":2}",
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		if (outcome_parse(refused[i], strlen(refused[i]), &o, &e) == ERR_OK)
			fail_msg("accepted %s", refused[i]);
		assert_null(o.payload_text);
		assert_null(o.payload);
	}
	assert_int_equal(outcome_parse(refused[1], strlen(refused[1]), &o, &e), ERR_INVALID);
	assert_non_null(strstr(e.msg, "duplicate object key"));
}

static void test_valid_outcome_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof valid_cases / sizeof valid_cases[0]; i++) {
		const struct valid_case *c = &valid_cases[i];
		struct outcome o;
		struct err e = {0};
		char *s;

		if (outcome_parse(c->body, strlen(c->body), &o, &e) != ERR_OK)
			fail_msg("case %zu rejected: %s", i, e.msg);
		assert_int_equal(o.kind, c->kind);
		assert_int_equal(o.trigger, c->trigger);
		assert_int_equal(o.delay_ms, c->delay_ms);
		assert_int_equal(o.timeout_ms, c->timeout_ms);
		if (c->key != NULL)
			assert_string_equal(o.correlation_key, c->key);
		else
			assert_null(o.correlation_key);
		if (c->reason != NULL)
			assert_string_equal(o.reason, c->reason);
		else
			assert_null(o.reason);
		if (c->kind == OUTCOME_CONTINUE)
			assert_true(o.payload != NULL || o.payload_text != NULL);
		if (c->kind == OUTCOME_SUCCEED)
			assert_true(o.result != NULL || o.result_text != NULL);
		s = canon_of_outcome(&o);
		outcome_cleanup(&o);
		assert_null(o.payload);
		assert_null(o.payload_text);
		if (strcmp(s, c->canonical) != 0) {
			char got[512];
			snprintf(got, sizeof got, "%s", s);
			free(s);
			fail_msg("case %zu encodes as %s, want %s", i, got, c->canonical);
		}
		free(s);
	}
}

static void test_outcome_to_json_round_trips(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof valid_cases / sizeof valid_cases[0]; i++) {
		struct outcome a, b;
		struct err e = {0};
		json_t *j;
		char *sa, *sb;

		assert_int_equal(
			outcome_parse(valid_cases[i].body, strlen(valid_cases[i].body), &a, &e),
			ERR_OK);
		j = outcome_to_json(&a);
		assert_int_equal(outcome_from_json(j, &b, &e), ERR_OK);
		json_decref(j);
		sa = canon_of_outcome(&a);
		sb = canon_of_outcome(&b);
		assert_string_equal(sa, sb);
		assert_int_equal(a.kind, b.kind);
		assert_int_equal(a.trigger, b.trigger);
		assert_int_equal(a.delay_ms, b.delay_ms);
		assert_int_equal(a.timeout_ms, b.timeout_ms);
		free(sa);
		free(sb);
		outcome_cleanup(&a);
		outcome_cleanup(&b);
	}
}

struct invalid_case {
	const char *body;
	const char *msg; /* exact, or a prefix when it ends in "*" */
};

#define DELAY_MSG "delay_ms: must be an integer between 0 and " MAX_DELAY
#define TIMEOUT_MSG "wait_for_signal.timeout_ms: must be an integer between 1 and " MAX_DELAY
#define ONE_OF "outcome: must be one of continue, succeed, fail, cancel, pending"

static const struct invalid_case invalid_cases[] = {
	{"", "body: must not be empty"},
	{"[]", "body: must be a JSON object"},
	{"\"continue\"", "body: must be a JSON object"},
	{"null", "body: must be a JSON object"},
	{"{", "body: invalid JSON: *"},
	{"{\"outcome\":\"succeed\"} trailing", "body: invalid JSON: *"},
	{"{\"outcome\":\"succeed\",\"outcome\":\"fail\"}", "body: invalid JSON: duplicate*"},
	{"{\"outcome\":\"fail\",\"reason\":\"\xff\"}", "body: must be valid UTF-8"},
	{"{\"outcome\":\"fail\",\"reason\":\"a\\u0000b\"}",
	 "body: invalid JSON: \\u0000 is not allowed"},
	{"{}", "outcome: is required"},
	{"{\"payload\":1}", "outcome: is required"},
	{"{\"outcome\":1}", ONE_OF},
	{"{\"outcome\":null}", ONE_OF},
	{"{\"outcome\":\"Continue\"}", ONE_OF},
	{"{\"outcome\":\"retry\"}", ONE_OF},
	{"{\"outcome\":\"continue\",\"extra\":1}", "unknown field \"extra\""},
	{"{\"outcome\":\"continue\",\"delay\":5000}", "unknown field \"delay\""},
	{"{\"outcome\":\"continue\",\"result\":1}", "result: not allowed with outcome continue"},
	{"{\"outcome\":\"continue\",\"reason\":\"r\"}",
	 "reason: not allowed with outcome continue"},
	{"{\"outcome\":\"succeed\",\"payload\":1}", "payload: not allowed with outcome succeed"},
	{"{\"outcome\":\"succeed\",\"delay_ms\":1}", "delay_ms: not allowed with outcome succeed"},
	{"{\"outcome\":\"fail\",\"reason\":\"r\",\"result\":1}",
	 "result: not allowed with outcome fail"},
	{"{\"outcome\":\"fail\"}", "reason: is required for outcome fail"},
	{"{\"outcome\":\"cancel\"}", "reason: is required for outcome cancel"},
	{"{\"outcome\":\"cancel\",\"reason\":5}", "reason: must be a string"},
	{"{\"outcome\":\"fail\",\"reason\":null}", "reason: must be a string"},
	{"{\"outcome\":\"continue\",\"delay_ms\":-1}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":\"60000\"}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":1.5}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":60000.0}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":31622400001}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":null}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":true}", DELAY_MSG},
	{"{\"outcome\":\"continue\",\"delay_ms\":10,\"wait_for_signal\":"
	 "{\"correlation_key\":\"k\",\"timeout_ms\":10}}",
	 "delay_ms: cannot be combined with wait_for_signal"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":[]}", "wait_for_signal: must be an object"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":[],\"timeout_ms\":1}"
	 "}",
	 "wait_for_signal.correlation_keys: must be an array of 1 to 16 keys"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":\"a\",\"timeout_ms\":"
	 "1}}",
	 "wait_for_signal.correlation_keys: must be an array of 1 to 16 keys"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":"
	 "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\","
	 "\"o\",\"p\",\"q\"],"
	 "\"timeout_ms\":1}}",
	 "wait_for_signal.correlation_keys: must be an array of 1 to 16 keys"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":[\"a\",7],\"timeout_"
	 "ms\":1}}",
	 "wait_for_signal.correlation_keys[1]: must be a string"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":[\"a\",\"\"],"
	 "\"timeout_ms\":1}}",
	 "wait_for_signal.correlation_keys[1]: must not be empty"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_keys\":[\"a\",\"b\",\"a\"],"
	 "\"timeout_ms\":1}}",
	 "wait_for_signal.correlation_keys[2]: repeats an earlier key"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_key\":\"a\",\"correlation_"
	 "keys\":[\"b\"],"
	 "\"timeout_ms\":1}}",
	 "wait_for_signal.correlation_keys: cannot be combined with correlation_key"},
	{"{\"outcome\":\"continue\",\"run_at\":\"tomorrow\"}",
	 "run_at: must be an RFC 3339 time such as 2026-12-02T10:15:00Z"},
	{"{\"outcome\":\"continue\",\"run_at\":1764670500000}",
	 "run_at: must be an RFC 3339 time such as 2026-12-02T10:15:00Z"},
	{"{\"outcome\":\"continue\",\"run_at\":\"2026-12-02T10:15:00Z\",\"delay_ms\":5}",
	 "run_at: cannot be combined with delay_ms"},
	{"{\"outcome\":\"succeed\",\"run_at\":\"2026-12-02T10:15:00Z\"}",
	 "run_at: not allowed with outcome succeed"},
	{"{\"outcome\":\"pending\",\"kv\":{\"put\":{\"a\":1}}}",
	 "kv: not allowed with outcome pending"},
	{"{\"outcome\":\"pending\",\"payload\":1}", "payload: not allowed with outcome pending"},
	{"{\"outcome\":\"pending\",\"timeout_ms\":0}",
	 "timeout_ms: must be an integer between 1 and " MAX_DELAY},
	{"{\"outcome\":\"pending\",\"heartbeat_timeout_ms\":\"5\"}",
	 "heartbeat_timeout_ms: must be an integer between 1 and " MAX_DELAY},
	{"{\"outcome\":\"continue\",\"heartbeat_timeout_ms\":5}",
	 "heartbeat_timeout_ms: not allowed with outcome continue"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":null}",
	 "wait_for_signal: must be an object"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{}}",
	 "wait_for_signal.correlation_key: is required (or correlation_keys)"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_key\":7,\"timeout_ms\":1}}",
	 "wait_for_signal.correlation_key: must be a string"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_key\":\"\",\"timeout_ms\":1}"
	 "}",
	 "wait_for_signal.correlation_key: must not be empty"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_key\":\"k\"}}",
	 "wait_for_signal.timeout_ms: is required"},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":{\"correlation_key\":\"k\",\"timeout_ms\":"
	 "0}}",
	 TIMEOUT_MSG},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":"
	 "{\"correlation_key\":\"k\",\"timeout_ms\":31622400001}}",
	 TIMEOUT_MSG},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":"
	 "{\"correlation_key\":\"k\",\"timeout_ms\":\"1000\"}}",
	 TIMEOUT_MSG},
	{"{\"outcome\":\"continue\",\"wait_for_signal\":"
	 "{\"correlation_key\":\"k\",\"timeout_ms\":1,\"key\":\"k\"}}",
	 "wait_for_signal: unknown field \"key\""},
	{"{\"outcome\":\"continue\",\"kv\":\"x\"}", "kv: must be an object"},
	{"{\"outcome\":\"continue\",\"kv\":{\"put\":{\"workflow/x\":1}}}",
	 "kv.put[\"workflow/x\"]: key prefix workflow/ is reserved"},
	{"{\"outcome\":\"succeed\",\"kv\":{\"put\":{\"a\":1},\"delete\":[\"a\"]}}",
	 "kv.delete[0]: key is both put and deleted"},
	{"{\"outcome\":\"fail\",\"reason\":\"r\",\"kv\":{\"puts\":{}}}",
	 "kv: unknown field \"puts\" (allowed: put, delete)"},
};

static void check_invalid(const char *body, size_t len, const char *msg, size_t i)
{
	struct outcome o;
	struct err e = {0};
	size_t n = strlen(msg);
	bool prefix = n > 0 && msg[n - 1] == '*';
	enum err_code rc = outcome_parse(body, len, &o, &e);

	if (rc == ERR_OK) {
		outcome_cleanup(&o);
		fail_msg("case %zu accepted", i);
	}
	assert_int_equal(rc, ERR_INVALID);
	if (prefix ? strncmp(e.msg, msg, n - 1) != 0 : strcmp(e.msg, msg) != 0)
		fail_msg("case %zu: \"%s\", want \"%s\"", i, e.msg, msg);
	/* A failed parse leaves the struct zeroed. */
	assert_int_equal(o.kind, 0);
	assert_null(o.payload);
	assert_null(o.reason);
	assert_null(o.correlation_key);
	assert_null(o.kv.put);
}

static void test_invalid_outcome_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof invalid_cases / sizeof invalid_cases[0]; i++)
		check_invalid(invalid_cases[i].body, strlen(invalid_cases[i].body),
			      invalid_cases[i].msg, i);
}

static void test_outcome_parse_reads_only_len_bytes(void **state)
{
	const char *body = "{\"outcome\":\"succeed\"}GARBAGE";
	struct outcome o;
	struct err e = {0};
	(void)state;

	assert_int_equal(outcome_parse(body, 21, &o, &e), ERR_OK);
	assert_int_equal(o.kind, OUTCOME_SUCCEED);
	outcome_cleanup(&o);
	check_invalid("{\"outcome\":\"succeed\"}\0", 22, "body: invalid JSON: *", 0);
}

static void test_reason_length_limit(void **state)
{
	size_t cap = VERDICT_MAX_REASON_BYTES + 64;
	char *body = malloc(cap), *reason = malloc(VERDICT_MAX_REASON_BYTES + 2);
	struct outcome o;
	struct err e = {0};
	(void)state;

	memset(reason, 'r', VERDICT_MAX_REASON_BYTES);
	reason[VERDICT_MAX_REASON_BYTES] = '\0';
	snprintf(body, cap, "{\"outcome\":\"fail\",\"reason\":\"%s\"}", reason);
	assert_int_equal(outcome_parse(body, strlen(body), &o, &e), ERR_OK);
	assert_int_equal(strlen(o.reason), VERDICT_MAX_REASON_BYTES);
	outcome_cleanup(&o);

	strcat(reason, "r");
	snprintf(body, cap, "{\"outcome\":\"fail\",\"reason\":\"%s\"}", reason);
	check_invalid(body, strlen(body), "reason: exceeds maximum length of 4096 bytes", 0);
	free(body);
	free(reason);
}

static void test_reason_with_nul_is_rejected(void **state)
{
	json_t *obj = json_pack("{s:s,s:s%}", "outcome", "cancel", "reason", "a\0b", (size_t)3);
	struct outcome o;
	struct err e = {0};
	(void)state;

	assert_non_null(obj);
	assert_int_equal(outcome_from_json(obj, &o, &e), ERR_INVALID);
	assert_string_equal(e.msg, "reason: must not contain NUL");
	json_decref(obj);
}

static void test_kv_value_over_256_kib_is_rejected(void **state)
{
	size_t n = EFFECTS_MAX_VALUE_BYTES;
	size_t cap = n + 128;
	char *body = malloc(cap);
	int off;
	(void)state;

	/* The value "vvv...v" is n - 1 characters, n + 1 bytes with its quotes. */
	off = snprintf(body, cap, "{\"outcome\":\"succeed\",\"kv\":{\"put\":{\"big\":\"");
	memset(body + off, 'v', n - 1);
	snprintf(body + off + n - 1, cap - (size_t)off - n + 1, "\"}}}");
	check_invalid(body, strlen(body),
		      "kv.put[\"big\"]: value exceeds maximum size of 262144 bytes", 0);
	free(body);
}

static void test_deeply_nested_payload_is_rejected(void **state)
{
	const int depth = 5000;
	size_t cap = 64 + 2 * (size_t)depth;
	char *body = malloc(cap);
	size_t o = 0;
	(void)state;

	o += (size_t)snprintf(body, cap, "{\"outcome\":\"continue\",\"payload\":");
	for (int i = 0; i < depth; i++)
		body[o++] = '[';
	for (int i = 0; i < depth; i++)
		body[o++] = ']';
	body[o++] = '}';
	check_invalid(body, o, "body: invalid JSON: *", 0);
	free(body);
}

/* A pending answer keeps its timeouts; a settlement caps them at the
 * workflow's max_pending_ms, the timeout defaulting to it. */
static void test_pending_outcome_and_its_caps(void **state)
{
	(void)state;
	struct outcome o;
	struct err e = {0};
	const char *b =
		"{\"outcome\":\"pending\",\"timeout_ms\":90000,\"heartbeat_timeout_ms\":500}";
	assert_int_equal(outcome_parse(b, strlen(b), &o, &e), ERR_OK);
	assert_int_equal(o.kind, OUTCOME_PENDING);
	assert_int_equal(o.timeout_ms, 90000);
	assert_int_equal(o.heartbeat_timeout_ms, 500);
	assert_null(outcome_to_json(&o)); /* never replayed */
	struct settlement s = {0};
	assert_true(outcome_settlement(&o, 60000, &s));
	assert_int_equal(s.result, SETTLE_PENDING);
	assert_int_equal(s.timeout_ms, 60000);
	assert_int_equal(s.heartbeat_timeout_ms, 500);
	settlement_cleanup(&s);
	outcome_cleanup(&o);

	b = "{\"outcome\":\"pending\"}";
	assert_int_equal(outcome_parse(b, strlen(b), &o, &e), ERR_OK);
	assert_true(outcome_settlement(&o, 86400000, &s));
	assert_int_equal(s.timeout_ms, 86400000);
	assert_int_equal(s.heartbeat_timeout_ms, 0);
	settlement_cleanup(&s);
	outcome_cleanup(&o);
}

/* run_at is an absolute time: it round-trips as RFC 3339 and settles as
 * run_at_ms, not as a delay. */
static void test_run_at_outcome(void **state)
{
	(void)state;
	struct outcome o;
	struct err e = {0};
	const char *b = "{\"outcome\":\"continue\",\"payload\":1,\"run_at\":\"2026-12-02T11:15:00."
			"250+01:00\"}";
	assert_int_equal(outcome_parse(b, strlen(b), &o, &e), ERR_OK);
	assert_int_equal(o.trigger, TRIGGER_AT);
	assert_int_equal(o.run_at_ms, 1796206500250LL);
	json_t *j = outcome_to_json(&o);
	assert_string_equal(json_string_value(json_object_get(j, "run_at")),
			    "2026-12-02T10:15:00.250Z");
	json_decref(j);
	struct settlement s = {0};
	assert_true(outcome_settlement(&o, 1000, &s));
	assert_int_equal(s.result, SETTLE_CONTINUE);
	assert_int_equal(s.run_at_ms, 1796206500250LL);
	assert_int_equal(s.delay_ms, 0);
	settlement_cleanup(&s);
	outcome_cleanup(&o);
}

/* A settlement takes the payload's and the result's text from the outcome
 * (they are kept as text when the answer is checked), not a copy. */
static void test_settlement_takes_the_texts(void **state)
{
	(void)state;
	struct outcome o;
	struct err e = {0};
	const char *b = "{\"outcome\":\"continue\",\"payload\":{\"big\":[1,2,3]}}";
	assert_int_equal(outcome_parse(b, strlen(b), &o, &e), ERR_OK);
	assert_non_null(o.payload_text);
	const char *text = o.payload_text;
	struct settlement s = {0};
	assert_true(outcome_settlement(&o, 1000, &s));
	assert_int_equal(s.result, SETTLE_CONTINUE);
	assert_ptr_equal(s.payload_text, text);
	assert_string_equal(s.payload_text, "{\"big\":[1,2,3]}");
	assert_null(o.payload_text);
	settlement_cleanup(&s);
	outcome_cleanup(&o);

	b = "{\"outcome\":\"succeed\",\"result\":\"done\"}";
	assert_int_equal(outcome_parse(b, strlen(b), &o, &e), ERR_OK);
	assert_non_null(o.result_text);
	text = o.result_text;
	assert_true(outcome_settlement(&o, 1000, &s));
	assert_int_equal(s.result, SETTLE_SUCCEED);
	assert_ptr_equal(s.value_text, text);
	assert_null(o.result_text);
	settlement_cleanup(&s);
	outcome_cleanup(&o);
}

static void test_outcome_from_json_rejects_non_object(void **state)
{
	json_t *arr = json_array();
	struct outcome o;
	struct err e = {0};
	(void)state;

	assert_int_equal(outcome_from_json(arr, &o, &e), ERR_INVALID);
	assert_string_equal(e.msg, "body: must be a JSON object");
	assert_int_equal(outcome_from_json(NULL, &o, &e), ERR_INVALID);
	json_decref(arr);
}

static void test_parsed_outcome_outlives_its_input(void **state)
{
	json_t *obj = json_pack("{s:s,s:{s:i}}", "outcome", "continue", "payload", "n", 7);
	struct outcome o;
	struct err e = {0};
	(void)state;

	assert_int_equal(outcome_from_json(obj, &o, &e), ERR_OK);
	json_decref(obj);
	assert_int_equal(json_integer_value(json_object_get(o.payload, "n")), 7);
	outcome_cleanup(&o);
	outcome_cleanup(&o); /* zeroed: a no-op */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_class_table),
		cmocka_unit_test(test_ok_step_carries_parsed_outcome),
		cmocka_unit_test(test_error_text_keeps_first_200_bytes),
		cmocka_unit_test(test_error_text_cuts_on_utf8_boundary),
		cmocka_unit_test(test_error_text_replaces_invalid_utf8),
		cmocka_unit_test(test_error_text_of_200_bad_bytes_fits),
		cmocka_unit_test(test_error_text_reads_only_body_len),
		cmocka_unit_test(test_retry_after_parse_table),
		cmocka_unit_test(test_retry_after_huge_seconds_saturates),
		cmocka_unit_test(test_retry_delay_caps_retry_after_at_max),
		cmocka_unit_test(test_retry_delay_from_a_429_call),
		cmocka_unit_test(test_backoff_table),
		cmocka_unit_test(test_backoff_never_decreases_up_to_attempt_1000),
		cmocka_unit_test(test_valid_outcome_table),
		cmocka_unit_test(test_payload_kept_as_text_or_decoded),
		cmocka_unit_test(test_outcome_to_json_round_trips),
		cmocka_unit_test(test_invalid_outcome_table),
		cmocka_unit_test(test_outcome_parse_reads_only_len_bytes),
		cmocka_unit_test(test_reason_length_limit),
		cmocka_unit_test(test_reason_with_nul_is_rejected),
		cmocka_unit_test(test_kv_value_over_256_kib_is_rejected),
		cmocka_unit_test(test_deeply_nested_payload_is_rejected),
		cmocka_unit_test(test_outcome_from_json_rejects_non_object),
		cmocka_unit_test(test_pending_outcome_and_its_caps),
		cmocka_unit_test(test_run_at_outcome),
		cmocka_unit_test(test_settlement_takes_the_texts),
		cmocka_unit_test(test_parsed_outcome_outlives_its_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
