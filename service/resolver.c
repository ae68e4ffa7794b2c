/* resolver: getaddrinfo on helper threads for one owner thread, with a cache
 * of answers and one lookup per name at a time. */
#include "service/resolver.h"

#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/timefmt.h"

#define BUCKETS 256

/* One name: its cached answer, or the lookup in progress and its waiters.
 * Owner thread only. */
struct resolver_entry {
	char host[RESOLVER_MAX_HOST + 1];
	struct resolver_entry *hnext;         /* hash chain */
	struct resolver_entry *lprev, *lnext; /* most recently used first */
	unsigned bucket;
	bool pending;       /* a job for it is with the helpers */
	int64_t expires_ms; /* monotonic; the answer is fresh before it */
	struct resolver_answer answer;
	struct resolver_wait *waiters;
};

/* One getaddrinfo. The helpers read host and write answer; entry is only
 * carried back to the owner. */
struct job {
	struct job *next;
	struct resolver_entry *entry;
	char host[RESOLVER_MAX_HOST + 1];
	struct resolver_answer answer;
};

struct resolver {
	int efd;
	pthread_t threads[RESOLVER_THREADS];
	int nthreads;
	pthread_mutex_t mu; /* guards stop, queue and done */
	pthread_cond_t cv;
	bool stop;
	struct job *queue_head, *queue_tail; /* for the helpers, oldest first */
	struct job *done;                    /* back to the owner */
	/* Owner thread only. */
	struct resolver_entry *buckets[BUCKETS];
	struct resolver_entry *lru_head, *lru_tail;
	int nentries;
	struct resolver_answer failed; /* answers given at once (bad host, no memory) */
};

static void resolve(struct job *j)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(j->host, NULL, &hints, &res);
	j->answer.n = 0;
	j->answer.error = rc;
	if (rc != 0)
		return;
	for (struct addrinfo *ai = res; ai != NULL && j->answer.n < RESOLVER_MAX_ADDRS;
	     ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof j->answer.addrs[0])
			continue;
		memcpy(&j->answer.addrs[j->answer.n++], ai->ai_addr, ai->ai_addrlen);
	}
	freeaddrinfo(res);
	if (j->answer.n == 0)
		j->answer.error = EAI_NONAME;
}

static void *helper_main(void *arg)
{
	struct resolver *r = arg;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->queue_head == NULL)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->stop) {
			pthread_mutex_unlock(&r->mu);
			return NULL;
		}
		struct job *j = r->queue_head;
		r->queue_head = j->next;
		if (r->queue_head == NULL)
			r->queue_tail = NULL;
		pthread_mutex_unlock(&r->mu);

		resolve(j);

		pthread_mutex_lock(&r->mu);
		j->next = r->done;
		r->done = j;
		pthread_mutex_unlock(&r->mu);
		uint64_t one = 1;
		ssize_t w = write(r->efd, &one, sizeof one);
		(void)w; /* a full counter is readable anyway */
	}
}

static void free_jobs(struct job *j)
{
	while (j != NULL) {
		struct job *n = j->next;
		free(j);
		j = n;
	}
}

void resolver_free(struct resolver *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < r->nthreads; i++)
		pthread_join(r->threads[i], NULL);
	free_jobs(r->queue_head);
	free_jobs(r->done);
	struct resolver_entry *en = r->lru_head;
	while (en != NULL) {
		struct resolver_entry *n = en->lnext;
		free(en);
		en = n;
	}
	if (r->efd >= 0)
		close(r->efd);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

struct resolver *resolver_new(struct err *e)
{
	struct resolver *r = calloc(1, sizeof *r);
	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		err_set(e, ERR_INTERNAL, "resolver: cannot create an eventfd");
		resolver_free(r);
		return NULL;
	}
	for (int i = 0; i < RESOLVER_THREADS; i++) {
		if (pthread_create(&r->threads[i], NULL, helper_main, r) != 0) {
			err_set(e, ERR_INTERNAL, "resolver: cannot start a thread");
			resolver_free(r);
			return NULL;
		}
		r->nthreads++;
	}
	return r;
}

int resolver_fd(const struct resolver *r)
{
	return r->efd;
}

static unsigned bucket_of(const char *host)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)host; *p; p++) {
		unsigned char c = *p >= 'A' && *p <= 'Z' ? (unsigned char)(*p + 32) : *p;
		h = (h ^ c) * 16777619u;
	}
	return h % BUCKETS;
}

static void lru_unlink(struct resolver *r, struct resolver_entry *en)
{
	if (en->lprev)
		en->lprev->lnext = en->lnext;
	else
		r->lru_head = en->lnext;
	if (en->lnext)
		en->lnext->lprev = en->lprev;
	else
		r->lru_tail = en->lprev;
	en->lprev = en->lnext = NULL;
}

static void lru_push_front(struct resolver *r, struct resolver_entry *en)
{
	en->lnext = r->lru_head;
	if (r->lru_head)
		r->lru_head->lprev = en;
	else
		r->lru_tail = en;
	r->lru_head = en;
}

/* Forgets `en` (not pending, no waiters). */
static void entry_remove(struct resolver *r, struct resolver_entry *en)
{
	struct resolver_entry **pp = &r->buckets[en->bucket];
	while (*pp != en)
		pp = &(*pp)->hnext;
	*pp = en->hnext;
	lru_unlink(r, en);
	r->nentries--;
	free(en);
}

/* Makes room for one more name: forgets the least recently used answer. When
 * every name is being looked up, the cache grows instead (the lookups are
 * bounded by the calls in flight). */
static void evict_one(struct resolver *r)
{
	for (struct resolver_entry *en = r->lru_tail; en != NULL; en = en->lprev) {
		if (!en->pending) {
			entry_remove(r, en);
			return;
		}
	}
}

static const struct resolver_answer *fail_now(struct resolver *r, int error)
{
	memset(&r->failed, 0, sizeof r->failed);
	r->failed.error = error;
	return &r->failed;
}

bool resolver_lookup(struct resolver *r, const char *host, struct resolver_wait *w,
		     const struct resolver_answer **a)
{
	size_t len = strlen(host);
	if (len == 0 || len > RESOLVER_MAX_HOST) {
		*a = fail_now(r, EAI_NONAME);
		return true;
	}
	unsigned b = bucket_of(host);
	struct resolver_entry *en = r->buckets[b];
	while (en != NULL && strcasecmp(en->host, host) != 0)
		en = en->hnext;
	if (en != NULL && !en->pending && en->expires_ms > timefmt_mono_ms()) {
		lru_unlink(r, en);
		lru_push_front(r, en);
		*a = &en->answer;
		return true;
	}
	if (en == NULL) {
		if (r->nentries >= RESOLVER_MAX_NAMES)
			evict_one(r);
		en = calloc(1, sizeof *en);
		if (en == NULL) {
			*a = fail_now(r, EAI_MEMORY);
			return true;
		}
		memcpy(en->host, host, len + 1);
		en->bucket = b;
		en->hnext = r->buckets[b];
		r->buckets[b] = en;
		lru_push_front(r, en);
		r->nentries++;
	}
	if (!en->pending) {
		struct job *j = calloc(1, sizeof *j);
		if (j == NULL) {
			*a = fail_now(r, EAI_MEMORY);
			return true;
		}
		j->entry = en;
		memcpy(j->host, en->host, sizeof j->host);
		en->pending = true;
		pthread_mutex_lock(&r->mu);
		if (r->queue_tail)
			r->queue_tail->next = j;
		else
			r->queue_head = j;
		r->queue_tail = j;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	w->entry = en;
	w->prev = NULL;
	w->next = en->waiters;
	if (en->waiters)
		en->waiters->prev = w;
	en->waiters = w;
	return false;
}

void resolver_cancel(struct resolver *r, struct resolver_wait *w)
{
	(void)r;
	struct resolver_entry *en = w->entry;
	if (en == NULL)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		en->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	w->entry = NULL;
}

void resolver_dispatch(struct resolver *r, resolver_done_fn done, void *arg)
{
	uint64_t v;
	ssize_t n = read(r->efd, &v, sizeof v);
	(void)n;
	pthread_mutex_lock(&r->mu);
	struct job *j = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->mu);
	int64_t now = timefmt_mono_ms();
	while (j != NULL) {
		struct job *next = j->next;
		struct resolver_entry *en = j->entry;
		en->pending = false;
		if (j->answer.error == 0) {
			en->answer = j->answer;
			en->expires_ms = now + RESOLVER_TTL_MS;
		}
		while (en->waiters != NULL) {
			struct resolver_wait *w = en->waiters;
			resolver_cancel(r, w);
			done(w, &j->answer, arg);
		}
		if (j->answer.error != 0)
			entry_remove(r, en); /* failures are not cached */
		free(j);
		j = next;
	}
}
