/* handlers/schedules: PUT, GET, DELETE /v1/schedules/{id}, GET
 * /v1/schedules, POST /v1/schedules/{id}/pause, /resume, /trigger and
 * /backfill (README "Schedules"). Fire times are computed here, from the
 * schedules' clock (the real one plus HOOKFLOW_CLOCK_OFFSET_MS), with
 * base/cron.h; the engine keeps the state and starts the runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/ids.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "base/tz.h"
#include "db/schedule.h"
#include "handlers/common.h"
#include "handlers/handlers.h"
#include "service/scheduler.h"
#include "service/verdict.h"

#define SCHEDULE_ID_MAX 64
#define NEXT_FIRE_TIMES 10
#define BACKFILL_MAX 1000
#define NOTE_MAX 1024
#define MAX_SPAN_MS 31622400000LL /* every_ms, catchup_window_ms: 366 days */

static const char *const schedule_keys[] = {"workflow",
					    "cron",
					    "every_ms",
					    "timezone",
					    "input",
					    "headers",
					    "priority",
					    "max_attempts",
					    "concurrency_key",
					    "overlap",
					    "catchup_window_ms",
					    "jitter_ms",
					    "start_at",
					    "end_at",
					    "paused",
					    "note",
					    NULL};
static const char *const overlaps[] = {"skip",         "buffer_one", "buffer_all",
				       "cancel_other", "allow_all",  NULL};

/* An overlap policy (NULL: absent, the default) is one of `overlaps`. */
static enum err_code check_overlap(const char *overlap, struct err *e)
{
	for (int i = 0; overlap != NULL && overlaps[i] != NULL; i++)
		if (strcmp(overlap, overlaps[i]) == 0)
			return ERR_OK;
	if (overlap == NULL)
		return ERR_OK;
	return err_set(e, ERR_INVALID,
		       "overlap: must be skip, buffer_one, buffer_all, cancel_other or allow_all");
}

/* A schedule's rule, loaded: what scheduler_next_fire reads. */
struct rule {
	struct cron_spec spec;
	struct tz *zone;
	struct fire_rule r;
};

static void rule_cleanup(struct rule *r)
{
	tz_free(r->zone);
	memset(r, 0, sizeof *r);
}

/* The schedules' clock. */
static int64_t clock_now(struct http_req *r)
{
	return timefmt_now_ms() + http_req_app(r)->cfg->clock_offset_ms;
}

static enum err_code path_id(struct http_req *r, const char **id, struct err *e)
{
	const char *s = http_req_param(r, 0);
	size_t n = strlen(s);
	bool ok = n >= 1 && n <= SCHEDULE_ID_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		     (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-';
	/* its runs' ids start with it: the run-id alphabet */
	if (!ok)
		return err_set(e, ERR_INVALID, "id: must be 1 to %d characters of [A-Za-z0-9_-]",
			       SCHEDULE_ID_MAX);
	*id = s;
	return ERR_OK;
}

/* An optional RFC 3339 time `name` of `obj` into *ms (0 when absent). */
static enum err_code opt_time(const json_t *obj, const char *name, int64_t *ms, struct err *e)
{
	const json_t *v = json_object_get(obj, name);
	*ms = 0;
	if (v == NULL || json_is_null(v))
		return ERR_OK;
	if (!json_is_string(v) || json_string_length(v) > 64 ||
	    strlen(json_string_value(v)) != json_string_length(v) ||
	    !timefmt_parse_rfc3339(json_string_value(v), ms) || *ms <= 0)
		return err_set(e, ERR_INVALID, "%s: must be an RFC 3339 time", name);
	return ERR_OK;
}

/* Loads the rule of a schedule: `cron` in `zone_name`, or every `every_ms`,
 * within [start_ms, end_ms). */
static enum err_code rule_load(const char *cron, int64_t every_ms, const char *zone_name,
			       int64_t start_ms, int64_t end_ms, struct rule *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	out->r.start_ms = start_ms;
	out->r.end_ms = end_ms;
	out->r.anchor_ms = start_ms;
	out->r.every_ms = every_ms;
	if (cron == NULL)
		return ERR_OK;
	if (cron_parse(cron, strlen(cron), &out->spec, e) ||
	    tz_load(zone_name != NULL ? zone_name : "UTC", &out->zone, e))
		return e->code;
	out->r.cron = &out->spec;
	out->r.zone = out->zone;
	return ERR_OK;
}

/* The rule of schedule JSON `s` (as the engine renders it). */
static enum err_code rule_of(const json_t *s, struct rule *out, struct err *e)
{
	int64_t start = 0, end = 0;
	if (opt_time(s, "start_at", &start, e) || opt_time(s, "end_at", &end, e))
		return e->code;
	return rule_load(json_string_value(json_object_get(s, "cron")),
			 json_integer_value(json_object_get(s, "every_ms")),
			 json_string_value(json_object_get(s, "timezone")), start, end, out, e);
}

/* Validates a PUT body into *rule; the body itself is the definition the
 * engine stores (every key known and checked). */
static enum err_code parse_schedule(const json_t *body, struct rule *rule, struct err *e)
{
	const char *workflow = NULL, *cron = NULL, *zone = NULL, *overlap = NULL, *note = NULL,
		   *ckey = NULL;
	int64_t every = 0, n = 0, start = 0, end = 0;
	bool paused;
	if (hc_only_keys(body, schedule_keys, e) ||
	    hc_str(body, "workflow", IDS_MAX_NAME, &workflow, e))
		return e->code;
	if (workflow == NULL)
		return err_set(e, ERR_INVALID, "workflow: is required");
	if (ids_check_workflow_name("workflow", workflow, strlen(workflow), e) ||
	    hc_str(body, "cron", CRON_MAX_EXPR, &cron, e) ||
	    hc_int(body, "every_ms", 1000, MAX_SPAN_MS, 0, &every, e) ||
	    hc_str(body, "timezone", TZ_MAX_NAME, &zone, e))
		return e->code;
	if ((cron == NULL) == (every == 0))
		return err_set(e, ERR_INVALID,
			       "cron: exactly one of cron and every_ms is required");
	if (zone != NULL && cron == NULL)
		return err_set(e, ERR_INVALID, "timezone: only with cron");
	const json_t *h = json_object_get(body, "headers");
	if (h != NULL && !json_is_null(h) && verdict_check_headers("headers", h, e))
		return e->code;
	if (hc_int(body, "priority", 0, 2147483647, 0, &n, e) ||
	    hc_int(body, "max_attempts", 1, 1000, 1, &n, e) ||
	    hc_concurrency_key(body, "concurrency_key", &ckey, e) ||
	    hc_str(body, "overlap", 32, &overlap, e) ||
	    hc_int(body, "catchup_window_ms", 0, MAX_SPAN_MS, 60000, &n, e) ||
	    hc_int(body, "jitter_ms", 0, 86400000, 0, &n, e) ||
	    opt_time(body, "start_at", &start, e) || opt_time(body, "end_at", &end, e) ||
	    hc_bool(body, "paused", false, &paused, e) || hc_str(body, "note", NOTE_MAX, &note, e))
		return e->code;
	if (check_overlap(overlap, e))
		return e->code;
	if (start > 0 && end > 0 && end <= start)
		return err_set(e, ERR_INVALID, "end_at: must be after start_at");
	if (note != NULL && !ids_utf8_valid(note, strlen(note)))
		return err_set(e, ERR_INVALID, "note: must be valid UTF-8");
	if (rule_load(cron, every, zone, start, end, rule, e))
		return e->code;
	int64_t first;
	if (cron != NULL && !cron_next(&rule->spec, rule->zone, timefmt_now_ms(), &first))
		return err_set(e, ERR_INVALID, "cron: never fires (no fire time in %d years)",
			       CRON_HORIZON_DAYS / 366);
	return ERR_OK;
}

/* Adds "next_fire_times" to schedule `s`: the next NEXT_FIRE_TIMES after
 * `now_ms`, paused or not. */
static void add_next_fire_times(json_t *s, const struct rule *rule, int64_t now_ms)
{
	json_t *a = json_array();
	int64_t t = now_ms;
	for (int i = 0; a != NULL && i < NEXT_FIRE_TIMES && scheduler_next_fire(&rule->r, t, &t);
	     i++) {
		char at[TIMEFMT_RFC3339_LEN + 1];
		timefmt_rfc3339(t, at);
		json_array_append_new(a, json_string(at));
	}
	json_object_set_new(s, "next_fire_times", a != NULL ? a : json_array());
}

/* Replies schedule `s` (taken) with its next fire times. */
static void reply_schedule(struct http_req *r, int status, json_t *s)
{
	struct rule rule;
	struct err e = {0};
	if (rule_of(s, &rule, &e) == ERR_OK)
		add_next_fire_times(s, &rule, clock_now(r));
	else /* a zone gone from the system's tzdata: it fires no more */
		json_object_set_new(s, "next_fire_times", json_array());
	rule_cleanup(&rule);
	http_reply_json(r, status, s);
}

void handle_schedule_put(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct rule rule = {0};
	json_t *body = NULL, *out = NULL;
	const char *id;
	bool created = false;
	int64_t next = 0;
	if (path_id(r, &id, &e) || http_req_json(r, &body, &e) || parse_schedule(body, &rule, &e))
		goto out;
	if (!scheduler_next_fire(&rule.r, clock_now(r), &next))
		next = 0;
	char *def = json_dumps(body, JSON_COMPACT);
	if (def == NULL) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (hc_db(r, &c, &e) == ERR_OK)
		db_schedule_put(c, id, def, next, &created, &out, &e);
	free(def);
	if (e.code)
		goto out;
	reply_schedule(r, created ? 201 : 200, out);
out:
	rule_cleanup(&rule);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_schedule_get(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	json_t *out = NULL;
	const char *id;
	if (path_id(r, &id, &e) || hc_db(r, &c, &e) || db_schedule_get(c, id, &out, &e))
		goto out;
	reply_schedule(r, 200, out);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_schedule_list(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct db_page items = {0};
	struct db_page_req pg;
	if (hc_paging(r, HC_PAGE_LIMIT, &pg, &e) || hc_db(r, &c, &e) ||
	    db_schedule_list(c, &pg, &items, &e))
		goto out;
	hc_reply_page(r, 200, NULL, "schedules", &items);
out:
	db_page_cleanup(&items);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_schedule_delete(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *id;
	if (path_id(r, &id, &e) || hc_db(r, &c, &e) || db_schedule_delete(c, id, &e))
		goto out;
	http_reply_empty(r, 204);
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

/* pause and resume: an optional body {"note"}. */
static void pause_or_resume(struct http_req *r, bool paused)
{
	static const char *const keys[] = {"note", NULL};
	struct err e = {0};
	struct db_conn *c = NULL;
	struct rule rule = {0};
	json_t *body = NULL, *cur = NULL, *out = NULL;
	const char *id, *note = NULL;
	int64_t next = 0;
	if (path_id(r, &id, &e))
		goto out;
	if (http_req_has_body(r) && (http_req_json(r, &body, &e) || hc_only_keys(body, keys, &e) ||
				     hc_str(body, "note", NOTE_MAX, &note, &e)))
		goto out;
	if (note != NULL && !ids_utf8_valid(note, strlen(note))) {
		err_set(&e, ERR_INVALID, "note: must be valid UTF-8");
		goto out;
	}
	if (hc_db(r, &c, &e) || db_schedule_get(c, id, &cur, &e))
		goto out;
	/* Resuming: the next fire time from now (those passed while paused
	 * are not run). */
	if (!paused && rule_of(cur, &rule, &e) == ERR_OK &&
	    !scheduler_next_fire(&rule.r, clock_now(r), &next))
		next = 0;
	err_clear(&e);
	if (db_schedule_pause(c, id, paused, note, next, &out, &e))
		goto out;
	reply_schedule(r, 200, out);
out:
	rule_cleanup(&rule);
	json_decref(cur);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_schedule_pause(struct http_req *r)
{
	pause_or_resume(r, true);
}

void handle_schedule_resume(struct http_req *r)
{
	pause_or_resume(r, false);
}

void handle_schedule_trigger(struct http_req *r)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	const char *id;
	char run_id[SCHEDULE_ID_MAX + 16 + IDS_ULID_LEN], ulid[IDS_ULID_LEN + 1], outcome[16];
	if (path_id(r, &id, &e))
		goto out;
	ids_ulid_new(ulid);
	snprintf(run_id, sizeof run_id, "%s-trigger-%s", id, ulid);
	if (hc_db(r, &c, &e) || db_schedule_trigger(c, id, run_id, outcome, &e))
		goto out;
	/* a skipped trigger started no run: it has no run id */
	http_reply_json(
		r, 200,
		json_pack("{s:o, s:s}", "run_id",
			  strcmp(outcome, "skipped") == 0 ? json_null() : json_string(run_id),
			  "outcome", outcome));
out:
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}

void handle_schedule_backfill(struct http_req *r)
{
	static const char *const keys[] = {"from", "to", "overlap", NULL};
	struct err e = {0};
	struct db_conn *c = NULL;
	struct rule rule = {0};
	struct strbuf fires = {0};
	json_t *body = NULL, *cur = NULL, *out = NULL;
	const char *id, *overlap = NULL;
	int64_t from = 0, to = 0;
	if (path_id(r, &id, &e) || http_req_json(r, &body, &e) || hc_only_keys(body, keys, &e) ||
	    opt_time(body, "from", &from, &e) || opt_time(body, "to", &to, &e) ||
	    hc_str(body, "overlap", 32, &overlap, &e))
		goto out;
	if (from == 0 || to == 0 || to <= from) {
		err_set(&e, ERR_INVALID, "%s",
			from == 0 ? "from: is required"
			: to == 0 ? "to: is required"
				  : "to: must be after from");
		goto out;
	}
	if (check_overlap(overlap, &e) || hc_db(r, &c, &e) || db_schedule_get(c, id, &cur, &e) ||
	    rule_of(cur, &rule, &e))
		goto out;
	strbuf_puts(&fires, "[");
	int n = 0;
	int64_t t = from - 1;
	while (scheduler_next_fire(&rule.r, t, &t) && t < to) {
		if (++n > BACKFILL_MAX) {
			err_set(&e, ERR_INVALID, "to: more than %d fire times between from and to",
				BACKFILL_MAX);
			goto out;
		}
		char at[TIMEFMT_RFC3339_LEN + 1];
		timefmt_rfc3339(t, at);
		strbuf_printf(&fires, "%s\"%s\"", n > 1 ? "," : "", at);
	}
	strbuf_puts(&fires, "]");
	if (fires.oom) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (db_schedule_backfill(c, id, fires.data, overlap ? overlap : "allow_all", &out, &e))
		goto out;
	http_reply_json(r, 200, out);
out:
	strbuf_cleanup(&fires);
	rule_cleanup(&rule);
	json_decref(cur);
	json_decref(body);
	hc_db_release(r, c);
	if (e.code)
		http_reply_error(r, &e);
}
