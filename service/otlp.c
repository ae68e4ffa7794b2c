/* otlp: the span queue, the exporter thread and the OTLP/HTTP protobuf
 * encoding of ExportTraceServiceRequest
 * (opentelemetry/proto/collector/trace/v1/trace_service.proto). */
#include "service/otlp.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/pb.h"
#include "base/timefmt.h"
#include "base/version.h"
#include "service/metrics.h"

#define EXPORT_ATTEMPTS 3      /* tries of one batch */
#define RETRY_PAUSE_MS 500     /* before the second try; doubles */
#define FLUSH_INTERVAL_MS 1000 /* a batch leaves at most this long after its first span */
#define STOP_BUDGET_MS 2000    /* what otlp_stop may spend sending the rest */

/* The field numbers of the OTLP messages written here. */
enum {
	F_REQUEST_RESOURCE_SPANS = 1, /* ExportTraceServiceRequest */
	F_RS_RESOURCE = 1,            /* ResourceSpans */
	F_RS_SCOPE_SPANS = 2,
	F_RESOURCE_ATTRIBUTES = 1, /* Resource */
	F_SS_SCOPE = 1,            /* ScopeSpans */
	F_SS_SPANS = 2,
	F_SCOPE_NAME = 1, /* InstrumentationScope */
	F_SCOPE_VERSION = 2,
	F_SPAN_TRACE_ID = 1, /* Span */
	F_SPAN_SPAN_ID = 2,
	F_SPAN_PARENT_SPAN_ID = 4,
	F_SPAN_NAME = 5,
	F_SPAN_KIND = 6,
	F_SPAN_START = 7,
	F_SPAN_END = 8,
	F_SPAN_ATTRIBUTES = 9,
	F_SPAN_STATUS = 15,
	F_STATUS_MESSAGE = 2, /* Status */
	F_STATUS_CODE = 3,
	F_KV_KEY = 1, /* KeyValue */
	F_KV_VALUE = 2,
	F_ANY_STRING = 1, /* AnyValue */
	F_ANY_INT = 3,
};

static struct {
	atomic_bool enabled;
	const struct config *cfg;
	char *instance;
	char url[CONFIG_MAX_OTLP_URL + 16];
	struct curl_slist *headers; /* the exporter's request headers */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct otlp_span *ring; /* cap slots; count queued spans from head */
	size_t cap, head, count;
	int64_t first_at; /* monotonic ms when the oldest queued span came */
	bool stop;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER};

void otlp_set(char *dst, size_t cap, const char *src)
{
	size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
	memcpy(dst, src != NULL ? src : "", n);
	dst[n] = '\0';
}

void otlp_span_init(struct otlp_span *s, const char *name, enum otlp_kind kind)
{
	memset(s, 0, sizeof *s);
	otlp_set(s->name, sizeof s->name, name);
	s->kind = kind;
	s->step = s->attempt = s->generation = -1;
}

bool otlp_enabled(void)
{
	return atomic_load_explicit(&X.enabled, memory_order_relaxed);
}

void otlp_emit(const struct otlp_span *s)
{
	if (!otlp_enabled())
		return;
	bool queued = false, wake = false;
	pthread_mutex_lock(&X.mu);
	if (X.count < X.cap && !X.stop) {
		X.ring[(X.head + X.count) % X.cap] = *s;
		if (X.count++ == 0)
			X.first_at = timefmt_mono_ms();
		wake = X.count == OTLP_BATCH;
		queued = true;
	}
	pthread_mutex_unlock(&X.mu);
	if (!queued)
		metrics_spans_dropped(METRICS_SPAN_QUEUE_FULL, 1);
	else if (wake)
		pthread_cond_signal(&X.cv);
}

/* ---- the engine's spans ---------------------------------------------- */

static void copy_str(char *dst, size_t cap, json_t *v)
{
	otlp_set(dst, cap, json_string_value(v));
}

void otlp_engine_span(const char *json, size_t len)
{
	if (!otlp_enabled())
		return;
	json_t *o = json_loadb(json, len, 0, NULL);
	const char *kind = json_string_value(json_object_get(o, "span"));
	if (kind == NULL || strcmp(kind, "run") != 0) {
		log_warn("otlp", "unreadable span from the engine", NULL);
		json_decref(o);
		return;
	}
	struct otlp_span s;
	otlp_span_init(&s, "run", OTLP_INTERNAL);
	const char *tid = json_string_value(json_object_get(o, "trace_id"));
	const char *sid = json_string_value(json_object_get(o, "span_id"));
	const char *pid = json_string_value(json_object_get(o, "parent_span_id"));
	bool ids = tid != NULL && sid != NULL && trace_hex_id_valid(tid, TRACE_ID_HEX) &&
		   trace_hex_id_valid(sid, TRACE_SPAN_HEX) &&
		   trace_hex_decode(tid, s.trace_id, sizeof s.trace_id) &&
		   trace_hex_decode(sid, s.span_id, sizeof s.span_id);
	if (ids && pid != NULL && trace_hex_id_valid(pid, TRACE_SPAN_HEX))
		trace_hex_decode(pid, s.parent_span_id, sizeof s.parent_span_id);
	s.start_ns = (int64_t)json_integer_value(json_object_get(o, "start_us")) * 1000;
	s.end_ns = (int64_t)json_integer_value(json_object_get(o, "end_us")) * 1000;
	copy_str(s.run_id, sizeof s.run_id, json_object_get(o, "run_id"));
	copy_str(s.workflow, sizeof s.workflow, json_object_get(o, "workflow"));
	s.generation = (int)json_integer_value(json_object_get(o, "generation"));
	json_t *fs = json_object_get(o, "final_step");
	if (json_is_integer(fs))
		s.step = (int)json_integer_value(fs);
	copy_str(s.outcome, sizeof s.outcome, json_object_get(o, "status"));
	if (strcmp(s.outcome, "failed") == 0) {
		s.status = OTLP_ERROR;
		copy_str(s.status_msg, sizeof s.status_msg, json_object_get(o, "error"));
		copy_str(s.error_type, sizeof s.error_type, json_object_get(o, "error_kind"));
		if (s.error_type[0] == '\0')
			otlp_set(s.error_type, sizeof s.error_type, "failed");
	}
	json_decref(o);
	if (!ids) {
		log_warn("otlp", "span from the engine without valid ids", NULL);
		return;
	}
	otlp_emit(&s);
}

/* ---- encoding ------------------------------------------------------------- */

/* Writes `v` as a varint at p; returns the end. */
static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Writes length-delimited field `field` with `n` bytes of `s` at p. */
static uint8_t *put_len(uint8_t *p, uint32_t field, const void *s, size_t n)
{
	p = put_varint(p, (uint64_t)field << 3 | PB_LEN);
	p = put_varint(p, n);
	memcpy(p, s, n);
	return p + n;
}

/* KeyValue{key, AnyValue{string_value | int_value}}: built on the stack
 * with their lengths known in advance and appended at once (attributes
 * are most of a span's bytes: one strbuf_add each, no pb_open move). Keys
 * are ours (short); values are span fields (at most 200 bytes). */
static void kv_any(struct strbuf *b, uint32_t field, const char *key, const uint8_t *any,
		   size_t any_n)
{
	uint8_t buf[512];
	size_t kn = strlen(key);
	size_t body = pb_len_field_size(F_KV_KEY, kn) + pb_len_field_size(F_KV_VALUE, any_n);
	uint8_t *p = put_varint(buf, (uint64_t)field << 3 | PB_LEN);
	p = put_varint(p, body);
	p = put_len(p, F_KV_KEY, key, kn);
	p = put_len(p, F_KV_VALUE, any, any_n);
	strbuf_add(b, (const char *)buf, (size_t)(p - buf));
}

static void kv_string(struct strbuf *b, uint32_t field, const char *key, const char *value)
{
	uint8_t any[256];
	size_t vn = strnlen(value, 240);
	uint8_t *p = put_len(any, F_ANY_STRING, value, vn);
	kv_any(b, field, key, any, (size_t)(p - any));
}

static void kv_int(struct strbuf *b, uint32_t field, const char *key, int64_t value)
{
	uint8_t any[16];
	uint8_t *p = put_varint(any, (uint64_t)F_ANY_INT << 3 | PB_VARINT);
	p = put_varint(p, (uint64_t)value);
	kv_any(b, field, key, any, (size_t)(p - any));
}

/* An id field, left out when all zero (a root span's parent). */
static void id_field(struct strbuf *b, uint32_t field, const uint8_t *id, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (id[i] != 0) {
			pb_bytes(b, field, id, n);
			return;
		}
}

static void encode_span(struct strbuf *b, const struct otlp_span *s)
{
	size_t sp = pb_open(b, F_SS_SPANS);
	id_field(b, F_SPAN_TRACE_ID, s->trace_id, 16);
	id_field(b, F_SPAN_SPAN_ID, s->span_id, 8);
	id_field(b, F_SPAN_PARENT_SPAN_ID, s->parent_span_id, 8);
	pb_string(b, F_SPAN_NAME, s->name);
	pb_uint(b, F_SPAN_KIND, (uint64_t)s->kind);
	pb_fixed64(b, F_SPAN_START, (uint64_t)s->start_ns);
	pb_fixed64(b, F_SPAN_END, (uint64_t)(s->end_ns >= s->start_ns ? s->end_ns : s->start_ns));
	if (s->run_id[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "hookflow.run_id", s->run_id);
	if (s->workflow[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "hookflow.workflow", s->workflow);
	if (s->generation >= 0)
		kv_int(b, F_SPAN_ATTRIBUTES, "hookflow.generation", s->generation);
	if (s->step >= 0)
		kv_int(b, F_SPAN_ATTRIBUTES, "hookflow.step", s->step);
	if (s->attempt >= 0)
		kv_int(b, F_SPAN_ATTRIBUTES, "hookflow.attempt", s->attempt);
	if (s->outcome[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "hookflow.outcome", s->outcome);
	if (s->kind == OTLP_CLIENT)
		kv_string(b, F_SPAN_ATTRIBUTES, "http.request.method", "POST");
	if (s->http_status > 0)
		kv_int(b, F_SPAN_ATTRIBUTES, "http.response.status_code", s->http_status);
	if (s->error_type[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "error.type", s->error_type);
	if (s->wait_kind[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "hookflow.wait", s->wait_kind);
	if (s->signal_state[0])
		kv_string(b, F_SPAN_ATTRIBUTES, "hookflow.signal.status", s->signal_state);
	if (s->status != OTLP_UNSET) {
		size_t st = pb_open(b, F_SPAN_STATUS);
		if (s->status_msg[0])
			pb_string(b, F_STATUS_MESSAGE, s->status_msg);
		pb_uint(b, F_STATUS_CODE, (uint64_t)s->status);
		pb_close(b, st);
	}
	pb_close(b, sp);
}

void otlp_encode(struct strbuf *b, const char *instance, const struct otlp_span *v, size_t n)
{
	size_t rs = pb_open(b, F_REQUEST_RESOURCE_SPANS);
	size_t res = pb_open(b, F_RS_RESOURCE);
	kv_string(b, F_RESOURCE_ATTRIBUTES, "service.name", "hookflow");
	kv_string(b, F_RESOURCE_ATTRIBUTES, "service.version", HOOKFLOW_VERSION);
	kv_string(b, F_RESOURCE_ATTRIBUTES, "service.instance.id", instance);
	pb_close(b, res);
	size_t ss = pb_open(b, F_RS_SCOPE_SPANS);
	size_t scope = pb_open(b, F_SS_SCOPE);
	pb_string(b, F_SCOPE_NAME, "hookflow");
	pb_string(b, F_SCOPE_VERSION, HOOKFLOW_VERSION);
	pb_close(b, scope);
	for (size_t i = 0; i < n; i++)
		encode_span(b, &v[i]);
	pb_close(b, ss);
	pb_close(b, rs);
}

bool otlp_traces_url(const char *endpoint, char *out, size_t cap)
{
	size_t len = strlen(endpoint);
	while (len > 0 && endpoint[len - 1] == '/')
		len--;
	int n = snprintf(out, cap, "%.*s/v1/traces", (int)len, endpoint);
	return n > 0 && (size_t)n < cap;
}

/* ---- the exporter thread ---------------------------------------------------- */

static size_t discard_body(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* One POST of `body`. Returns 0 when the collector took it, 1 when it may be
 * tried again (no answer, 429, 502, 503, 504: the OTLP specification's
 * retryable answers), -1 when it refused it for good. */
static int post(CURL *c, const struct strbuf *b, long timeout_ms, char *why, size_t why_cap)
{
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, b->data);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		snprintf(why, why_cap, "%s", curl_easy_strerror(rc));
		return 1;
	}
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300)
		return 0;
	snprintf(why, why_cap, "HTTP %ld", status);
	return status == 429 || status == 502 || status == 503 || status == 504 ? 1 : -1;
}

/* Sends spans v[0..n) (up to `attempts` tries, pausing between them unless
 * stopping), counting them exported or dropped. `b` is the exporter's
 * buffer, kept from one batch to the next (emptied here). */
static void export_batch(CURL *c, struct strbuf *b, const struct otlp_span *v, size_t n,
			 int attempts)
{
	b->len = 0;
	otlp_encode(b, X.instance, v, n);
	if (b->oom) {
		strbuf_cleanup(b);
		metrics_spans_dropped(METRICS_SPAN_EXPORT_FAILED, (int64_t)n);
		log_warn("otlp", "out of memory encoding spans: dropped", "spans=%zu", n);
		return;
	}
	char why[128] = "";
	int r = 1;
	for (int a = 1; a <= attempts && r > 0; a++) {
		if (a > 1) {
			int64_t ms = (int64_t)RETRY_PAUSE_MS << (a - 2);
			struct timespec dl;
			timefmt_mono_deadline((int)ms, &dl);
			pthread_mutex_lock(&X.mu);
			while (!X.stop && pthread_cond_timedwait(&X.cv, &X.mu, &dl) != ETIMEDOUT) {
			}
			pthread_mutex_unlock(&X.mu);
		}
		r = post(c, b, X.cfg->otlp_timeout_ms, why, sizeof why);
	}
	if (r == 0) {
		metrics_spans_exported((int64_t)n);
		return;
	}
	metrics_spans_dropped(METRICS_SPAN_EXPORT_FAILED, (int64_t)n);
	log_warn("otlp", "spans dropped: the collector did not take them", "spans=%zu error=\"%s\"",
		 n, why);
}

/* The oldest queued spans, up to OTLP_BATCH of them and up to the ring's
 * end: *at receives where they start. They stay in their slots, which no
 * emitter writes (emitters write after the last queued span), until
 * release(): the exporter encodes them in place, and the lock is held only
 * to read the indices. */
static size_t peek(size_t *at)
{
	pthread_mutex_lock(&X.mu);
	size_t n = X.count < OTLP_BATCH ? X.count : OTLP_BATCH;
	if (n > X.cap - X.head)
		n = X.cap - X.head;
	*at = X.head;
	pthread_mutex_unlock(&X.mu);
	return n;
}

/* Gives the `n` spans peek() found back to the emitters. */
static void release(size_t n)
{
	pthread_mutex_lock(&X.mu);
	X.head = (X.head + n) % X.cap;
	X.count -= n;
	X.first_at = timefmt_mono_ms();
	pthread_mutex_unlock(&X.mu);
}

static void *exporter_main(void *arg)
{
	CURL *c = arg;
	struct strbuf b = {0};
	for (;;) {
		pthread_mutex_lock(&X.mu);
		for (;;) {
			if (X.stop || X.count >= OTLP_BATCH)
				break;
			if (X.count > 0 && timefmt_mono_ms() - X.first_at >= FLUSH_INTERVAL_MS)
				break;
			struct timespec dl;
			timefmt_mono_deadline(X.count > 0 ? (int)(X.first_at + FLUSH_INTERVAL_MS -
								  timefmt_mono_ms())
							  : FLUSH_INTERVAL_MS,
					      &dl);
			pthread_cond_timedwait(&X.cv, &X.mu, &dl);
		}
		bool stop = X.stop;
		pthread_mutex_unlock(&X.mu);
		if (stop)
			break;
		size_t at, n = peek(&at);
		if (n > 0) {
			export_batch(c, &b, &X.ring[at], n, EXPORT_ATTEMPTS);
			release(n);
		}
	}
	/* Stopping: what is queued goes out, one try per batch, within the
	 * budget; the rest is dropped. */
	int64_t until = timefmt_mono_ms() + STOP_BUDGET_MS;
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	for (;;) {
		size_t at, n = peek(&at);
		if (n == 0)
			break;
		if (timefmt_mono_ms() >= until)
			metrics_spans_dropped(METRICS_SPAN_EXPORT_FAILED, (int64_t)n);
		else
			export_batch(c, &b, &X.ring[at], n, 1);
		release(n);
	}
	strbuf_cleanup(&b);
	curl_easy_cleanup(c);
	return NULL;
}

enum err_code otlp_start(const struct config *cfg, const char *instance, struct err *e)
{
	if (cfg->otlp_endpoint == NULL)
		return ERR_OK;
	X.cfg = cfg;
	if (!otlp_traces_url(cfg->otlp_endpoint, X.url, sizeof X.url))
		return err_set(e, ERR_INVALID, "HOOKFLOW_OTLP_ENDPOINT: too long");
	X.instance = strdup(instance);
	X.cap = (size_t)cfg->otlp_queue;
	X.ring = calloc(X.cap, sizeof *X.ring);
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	if (X.instance == NULL || X.ring == NULL || c == NULL ||
	    (h = curl_slist_append(NULL, "Content-Type: application/x-protobuf")) == NULL) {
		curl_easy_cleanup(c);
		free(X.instance);
		free(X.ring);
		X.instance = NULL;
		X.ring = NULL;
		return err_set(e, ERR_INTERNAL, "otlp: out of memory");
	}
	X.headers = h; /* freed by otlp_stop, once the exporter's handle is gone */
	curl_easy_setopt(c, CURLOPT_URL, X.url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, X.headers);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "hookflow/" HOOKFLOW_VERSION);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NOPROXY, "");
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&X.cv, &ca);
	pthread_condattr_destroy(&ca);
	X.stop = false;
	atomic_store(&X.enabled, true);
	if (pthread_create(&X.thread, NULL, exporter_main, c) != 0) {
		atomic_store(&X.enabled, false);
		curl_easy_cleanup(c);
		curl_slist_free_all(X.headers);
		X.headers = NULL;
		return err_set(e, ERR_INTERNAL, "otlp: cannot start the exporter thread");
	}
	log_info("otlp", "exporting spans", "url=%s queue=%zu", X.url, X.cap);
	return ERR_OK;
}

void otlp_stop(void)
{
	if (!otlp_enabled())
		return;
	atomic_store(&X.enabled, false);
	pthread_mutex_lock(&X.mu);
	X.stop = true;
	pthread_cond_signal(&X.cv);
	pthread_mutex_unlock(&X.mu);
	pthread_join(X.thread, NULL);
	X.count = 0;
	free(X.ring);
	X.ring = NULL;
	free(X.instance);
	X.instance = NULL;
	curl_slist_free_all(X.headers);
	X.headers = NULL;
	pthread_cond_destroy(&X.cv);
}
