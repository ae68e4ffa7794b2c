/* waiters: a mutex-guarded hash table of long-poll registrations. */
#include "service/waiters.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_BITS 10
#define NBUCKETS (1 << BUCKET_BITS)

struct waiter {
	uint64_t id; /* (sequence << BUCKET_BITS) | bucket */
	char *key;
	int64_t deadline;
	waiter_fire_fn fire;
	void *arg;
	struct waiter *next; /* bucket chain */
};

struct waiters {
	pthread_mutex_t mu;
	struct waiter *buckets[NBUCKETS];
	int count;
	uint64_t seq; /* ids handed out so far */
};

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % (unsigned)NBUCKETS;
}

struct waiters *waiters_new(void)
{
	struct waiters *ws = calloc(1, sizeof *ws);
	if (ws != NULL)
		pthread_mutex_init(&ws->mu, NULL);
	return ws;
}

void waiters_free(struct waiters *ws)
{
	if (ws == NULL)
		return;
	for (int i = 0; i < NBUCKETS; i++) {
		struct waiter *w = ws->buckets[i];
		while (w != NULL) {
			struct waiter *n = w->next;
			free(w->key);
			free(w);
			w = n;
		}
	}
	pthread_mutex_destroy(&ws->mu);
	free(ws);
}

uint64_t waiters_add(struct waiters *ws, const char *key, int64_t deadline_ms, waiter_fire_fn fire,
		     void *arg)
{
	struct waiter *w = calloc(1, sizeof *w);
	if (w == NULL || (w->key = strdup(key)) == NULL) {
		free(w);
		return 0;
	}
	w->deadline = deadline_ms;
	w->fire = fire;
	w->arg = arg;
	unsigned h = hash(key);
	pthread_mutex_lock(&ws->mu);
	w->id = (++ws->seq << BUCKET_BITS) | h;
	uint64_t id = w->id;
	w->next = ws->buckets[h];
	ws->buckets[h] = w;
	ws->count++;
	pthread_mutex_unlock(&ws->mu);
	return id;
}

int waiters_cancel(struct waiters *ws, uint64_t id)
{
	struct waiter *found = NULL;
	pthread_mutex_lock(&ws->mu);
	for (struct waiter **pp = &ws->buckets[id & (NBUCKETS - 1)]; *pp != NULL;
	     pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			found = *pp;
			*pp = found->next;
			ws->count--;
			break;
		}
	}
	pthread_mutex_unlock(&ws->mu);
	if (found != NULL) {
		free(found->key);
		free(found);
	}
	return found != NULL;
}

/* Fires and frees a detached list. */
static void fire_list(struct waiter *list)
{
	while (list != NULL) {
		struct waiter *n = list->next;
		list->fire(list->arg);
		free(list->key);
		free(list);
		list = n;
	}
}

void waiters_notify(struct waiters *ws, const char *key)
{
	struct waiter *fired = NULL;
	pthread_mutex_lock(&ws->mu);
	struct waiter **pp = &ws->buckets[hash(key)];
	while (*pp != NULL) {
		struct waiter *w = *pp;
		if (strcmp(w->key, key) == 0) {
			*pp = w->next;
			ws->count--;
			w->next = fired;
			fired = w;
		} else {
			pp = &w->next;
		}
	}
	pthread_mutex_unlock(&ws->mu);
	fire_list(fired);
}

void waiters_notify_all(struct waiters *ws)
{
	struct waiter *fired = NULL;
	pthread_mutex_lock(&ws->mu);
	for (int i = 0; i < NBUCKETS; i++) {
		while (ws->buckets[i] != NULL) {
			struct waiter *w = ws->buckets[i];
			ws->buckets[i] = w->next;
			w->next = fired;
			fired = w;
		}
	}
	ws->count = 0;
	pthread_mutex_unlock(&ws->mu);
	fire_list(fired);
}

int64_t waiters_expire(struct waiters *ws, int64_t now_ms)
{
	struct waiter *fired = NULL;
	int64_t next = -1;
	pthread_mutex_lock(&ws->mu);
	if (ws->count > 0) {
		for (int i = 0; i < NBUCKETS; i++) {
			struct waiter **pp = &ws->buckets[i];
			while (*pp != NULL) {
				struct waiter *w = *pp;
				if (w->deadline <= now_ms) {
					*pp = w->next;
					ws->count--;
					w->next = fired;
					fired = w;
				} else {
					if (next < 0 || w->deadline < next)
						next = w->deadline;
					pp = &w->next;
				}
			}
		}
	}
	pthread_mutex_unlock(&ws->mu);
	fire_list(fired);
	return next;
}
