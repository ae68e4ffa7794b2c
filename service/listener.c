/* listener: LISTEN/NOTIFY routing, the due-time timer (promote, reap) and long-poll deadlines.
 *
 * One thread. Notifications: hookflow_wake -> dispatcher_wake;
 * hookflow_cancel -> dispatcher_cancel; hookflow_done -> fire the run's
 * waiters; hookflow_sched -> pull the timer earlier. When the LISTEN
 * connection is lost, everything that depends on notifications is re-checked
 * once it is back (workers woken, waiters fired, timer recomputed). */
#include "service/listener.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timefmt.h"
#include "db/db.h"
#include "db/jobs.h"
#include "db/keys.h"
#include "db/listen.h"
#include "db/migrate.h"
#include "service/metrics.h"
#include "service/scheduler.h"

#define BATCH 1000
#define RECONNECT_MS 1000
#define SWEEP_MS 1000

struct listener {
	const struct config *cfg;
	struct dispatcher *d;
	struct waiters *ws;
	struct keyring *keys;
	pthread_t thread;
	bool started;
	int evfd;
	atomic_bool stop;
	atomic_bool connected;
	atomic_bool closing; /* shutting down: long-polls answer as things stand */
	struct db_listener *lis;
	struct db_conn *db;
	int64_t due_at;    /* monotonic ms of the next promote/reap, or -1 */
	bool engine_check; /* the engine was reloaded: is the database newer than us? */
	bool keys_reload;  /* the delivery-token keys changed */
};

static const char *const channels[] = {"hookflow_wake",   "hookflow_done",   "hookflow_sched",
				       "hookflow_cancel", "hookflow_engine", "hookflow_keys"};
#define NCHANNELS ((int)(sizeof channels / sizeof channels[0]))

struct listener *listener_new(const struct config *cfg, struct dispatcher *d, struct waiters *ws,
			      struct keyring *keys)
{
	struct listener *l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->cfg = cfg;
	l->d = d;
	l->ws = ws;
	l->keys = keys;
	l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	l->due_at = 0;
	if (l->evfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

static void poke(struct listener *l)
{
	uint64_t one = 1;
	ssize_t r = write(l->evfd, &one, sizeof one);
	(void)r;
}

uint64_t listener_wait(struct listener *l, const char *run_id, int64_t deadline_ms,
		       waiter_fire_fn fire, void *arg)
{
	uint64_t id = waiters_add(l->ws, run_id, deadline_ms, fire, arg);
	if (id != 0)
		poke(l);
	return id;
}

int listener_unwait(struct listener *l, uint64_t id)
{
	return waiters_cancel(l->ws, id);
}

bool listener_connected(const struct listener *l)
{
	return atomic_load(&l->connected);
}

void listener_close_waits(struct listener *l)
{
	atomic_store(&l->closing, true);
	waiters_notify_all(l->ws);
}

bool listener_closing(const struct listener *l)
{
	return atomic_load(&l->closing);
}

static void on_notify(void *arg, const char *channel, const char *payload)
{
	struct listener *l = arg;
	if (strcmp(channel, "hookflow_wake") == 0) {
		dispatcher_wake(l->d);
	} else if (strcmp(channel, "hookflow_done") == 0) {
		waiters_notify(l->ws, payload);
	} else if (strcmp(channel, "hookflow_cancel") == 0) {
		dispatcher_cancel(l->d, payload);
	} else if (strcmp(channel, "hookflow_engine") == 0) {
		l->engine_check = true;
	} else if (strcmp(channel, "hookflow_keys") == 0) {
		l->keys_reload = true;
	} else if (strcmp(channel, "hookflow_sched") == 0) {
		int64_t at = strtoll(payload, NULL, 10);
		int64_t mono = timefmt_mono_ms() + (at - timefmt_now_ms());
		if (l->due_at < 0 || mono < l->due_at)
			l->due_at = mono;
	}
}

static void disconnect(struct listener *l)
{
	db_listen_free(l->lis);
	l->lis = NULL;
	db_conn_free(l->db);
	l->db = NULL;
	atomic_store(&l->connected, false);
}

static bool connect_db(struct listener *l)
{
	struct err e = {0};
	/* LISTEN holds its server session: never through a transaction pooler.
	 * The test fault deaf_to_wake_and_done leaves out the first channels
	 * (hookflow_wake, then hookflow_done, moved to the front for it): this
	 * process hears of its own submissions and endings only directly. */
	bool deaf = l->cfg->test_fault != NULL &&
		    strcmp(l->cfg->test_fault, "deaf_to_wake_and_done") == 0;
	int skip = deaf ? 2 : 0;
	if (db_listen_open(l->cfg->listen_database_url, channels + skip, NCHANNELS - skip, &l->lis,
			   &e) ||
	    db_conn_open(l->cfg->database_url, &l->db, &e)) {
		disconnect(l);
		return false;
	}
	atomic_store(&l->connected, true);
	log_info("listener", "listening", NULL);
	/* Anything announced while we were away is re-checked now. */
	dispatcher_wake(l->d);
	waiters_notify_all(l->ws);
	l->due_at = 0;
	l->engine_check = true;
	l->keys_reload = true;
	return true;
}

/* Takes the delivery-token keys the database holds now (after a rotation). A
 * failure keeps the keys held and is tried again at the next reconnect or
 * rotation. */
static void reload_keys(struct listener *l)
{
	l->keys_reload = false;
	struct token_key *keys = NULL;
	size_t n = 0;
	struct err e = {0};
	if (db_keys_load(l->db, config_encryption_key(l->cfg), &keys, &n, &e)) {
		log_error("listener", "cannot reload the delivery-token keys", "error=\"%s\"",
			  e.msg);
		return;
	}
	keyring_replace(l->keys, keys, n);
	log_info("listener", "delivery-token keys loaded", "count=%zu current=%s", n,
		 keys[n - 1].kid);
}

/* After an engine reload (or a reconnect, which may have missed one): when
 * a newer hookflow upgraded the database, this instance claims nothing more
 * and stops promoting, reaping and sweeping with an engine it does not know;
 * /readyz reports why. (A lost connection shows in the next scheduler pass,
 * and the reconnect checks again.) */
static void check_engine(struct listener *l)
{
	l->engine_check = false;
	struct err e = {0};
	if (db_schema_check(l->db, NULL, &e) == ERR_CONFLICT) {
		log_error("listener", "database upgraded by a newer hookflow", "error=\"%s\"",
			  e.msg);
		dispatcher_refuse(l->d);
	}
}

/* Promotes due jobs, reaps expired leases and fires due schedules, then
 * finds the next due time and wakes the claimers. */
static void tick(struct listener *l)
{
	struct err e = {0};
	int n;
	do {
		if (db_jobs_promote(l->db, BATCH, &n, &e))
			goto fail;
	} while (n == BATCH);
	do {
		if (db_jobs_reap(l->db, NULL, BATCH, &n, &e))
			goto fail;
		if (n > 0) {
			metrics_leases_expired(n);
			log_info("listener", "reaped expired leases", "count=%d", n);
		}
	} while (n == BATCH);
	bool more;
	do {
		int fired, skipped, missed;
		if (scheduler_pass(l->db, l->cfg->clock_offset_ms, &fired, &skipped, &missed, &more,
				   &e))
			goto fail;
		metrics_schedules(fired, skipped, missed);
		if (fired + skipped + missed > 0)
			log_info("listener", "schedules fired", "fired=%d skipped=%d missed=%d",
				 fired, skipped, missed);
	} while (more);
	int64_t due, db_now;
	bool has;
	if (db_jobs_next_due(l->db, l->cfg->clock_offset_ms, &due, &has, &db_now, &e))
		goto fail;
	/* Lease expiry is compared with "<" in the reaper: come back just after. */
	l->due_at = has ? timefmt_mono_ms() + (due - db_now) + 1 : -1;
	/* A due time may also be a rate limit's window opening (hf_claim
	 * announces it on hookflow_sched): its runs are pending already, so the
	 * claimers look again. */
	dispatcher_wake(l->d);
	return;
fail:
	log_warn("listener", "scheduler pass failed", "error=\"%s\"", e.msg);
	if (e.code == ERR_UNAVAILABLE)
		disconnect(l);
	l->due_at = timefmt_mono_ms() + RECONNECT_MS;
}

/* Retention: deletes runs and dead letters past their windows, and
 * rate-limit windows that are over, in batches. */
static void sweep(struct listener *l)
{
	int n;
	do {
		struct err e = {0};
		if (db_jobs_sweep(l->db, l->cfg->retention_ms, l->cfg->dead_retention_ms, BATCH, &n,
				  &e)) {
			log_warn("listener", "retention sweep failed", "error=\"%s\"", e.msg);
			if (e.code == ERR_UNAVAILABLE)
				disconnect(l);
			return;
		}
		if (n > 0)
			log_info("listener", "retention sweep", "removed=%d", n);
	} while (n == BATCH && !atomic_load(&l->stop));
}

static void *listener_main(void *arg)
{
	struct listener *l = arg;
	int64_t reconnect_at = 0;
	int64_t next_sweep = timefmt_mono_ms() + SWEEP_MS;
	int64_t next_poll = timefmt_mono_ms() + l->cfg->poll_ms;
	while (!atomic_load(&l->stop)) {
		int64_t now = timefmt_mono_ms();
		if (l->lis == NULL && now >= reconnect_at) {
			if (!connect_db(l)) {
				reconnect_at = now + RECONNECT_MS;
				log_warn("listener", "database unavailable, retrying", NULL);
			}
		}
		if (l->lis != NULL) {
			struct err e = {0};
			if (db_listen_drain(l->lis, on_notify, l, &e)) {
				log_warn("listener", "listen connection lost", NULL);
				disconnect(l);
				reconnect_at = now + RECONNECT_MS;
			}
		}
		now = timefmt_mono_ms();
		if (now >= next_poll) {
			/* Safety net for a notification lost in transit. */
			next_poll = now + l->cfg->poll_ms;
			dispatcher_wake(l->d);
			if (l->due_at < 0 || l->due_at > now)
				l->due_at = now;
		}
		if (l->db != NULL && l->engine_check)
			check_engine(l);
		if (l->db != NULL && l->keys_reload)
			reload_keys(l);
		bool engine_ours = !dispatcher_refusing(l->d);
		if (engine_ours && l->db != NULL && l->due_at >= 0 && now >= l->due_at)
			tick(l);
		if (engine_ours && l->db != NULL && timefmt_mono_ms() >= next_sweep) {
			sweep(l);
			next_sweep = timefmt_mono_ms() + SWEEP_MS;
		}
		int64_t wdl = waiters_expire(l->ws, timefmt_mono_ms());

		now = timefmt_mono_ms();
		int64_t wake = next_poll;
		if (l->due_at >= 0 && l->due_at < wake)
			wake = l->due_at;
		if (wdl >= 0 && wdl < wake)
			wake = wdl;
		if (next_sweep < wake) /* also with every retention off: rate windows */
			wake = next_sweep;
		if (l->lis == NULL && reconnect_at < wake)
			wake = reconnect_at;
		int timeout = wake > now ? (int)(wake - now) : 0;
		struct pollfd pf[2] = {
			{.fd = l->evfd, .events = POLLIN},
			{.fd = l->lis ? db_listen_fd(l->lis) : -1, .events = POLLIN}};
		if (poll(pf, 2, timeout) > 0 && (pf[0].revents & POLLIN)) {
			uint64_t v;
			ssize_t r = read(l->evfd, &v, sizeof v);
			(void)r;
		}
	}
	disconnect(l);
	return NULL;
}

enum err_code listener_start(struct listener *l, struct err *e)
{
	if (pthread_create(&l->thread, NULL, listener_main, l) != 0)
		return err_set(e, ERR_INTERNAL, "listener: cannot start thread");
	l->started = true;
	return ERR_OK;
}

void listener_stop(struct listener *l)
{
	if (!l->started)
		return;
	atomic_store(&l->stop, true);
	poke(l);
	pthread_join(l->thread, NULL);
	l->started = false;
}

void listener_free(struct listener *l)
{
	if (l == NULL)
		return;
	disconnect(l);
	close(l->evfd);
	free(l);
}
