/* test_stepreq: the body of a step request (service/stepreq.c), which the
 * dispatcher sends and `hookflow check-webhook` imitates: every field of
 * docs/webhook-protocol.md section 1, the optional ones only when set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "service/stepreq.h"

static void test_a_plain_step(void **state)
{
	(void)state;
	struct claimed_job j = {
		.kind = JOB_STEP,
		.run_id = "order-42",
		.workflow = "orders",
		.step = 2,
		.attempt = 1,
		.max_attempts = 3,
		.generation = 1,
		.payload = "{\"order\":42}",
		.headers = NULL,
		.timeout_ms = 30000,
		.now_ms = 1796205600000, /* 2026-12-02T10:00:00.000Z */
	};
	char *body = stepreq_body(&j, "http://127.0.0.1:8080", "hf1.k.1.2.1.9.mac", NULL);
	assert_string_equal(body,
			    "{\"run_id\":\"order-42\",\"workflow\":\"orders\",\"step\":2,"
			    "\"attempt\":1,\"max_attempts\":3,\"generation\":1,"
			    "\"payload\":{\"order\":42},\"headers\":{},\"concurrency_key\":null,"
			    "\"deadline\":\"2026-12-02T10:00:30.000Z\","
			    "\"memo\":{\"url\":\"http://127.0.0.1:8080/v1/runs/order-42\","
			    "\"token\":\"hf1.k.1.2.1.9.mac\"}}");
	free(body);
}

static void test_the_optional_fields_when_set(void **state)
{
	(void)state;
	struct claimed_job j = {
		.kind = JOB_STEP,
		.run_id = "r",
		.workflow = "w",
		.step = 3,
		.attempt = 2,
		.max_attempts = 5,
		.generation = 4,
		.payload = NULL,
		.headers = "{\"tenant\":\"acme\"}",
		.concurrency_key = "customer \"7\"",
		.signal = "{\"status\":\"timeout\"}",
		.children = "[]",
		.last_heartbeat = "{\"done\":1}",
		.group_id = "g",
		.group_key = "k",
		.timeout_ms = 1000,
		.now_ms = 0,
	};
	char *body = stepreq_body(&j, "https://h", "t", NULL);
	assert_string_equal(
		body, "{\"run_id\":\"r\",\"workflow\":\"w\",\"step\":3,\"attempt\":2,"
		      "\"max_attempts\":5,\"generation\":4,\"payload\":null,"
		      "\"headers\":{\"tenant\":\"acme\"},"
		      "\"concurrency_key\":\"customer \\\"7\\\"\","
		      "\"signal\":{\"status\":\"timeout\"},\"children\":[],"
		      "\"last_heartbeat\":{\"done\":1},\"group\":{\"id\":\"g\",\"key\":\"k\"},"
		      "\"deadline\":\"1970-01-01T00:00:01.000Z\","
		      "\"memo\":{\"url\":\"https://h/v1/runs/r\",\"token\":\"t\"}}");
	free(body);
}

/* A large payload whose length the claim gave, and strings that escape to
 * six bytes a byte: the body is the same as when the length is measured,
 * and its length is reported. */
static void test_a_large_payload_and_escaped_strings(void **state)
{
	(void)state;
	size_t n = 200000;
	char *payload = malloc(n + 1);
	assert_non_null(payload);
	payload[0] = '"';
	memset(payload + 1, 'x', n - 2);
	payload[n - 1] = '"';
	payload[n] = '\0';
	char key[65];
	memset(key, '\x01', 64); /* \u0001 each */
	key[64] = '\0';
	struct claimed_job j = {
		.kind = JOB_STEP,
		.run_id = "r",
		.workflow = "w",
		.payload = payload,
		.concurrency_key = key,
		.group_id = key,
		.group_key = key,
	};
	size_t len = 0;
	char *measured = stepreq_body(&j, "http://h", "t", &len);
	assert_non_null(measured);
	assert_int_equal(len, strlen(measured));
	j.payload_len = n;
	size_t len2 = 0;
	char *given = stepreq_body(&j, "http://h", "t", &len2);
	assert_non_null(given);
	assert_int_equal(len2, len);
	assert_string_equal(given, measured);
	assert_non_null(strstr(given, "\"concurrency_key\":\"\\u0001\\u0001"));
	assert_true(len > n + 3 * 64 * 6);
	free(measured);
	free(given);
	free(payload);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_plain_step),
		cmocka_unit_test(test_the_optional_fields_when_set),
		cmocka_unit_test(test_a_large_payload_and_escaped_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
