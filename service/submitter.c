/* submitter: commits run submissions in batches (see submitter.h). */
#include "service/submitter.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "db/db.h"
#include "service/dispatcher.h"

#define MAX_BATCH 512

struct submitter {
	const struct config *cfg;
	struct dispatcher *dispatcher; /* woken after a batch created runs; may be NULL */
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct submit_job *head, *tail; /* queued, oldest first */
	bool stop;
	struct db_conn *db; /* the thread's own */
};

struct submit_job *submit_job_new(char *item, void (*done)(void *arg), void *arg)
{
	struct submit_job *j = calloc(1, sizeof *j);
	if (j == NULL) {
		free(item);
		return NULL;
	}
	j->item = item;
	j->done = done;
	j->arg = arg;
	atomic_store(&j->refs, 1);
	return j;
}

void submit_job_unref(struct submit_job *j)
{
	if (j == NULL || atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	free(j->item);
	free(j->answer.run_json);
	free(j);
}

/* Answers `j` (its answer already set) and drops the submitter's reference. */
static void finish(struct submit_job *j)
{
	j->done(j->arg);
	submit_job_unref(j);
}

static void fail(struct submit_job *j, const struct err *e)
{
	j->answer.err = *e;
	finish(j);
}

/* Submits `n` jobs in one transaction; when that fails for another reason
 * than the database being away, each on its own. Answers every job. */
static void submit_batch(struct submitter *s, struct submit_job **jobs, int n)
{
	struct err e = {0};
	/* A connection the server closed since the last batch (a restart, a
	 * failover) is made again now, not found broken by this batch's clients. */
	if (s->db != NULL)
		db_conn_drop_if_closed(s->db);
	if (s->db == NULL && db_conn_open(s->cfg->database_url, &s->db, &e)) {
		for (int i = 0; i < n; i++)
			fail(jobs[i], &e);
		return;
	}
	char **items = malloc((size_t)n * sizeof *items);
	struct run_submit_answer *answers = calloc((size_t)n, sizeof *answers);
	if (items == NULL || answers == NULL) {
		free(items);
		free(answers);
		err_set(&e, ERR_INTERNAL, "out of memory");
		for (int i = 0; i < n; i++)
			fail(jobs[i], &e);
		return;
	}
	for (int i = 0; i < n; i++)
		items[i] = jobs[i]->item;
	if (db_run_submit_many(s->db, items, n, answers, &e) == ERR_OK) {
		bool created = false;
		for (int i = 0; i < n; i++)
			created |= answers[i].res == RUN_CREATED;
		if (created && s->dispatcher != NULL)
			dispatcher_wake(
				s->dispatcher); /* before the answers: the claim goes first */
		for (int i = 0; i < n; i++) {
			jobs[i]->answer = answers[i];
			finish(jobs[i]);
		}
	} else if (e.code == ERR_UNAVAILABLE || n == 1) {
		if (e.code == ERR_UNAVAILABLE) {
			db_conn_free(s->db); /* reconnect for the next batch */
			s->db = NULL;
		}
		for (int i = 0; i < n; i++)
			fail(jobs[i], &e);
	} else {
		log_warn("submitter", "batch failed, submitting one by one", "runs=%d error=\"%s\"",
			 n, e.msg);
		for (int i = 0; i < n; i++)
			submit_batch(s, &jobs[i], 1);
	}
	free(items);
	free(answers);
}

static void *submitter_main(void *arg)
{
	struct submitter *s = arg;
	struct submit_job *batch[MAX_BATCH];
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (s->head == NULL && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		int n = 0;
		while (s->head != NULL && n < MAX_BATCH) {
			batch[n++] = s->head;
			s->head = s->head->next;
		}
		if (s->head == NULL)
			s->tail = NULL;
		bool stop = s->stop && n == 0;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		submit_batch(s, batch, n);
	}
	db_conn_free(s->db);
	s->db = NULL;
	return NULL;
}

struct submitter *submitter_new(const struct config *cfg, struct dispatcher *d)
{
	struct submitter *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->cfg = cfg;
	s->dispatcher = d;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

enum err_code submitter_start(struct submitter *s, struct err *e)
{
	if (pthread_create(&s->thread, NULL, submitter_main, s) != 0)
		return err_set(e, ERR_INTERNAL, "cannot start the submitter thread");
	s->started = true;
	return ERR_OK;
}

void submitter_enqueue(struct submitter *s, struct submit_job *j)
{
	atomic_fetch_add(&j->refs, 1);
	if (j->item == NULL) {
		struct err e = {0};
		err_set(&e, ERR_INTERNAL, "out of memory");
		fail(j, &e);
		return;
	}
	pthread_mutex_lock(&s->mu);
	bool stopped = s->stop || !s->started;
	if (!stopped) {
		j->next = NULL;
		if (s->tail)
			s->tail->next = j;
		else
			s->head = j;
		s->tail = j;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	if (stopped) {
		struct err e = {0};
		err_set(&e, ERR_UNAVAILABLE, "shutting down");
		fail(j, &e);
	}
}

void submitter_stop(struct submitter *s)
{
	if (s == NULL || !s->started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&s->mu);
	s->started = false;
	pthread_mutex_unlock(&s->mu);
}

void submitter_free(struct submitter *s)
{
	if (s == NULL)
		return;
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
