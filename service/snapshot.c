/* snapshot: the database's side of /readyz and /metrics, refreshed on demand
 * (at most about once a second) by one thread on its own connection. */
#include "service/snapshot.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timefmt.h"
#include "db/db.h"
#include "db/migrate.h"
#include "db/stats.h"

struct snapshot {
	const struct config *cfg;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* the thread waits for `wanted`, readers for `seq` */
	pthread_t thread;
	bool started;
	bool stop;
	bool wanted;     /* a reader asked for a new snapshot */
	bool refreshing; /* the thread is taking one */
	uint64_t seq;    /* snapshots taken so far */
	int64_t at_ms;   /* monotonic time the latest one was taken; 0: none */
	bool ready;
	bool db_up;
	char why[256];
	struct strbuf gauges;
	struct db_conn *db; /* used by one thread at a time: start-up, then the thread */
};

struct snapshot *snapshot_new(const struct config *cfg)
{
	struct snapshot *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->cfg = cfg;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(s->why, sizeof s->why, "not checked yet");
	return s;
}

/* Checks the database (on the caller's thread, without the lock) and
 * publishes the result. The messages are hookflow's own: a failure of the
 * database itself is logged by db/ and reported as "database unavailable". */
static void refresh(struct snapshot *s)
{
	struct err e = {0};
	struct strbuf g = {0};
	bool up = false, ready = false;
	char why[256] = "";
	int64_t t0 = timefmt_mono_ms();
	if ((s->db != NULL || db_conn_open(s->cfg->database_url, &s->db, &e) == ERR_OK) &&
	    db_conn_ping(s->db, &e) == ERR_OK && db_stats_render(s->db, &g, &e) == ERR_OK) {
		up = true;
		if (db_schema_check(s->db, NULL, &e) == ERR_OK)
			ready = true;
		else
			snprintf(why, sizeof why, "%s", e.msg);
	} else {
		snprintf(why, sizeof why, "database unavailable");
	}
	pthread_mutex_lock(&s->mu);
	strbuf_cleanup(&s->gauges);
	s->gauges = g;
	s->db_up = up;
	s->ready = ready;
	snprintf(s->why, sizeof s->why, "%s", why);
	s->at_ms = timefmt_mono_ms();
	s->seq++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	log_debug("snapshot", "refreshed", "took_ms=%lld db_up=%s ready=%s",
		  (long long)(timefmt_mono_ms() - t0), up ? "true" : "false",
		  ready ? "true" : "false");
}

static void *snapshot_main(void *arg)
{
	struct snapshot *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->stop && !s->wanted)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop)
			break;
		s->wanted = false;
		s->refreshing = true;
		pthread_mutex_unlock(&s->mu);
		refresh(s);
		pthread_mutex_lock(&s->mu);
		s->refreshing = false;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

enum err_code snapshot_start(struct snapshot *s, struct err *e)
{
	refresh(s);
	if (pthread_create(&s->thread, NULL, snapshot_main, s) != 0)
		return err_set(e, ERR_INTERNAL, "snapshot: cannot start thread");
	s->started = true;
	return ERR_OK;
}

void snapshot_read(struct snapshot *s, struct snapshot_view *v, struct strbuf *gauges)
{
	pthread_mutex_lock(&s->mu);
	int64_t now = timefmt_mono_ms();
	if (s->started && (s->at_ms == 0 || now - s->at_ms >= SNAPSHOT_FRESH_MS) && !s->wanted &&
	    !s->refreshing) {
		/* This reader asks, and waits a little for the answer. */
		s->wanted = true;
		pthread_cond_broadcast(&s->cv);
		uint64_t seq = s->seq;
		struct timespec dl;
		timefmt_mono_deadline(SNAPSHOT_WAIT_MS, &dl);
		while (s->seq == seq && !s->stop)
			if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0)
				break;
		now = timefmt_mono_ms();
	}
	v->age_ms = s->at_ms ? now - s->at_ms : -1;
	if (s->at_ms == 0 || v->age_ms > SNAPSHOT_STALE_MS) {
		v->ready = false;
		v->db_up = false;
		snprintf(v->why, sizeof v->why,
			 "the database did not answer a check in the last %d ms",
			 SNAPSHOT_STALE_MS);
	} else {
		v->ready = s->ready;
		v->db_up = s->db_up;
		snprintf(v->why, sizeof v->why, "%s", s->why);
		if (gauges != NULL && s->gauges.len > 0)
			strbuf_puts(gauges, s->gauges.data);
	}
	pthread_mutex_unlock(&s->mu);
}

void snapshot_stop(struct snapshot *s)
{
	if (s == NULL || !s->started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->started = false;
}

void snapshot_free(struct snapshot *s)
{
	if (s == NULL)
		return;
	snapshot_stop(s);
	db_conn_free(s->db);
	strbuf_cleanup(&s->gauges);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
