/* service/scheduler: fire times and the firing pass. */
#include "service/scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "db/schedule.h"

bool scheduler_next_fire(const struct fire_rule *r, int64_t after_ms, int64_t *next_ms)
{
	int64_t t = after_ms;
	if (r->start_ms > 0 && t < r->start_ms - 1)
		t = r->start_ms - 1;
	int64_t n;
	if (r->cron != NULL) {
		if (!cron_next(r->cron, r->zone, t, &n))
			return false;
	} else {
		if (r->every_ms <= 0)
			return false;
		int64_t a = r->anchor_ms;
		n = t < a ? a : a + ((t - a) / r->every_ms + 1) * r->every_ms;
	}
	if (r->end_ms > 0 && n >= r->end_ms)
		return false;
	*next_ms = n;
	return true;
}

int64_t scheduler_jitter_ms(const char *id, int64_t fire_ms, int64_t jitter_ms)
{
	if (jitter_ms <= 0)
		return 0;
	/* FNV-1a over the id and the fire time's bytes. */
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++)
		h = (h ^ *p) * 1099511628211ULL;
	for (int i = 0; i < 8; i++)
		h = (h ^ ((uint64_t)fire_ms >> (8 * i) & 0xff)) * 1099511628211ULL;
	return (int64_t)(h % (uint64_t)jitter_ms);
}

/* Appends fire time `t` to the JSON array being built in `b`. */
static void add_fire(struct strbuf *b, int64_t t, bool missed, int64_t count, int64_t delay_ms)
{
	char at[TIMEFMT_RFC3339_LEN + 1];
	timefmt_rfc3339(t, at);
	strbuf_printf(b, "%s{\"fire_time\":\"%s\",\"missed\":%s,\"count\":%lld,\"delay_ms\":%lld}",
		      b->len > 1 ? "," : "", at, missed ? "true" : "false", (long long)count,
		      (long long)delay_ms);
}

/* The fire times of due schedule `s` up to `now_ms` into `b` (a JSON array
 * as hf_schedule_fire takes it), and the next after now into *next_ms (0:
 * none left). Those older than the catch-up window are counted missed in
 * one entry; at most SCHEDULER_MAX_FIRES others run. */
static enum err_code fires_of(const struct due_schedule *s, int64_t now_ms, struct strbuf *b,
			      int64_t *next_ms, struct err *e)
{
	struct cron_spec spec;
	struct tz *zone = NULL;
	struct fire_rule r = {.every_ms = s->every_ms,
			      .anchor_ms = s->start_ms,
			      .start_ms = s->start_ms,
			      .end_ms = s->end_ms};
	if (s->cron != NULL) {
		if (cron_parse(s->cron, strlen(s->cron), &spec, e) ||
		    tz_load(s->timezone ? s->timezone : "UTC", &zone, e))
			return e->code;
		r.cron = &spec;
		r.zone = zone;
	}
	strbuf_puts(b, "[");
	int64_t t = s->next_fire_ms, missed = 0, first_missed = 0;
	int ran = 0;
	bool has = true;
	while (has && t <= now_ms && ran < SCHEDULER_MAX_FIRES) {
		if (now_ms - t > s->catchup_window_ms + SCHEDULER_ON_TIME_MS) {
			if (missed++ == 0)
				first_missed = t;
		} else {
			int64_t start = t + scheduler_jitter_ms(s->id, t, s->jitter_ms);
			add_fire(b, t, false, 1, start > now_ms ? start - now_ms : 0);
			ran++;
		}
		has = scheduler_next_fire(&r, t, &t);
	}
	/* More than SCHEDULER_MAX_FIRES inside the window: the rest missed. */
	while (has && t <= now_ms) {
		if (missed++ == 0)
			first_missed = t;
		has = scheduler_next_fire(&r, t, &t);
	}
	if (missed > 0)
		add_fire(b, first_missed, true, missed, 0);
	strbuf_puts(b, "]");
	*next_ms = has ? t : 0;
	tz_free(zone);
	return b->oom ? err_set(e, ERR_INTERNAL, "out of memory") : ERR_OK;
}

struct pass {
	int64_t offset_ms;
	int64_t now_ms;
	int fired, skipped, missed;
	bool more;
};

static enum err_code pass_tx(struct db_conn *c, void *arg, struct err *e)
{
	struct pass *p = arg;
	struct due_schedule *due = NULL;
	int n = 0;
	p->fired = p->skipped = p->missed = 0;
	if (db_schedule_due(c, p->offset_ms, SCHEDULER_BATCH, &due, &n, &p->now_ms, e))
		return e->code;
	p->more = n == SCHEDULER_BATCH;
	for (int i = 0; i < n && e->code == ERR_OK; i++) {
		struct strbuf b = {0};
		int64_t next = 0;
		int f = 0, s = 0, m = 0;
		/* A schedule whose rule no longer reads (a zone removed from the
		 * system's tzdata) fires nothing and has no next fire time; its
		 * error is in the log and on GET (next_fire_times empty). */
		struct err rule = {0};
		if (fires_of(&due[i], p->now_ms, &b, &next, &rule) == ERR_OK) {
			db_schedule_fire(c, due[i].id, b.data, next, &f, &s, &m, e);
		} else {
			log_warn("scheduler", "schedule cannot fire", "schedule=%s error=\"%s\"",
				 due[i].id, rule.msg);
			db_schedule_fire(c, due[i].id, "[]", 0, &f, &s, &m, e);
		}
		strbuf_cleanup(&b);
		p->fired += f;
		p->skipped += s;
		p->missed += m;
	}
	for (int i = 0; i < n; i++)
		db_due_schedule_cleanup(&due[i]);
	free(due);
	return e->code;
}

enum err_code scheduler_pass(struct db_conn *c, int64_t offset_ms, int *fired, int *skipped,
			     int *missed, bool *more, struct err *e)
{
	struct pass p = {.offset_ms = offset_ms};
	if (db_tx_run(c, pass_tx, &p, e))
		return e->code;
	*fired = p.fired;
	*skipped = p.skipped;
	*missed = p.missed;
	*more = p.more;
	return ERR_OK;
}
