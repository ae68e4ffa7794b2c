/* submitter: commits run submissions in batches.
 *
 * A submission costs PostgreSQL far more in its transaction (commit, WAL
 * flush, round trips) than in its rows, so the HTTP threads do not submit
 * themselves: they queue the validated submission and suspend the request.
 * One thread with its own connection takes everything queued, submits it in
 * one transaction (hf_submit_many) and answers each job; while a batch is in
 * the database the next one gathers, so an idle service adds no wait and a
 * busy one pays one commit for many runs. A batch that fails as a whole for
 * another reason than the database being away is retried one job at a time,
 * so one bad submission cannot fail the others. */
#ifndef HOOKFLOW_SUBMITTER_H
#define HOOKFLOW_SUBMITTER_H

#include <stdatomic.h>

#include "base/config.h"
#include "base/err.h"
#include "db/run.h"

/* One queued submission, shared by the HTTP thread that made it and the
 * submitter thread that answers it; freed by whichever drops it last. */
struct submit_job {
	char *item;              /* owned: the batch item (db_run_submit_item) */
	void (*done)(void *arg); /* called once, on the submitter thread, after `answer` is set */
	void *arg;
	struct run_submit_answer answer; /* owned strings; valid once `done` was called */
	atomic_int refs;
	struct submit_job *next;
};

/* A job for `item` (stolen; NULL is answered with an out-of-memory error)
 * holding one reference, the caller's. NULL when out of memory (`item` is
 * freed). */
struct submit_job *submit_job_new(char *item, void (*done)(void *arg), void *arg);

/* Drops a reference; the last one frees the job. NULL is a no-op. */
void submit_job_unref(struct submit_job *j);

struct submitter;

struct dispatcher;

/* A submitter on `cfg` (borrowed, outlives it). Once a batch that created
 * runs has committed, it wakes `d` (borrowed, outlives it; NULL: none) at
 * once: the runs' NOTIFY still wakes every instance, this one without the
 * round trip through PostgreSQL and the listener. NULL when out of memory. */
struct submitter *submitter_new(const struct config *cfg, struct dispatcher *d);

/* Starts its thread. */
enum err_code submitter_start(struct submitter *s, struct err *e);

/* Queues job `j` (the submitter takes its own reference). `done` is called
 * once the job is answered: after its batch, or at once when the submitter
 * is stopping. Thread-safe. */
void submitter_enqueue(struct submitter *s, struct submit_job *j);

/* Answers everything queued, then stops the thread; later jobs are answered
 * at once with ERR_UNAVAILABLE. */
void submitter_stop(struct submitter *s);

/* Frees a stopped (or never started) submitter. NULL is a no-op. */
void submitter_free(struct submitter *s);

#endif
