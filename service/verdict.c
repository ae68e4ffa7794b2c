/* verdict: what a webhook's answer means (status classes, outcomes, Retry-After, backoff).
 *
 * Everything here is a pure function of its arguments. outcome_parse is
 * strict: a step answer is a protocol, and a typo in it ("delay": 5000) must
 * fail the step loudly rather than be ignored. The status-class table of
 * docs/webhook-protocol.md (section 2) lives in status_class(); the error-body
 * override and the error text are applied on top of it in verdict_from_call(). */
#include "service/verdict.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/jsonscan.h"
#include "base/timefmt.h"

#define QUOTED_BYTES 72

static const char *const kind_names[] = {
	[OUTCOME_CONTINUE] = "continue", [OUTCOME_SUCCEED] = "succeed", [OUTCOME_FAIL] = "fail",
	[OUTCOME_CANCEL] = "cancel",     [OUTCOME_PENDING] = "pending",
};

/* ---- outcome bodies ---- */

static bool key_is(const char *k, size_t klen, const char *name)
{
	return klen == strlen(name) && memcmp(k, name, klen) == 0;
}

/* Whether top-level key `k` belongs to an outcome of `kind`. */
static bool key_allowed(enum outcome_kind kind, const char *k, size_t klen)
{
	if (key_is(k, klen, "outcome"))
		return true;
	if (key_is(k, klen, "kv"))
		return kind != OUTCOME_PENDING;
	switch (kind) {
	case OUTCOME_CONTINUE:
		return key_is(k, klen, "payload") || key_is(k, klen, "delay_ms") ||
		       key_is(k, klen, "run_at") || key_is(k, klen, "wait_for_signal") ||
		       key_is(k, klen, "children") || key_is(k, klen, "wait_for_children");
	case OUTCOME_PENDING:
		return key_is(k, klen, "timeout_ms") || key_is(k, klen, "heartbeat_timeout_ms");
	case OUTCOME_SUCCEED:
		return key_is(k, klen, "result");
	case OUTCOME_FAIL:
	case OUTCOME_CANCEL:
		return key_is(k, klen, "reason");
	}
	return false;
}

static bool key_known(const char *k, size_t klen)
{
	for (int kind = OUTCOME_CONTINUE; kind <= OUTCOME_PENDING; kind++)
		if (key_allowed((enum outcome_kind)kind, k, klen))
			return true;
	return false;
}

/* An integer `v` in lo..hi into *out. */
static bool int_in_range(const json_t *v, int64_t lo, int64_t hi, int64_t *out)
{
	json_int_t n;

	if (!json_is_integer(v))
		return false;
	n = json_integer_value(v);
	if (n < lo || n > hi)
		return false;
	*out = (int64_t)n;
	return true;
}

/* wait_for_signal.correlation_keys: 1..VERDICT_MAX_WAIT_KEYS distinct keys. */
static enum err_code parse_wait_keys(const json_t *cks, struct outcome *out, struct err *e)
{
	char field[64];
	size_t n = json_array_size(cks);
	if (!json_is_array(cks) || n < 1 || n > VERDICT_MAX_WAIT_KEYS)
		return err_set(e, ERR_INVALID,
			       "wait_for_signal.correlation_keys: must be an array of 1 to %d keys",
			       VERDICT_MAX_WAIT_KEYS);
	for (size_t i = 0; i < n; i++) {
		const json_t *k = json_array_get(cks, i);
		snprintf(field, sizeof field, "wait_for_signal.correlation_keys[%zu]", i);
		if (!json_is_string(k))
			return err_set(e, ERR_INVALID, "%s: must be a string", field);
		if (ids_check_key(field, json_string_value(k), json_string_length(k), e) != ERR_OK)
			return e != NULL ? e->code : ERR_INVALID;
		for (size_t j = 0; j < i; j++)
			if (json_equal(json_array_get(cks, j), k))
				return err_set(e, ERR_INVALID, "%s: repeats an earlier key", field);
	}
	out->correlation_keys = json_incref((json_t *)cks);
	return ERR_OK;
}

static enum err_code parse_wait(const json_t *w, struct outcome *out, struct err *e)
{
	char quoted[QUOTED_BYTES];
	const char *k;
	size_t klen;
	json_t *val;
	const json_t *ck, *to;

	if (!json_is_object(w))
		return err_set(e, ERR_INVALID, "wait_for_signal: must be an object");
	json_object_keylen_foreach((json_t *)w, k, klen, val)
	{
		(void)val;
		if (key_is(k, klen, "correlation_key") || key_is(k, klen, "correlation_keys") ||
		    key_is(k, klen, "timeout_ms"))
			continue;
		ids_quote(k, klen, quoted, sizeof quoted);
		return err_set(e, ERR_INVALID, "wait_for_signal: unknown field %s", quoted);
	}
	ck = json_object_get(w, "correlation_key");
	to = json_object_get(w, "timeout_ms");
	const json_t *cks = json_object_get(w, "correlation_keys");
	if (ck != NULL && cks != NULL)
		return err_set(e, ERR_INVALID,
			       "wait_for_signal.correlation_keys: cannot be combined with "
			       "correlation_key");
	if (cks != NULL) {
		if (parse_wait_keys(cks, out, e))
			return e != NULL ? e->code : ERR_INVALID;
		ck = json_array_get(cks, 0);
	}
	if (ck == NULL)
		return err_set(
			e, ERR_INVALID,
			"wait_for_signal.correlation_key: is required (or correlation_keys)");
	if (!json_is_string(ck))
		return err_set(e, ERR_INVALID, "wait_for_signal.correlation_key: must be a string");
	if (ids_check_key("wait_for_signal.correlation_key", json_string_value(ck),
			  json_string_length(ck), e) != ERR_OK)
		return e != NULL ? e->code : ERR_INVALID;
	if (to == NULL)
		return err_set(e, ERR_INVALID, "wait_for_signal.timeout_ms: is required");
	if (!int_in_range(to, 1, VERDICT_MAX_DELAY_MS, &out->timeout_ms))
		return err_set(e, ERR_INVALID,
			       "wait_for_signal.timeout_ms: must be an integer between 1 and %lld",
			       VERDICT_MAX_DELAY_MS);
	out->correlation_key = strdup(json_string_value(ck));
	if (out->correlation_key == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	out->trigger = TRIGGER_SIGNAL;
	return ERR_OK;
}

/* One child run: {"key", "workflow", "input", "headers", "concurrency_key"}
 * (key and workflow required). */
static enum err_code parse_child(const json_t *c, size_t i, struct err *e)
{
	static const char *const keys[] = {"key", "workflow", "input", "headers",
					   "concurrency_key"};
	char f[32], sub[64], quoted[QUOTED_BYTES];
	const char *k;
	size_t klen;
	json_t *val;

	snprintf(f, sizeof f, "children[%zu]", i);
	if (!json_is_object(c))
		return err_set(e, ERR_INVALID, "%s: must be an object", f);
	json_object_keylen_foreach((json_t *)c, k, klen, val)
	{
		(void)val;
		bool known = false;
		for (size_t n = 0; n < sizeof keys / sizeof keys[0]; n++)
			known |= key_is(k, klen, keys[n]);
		if (known)
			continue;
		ids_quote(k, klen, quoted, sizeof quoted);
		return err_set(e, ERR_INVALID, "%s: unknown field %s", f, quoted);
	}
	const json_t *key = json_object_get(c, "key"), *wf = json_object_get(c, "workflow");
	const json_t *h = json_object_get(c, "headers"),
		     *ck = json_object_get(c, "concurrency_key");
	snprintf(sub, sizeof sub, "%s.key", f);
	if (!json_is_string(key))
		return err_set(e, ERR_INVALID, "%s: is required, a string", sub);
	if (ids_check_key(sub, json_string_value(key), json_string_length(key), e))
		return e != NULL ? e->code : ERR_INVALID;
	snprintf(sub, sizeof sub, "%s.workflow", f);
	if (!json_is_string(wf))
		return err_set(e, ERR_INVALID, "%s: is required, a string", sub);
	if (ids_check_workflow_name(sub, json_string_value(wf), json_string_length(wf), e))
		return e != NULL ? e->code : ERR_INVALID;
	snprintf(sub, sizeof sub, "%s.headers", f);
	if (h != NULL && !json_is_null(h) && verdict_check_headers(sub, h, e))
		return e != NULL ? e->code : ERR_INVALID;
	snprintf(sub, sizeof sub, "%s.concurrency_key", f);
	if (ck != NULL && !json_is_null(ck) && !json_is_string(ck))
		return err_set(e, ERR_INVALID, "%s: must be a string", sub);
	if (json_is_string(ck) &&
	    ids_check_concurrency_key(sub, json_string_value(ck), json_string_length(ck), e))
		return e != NULL ? e->code : ERR_INVALID;
	return ERR_OK;
}

/* children (1..VERDICT_MAX_CHILDREN, distinct keys) and wait_for_children
 * ({"mode": all | any | count, "count": 1..number of children with count,
 * "timeout_ms"}). */
static enum err_code parse_children(const json_t *cs, const json_t *wc, struct outcome *out,
				    struct err *e)
{
	char quoted[QUOTED_BYTES];
	const char *k;
	size_t klen, n = json_array_size(cs);
	json_t *val;
	int64_t count = 0, timeout = 0;

	if (!json_is_array(cs) || n < 1 || n > VERDICT_MAX_CHILDREN)
		return err_set(e, ERR_INVALID, "children: must be an array of 1 to %d child runs",
			       VERDICT_MAX_CHILDREN);
	for (size_t i = 0; i < n; i++) {
		if (parse_child(json_array_get(cs, i), i, e))
			return e != NULL ? e->code : ERR_INVALID;
		for (size_t j = 0; j < i; j++)
			if (json_equal(json_object_get(json_array_get(cs, j), "key"),
				       json_object_get(json_array_get(cs, i), "key")))
				return err_set(e, ERR_INVALID,
					       "children[%zu].key: repeats children[%zu].key", i,
					       j);
	}
	if (wc != NULL) {
		if (!json_is_object(wc))
			return err_set(e, ERR_INVALID, "wait_for_children: must be an object");
		json_object_keylen_foreach((json_t *)wc, k, klen, val)
		{
			(void)val;
			if (key_is(k, klen, "mode") || key_is(k, klen, "count") ||
			    key_is(k, klen, "timeout_ms"))
				continue;
			ids_quote(k, klen, quoted, sizeof quoted);
			return err_set(e, ERR_INVALID, "wait_for_children: unknown field %s",
				       quoted);
		}
		const json_t *m = json_object_get(wc, "mode");
		const char *mode = json_string_value(m);
		const json_t *c = json_object_get(wc, "count"),
			     *t = json_object_get(wc, "timeout_ms");
		if (m != NULL &&
		    (mode == NULL || (strcmp(mode, "all") != 0 && strcmp(mode, "any") != 0 &&
				      strcmp(mode, "count") != 0)))
			return err_set(e, ERR_INVALID,
				       "wait_for_children.mode: must be one of all, any, count");
		bool by_count = mode != NULL && strcmp(mode, "count") == 0;
		if (by_count && !int_in_range(c, 1, (int64_t)n, &count))
			return err_set(
				e, ERR_INVALID,
				"wait_for_children.count: must be an integer between 1 and %zu "
				"(the number of children) with mode count",
				n);
		if (!by_count && c != NULL)
			return err_set(e, ERR_INVALID,
				       "wait_for_children.count: only with mode count");
		if (t != NULL && !int_in_range(t, 1, VERDICT_MAX_DELAY_MS, &timeout))
			return err_set(
				e, ERR_INVALID,
				"wait_for_children.timeout_ms: must be an integer between 1 and "
				"%lld",
				VERDICT_MAX_DELAY_MS);
		out->wait_children = json_incref((json_t *)wc);
	}
	out->children = json_incref((json_t *)cs);
	return ERR_OK;
}

static enum err_code parse_continue(const json_t *obj, struct outcome *out, struct err *e)
{
	const json_t *payload = json_object_get(obj, "payload");
	const json_t *delay = json_object_get(obj, "delay_ms");
	const json_t *wait = json_object_get(obj, "wait_for_signal");
	const json_t *at = json_object_get(obj, "run_at");

	out->payload = payload != NULL ? json_incref((json_t *)payload) : json_null();
	out->trigger = TRIGGER_NOW;
	if (delay != NULL && wait != NULL)
		return err_set(e, ERR_INVALID, "delay_ms: cannot be combined with wait_for_signal");
	if (at != NULL && (delay != NULL || wait != NULL))
		return err_set(e, ERR_INVALID, "run_at: cannot be combined with %s",
			       delay != NULL ? "delay_ms" : "wait_for_signal");
	const json_t *cs = json_object_get(obj, "children");
	const json_t *wc = json_object_get(obj, "wait_for_children");
	if (wc != NULL && cs == NULL)
		return err_set(e, ERR_INVALID, "wait_for_children: needs children");
	if (cs != NULL && (delay != NULL || at != NULL || wait != NULL))
		return err_set(e, ERR_INVALID, "children: cannot be combined with %s",
			       delay != NULL ? "delay_ms"
			       : at != NULL  ? "run_at"
					     : "wait_for_signal");
	if (cs != NULL)
		return parse_children(cs, wc, out, e);
	if (at != NULL) {
		if (!json_is_string(at) || json_string_length(at) > 64 ||
		    strlen(json_string_value(at)) != json_string_length(at) ||
		    !timefmt_parse_rfc3339(json_string_value(at), &out->run_at_ms))
			return err_set(e, ERR_INVALID,
				       "run_at: must be an RFC 3339 time such as "
				       "2026-12-02T10:15:00Z");
		out->trigger = TRIGGER_AT;
	}
	if (delay != NULL) {
		if (!int_in_range(delay, 0, VERDICT_MAX_DELAY_MS, &out->delay_ms))
			return err_set(e, ERR_INVALID,
				       "delay_ms: must be an integer between 0 and %lld",
				       VERDICT_MAX_DELAY_MS);
		out->trigger = out->delay_ms > 0 ? TRIGGER_AFTER : TRIGGER_NOW;
	}
	if (wait != NULL)
		return parse_wait(wait, out, e);
	return ERR_OK;
}

static enum err_code parse_pending(const json_t *obj, struct outcome *out, struct err *e)
{
	static const char *const names[] = {"timeout_ms", "heartbeat_timeout_ms"};
	int64_t *dst[] = {&out->timeout_ms, &out->heartbeat_timeout_ms};

	for (size_t i = 0; i < 2; i++) {
		const json_t *v = json_object_get(obj, names[i]);
		if (v != NULL && !int_in_range(v, 1, VERDICT_MAX_DELAY_MS, dst[i]))
			return err_set(e, ERR_INVALID, "%s: must be an integer between 1 and %lld",
				       names[i], VERDICT_MAX_DELAY_MS);
	}
	return ERR_OK;
}

static enum err_code parse_reason(const json_t *obj, struct outcome *out, struct err *e)
{
	const json_t *r = json_object_get(obj, "reason");
	const char *s;
	size_t len;

	if (r == NULL)
		return err_set(e, ERR_INVALID, "reason: is required for outcome %s",
			       kind_names[out->kind]);
	if (!json_is_string(r))
		return err_set(e, ERR_INVALID, "reason: must be a string");
	s = json_string_value(r);
	len = json_string_length(r);
	if (len > VERDICT_MAX_REASON_BYTES)
		return err_set(e, ERR_INVALID, "reason: exceeds maximum length of %d bytes",
			       VERDICT_MAX_REASON_BYTES);
	if (memchr(s, '\0', len) != NULL)
		return err_set(e, ERR_INVALID, "reason: must not contain NUL");
	if (!ids_utf8_valid(s, len))
		return err_set(e, ERR_INVALID, "reason: must be valid UTF-8");
	out->reason = strdup(s);
	if (out->reason == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	return ERR_OK;
}

enum err_code outcome_from_json(const json_t *obj, struct outcome *out, struct err *e)
{
	char quoted[QUOTED_BYTES];
	const json_t *o, *res;
	const char *k, *name;
	size_t klen;
	json_t *val;
	enum err_code rc = ERR_OK;

	memset(out, 0, sizeof *out);
	if (!json_is_object(obj)) {
		rc = err_set(e, ERR_INVALID, "body: must be a JSON object");
		goto out;
	}
	o = json_object_get(obj, "outcome");
	if (o == NULL) {
		rc = err_set(e, ERR_INVALID, "outcome: is required");
		goto out;
	}
	name = json_string_value(o);
	for (int kind = OUTCOME_CONTINUE; name != NULL && kind <= OUTCOME_PENDING; kind++)
		if (strcmp(name, kind_names[kind]) == 0 && strlen(name) == json_string_length(o))
			out->kind = (enum outcome_kind)kind;
	if (out->kind == 0) {
		rc = err_set(e, ERR_INVALID,
			     "outcome: must be one of continue, succeed, fail, cancel, pending");
		goto out;
	}
	json_object_keylen_foreach((json_t *)obj, k, klen, val)
	{
		(void)val;
		if (key_allowed(out->kind, k, klen))
			continue;
		ids_quote(k, klen, quoted, sizeof quoted);
		if (key_known(k, klen))
			rc = err_set(e, ERR_INVALID, "%s: not allowed with outcome %s", k,
				     kind_names[out->kind]);
		else
			rc = err_set(e, ERR_INVALID, "unknown field %s", quoted);
		goto out;
	}
	switch (out->kind) {
	case OUTCOME_CONTINUE:
		rc = parse_continue(obj, out, e);
		break;
	case OUTCOME_SUCCEED:
		res = json_object_get(obj, "result");
		out->result = res != NULL ? json_incref((json_t *)res) : json_null();
		break;
	case OUTCOME_FAIL:
	case OUTCOME_CANCEL:
		rc = parse_reason(obj, out, e);
		break;
	case OUTCOME_PENDING:
		rc = parse_pending(obj, out, e);
		break;
	}
	if (rc != ERR_OK)
		goto out;
	rc = effects_parse(json_object_get(obj, "kv"), "kv", &out->kv, e);
out:
	if (rc != ERR_OK)
		outcome_cleanup(out);
	return rc;
}

/* Takes the JSON text at span `sp` of `body` as *text (malloc'd) in place of
 * the decoded value *v (dropped). */
static bool keep_text(const char *body, struct jsonscan_span sp, json_t **v, char **text)
{
	if (sp.len == 0 || *v == NULL)
		return true;
	*text = malloc(sp.len + 1); /* not strndup: body need not end in NUL */
	if (*text == NULL)
		return false;
	memcpy(*text, body + sp.off, sp.len);
	(*text)[sp.len] = '\0';
	json_decref(*v);
	*v = NULL;
	return true;
}

/* outcome_parse of a body jsonscan vouched for, whose top-level payload and
 * result are at spans sp[0] and sp[1] (at least one present): decoded with
 * null in their place, then given their text. */
static enum err_code parse_without(const char *body, size_t len, const struct jsonscan_span sp[2],
				   struct outcome *out, struct err *e)
{
	size_t a = sp[0].len > 0 && (sp[1].len == 0 || sp[0].off < sp[1].off) ? 0 : 1;
	size_t b = 1 - a; /* the spans in text order: a, then b when present */
	/* The body without the spans' text, and "null" in place of each. */
	char *copy = malloc(len - sp[0].len - sp[1].len + 8);
	if (copy == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	size_t o = 0, from = 0;
	for (size_t k = 0; k < 2; k++) {
		const struct jsonscan_span *s = &sp[k == 0 ? a : b];
		if (s->len == 0)
			continue;
		memcpy(copy + o, body + from, s->off - from);
		o += s->off - from;
		memcpy(copy + o, "null", 4);
		o += 4;
		from = s->off + s->len;
	}
	memcpy(copy + o, body + from, len - from);
	o += len - from;
	json_t *root = json_loadb(copy, o, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	free(copy);
	if (root == NULL) /* jsonscan vouched for it: only memory can fail */
		return err_set(e, ERR_INTERNAL, "out of memory");
	enum err_code rc = outcome_from_json(root, out, e);
	json_decref(root);
	if (rc == ERR_OK && (!keep_text(body, sp[0], &out->payload, &out->payload_text) ||
			     !keep_text(body, sp[1], &out->result, &out->result_text)))
		rc = err_set(e, ERR_INTERNAL, "out of memory");
	if (rc != ERR_OK)
		outcome_cleanup(out);
	return rc;
}

enum err_code outcome_parse(const char *body, size_t len, struct outcome *out, struct err *e)
{
	json_t *root = NULL;
	json_error_t jerr;
	enum err_code rc = ERR_OK;

	memset(out, 0, sizeof *out);
	if (body == NULL || len == 0) {
		rc = err_set(e, ERR_INVALID, "body: must not be empty");
		goto out;
	}
	if (!ids_utf8_valid(body, len)) {
		rc = err_set(e, ERR_INVALID, "body: must be valid UTF-8");
		goto out;
	}
	/* A body jsonscan vouches for is decoded without its payload and
	 * result, which are kept as text. */
	static const char *const raw_names[] = {"payload", "result"};
	struct jsonscan_span sp[2];
	if (jsonscan_object(body, len, raw_names, 2, sp) && (sp[0].len > 0 || sp[1].len > 0)) {
		rc = parse_without(body, len, sp, out, e);
		goto out;
	}
	/* jansson parses with a depth limit (JSON_PARSER_MAX_DEPTH). */
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (root == NULL) {
		/* jansson names its own flag in this one message. */
		if (strstr(jerr.text, "JSON_ALLOW_NUL") != NULL)
			rc = err_set(e, ERR_INVALID, "body: invalid JSON: \\u0000 is not allowed");
		else
			rc = err_set(e, ERR_INVALID, "body: invalid JSON: %s", jerr.text);
		goto out;
	}
	rc = outcome_from_json(root, out, e);
out:
	json_decref(root);
	return rc;
}

/* Sets key `k` of `obj` to `v` (stolen); remembers a failure in *ok. */
static void set_new(json_t *obj, const char *k, json_t *v, bool *ok)
{
	if (v == NULL || json_object_set_new(obj, k, v) != 0)
		*ok = false;
}

static json_t *value_or_null(json_t *v)
{
	return v != NULL ? json_incref(v) : json_null();
}

/* A new reference to `v`, or the decoding of `text` when v is NULL, or JSON
 * null when both are. */
static json_t *decoded(json_t *v, const char *text)
{
	if (v == NULL && text != NULL)
		return json_loads(text, JSON_DECODE_ANY, NULL);
	return value_or_null(v);
}

json_t *outcome_to_json(const struct outcome *o)
{
	json_t *obj = NULL, *w = NULL, *kv = NULL;
	bool ok = true;

	if (o->kind < OUTCOME_CONTINUE || o->kind > OUTCOME_CANCEL)
		return NULL; /* pending: never replayed */
	obj = json_object();
	if (obj == NULL)
		return NULL;
	set_new(obj, "outcome", json_string(kind_names[o->kind]), &ok);
	switch (o->kind) {
	case OUTCOME_CONTINUE:
		set_new(obj, "payload", decoded(o->payload, o->payload_text), &ok);
		if (o->trigger == TRIGGER_AFTER) {
			set_new(obj, "delay_ms", json_integer(o->delay_ms), &ok);
		} else if (o->trigger == TRIGGER_AT) {
			char at[TIMEFMT_RFC3339_LEN + 1];
			timefmt_rfc3339(o->run_at_ms, at);
			set_new(obj, "run_at", json_string(at), &ok);
		} else if (o->trigger == TRIGGER_SIGNAL) {
			w = json_object();
			if (w != NULL) {
				if (o->correlation_keys != NULL)
					set_new(w, "correlation_keys",
						json_incref(o->correlation_keys), &ok);
				else
					set_new(w, "correlation_key",
						json_string(o->correlation_key ? o->correlation_key
									       : ""),
						&ok);
				set_new(w, "timeout_ms", json_integer(o->timeout_ms), &ok);
			}
			set_new(obj, "wait_for_signal", w, &ok);
		}
		if (o->children != NULL)
			set_new(obj, "children", json_incref(o->children), &ok);
		if (o->wait_children != NULL)
			set_new(obj, "wait_for_children", json_incref(o->wait_children), &ok);
		break;
	case OUTCOME_SUCCEED:
		set_new(obj, "result", decoded(o->result, o->result_text), &ok);
		break;
	case OUTCOME_FAIL:
	case OUTCOME_CANCEL:
		set_new(obj, "reason", json_string(o->reason ? o->reason : ""), &ok);
		break;
	case OUTCOME_PENDING:
		break;
	}
	if (!effects_empty(&o->kv)) {
		kv = json_object();
		if (kv != NULL && o->kv.put != NULL)
			set_new(kv, "put", json_incref(o->kv.put), &ok);
		if (kv != NULL && o->kv.del != NULL)
			set_new(kv, "delete", json_incref(o->kv.del), &ok);
		set_new(obj, "kv", kv, &ok);
	}
	if (!ok) {
		json_decref(obj);
		obj = NULL;
	}
	return obj;
}

static int64_t capped(int64_t v, int64_t cap)
{
	return v < cap ? v : cap;
}

bool outcome_settlement(struct outcome *o, int64_t max_pending_ms, struct settlement *s)
{
	bool ok = true;
	switch (o->kind) {
	case OUTCOME_CONTINUE:
		s->result = SETTLE_CONTINUE;
		if (o->payload_text != NULL) {
			s->payload_text = o->payload_text;
			o->payload_text = NULL;
		} else {
			s->payload = json_incref(o->payload ? o->payload : json_null());
		}
		if (o->trigger == TRIGGER_AFTER)
			s->delay_ms = o->delay_ms;
		if (o->trigger == TRIGGER_AT)
			s->run_at_ms = o->run_at_ms;
		if (o->trigger == TRIGGER_SIGNAL) {
			s->wait_key = strdup(o->correlation_key);
			s->wait_keys = json_incref(o->correlation_keys);
			s->wait_timeout_ms = o->timeout_ms;
			if (s->wait_key == NULL)
				ok = false;
		}
		s->children = json_incref(o->children);
		s->wait_children = json_incref(o->wait_children);
		break;
	case OUTCOME_SUCCEED:
		s->result = SETTLE_SUCCEED;
		if (o->result_text != NULL) {
			s->value_text = o->result_text;
			o->result_text = NULL;
		} else {
			s->value = json_incref(o->result ? o->result : json_null());
		}
		break;
	case OUTCOME_FAIL:
	case OUTCOME_CANCEL:
		s->result = o->kind == OUTCOME_FAIL ? SETTLE_FAIL : SETTLE_CANCEL;
		s->reason = strdup(o->reason ? o->reason : "");
		ok = s->reason != NULL;
		break;
	case OUTCOME_PENDING:
		s->result = SETTLE_PENDING;
		s->timeout_ms =
			o->timeout_ms > 0 ? capped(o->timeout_ms, max_pending_ms) : max_pending_ms;
		s->heartbeat_timeout_ms = o->heartbeat_timeout_ms > 0
						  ? capped(o->heartbeat_timeout_ms, max_pending_ms)
						  : 0;
		break;
	}
	s->kv_put = json_incref(o->kv.put);
	s->kv_delete = json_incref(o->kv.del);
	return ok;
}

enum err_code verdict_check_headers(const char *field, const json_t *h, struct err *e)
{
	if (!json_is_object(h))
		return err_set(e, ERR_INVALID, "%s: must be an object of strings", field);
	if (json_object_size(h) > VERDICT_MAX_HEADERS)
		return err_set(e, ERR_INVALID, "%s: at most %d entries", field,
			       VERDICT_MAX_HEADERS);
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)h, k, v) {
		char q[80];
		ids_quote(k, strlen(k), q, sizeof q);
		size_t kl = strlen(k);
		if (kl == 0 || kl > VERDICT_MAX_HEADER_NAME)
			return err_set(e, ERR_INVALID, "%s[%s]: name must be 1 to %d bytes", field,
				       q, VERDICT_MAX_HEADER_NAME);
		if (strncmp(k, "workflow.", 9) == 0)
			return err_set(e, ERR_INVALID, "%s[%s]: the workflow. prefix is reserved",
				       field, q);
		if (!json_is_string(v))
			return err_set(e, ERR_INVALID, "%s[%s]: must be a string", field, q);
		if (json_string_length(v) > VERDICT_MAX_HEADER_VALUE ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return err_set(e, ERR_INVALID, "%s[%s]: at most %d bytes, without NUL",
				       field, q, VERDICT_MAX_HEADER_VALUE);
	}
	return ERR_OK;
}

void outcome_cleanup(struct outcome *o)
{
	if (o == NULL)
		return;
	json_decref(o->payload);
	json_decref(o->result);
	free(o->payload_text);
	free(o->result_text);
	free(o->reason);
	free(o->correlation_key);
	json_decref(o->correlation_keys);
	json_decref(o->children);
	json_decref(o->wait_children);
	effects_cleanup(&o->kv);
	memset(o, 0, sizeof *o);
}

/* ---- status classes ---- */

/* The status class of a complete non-2xx response (docs/webhook-protocol.md,
 * section 2). */
static enum verdict_kind status_class(long status)
{
	if (status == 408 || status == 425 || status == 429)
		return VERDICT_TRANSIENT;
	if (status >= 500 && status <= 599)
		return VERDICT_TRANSIENT;
	return VERDICT_PERMANENT; /* 1xx, 3xx, other 4xx, anything out of range */
}

/* The error-body override: 1 for {"error":{"message":S,"retryable":true}}, 0
 * for retryable false, -1 when the body is not that shape (the status class
 * then stands). Members other than message and retryable are tolerated. */
static int error_override(const char *body, size_t len)
{
	json_t *root = NULL;
	const json_t *err, *msg, *retryable;
	int rc = -1;

	if (body == NULL || len == 0)
		goto out;
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	err = json_object_get(root, "error");
	msg = json_object_get(err, "message");
	retryable = json_object_get(err, "retryable");
	if (json_is_object(err) && json_is_string(msg) && json_is_boolean(retryable))
		rc = json_is_true(retryable) ? 1 : 0;
out:
	json_decref(root);
	return rc;
}

/* The byte count of the UTF-8 sequence a lead byte announces, 0 for a byte
 * that cannot start one. */
static size_t lead_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return 2;
	if (c >= 0xE0 && c <= 0xEF)
		return 3;
	if (c >= 0xF0 && c <= 0xF4)
		return 4;
	return 0;
}

/* "HTTP <status>" plus ": " and the first VERDICT_ERROR_BODY_BYTES of the body,
 * cut on a character boundary, with invalid UTF-8 (and NUL) replaced by U+FFFD
 * and trailing white space dropped. */
static void http_error_text(long status, const char *body, size_t len, char *out, size_t cap)
{
	static const char fffd[] = "\xEF\xBF\xBD";
	const unsigned char *p = (const unsigned char *)body;
	size_t lim = len < VERDICT_ERROR_BODY_BYTES ? len : VERDICT_ERROR_BODY_BYTES;
	size_t o, i = 0;
	int n;

	n = snprintf(out, cap, "HTTP %ld", status);
	o = n > 0 && (size_t)n < cap ? (size_t)n : cap - 1;
	while (lim > 0 && (p[lim - 1] == ' ' || p[lim - 1] == '\t' || p[lim - 1] == '\r' ||
			   p[lim - 1] == '\n'))
		lim--;
	if (lim == 0 || o + 2 >= cap)
		return;
	memcpy(out + o, ": ", 2);
	o += 2;
	while (i < lim) {
		size_t want = lead_len(p[i]);
		const char *piece = fffd;
		size_t plen = 3, step = 1;

		if (want == 1 && p[i] != '\0') {
			piece = (const char *)p + i;
			plen = 1;
		} else if (want > 1 && i + want <= len && ids_utf8_valid(body + i, want)) {
			if (i + want > lim)
				break; /* the character straddles the cut */
			piece = (const char *)p + i;
			plen = step = want;
		}
		if (o + plen >= cap)
			break;
		memcpy(out + o, piece, plen);
		o += plen;
		i += step;
	}
	out[o] = '\0';
}

void verdict_from_call(const struct call_result *r, bool expect_outcome, int64_t now_ms,
		       struct verdict *v)
{
	struct err e = {0};
	int64_t delay;
	int ov;

	memset(v, 0, sizeof *v);
	v->retry_after_ms = -1;
	if (r->refused != NULL) {
		v->kind = VERDICT_PERMANENT;
		snprintf(v->error, sizeof v->error, "webhook address refused: %s", r->refused);
		return;
	}
	if (r->timed_out) {
		v->kind = VERDICT_TRANSIENT;
		snprintf(v->error, sizeof v->error, "timed out after %" PRId64 " ms",
			 r->timeout_ms);
		return;
	}
	if (r->transport_error != 0) {
		v->kind = VERDICT_TRANSIENT;
		if (r->transport_msg != NULL && r->transport_msg[0] != '\0')
			snprintf(v->error, sizeof v->error, "connection failed: %s",
				 r->transport_msg);
		else
			snprintf(v->error, sizeof v->error, "connection failed: transport error %d",
				 r->transport_error);
		return;
	}
	if (r->too_large) {
		v->kind = VERDICT_PERMANENT;
		snprintf(v->error, sizeof v->error, "response body exceeds %" PRId64 " bytes",
			 r->max_response_bytes);
		return;
	}
	if (r->status >= 200 && r->status <= 299) {
		if (!expect_outcome) {
			v->kind = VERDICT_OK;
			return;
		}
		if (r->body_len == 0) {
			v->kind = VERDICT_PERMANENT;
			snprintf(v->error, sizeof v->error, "invalid step response: empty body");
			return;
		}
		if (outcome_parse(r->body, r->body_len, &v->outcome, &e) != ERR_OK) {
			v->kind = VERDICT_PERMANENT;
			snprintf(v->error, sizeof v->error, "invalid step response: %s", e.msg);
			return;
		}
		v->kind = VERDICT_OK;
		return;
	}
	v->kind = status_class(r->status);
	ov = error_override(r->body, r->body_len);
	if (ov >= 0)
		v->kind = ov ? VERDICT_TRANSIENT : VERDICT_PERMANENT;
	http_error_text(r->status, r->body, r->body_len, v->error, sizeof v->error);
	if (v->kind == VERDICT_TRANSIENT && r->retry_after != NULL &&
	    verdict_parse_retry_after(r->retry_after, now_ms, &delay))
		v->retry_after_ms = delay;
}

void verdict_cleanup(struct verdict *v)
{
	if (v == NULL)
		return;
	outcome_cleanup(&v->outcome);
}

/* ---- Retry-After and backoff ---- */

bool verdict_parse_retry_after(const char *value, int64_t now_ms, int64_t *delay_ms)
{
	char date[64];
	const char *p = value, *end;
	int64_t secs = 0;
	size_t n;

	if (value == NULL)
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	n = (size_t)(end - p);
	if (n == 0)
		return false;
	if (p[0] >= '0' && p[0] <= '9') {
		for (const char *q = p; q < end; q++) {
			if (*q < '0' || *q > '9')
				return false;
			/* Saturate: an absurd delay is capped by the caller anyway. */
			if (secs < INT64_MAX / 1000 / 10)
				secs = secs * 10 + (*q - '0');
			else
				secs = INT64_MAX / 1000;
		}
		*delay_ms = secs > INT64_MAX / 1000 ? INT64_MAX : secs * 1000;
		return true;
	}
	if (n >= sizeof date)
		return false;
	memcpy(date, p, n);
	date[n] = '\0';
	if (!timefmt_parse_http_date(date, &secs))
		return false;
	*delay_ms = secs * 1000 > now_ms ? secs * 1000 - now_ms : 0;
	return true;
}

int64_t verdict_backoff_ms(int64_t base_ms, int64_t max_ms, int attempt)
{
	int shift = attempt > 1 ? attempt - 1 : 0;

	if (base_ms <= 0 || max_ms <= 0)
		return 0;
	/* base << shift <= max exactly when base <= max >> shift, so the shift
	 * below cannot overflow. */
	if (base_ms >= max_ms || shift >= 63 || base_ms > (max_ms >> shift))
		return max_ms;
	return base_ms << shift;
}

int64_t verdict_retry_delay_ms(const struct verdict *v, int64_t base_ms, int64_t max_ms,
			       int attempt)
{
	if (v->retry_after_ms >= 0)
		return v->retry_after_ms < max_ms ? v->retry_after_ms : (max_ms > 0 ? max_ms : 0);
	return verdict_backoff_ms(base_ms, max_ms, attempt);
}
