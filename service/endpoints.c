/* endpoints: per-endpoint in-flight allowance (AIMD) and circuit breaker.
 * The contract is in endpoints.h; this file keeps the table (a chained hash
 * of at most ENDPOINTS_MAX_TRACKED entries) behind one mutex. */
#include "service/endpoints.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"

#define HASH_SLOTS 8192 /* a power of two, twice ENDPOINTS_MAX_TRACKED */

/* One bucket of the recent error rate: the calls that ended in the
 * ENDPOINTS_RATE_BUCKET_MS slice number `id`, and how many of them badly. */
struct rate_bucket {
	int64_t id;
	uint64_t calls, bad;
};

struct endpoint {
	struct endpoint *next; /* hash chain */
	uint64_t hash;
	char origin[ENDPOINTS_ORIGIN_BYTES + 1];
	int inflight;
	int64_t last_active_ms; /* the last call started or finished */

	/* Allowance. */
	double allowance;        /* 1..cap; cap means unconstrained */
	double ssthresh;         /* below it, slow start */
	int64_t calm_from_ms;    /* the last cut, close or calm re-arm */
	int64_t paused_until_ms; /* 0: no pause */

	/* Epochs: every cut and every breaker transition opens a new one. A
	 * call's token is the epoch it started in. */
	uint64_t epoch;
	uint64_t cut_epoch;     /* a throttle cuts only from a call started in it or later */
	uint64_t breaker_epoch; /* the breaker counts only calls started in it or later */
	uint64_t probe_token;   /* half-open: the probe's token */
	bool probe_inflight;

	/* Breaker. */
	enum endpoint_state state;
	int64_t open_until_ms;
	int64_t cooldown_ms;    /* the current (or next) cool-down */
	double saved_allowance; /* the allowance when the breaker opened */
	int fail_count;         /* failures in the current run */
	int64_t fail_first_ms;  /* the run's first failure */

	/* Reporting. */
	struct rate_bucket buckets[ENDPOINTS_RATE_BUCKETS];
	char last_error[ENDPOINTS_ERROR_BYTES + 1];
	int64_t last_error_ms;
	uint64_t calls, throttled, failures, breaker_opens;
};

struct endpoints {
	pthread_mutex_t mu;
	struct endpoints_config cfg;
	size_t count;
	struct endpoint *slots[HASH_SLOTS];
};

struct endpoints_config endpoints_config_default(void)
{
	return (struct endpoints_config){
		.enabled = true,
		.max_inflight = 10000,
		.breaker_threshold = 10,
		.breaker_window_ms = 10000,
		.cooldown_ms = 1000,
		.cooldown_max_ms = 60000,
	};
}

static enum err_code check_config(const struct endpoints_config *c, struct err *e)
{
	if (c->max_inflight < 1 || c->max_inflight > ENDPOINTS_MAX_INFLIGHT_LIMIT)
		return err_set(e, ERR_INVALID, "max_inflight: must be 1..%d",
			       ENDPOINTS_MAX_INFLIGHT_LIMIT);
	if (c->breaker_threshold < 1 || c->breaker_threshold > ENDPOINTS_MAX_THRESHOLD)
		return err_set(e, ERR_INVALID, "breaker_threshold: must be 1..%d",
			       ENDPOINTS_MAX_THRESHOLD);
	if (c->breaker_window_ms < 1 || c->breaker_window_ms > ENDPOINTS_MAX_DURATION_MS)
		return err_set(e, ERR_INVALID, "breaker_window_ms: must be 1..%lld",
			       (long long)ENDPOINTS_MAX_DURATION_MS);
	if (c->cooldown_ms < 1 || c->cooldown_ms > ENDPOINTS_MAX_DURATION_MS)
		return err_set(e, ERR_INVALID, "cooldown_ms: must be 1..%lld",
			       (long long)ENDPOINTS_MAX_DURATION_MS);
	if (c->cooldown_max_ms < c->cooldown_ms || c->cooldown_max_ms > ENDPOINTS_MAX_DURATION_MS)
		return err_set(e, ERR_INVALID, "cooldown_max_ms: must be cooldown_ms..%lld",
			       (long long)ENDPOINTS_MAX_DURATION_MS);
	return ERR_OK;
}

struct endpoints *endpoints_new(const struct endpoints_config *cfg, struct err *e)
{
	struct endpoints *eps;

	if (check_config(cfg, e) != ERR_OK)
		return NULL;
	eps = calloc(1, sizeof *eps);
	if (eps == NULL) {
		err_set(e, ERR_INTERNAL, "endpoints: out of memory");
		return NULL;
	}
	if (pthread_mutex_init(&eps->mu, NULL) != 0) {
		free(eps);
		err_set(e, ERR_INTERNAL, "endpoints: cannot create a mutex");
		return NULL;
	}
	eps->cfg = *cfg;
	return eps;
}

void endpoints_free(struct endpoints *eps)
{
	if (eps == NULL)
		return;
	for (size_t i = 0; i < HASH_SLOTS; i++) {
		struct endpoint *ep = eps->slots[i];
		while (ep != NULL) {
			struct endpoint *next = ep->next;
			free(ep);
			ep = next;
		}
	}
	pthread_mutex_destroy(&eps->mu);
	free(eps);
}

const char *endpoint_state_name(enum endpoint_state s)
{
	switch (s) {
	case ENDPOINT_CLOSED:
		return "closed";
	case ENDPOINT_OPEN:
		return "open";
	case ENDPOINT_HALF_OPEN:
		return "half_open";
	}
	return "unknown";
}

enum endpoint_result endpoints_result_of_call(const struct call_result *r)
{
	if (r->refused != NULL)
		return ENDPOINT_IGNORED;
	if (r->timed_out || r->transport_error != 0)
		return ENDPOINT_FAILURE;
	if (r->too_large)
		return ENDPOINT_SUCCESS;
	if (r->status == 429)
		return ENDPOINT_THROTTLED;
	if (r->status == 503)
		return ENDPOINT_UNAVAILABLE;
	if (r->status >= 500 && r->status <= 599)
		return ENDPOINT_FAILURE;
	return ENDPOINT_SUCCESS;
}

/* ---- the table ---- */

/* The length of `origin`, or 0 when it is NULL, empty or too long. */
static size_t origin_len(const char *origin)
{
	size_t n;

	if (origin == NULL)
		return 0;
	n = strnlen(origin, ENDPOINTS_ORIGIN_BYTES + 1);
	return n <= ENDPOINTS_ORIGIN_BYTES ? n : 0;
}

/* FNV-1a. */
static uint64_t hash_of(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static struct endpoint *find(struct endpoints *eps, const char *origin, size_t len, uint64_t h)
{
	for (struct endpoint *ep = eps->slots[h & (HASH_SLOTS - 1)]; ep != NULL; ep = ep->next)
		if (ep->hash == h && strncmp(ep->origin, origin, len) == 0 &&
		    ep->origin[len] == '\0')
			return ep;
	return NULL;
}

/* Moves `ep` on in time: an elapsed cool-down makes the breaker half-open, an
 * elapsed pause ends. */
static void refresh(struct endpoint *ep, int64_t now_ms)
{
	if (ep->state == ENDPOINT_OPEN && now_ms >= ep->open_until_ms) {
		ep->state = ENDPOINT_HALF_OPEN;
		ep->probe_inflight = false;
	}
	if (ep->paused_until_ms != 0 && now_ms >= ep->paused_until_ms)
		ep->paused_until_ms = 0;
}

static bool unconstrained(const struct endpoints *eps, const struct endpoint *ep)
{
	return ep->allowance >= (double)eps->cfg.max_inflight;
}

/* endpoints_room for a tracked endpoint (refreshed). */
static int room_of(const struct endpoints *eps, const struct endpoint *ep)
{
	int r;

	if (ep->paused_until_ms != 0 || ep->state == ENDPOINT_OPEN)
		return 0;
	if (ep->state == ENDPOINT_HALF_OPEN)
		return ep->inflight >= 1 ? 0 : 1;
	if (unconstrained(eps, ep))
		return ENDPOINTS_UNLIMITED;
	r = (int)floor(ep->allowance) - ep->inflight;
	return r > 0 ? r : 0;
}

/* An endpoint that can be forgotten without losing anything that matters. */
static bool idle(const struct endpoints *eps, const struct endpoint *ep, int64_t now_ms)
{
	return ep->inflight == 0 && ep->state == ENDPOINT_CLOSED && ep->paused_until_ms == 0 &&
	       (unconstrained(eps, ep) || now_ms - ep->last_active_ms >= ENDPOINTS_FORGET_MS);
}

/* Forgets the least recently active idle endpoint; false when none is idle. */
static bool evict_one(struct endpoints *eps, int64_t now_ms)
{
	struct endpoint **victim = NULL;

	for (size_t i = 0; i < HASH_SLOTS; i++)
		for (struct endpoint **pp = &eps->slots[i]; *pp != NULL; pp = &(*pp)->next) {
			refresh(*pp, now_ms);
			if (idle(eps, *pp, now_ms) &&
			    (victim == NULL || (*pp)->last_active_ms < (*victim)->last_active_ms))
				victim = pp;
		}
	if (victim == NULL)
		return false;
	struct endpoint *ep = *victim;
	*victim = ep->next;
	free(ep);
	eps->count--;
	return true;
}

static enum err_code add(struct endpoints *eps, const char *origin, size_t len, uint64_t h,
			 int64_t now_ms, struct endpoint **out, struct err *e)
{
	struct endpoint *ep;

	if (eps->count >= ENDPOINTS_MAX_TRACKED && !evict_one(eps, now_ms))
		return err_set(e, ERR_UNAVAILABLE,
			       "endpoints: %d endpoints tracked and none idle; %s not tracked",
			       ENDPOINTS_MAX_TRACKED, origin);
	ep = calloc(1, sizeof *ep);
	if (ep == NULL)
		return err_set(e, ERR_INTERNAL, "endpoints: out of memory");
	ep->hash = h;
	memcpy(ep->origin, origin, len);
	ep->origin[len] = '\0';
	ep->allowance = ep->ssthresh = eps->cfg.max_inflight;
	ep->saved_allowance = ep->allowance;
	ep->calm_from_ms = ep->last_active_ms = now_ms;
	ep->epoch = ep->cut_epoch = ep->breaker_epoch = 1;
	ep->state = ENDPOINT_CLOSED;
	ep->cooldown_ms = eps->cfg.cooldown_ms;
	for (int i = 0; i < ENDPOINTS_RATE_BUCKETS; i++)
		ep->buckets[i].id = INT64_MIN;
	ep->next = eps->slots[h & (HASH_SLOTS - 1)];
	eps->slots[h & (HASH_SLOTS - 1)] = ep;
	eps->count++;
	*out = ep;
	return ERR_OK;
}

/* ---- room and calls ---- */

int endpoints_room(struct endpoints *eps, const char *origin, int64_t now_ms)
{
	size_t len = origin_len(origin);
	struct endpoint *ep;
	int room = ENDPOINTS_UNLIMITED;

	if (!eps->cfg.enabled || len == 0)
		return ENDPOINTS_UNLIMITED;
	pthread_mutex_lock(&eps->mu);
	ep = find(eps, origin, len, hash_of(origin, len));
	if (ep != NULL) {
		refresh(ep, now_ms);
		room = room_of(eps, ep);
	}
	pthread_mutex_unlock(&eps->mu);
	return room;
}

enum err_code endpoints_started(struct endpoints *eps, const char *origin, int n, int64_t now_ms,
				uint64_t *token, struct err *e)
{
	size_t len = origin_len(origin);
	uint64_t h;
	struct endpoint *ep;
	enum err_code rc = ERR_OK;

	*token = 0;
	if (!eps->cfg.enabled)
		return ERR_OK;
	if (len == 0)
		return err_set(e, ERR_INVALID, "origin: must be 1..%d bytes",
			       ENDPOINTS_ORIGIN_BYTES);
	if (n < 1)
		return err_set(e, ERR_INVALID, "n: must be at least 1");
	h = hash_of(origin, len);
	pthread_mutex_lock(&eps->mu);
	ep = find(eps, origin, len, h);
	if (ep == NULL && (rc = add(eps, origin, len, h, now_ms, &ep, e)) != ERR_OK)
		goto out;
	if (n > INT_MAX - ep->inflight) {
		rc = err_set(e, ERR_INVALID, "n: %d more calls would overflow the %d in flight", n,
			     ep->inflight);
		goto out;
	}
	refresh(ep, now_ms);
	if (ep->state == ENDPOINT_HALF_OPEN && !ep->probe_inflight) {
		ep->probe_token = ++ep->epoch;
		ep->probe_inflight = true;
	}
	ep->inflight += n;
	ep->last_active_ms = now_ms;
	*token = ep->epoch;
out:
	pthread_mutex_unlock(&eps->mu);
	return rc;
}

/* Opens (or reopens) the breaker for the current cool-down. */
static void breaker_open(struct endpoint *ep, int64_t now_ms)
{
	ep->state = ENDPOINT_OPEN;
	ep->open_until_ms = now_ms + ep->cooldown_ms;
	ep->breaker_epoch = ep->cut_epoch = ++ep->epoch;
	ep->breaker_opens++;
	ep->fail_count = 0;
	ep->probe_inflight = false;
}

/* The probe succeeded: closed, allowance back to 1 in slow start up to where
 * it was when the breaker opened. */
static void breaker_close(const struct endpoints *eps, struct endpoint *ep, int64_t now_ms)
{
	ep->state = ENDPOINT_CLOSED;
	ep->open_until_ms = 0;
	ep->cooldown_ms = eps->cfg.cooldown_ms;
	ep->allowance = 1;
	ep->ssthresh = ep->saved_allowance > 1 ? ep->saved_allowance : 1;
	ep->breaker_epoch = ep->cut_epoch = ++ep->epoch;
	ep->fail_count = 0;
	ep->calm_from_ms = now_ms;
}

static void grow(const struct endpoints *eps, struct endpoint *ep, int64_t now_ms)
{
	double cap = eps->cfg.max_inflight;

	if (ep->allowance >= cap)
		return;
	if (ep->allowance >= ep->ssthresh && ep->ssthresh < cap &&
	    now_ms - ep->calm_from_ms >= ENDPOINTS_CALM_MS) {
		ep->ssthresh = 2 * ep->allowance < cap ? 2 * ep->allowance : cap;
		ep->calm_from_ms = now_ms;
	}
	if (ep->allowance < ep->ssthresh)
		ep->allowance = ep->allowance + 1 < ep->ssthresh ? ep->allowance + 1 : ep->ssthresh;
	else
		ep->allowance += 1 / (ENDPOINTS_AVOIDANCE_DIVISOR * ep->allowance);
	if (ep->allowance >= cap)
		ep->allowance = ep->ssthresh = cap;
}

static void on_success(const struct endpoints *eps, struct endpoint *ep, uint64_t token, bool probe,
		       int64_t now_ms)
{
	if (ep->state == ENDPOINT_HALF_OPEN && probe) {
		breaker_close(eps, ep, now_ms);
		return;
	}
	if (ep->state != ENDPOINT_CLOSED)
		return;
	if (token >= ep->breaker_epoch)
		ep->fail_count = 0;
	grow(eps, ep, now_ms);
}

/* A 429 or a 503: one cut per epoch, and the Retry-After pause. `inflight`
 * counts the throttled call. */
static void on_throttle(struct endpoint *ep, uint64_t token, int inflight, int64_t retry_after_ms,
			int64_t now_ms)
{
	if (token >= ep->cut_epoch) {
		double base = ep->allowance < inflight ? ep->allowance : inflight;
		double a = base / 2 > 1 ? base / 2 : 1;

		ep->allowance = ep->ssthresh = a;
		ep->cut_epoch = ++ep->epoch;
		ep->calm_from_ms = now_ms;
	}
	if (retry_after_ms > 0) {
		int64_t d = retry_after_ms < ENDPOINTS_MAX_PAUSE_MS ? retry_after_ms
								    : ENDPOINTS_MAX_PAUSE_MS;
		if (now_ms + d > ep->paused_until_ms)
			ep->paused_until_ms = now_ms + d;
	}
}

static void on_failure(const struct endpoints *eps, struct endpoint *ep, uint64_t token, bool probe,
		       int64_t now_ms)
{
	if (ep->state == ENDPOINT_HALF_OPEN && probe) {
		int64_t doubled = ep->cooldown_ms * 2;
		ep->cooldown_ms =
			doubled < eps->cfg.cooldown_max_ms ? doubled : eps->cfg.cooldown_max_ms;
		breaker_open(ep, now_ms);
		return;
	}
	if (ep->state != ENDPOINT_CLOSED || token < ep->breaker_epoch)
		return;
	if (ep->fail_count == 0 || now_ms - ep->fail_first_ms > eps->cfg.breaker_window_ms) {
		ep->fail_count = 1;
		ep->fail_first_ms = now_ms;
	} else {
		ep->fail_count++;
	}
	if (ep->fail_count >= eps->cfg.breaker_threshold) {
		ep->saved_allowance = ep->allowance;
		ep->cooldown_ms = eps->cfg.cooldown_ms;
		breaker_open(ep, now_ms);
	}
}

static int64_t bucket_id(int64_t now_ms)
{
	int64_t id = now_ms / ENDPOINTS_RATE_BUCKET_MS;
	return now_ms < 0 && now_ms % ENDPOINTS_RATE_BUCKET_MS != 0 ? id - 1 : id;
}

static void count_rate(struct endpoint *ep, bool bad, int64_t now_ms)
{
	int64_t id = bucket_id(now_ms);
	struct rate_bucket *b =
		&ep->buckets[((id % ENDPOINTS_RATE_BUCKETS) + ENDPOINTS_RATE_BUCKETS) %
			     ENDPOINTS_RATE_BUCKETS];

	if (b->id != id) {
		b->id = id;
		b->calls = b->bad = 0;
	}
	b->calls++;
	if (bad)
		b->bad++;
}

/* Keeps `text` as the last error: at most ENDPOINTS_ERROR_BYTES, cut on a
 * character boundary; a text that is not UTF-8 has its non-ASCII bytes
 * replaced by '?'. */
static void keep_error(struct endpoint *ep, const char *text, int64_t now_ms)
{
	size_t n = strnlen(text, ENDPOINTS_ERROR_BYTES + 1);

	if (n > ENDPOINTS_ERROR_BYTES) {
		n = ENDPOINTS_ERROR_BYTES;
		while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(ep->last_error, text, n);
	ep->last_error[n] = '\0';
	if (!ids_utf8_valid(ep->last_error, n))
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)ep->last_error[i] >= 0x80)
				ep->last_error[i] = '?';
	ep->last_error_ms = now_ms;
}

static const char *result_name(enum endpoint_result r)
{
	switch (r) {
	case ENDPOINT_THROTTLED:
		return "throttled";
	case ENDPOINT_UNAVAILABLE:
		return "unavailable";
	case ENDPOINT_FAILURE:
		return "failed";
	default:
		return "";
	}
}

void endpoints_finished(struct endpoints *eps, const char *origin, uint64_t token,
			enum endpoint_result r, int64_t retry_after_ms, const char *error,
			int64_t now_ms)
{
	size_t len = origin_len(origin);
	struct endpoint *ep;
	int inflight;
	bool probe;

	if (!eps->cfg.enabled || token == 0 || len == 0)
		return;
	pthread_mutex_lock(&eps->mu);
	ep = find(eps, origin, len, hash_of(origin, len));
	if (ep == NULL)
		goto out;
	refresh(ep, now_ms);
	inflight = ep->inflight;
	if (ep->inflight > 0)
		ep->inflight--;
	ep->last_active_ms = now_ms;
	probe = ep->probe_inflight && token == ep->probe_token;
	if (probe)
		ep->probe_inflight = false;
	if (r != ENDPOINT_SUCCESS && r != ENDPOINT_THROTTLED && r != ENDPOINT_UNAVAILABLE &&
	    r != ENDPOINT_FAILURE)
		goto out; /* ignored (or not a result): only the in-flight count changes */
	ep->calls++;
	count_rate(ep, r != ENDPOINT_SUCCESS, now_ms);
	if (r == ENDPOINT_SUCCESS) {
		on_success(eps, ep, token, probe, now_ms);
		goto out;
	}
	keep_error(ep, error != NULL && error[0] != '\0' ? error : result_name(r), now_ms);
	if (r == ENDPOINT_THROTTLED || r == ENDPOINT_UNAVAILABLE) {
		ep->throttled++;
		on_throttle(ep, token, inflight, retry_after_ms, now_ms);
	}
	if (r == ENDPOINT_UNAVAILABLE || r == ENDPOINT_FAILURE) {
		ep->failures++;
		on_failure(eps, ep, token, probe, now_ms);
	}
out:
	pthread_mutex_unlock(&eps->mu);
}

/* ---- snapshots ---- */

static void describe(const struct endpoints *eps, const struct endpoint *ep, int64_t now_ms,
		     struct endpoint_info *out)
{
	int64_t id = bucket_id(now_ms);
	uint64_t calls = 0, bad = 0;

	memset(out, 0, sizeof *out);
	memcpy(out->origin, ep->origin, sizeof out->origin);
	out->state = ep->state;
	out->unconstrained = unconstrained(eps, ep);
	out->allowance = ep->allowance;
	out->room = room_of(eps, ep);
	out->inflight = ep->inflight;
	out->paused_until_ms = ep->paused_until_ms;
	out->open_until_ms = ep->state == ENDPOINT_OPEN ? ep->open_until_ms : 0;
	out->cooldown_ms = ep->cooldown_ms;
	for (int i = 0; i < ENDPOINTS_RATE_BUCKETS; i++) {
		const struct rate_bucket *b = &ep->buckets[i];
		if (b->id <= id && b->id > id - ENDPOINTS_RATE_BUCKETS) {
			calls += b->calls;
			bad += b->bad;
		}
	}
	out->recent_calls = calls;
	out->error_rate = calls > 0 ? (double)bad / (double)calls : 0;
	memcpy(out->last_error, ep->last_error, sizeof out->last_error);
	out->last_error_ms = ep->last_error_ms;
	out->calls = ep->calls;
	out->throttled = ep->throttled;
	out->failures = ep->failures;
	out->breaker_opens = ep->breaker_opens;
}

/* Both listings' elements begin with the origin. */
static int by_origin(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* Writes what a listing keeps of `ep` (refreshed) to `slot`; false to leave
 * it out. */
typedef bool (*fill_fn)(const struct endpoints *eps, const struct endpoint *ep, int64_t now_ms,
			void *slot);

/* The listing of every endpoint that `fill` keeps, `size` bytes an element,
 * sorted by origin: *out malloc'd (NULL when empty). */
static enum err_code list_endpoints(struct endpoints *eps, int64_t now_ms, size_t size,
				    fill_fn fill, void **out, size_t *n, struct err *e)
{
	char *list = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!eps->cfg.enabled)
		return ERR_OK;
	pthread_mutex_lock(&eps->mu);
	if (eps->count > 0 && (list = malloc(eps->count * size)) == NULL) {
		pthread_mutex_unlock(&eps->mu);
		return err_set(e, ERR_INTERNAL, "endpoints: out of memory");
	}
	for (size_t i = 0; i < HASH_SLOTS; i++)
		for (struct endpoint *ep = eps->slots[i]; ep != NULL; ep = ep->next) {
			refresh(ep, now_ms);
			if (fill(eps, ep, now_ms, list + k * size))
				k++;
		}
	pthread_mutex_unlock(&eps->mu);
	if (k == 0) {
		free(list);
		return ERR_OK;
	}
	qsort(list, k, size, by_origin);
	*out = list;
	*n = k;
	return ERR_OK;
}

static bool fill_info(const struct endpoints *eps, const struct endpoint *ep, int64_t now_ms,
		      void *slot)
{
	describe(eps, ep, now_ms, slot);
	return true;
}

static bool fill_room(const struct endpoints *eps, const struct endpoint *ep, int64_t now_ms,
		      void *slot)
{
	struct endpoint_room *r = slot;
	int room = room_of(eps, ep);

	(void)now_ms;
	if (room == ENDPOINTS_UNLIMITED)
		return false;
	memcpy(r->origin, ep->origin, sizeof r->origin);
	r->room = room;
	r->reopen_ms = 0;
	if (room == 0 && ep->paused_until_ms != 0)
		r->reopen_ms = ep->paused_until_ms;
	if (room == 0 && ep->state == ENDPOINT_OPEN && ep->open_until_ms > r->reopen_ms)
		r->reopen_ms = ep->open_until_ms;
	return true;
}

enum err_code endpoints_snapshot(struct endpoints *eps, int64_t now_ms, struct endpoint_info **out,
				 size_t *n, struct err *e)
{
	void *list;
	enum err_code rc = list_endpoints(eps, now_ms, sizeof **out, fill_info, &list, n, e);

	*out = list;
	return rc;
}

void endpoints_snapshot_free(struct endpoint_info *list)
{
	free(list);
}

enum err_code endpoints_limited(struct endpoints *eps, int64_t now_ms, struct endpoint_room **out,
				size_t *n, struct err *e)
{
	void *list;
	enum err_code rc = list_endpoints(eps, now_ms, sizeof **out, fill_room, &list, n, e);

	*out = list;
	return rc;
}
