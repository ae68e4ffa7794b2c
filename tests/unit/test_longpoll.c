/* Stress test of the long-poll machinery of service/http.c against the waiter
 * table of service/waiters.c (issue 12, item 3), with the real parts: the
 * libmicrohttpd server, the waiter table, real sockets; no database.
 *
 * The race it proves fixed: a request that armed a waiter and then answered
 * without suspending (as GET /v1/runs/{id}?wait_ms does when its re-read finds
 * the run terminal) withdrew its waiter while the listener thread was firing
 * and freeing it. Here every request does exactly that, while a notifier
 * thread fires the waiters of the same key in a tight loop, as the listener
 * does when runs terminate; one request in four suspends instead and is
 * resumed by a fire. With the old withdrawal (by pointer, after dropping the
 * long-poll's lock) AddressSanitizer reports a heap-use-after-free within a
 * few thousand requests and ThreadSanitizer a race (make tsan-test builds and
 * runs this file too). Afterwards no waiter is left in the table, and the
 * leak checker finds no long-poll state left behind. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/timefmt.h"
#include "service/http.h"
#include "service/listener.h"
#include "service/waiters.h"

#define CLIENTS 4
#define REQUESTS_PER_CLIENT 25000
#define KEY "run-1"

static struct waiters *ws;
static atomic_bool stop_notifier;
static atomic_long fired_answers;
static atomic_long armed_answers;

/* Arms a waiter on KEY; answers at once (with the waiter armed) three times
 * in four, suspends the fourth time; answers "fired" once resumed. */
static void handle_race(struct http_req *r)
{
	static atomic_uint n;
	if (http_longpoll_state(r) == HTTP_LP_FIRED) {
		atomic_fetch_add(&fired_answers, 1);
		http_reply_bytes(r, 200, "text/plain", "fired", 5);
		return;
	}
	struct err e = {0};
	if (http_longpoll_arm(r, KEY, 60000, &e)) {
		http_reply_error(r, &e);
		return;
	}
	if (atomic_fetch_add(&n, 1) % 4 == 3 && http_longpoll_suspend(r))
		return; /* called again when a fire resumes it */
	atomic_fetch_add(&armed_answers, 1);
	http_reply_bytes(r, 200, "text/plain", "armed", 5);
}

static const struct http_route race_routes[] = {
	{"GET", "/race", handle_race, HTTP_AUTH_PUBLIC},
};

static void *notifier(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_notifier))
		waiters_notify(ws, KEY);
	return NULL;
}

struct client {
	int port;
	int answered;
	char error[160];
};

/* Reads one answer (headers, then Content-Length bytes) into buf. */
static bool read_answer(int fd, char *buf, size_t cap, int *status)
{
	size_t have = 0;
	for (;;) {
		buf[have] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (end != NULL) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");
			size_t body = cl ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
			size_t want = (size_t)(end + 4 - buf) + body;
			while (have < want) {
				ssize_t n = read(fd, buf + have, cap - 1 - have);
				if (n <= 0)
					return false;
				have += (size_t)n;
			}
			*status = atoi(buf + 9);
			return have == want;
		}
		if (have + 1 >= cap)
			return false;
		ssize_t n = read(fd, buf + have, cap - 1 - have);
		if (n <= 0)
			return false;
		have += (size_t)n;
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	int fd = -1;
	char req[128];
	snprintf(req, sizeof req, "GET /race HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", c->port);
	for (int i = 0; i < REQUESTS_PER_CLIENT; i++) {
		if (fd < 0) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_port = htons((uint16_t)c->port)};
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
				snprintf(c->error, sizeof c->error, "connect failed");
				break;
			}
		}
		char buf[4096];
		int status = 0;
		if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
		    !read_answer(fd, buf, sizeof buf, &status)) {
			snprintf(c->error, sizeof c->error, "request %d: no answer", i);
			break;
		}
		if (status != 200) {
			snprintf(c->error, sizeof c->error, "request %d: status %d", i, status);
			break;
		}
		c->answered++;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void test_answers_with_armed_waiters_while_they_fire(void **state)
{
	(void)state;
	struct config cfg = {
		.listen_host = "127.0.0.1",
		.listen_port = 0,
		.http_threads = 4,
		.max_body_bytes = 1 << 20,
		.request_timeout_ms = 60000,
	};
	ws = waiters_new();
	assert_non_null(ws);
	struct listener *l =
		listener_new(&cfg, NULL, ws, NULL); /* not started: the notifier fires */
	assert_non_null(l);
	struct app app = {.cfg = &cfg, .listener = l};
	struct http_server *srv = NULL;
	struct err e = {0};
	assert_int_equal(http_server_start(&app, race_routes, 1, &srv, &e), ERR_OK);
	int port = http_server_port(srv);
	assert_true(port > 0);

	pthread_t nt;
	atomic_store(&stop_notifier, false);
	assert_int_equal(pthread_create(&nt, NULL, notifier, NULL), 0);
	struct client cs[CLIENTS];
	pthread_t ct[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		cs[i] = (struct client){.port = port};
		assert_int_equal(pthread_create(&ct[i], NULL, client_main, &cs[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(ct[i], NULL);
	atomic_store(&stop_notifier, true);
	pthread_join(nt, NULL);

	long total = 0;
	for (int i = 0; i < CLIENTS; i++) {
		if (cs[i].error[0])
			fail_msg("client %d: %s", i, cs[i].error);
		total += cs[i].answered;
	}
	assert_int_equal(total, (long)CLIENTS * REQUESTS_PER_CLIENT);
	assert_int_equal(atomic_load(&armed_answers) + atomic_load(&fired_answers), total);
	assert_true(atomic_load(&fired_answers) > 0);
	/* Every waiter was withdrawn or fired: none is left in the table. */
	assert_int_equal(waiters_expire(ws, 0), -1);

	http_server_stop(srv);
	listener_free(l);
	waiters_free(ws);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answers_with_armed_waiters_while_they_fire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
