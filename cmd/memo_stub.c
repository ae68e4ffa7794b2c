/* memo_stub: hookflow's memo endpoints in memory, for check-webhook. */
#include "cmd/memo_stub.h"

#include <arpa/inet.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/ids.h"
#include "handlers/common.h"
#include "service/http.h"
#include "service/keyring.h"

#define MEMO_STUB_MAX_FAILING 16

struct entry {
	struct entry *next;
	char *run_id;
	int scope;
	char *key;
	char *value; /* canonical JSON */
};

struct memo_stub {
	struct config cfg;
	struct app app;
	struct keyring *keyring;
	struct http_server *server;
	pthread_mutex_t mu;
	struct entry *entries;
	size_t bytes;
	struct memo_op *ops;
	size_t nops;
	char failing[MEMO_STUB_MAX_FAILING][IDS_MAX_RUN_ID + 1];
	int nfailing;
};

/* The handlers' way to the stub: one per process. */
static struct memo_stub *stub;

static struct entry *find(struct memo_stub *m, const char *run_id, int scope, const char *key)
{
	for (struct entry *x = m->entries; x != NULL; x = x->next)
		if (x->scope == scope && strcmp(x->run_id, run_id) == 0 && strcmp(x->key, key) == 0)
			return x;
	return NULL;
}

static void drop(struct memo_stub *m, struct entry *gone)
{
	for (struct entry **p = &m->entries; *p != NULL; p = &(*p)->next)
		if (*p == gone) {
			*p = gone->next;
			m->bytes -= strlen(gone->value);
			free(gone->run_id);
			free(gone->key);
			free(gone->value);
			free(gone);
			return;
		}
}

static bool failing(const struct memo_stub *m, const char *run_id)
{
	for (int i = 0; i < m->nfailing; i++)
		if (strcmp(m->failing[i], run_id) == 0)
			return true;
	return false;
}

/* Answers one memo call (under m->mu) and returns the status it answered. */
static int answer(struct memo_stub *m, struct http_req *r, const char *method, const char *run_id,
		  int scope, const char *key)
{
	struct err e = {0};
	if (failing(m, run_id)) {
		err_set(&e, ERR_UNAVAILABLE,
			"memo unavailable (hookflow check-webhook: this probe's memo is down)");
		http_reply_error(r, &e);
		return 503;
	}
	struct entry *x = find(m, run_id, scope, key);
	if (strcmp(method, "GET") == 0) {
		json_t *v = x != NULL ? json_loads(x->value, JSON_DECODE_ANY, NULL) : NULL;
		if (v == NULL) {
			err_set(&e, ERR_NOT_FOUND, "key: no memo under this key");
			http_reply_error(r, &e);
			return 404;
		}
		http_reply_json(r, 200, json_pack("{s:o}", "value", v));
		return 200;
	}
	if (strcmp(method, "DELETE") == 0) {
		if (x != NULL)
			drop(m, x);
		http_reply_empty(r, 204);
		return 204;
	}
	char *value = NULL;
	if (hc_value_body(r, &value, &e)) {
		http_reply_error(r, &e);
		return err_code_http_status(e.code);
	}
	size_t old = x != NULL ? strlen(x->value) : 0;
	if (m->bytes - old + strlen(value) > (size_t)MEMO_STUB_MAX_BYTES) {
		free(value);
		err_set(&e, ERR_UNAVAILABLE, "memo full: check-webhook keeps at most %ld bytes",
			MEMO_STUB_MAX_BYTES);
		http_reply_error(r, &e);
		return 503;
	}
	if (x == NULL) {
		struct entry *nx = calloc(1, sizeof *nx);
		char *rid = strdup(run_id), *k = strdup(key);
		if (nx == NULL || rid == NULL || k == NULL) {
			free(nx);
			free(rid);
			free(k);
			free(value);
			err_set(&e, ERR_INTERNAL, "out of memory");
			http_reply_error(r, &e);
			return 500;
		}
		nx->run_id = rid;
		nx->key = k;
		nx->scope = scope;
		nx->next = m->entries;
		m->entries = nx;
		x = nx;
	} else {
		m->bytes -= old;
		free(x->value);
	}
	x->value = value;
	m->bytes += strlen(value);
	http_reply_json(r, 200,
			json_pack("{s:o}", "value", json_loads(value, JSON_DECODE_ANY, NULL)));
	return 200;
}

static void handle_memo(struct http_req *r)
{
	struct memo_stub *m = stub;
	struct err e = {0};
	const char *run_id = http_req_param(r, 0);
	const char *key = http_req_param(r, 2);
	int scope = -1;
	if (key == NULL)
		key = http_req_param(r, 1);
	else if (hc_step_param(r, 1, &scope, &e))
		goto bad;
	if (ids_check_run_id("run_id", run_id, strlen(run_id), &e) ||
	    ids_check_key("key", key, strlen(key), &e))
		goto bad;
	const char *method = http_req_method(r);
	pthread_mutex_lock(&m->mu);
	if (m->nops >= MEMO_STUB_MAX_OPS) {
		pthread_mutex_unlock(&m->mu);
		err_set(&e, ERR_UNAVAILABLE, "check-webhook answers at most %d memo calls",
			MEMO_STUB_MAX_OPS);
		http_reply_error(r, &e);
		return;
	}
	struct memo_op *op = &m->ops[m->nops++];
	memset(op, 0, sizeof *op);
	snprintf(op->run_id, sizeof op->run_id, "%s", run_id);
	snprintf(op->method, sizeof op->method, "%s", method);
	op->scope = scope;
	snprintf(op->key, sizeof op->key, "%s", key);
	op->status = answer(m, r, method, run_id, scope, key);
	pthread_mutex_unlock(&m->mu);
	return;
bad:
	http_reply_error(r, &e);
}

static const struct http_route stub_routes[] = {
	{"GET", "/v1/runs/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
	{"PUT", "/v1/runs/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
	{"DELETE", "/v1/runs/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
	{"GET", "/v1/runs/{}/steps/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
	{"PUT", "/v1/runs/{}/steps/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
	{"DELETE", "/v1/runs/{}/steps/{}/memo/{}", handle_memo, HTTP_AUTH_MEMO},
};

enum err_code memo_stub_start(const char *host, int port, struct memo_stub **out, struct err *e)
{
	*out = NULL;
	unsigned char probe[16];
	if (inet_pton(AF_INET, host, probe) != 1 && inet_pton(AF_INET6, host, probe) != 1)
		return err_set(e, ERR_INVALID, "--memo-listen: %.100s is not an IP address", host);
	struct memo_stub *m = calloc(1, sizeof *m);
	struct token_key *key = calloc(1, sizeof *key);
	unsigned char api_token[24];
	char api_hex[2 * sizeof api_token + 1];
	if (m == NULL || key == NULL) {
		free(m);
		free(key);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	pthread_mutex_init(&m->mu, NULL);
	m->ops = calloc(MEMO_STUB_MAX_OPS, sizeof *m->ops);
	m->keyring = keyring_new();
	snprintf(key->kid, sizeof key->kid, "cw");
	key->len = 32;
	if (RAND_bytes(key->key, (int)key->len) != 1 ||
	    RAND_bytes(api_token, sizeof api_token) != 1 || m->ops == NULL || m->keyring == NULL) {
		free(key);
		memo_stub_stop(m);
		return err_set(e, ERR_INTERNAL, "cannot make the memo's keys");
	}
	keyring_replace(m->keyring, key, 1);
	ids_hex(api_token, sizeof api_token, api_hex);

	/* The server's settings, made here rather than read from HOOKFLOW_*:
	 * one API token that nobody is given, so that a call needs a delivery
	 * token of its run (and any Host header is accepted: the webhook may
	 * reach the stub by a name). */
	m->cfg.listen_host = strdup(host);
	m->cfg.listen_port = port;
	m->cfg.tokens[0] = strdup(api_hex);
	m->cfg.token_scopes[0] = TOKEN_SCOPE_ADMIN;
	m->cfg.ntokens = 1;
	m->cfg.max_body_bytes = 1024 * 1024;
	m->cfg.http_threads = 2;
	m->cfg.max_conns_per_ip = 0;
	m->cfg.request_timeout_ms = 60000;
	m->app.cfg = &m->cfg;
	m->app.keyring = m->keyring;
	if (m->cfg.listen_host == NULL || m->cfg.tokens[0] == NULL) {
		memo_stub_stop(m);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	stub = m;
	struct err se = {0};
	if (http_server_start(&m->app, stub_routes, sizeof stub_routes / sizeof *stub_routes,
			      &m->server, &se)) {
		memo_stub_stop(m);
		return err_set(e, ERR_INVALID, "--memo-listen: cannot listen on %.100s:%d", host,
			       port);
	}
	*out = m;
	return ERR_OK;
}

int memo_stub_port(const struct memo_stub *m)
{
	return http_server_port(m->server);
}

bool memo_stub_token(struct memo_stub *m, const char *run_id, int generation, int step, int attempt,
		     int64_t expires, char out[TOKEN_MAX])
{
	return keyring_make(m->keyring, run_id, generation, step, attempt, expires, out);
}

void memo_stub_fail_run(struct memo_stub *m, const char *run_id)
{
	pthread_mutex_lock(&m->mu);
	if (m->nfailing < MEMO_STUB_MAX_FAILING)
		snprintf(m->failing[m->nfailing++], sizeof m->failing[0], "%s", run_id);
	pthread_mutex_unlock(&m->mu);
}

size_t memo_stub_ops(struct memo_stub *m, const char *run_id, struct memo_op **ops)
{
	*ops = NULL;
	pthread_mutex_lock(&m->mu);
	size_t n = 0;
	for (size_t i = 0; i < m->nops; i++)
		n += strcmp(m->ops[i].run_id, run_id) == 0;
	if (n > 0)
		*ops = malloc(n * sizeof **ops);
	size_t k = 0;
	for (size_t i = 0; *ops != NULL && i < m->nops; i++)
		if (strcmp(m->ops[i].run_id, run_id) == 0)
			(*ops)[k++] = m->ops[i];
	pthread_mutex_unlock(&m->mu);
	return k;
}

void memo_stub_stop(struct memo_stub *m)
{
	if (m == NULL)
		return;
	http_server_stop(m->server);
	if (stub == m)
		stub = NULL;
	while (m->entries != NULL)
		drop(m, m->entries);
	free(m->ops);
	keyring_free(m->keyring);
	free(m->cfg.listen_host);
	free(m->cfg.tokens[0]);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
