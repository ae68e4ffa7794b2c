/* test_otlp: the protobuf writer (base/pb.c) against bytes the
 * OpenTelemetry project's generated encoder produced, and the OTLP request
 * service/otlp.c builds, read back with a small wire-format reader. (The
 * integration test test_traces.py decodes real export requests with the
 * project's own definitions.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/pb.h"
#include "service/otlp.h"

static void hex(const struct strbuf *b, char *out)
{
	for (size_t i = 0; i < b->len; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)b->data[i]);
	out[2 * b->len] = '\0';
}

static void test_varints(void **state)
{
	struct strbuf b = {0};
	char out[64];
	(void)state;
	pb_varint(&b, 0);
	pb_varint(&b, 1);
	pb_varint(&b, 127);
	pb_varint(&b, 128);
	pb_varint(&b, 300);
	hex(&b, out);
	assert_string_equal(out, "00017f8001ac02");
	strbuf_cleanup(&b);
	pb_int(&b, 3, -1); /* a negative int64: ten bytes */
	hex(&b, out);
	assert_string_equal(out, "18ffffffffffffffffff01");
	strbuf_cleanup(&b);
}

/* A Span as @opentelemetry/otlp-transformer 0.216.0's generated code
 * (protobufjs) encodes it:
 * Span.encode({traceId: 16 x 0x01, spanId: 8 x 0x02, name: "x", kind: 3,
 * startTimeUnixNano: 5, attributes: [{key: "a", value: {intValue: 3}}],
 * status: {code: 2, message: "m"}}). */
#define SPAN_VECTOR                                                            \
	"0a1001010101010101010101010101010101120802020202020202022a0178300339" \
	"05000000000000004a070a0161120218037a0512016d1802"

static void test_span_matches_the_reference_encoder(void **state)
{
	struct strbuf b = {0};
	uint8_t tid[16], sid[8];
	char out[256];
	(void)state;
	memset(tid, 1, sizeof tid);
	memset(sid, 2, sizeof sid);
	pb_bytes(&b, 1, tid, sizeof tid);
	pb_bytes(&b, 2, sid, sizeof sid);
	pb_string(&b, 5, "x");
	pb_uint(&b, 6, 3);
	pb_fixed64(&b, 7, 5);
	size_t kv = pb_open(&b, 9);
	pb_string(&b, 1, "a");
	size_t any = pb_open(&b, 2);
	pb_int(&b, 3, 3);
	pb_close(&b, any);
	pb_close(&b, kv);
	size_t st = pb_open(&b, 15);
	pb_string(&b, 2, "m");
	pb_uint(&b, 3, 2);
	pb_close(&b, st);
	assert_false(b.oom);
	hex(&b, out);
	assert_string_equal(out, SPAN_VECTOR);
	strbuf_cleanup(&b);
}

static void test_long_nested_message_gets_a_two_byte_length(void **state)
{
	struct strbuf b = {0};
	char text[301];
	(void)state;
	memset(text, 'z', 300);
	text[300] = '\0';
	pb_uint(&b, 1, 7);
	size_t m = pb_open(&b, 2);
	pb_string(&b, 1, text); /* 1 + 2 + 300 bytes of content */
	pb_close(&b, m);
	pb_fixed32(&b, 3, 0x01020304);
	assert_int_equal(b.len, 2 + 1 + 2 + 303 + 5);
	const unsigned char *d = (const unsigned char *)b.data;
	assert_int_equal(d[2], 0x12);            /* field 2, length-delimited */
	assert_int_equal(d[3], 303 % 128 + 128); /* 303: af 02 */
	assert_int_equal(d[4], 303 / 128);
	assert_int_equal(d[5], 0x0a);         /* the content follows */
	assert_int_equal(d[b.len - 5], 0x1d); /* field 3, fixed32 */
	assert_int_equal(d[b.len - 4], 0x04); /* little-endian */
	strbuf_cleanup(&b);
}

/* ---- a wire-format reader for the test ---------------------------------- */

struct field {
	uint32_t num;
	int wire;
	uint64_t v;       /* varint or fixed */
	const uint8_t *p; /* length-delimited: the content */
	size_t n;
};

static bool next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
	uint64_t key = 0, v = 0;
	int shift = 0;
	if (*p >= end)
		return false;
	while (*p < end) {
		uint8_t c = *(*p)++;
		key |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
		if (!(c & 0x80))
			break;
	}
	f->num = (uint32_t)(key >> 3);
	f->wire = (int)(key & 7);
	f->p = NULL;
	f->n = 0;
	switch (f->wire) {
	case PB_VARINT:
	case PB_LEN:
		shift = 0;
		while (*p < end) {
			uint8_t c = *(*p)++;
			v |= (uint64_t)(c & 0x7f) << shift;
			shift += 7;
			if (!(c & 0x80))
				break;
		}
		f->v = v;
		if (f->wire == PB_LEN) {
			assert_true((size_t)(end - *p) >= v);
			f->p = *p;
			f->n = (size_t)v;
			*p += v;
		}
		return true;
	case PB_I64:
	case PB_I32: {
		int k = f->wire == PB_I64 ? 8 : 4;
		assert_true(end - *p >= k);
		for (int i = 0; i < k; i++)
			v |= (uint64_t)(*p)[i] << (8 * i);
		*p += k;
		f->v = v;
		return true;
	}
	}
	fail_msg("unknown wire type %d", f->wire);
	return false;
}

/* The first field `num` of message [p, p + n). */
static bool find(const uint8_t *p, size_t n, uint32_t num, struct field *out)
{
	const uint8_t *end = p + n;
	struct field f = {0};
	while (next_field(&p, end, &f))
		if (f.num == num) {
			*out = f;
			return true;
		}
	return false;
}

/* The string value of attribute `key` of a Span or Resource's repeated
 * KeyValue field `num`, or its int value as text; "" when absent. */
static void attr(const uint8_t *p, size_t n, uint32_t num, const char *key, char *out, size_t cap)
{
	const uint8_t *end = p + n;
	struct field f = {0}, k = {0}, v = {0}, a = {0};
	out[0] = '\0';
	while (next_field(&p, end, &f)) {
		if (f.num != num || !find(f.p, f.n, 1, &k) || k.n != strlen(key) ||
		    memcmp(k.p, key, k.n) != 0 || !find(f.p, f.n, 2, &v))
			continue;
		if (find(v.p, v.n, 1, &a))
			snprintf(out, cap, "%.*s", (int)a.n, (const char *)a.p);
		else if (find(v.p, v.n, 3, &a))
			snprintf(out, cap, "%lld", (long long)a.v);
		return;
	}
}

static void test_export_request_carries_resource_scope_and_spans(void **state)
{
	struct otlp_span run, step;
	(void)state;
	otlp_span_init(&run, "run", OTLP_INTERNAL);
	assert_true(trace_hex_decode("4bf92f3577b34da6a3ce929d0e0e4736", run.trace_id, 16));
	assert_true(trace_hex_decode("00f067aa0ba902b7", run.span_id, 8));
	snprintf(run.run_id, sizeof run.run_id, "order-42");
	snprintf(run.workflow, sizeof run.workflow, "orders");
	run.start_ns = 1700000000000000000;
	run.end_ns = 1700000001000000000;
	run.status = OTLP_ERROR;
	snprintf(run.status_msg, sizeof run.status_msg, "card declined");
	otlp_span_init(&step, "step", OTLP_CLIENT);
	memcpy(step.trace_id, run.trace_id, sizeof step.trace_id);
	assert_true(trace_hex_decode("d35c8cfa7ae52993", step.span_id, 8));
	memcpy(step.parent_span_id, run.span_id, sizeof step.parent_span_id);
	step.step = 2;
	step.attempt = 3;
	step.http_status = 503;
	snprintf(step.error_type, sizeof step.error_type, "503");
	const struct otlp_span v[] = {run, step};

	struct strbuf b = {0};
	otlp_encode(&b, "host-1-ab", v, 2);
	assert_false(b.oom);
	const uint8_t *d = (const uint8_t *)b.data;
	struct field rs = {0}, res = {0}, ss = {0}, f = {0};
	char s[64];
	assert_true(find(d, b.len, 1, &rs)); /* resource_spans */
	assert_true(find(rs.p, rs.n, 1, &res));
	attr(res.p, res.n, 1, "service.name", s, sizeof s);
	assert_string_equal(s, "hookflow");
	attr(res.p, res.n, 1, "service.instance.id", s, sizeof s);
	assert_string_equal(s, "host-1-ab");
	assert_true(find(rs.p, rs.n, 2, &ss)); /* scope_spans */
	assert_true(find(ss.p, ss.n, 1, &f));  /* scope */
	assert_true(find(f.p, f.n, 1, &f));
	assert_int_equal(f.n, strlen("hookflow"));

	/* the two spans, in order */
	const uint8_t *p = ss.p, *end = ss.p + ss.n;
	int spans = 0;
	while (next_field(&p, end, &f)) {
		if (f.num != 2)
			continue;
		struct field x = {0};
		assert_true(find(f.p, f.n, 1, &x));
		assert_int_equal(x.n, 16);
		assert_int_equal(x.p[0], 0x4b);
		assert_true(find(f.p, f.n, 2, &x));
		assert_int_equal(x.n, 8);
		assert_true(find(f.p, f.n, 5, &x));
		if (spans == 0) {
			assert_memory_equal(x.p, "run", 3);
			assert_false(find(f.p, f.n, 4, &x)); /* a root: no parent */
			assert_true(find(f.p, f.n, 7, &x));
			assert_int_equal(x.v, 1700000000000000000ULL);
			assert_true(find(f.p, f.n, 15, &x)); /* status */
			struct field c = {0};
			assert_true(find(x.p, x.n, 3, &c));
			assert_int_equal(c.v, OTLP_ERROR);
			attr(f.p, f.n, 9, "hookflow.run_id", s, sizeof s);
			assert_string_equal(s, "order-42");
			attr(f.p, f.n, 9, "hookflow.step", s, sizeof s);
			assert_string_equal(s, ""); /* left out */
		} else {
			assert_memory_equal(x.p, "step", 4);
			assert_true(find(f.p, f.n, 4, &x));
			assert_int_equal(x.n, 8);
			assert_int_equal(x.p[1], 0xf0);
			assert_true(find(f.p, f.n, 6, &x));
			assert_int_equal(x.v, OTLP_CLIENT);
			attr(f.p, f.n, 9, "hookflow.attempt", s, sizeof s);
			assert_string_equal(s, "3");
			attr(f.p, f.n, 9, "http.response.status_code", s, sizeof s);
			assert_string_equal(s, "503");
			attr(f.p, f.n, 9, "error.type", s, sizeof s);
			assert_string_equal(s, "503");
			attr(f.p, f.n, 9, "http.request.method", s, sizeof s);
			assert_string_equal(s, "POST");
		}
		spans++;
	}
	assert_int_equal(spans, 2);
	strbuf_cleanup(&b);
}

static void test_traces_url(void **state)
{
	char out[64];
	(void)state;
	assert_true(otlp_traces_url("http://127.0.0.1:4318", out, sizeof out));
	assert_string_equal(out, "http://127.0.0.1:4318/v1/traces");
	assert_true(otlp_traces_url("http://collector:4318/", out, sizeof out));
	assert_string_equal(out, "http://collector:4318/v1/traces");
	assert_true(otlp_traces_url("https://c.example/otlp", out, sizeof out));
	assert_string_equal(out, "https://c.example/otlp/v1/traces");
	assert_false(otlp_traces_url("http://a-very-long-host-name.example:4318", out, 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varints),
		cmocka_unit_test(test_span_matches_the_reference_encoder),
		cmocka_unit_test(test_long_nested_message_gets_a_two_byte_length),
		cmocka_unit_test(test_export_request_carries_resource_scope_and_spans),
		cmocka_unit_test(test_traces_url),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
