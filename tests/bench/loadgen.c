/* loadgen: submits hookflow runs over keep-alive HTTP/1.1 (epoll, raw sockets) and measures them.
 *
 *   loadgen submit  -u HOST:PORT[,HOST:PORT...] -w WORKFLOW -n RUNS [-c CONNS]
 *                   [-p PREFIX] [-b INPUT_BYTES [-J]] [-d CONNINFO] [-T TIMEOUT_S]
 *                   [-D DUE_MS]
 *       Submits RUNS runs (POST /v1/runs, run ids PREFIX-0..RUNS-1) as fast as
 *       CONNS keep-alive connections allow, spread over the given instances.
 *       With -d it then waits until every run of the database is terminal,
 *       counting active runs with one query every 100 ms on one libpq
 *       connection (no load on the service), and takes the end time from the database:
 *       max(finished_at). The elapsed time runs from the first submission to
 *       that end. With -D every run is submitted with the delay_ms that makes
 *       it due DUE_MS after the first submission, so that all of them become
 *       claimable at once (the in-flight test). The input is an object of
 *       about INPUT_BYTES: incompressible text, or with -J typical JSON
 *       records (make_input).
 *
 *   loadgen latency -u HOST:PORT -w WORKFLOW -n COUNT [-W WARMUP] [-p PREFIX]
 *                   [-d CONNINFO] [-o FILE]
 *       Idle latency: one run at a time, POST /v1/runs then GET
 *       /v1/runs/{id}?wait_ms=30000 on the same connection; the latency is from
 *       just before the POST is written to the terminal answer. With -d it also
 *       reports the server's own view, finished_at - created_at, and where the
 *       time goes (bd_*_ms, medians), from this machine's clock and the
 *       database's timestamps (the same clock): submit = POST written to the
 *       submitting transaction's start (run.created_at); per step, claim =
 *       from the step becoming claimable (created_at, or the previous
 *       attempt's settling transaction's start) to the lease (started_at,
 *       the clock when the claim's UPDATE began), so it holds the previous
 *       settlement (the same transaction when the step was claimed in that
 *       cycle), or its commit, the NOTIFY and the wake-up; call =
 *       started_at to the settling transaction's start
 *       (finished_at): the claim's commit, the webhook call and its answer
 *       read; answer = finished_at to the terminal answer read here: the
 *       settlement's commit, the long-poll's wake-up and its reply. With -o
 *       it writes every latency (ms, sorted, one a line) to FILE.
 *
 *   loadgen rate    -u HOST:PORT[,...] -w WORKFLOW -r RUNS_PER_S -s SECONDS
 *                   -d CONNINFO [-S STEPS] [-c MAXCONNS] [-p PREFIX] [-b BYTES [-J]]
 *                   [-i INTERVAL_S] [-P PID] [-o FILE] [-T DRAIN_S]
 *       Open loop (the soak): run i is due at start + i / RUNS_PER_S and is
 *       submitted then, on an idle keep-alive connection or a new one (up to
 *       MAXCONNS), whatever the service's pace, for SECONDS. Every 250 ms one
 *       query (sent asynchronously, in the same epoll loop, so it never holds a
 *       submission back) looks up the runs accepted and not yet seen terminal,
 *       by primary key, before retention can delete them: finished_at, whether
 *       the run succeeded at step STEPS-1 and whether any attempt or step was
 *       settled twice. A run's latency is finished_at (the database's clock, the
 *       settling transaction) minus the moment it came due (this machine's
 *       clock, the same one), so a submission that could not go out on time
 *       counts against the service. Every INTERVAL_S (10) it samples the
 *       database size and VmRSS of PID; at the end it writes one line per
 *       interval to FILE (runs finished in it by finished_at, their p50/p99,
 *       the samples) and prints the first and the last minute. After SECONDS it
 *       waits up to DRAIN_S (-T) for the runs still going.
 *
 * Results go to stdout as key=value lines; progress and errors to stderr.
 * Exit status: 0 when every run was accepted (and, with -d, ended succeeded),
 * 1 otherwise, 2 for usage errors. rate: 0 when every accepted run was seen
 * terminal, succeeded, with each of its steps settled once (rejected
 * submissions are reported, not counted here). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 16

struct target {
	struct sockaddr_in sa;
	char hostport[64];
};

static struct target targets[MAX_TARGETS];
static int ntargets;
static const char *workflow;
static const char *prefix = "r";
static const char *conninfo;
static long nruns = 100;
static int nconns = 64;
static long input_bytes;
static int timeout_s = 300;
static int warmup = 5;
static long due_ms = -1;    /* -D: every run due at submit start + due_ms */
static const char *outfile; /* -o: raw latencies (latency), samples (rate) */
static double rate;         /* -r: runs per second (rate) */
static int seconds;         /* -s: how long to submit (rate) */
static int steps = 1;       /* -S: steps per run (rate checks every run has them) */
static int interval_s = 10; /* -i: sampling period (rate) */
static long watch_pid;      /* -P: the hookflow whose RSS is sampled (rate) */
static long nkeys;          /* -k: run i gets concurrency_key "k<i % nkeys>" (0: none) */
static int64_t start_us;
static bool json_input; /* -J: the input is typical JSON records, not incompressible text */
static char *pad;       /* the run's input object, about input_bytes long (-b) */

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This process's CPU time so far, in ms (printed as cpu_ms for the bench's
 * accounting of who used the machine). */
static long cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
}

static void die(const char *msg)
{
	fprintf(stderr, "loadgen: %s\n", msg);
	exit(2);
}

/* ---- HTTP --------------------------------------------------------------- */

/* The runs' input object, `bytes` long (within a record's length below it
 * with `json`). By default {"pad":"..."}: letters and digits from a fixed
 * pseudo-random sequence, which neither lz4 nor pglz compresses (PostgreSQL
 * compresses large values: the worst case for storage). With `json`,
 * {"items":[...]}: order-like records with ids, SKUs, names from a small
 * vocabulary, quantities, prices and timestamps, as typical JSON payloads
 * are (compressible). */
static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static char *make_input(long bytes, bool json)
{
	static const char alnum[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	static const char *const words[] = {
		"red",   "blue",  "green", "small", "large",  "steel", "cotton", "wool",
		"chair", "table", "lamp",  "mug",   "shirt",  "boot",  "clock",  "desk",
		"pro",   "mini",  "max",   "basic", "deluxe", "eco",   "smart",  "classic"};
	static const char *const states[] = {"pending", "paid", "shipped", "delivered"};
	char *out = malloc((size_t)bytes + 512);
	if (out == NULL)
		die("out of memory");
	uint64_t x = 88172645463325252ULL;
	size_t n = 0;
	if (!json) {
		n = (size_t)sprintf(out, "{\"pad\":\"");
		for (long i = 0; i < bytes; i++)
			out[n++] = alnum[xorshift(&x) % 62];
		strcpy(out + n, "\"}");
		return out;
	}
	n = (size_t)sprintf(out, "{\"items\":[");
	for (long id = 1;; id++) {
		uint64_t r[8];
		for (int k = 0; k < 8; k++)
			r[k] = xorshift(&x);
		char rec[320];
		int rl = snprintf(rec, sizeof rec,
				  "%s{\"id\":%ld,\"sku\":\"SKU-%06ld\",\"name\":\"%s %s %s\","
				  "\"qty\":%d,\"price\":%d.%02d,\"status\":\"%s\","
				  "\"created_at\":\"2026-12-07T%02ld:%02ld:%02ldZ\"}",
				  id > 1 ? "," : "", id, 100000 + (long)(r[0] % 900000),
				  words[r[1] % 24], words[r[2] % 24], words[r[3] % 24],
				  1 + (int)(r[4] % 20), (int)(r[5] % 500), (int)(r[6] % 100),
				  states[r[7] % 4], id / 3600 % 24, id / 60 % 60, id % 60);
		if (id > 1 && n + (size_t)rl + 2 > (size_t)bytes)
			break;
		memcpy(out + n, rec, (size_t)rl);
		n += (size_t)rl;
	}
	strcpy(out + n, "]}");
	return out;
}

/* Builds the request for run `i` into a new buffer. */
static char *submit_request(const struct target *t, long i, size_t *len)
{
	size_t cap = 512 + (size_t)input_bytes;
	char *body = malloc(cap);
	char delay[96] = "";
	if (nkeys > 0)
		snprintf(delay, sizeof delay, ",\"concurrency_key\":\"k%ld\"", i % nkeys);
	if (due_ms >= 0) {
		int64_t left = due_ms - (mono_us() - start_us) / 1000;
		size_t used = strlen(delay);
		snprintf(delay + used, sizeof delay - used, ",\"delay_ms\":%lld",
			 (long long)(left > 0 ? left : 0));
	}
	int bl;
	if (pad != NULL)
		bl = snprintf(body, cap,
			      "{\"workflow\":\"%s\",\"run_id\":\"%s-%ld\"%s,\"input\":%s}",
			      workflow, prefix, i, delay, pad);
	else
		bl = snprintf(body, cap,
			      "{\"workflow\":\"%s\",\"run_id\":\"%s-%ld\"%s,\"input\":{\"i\":%ld}}",
			      workflow, prefix, i, delay, i);
	char *req = malloc((size_t)bl + 256);
	int n = snprintf(req, (size_t)bl + 256,
			 "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %d\r\n\r\n%s",
			 t->hostport, bl, body);
	free(body);
	*len = (size_t)n;
	return req;
}

/* Looks at a response in buf[0..len): returns its total length once complete,
 * 0 while incomplete, -1 when malformed. Sets the status and the body span
 * (for chunked bodies, the span of the raw chunked data). */
static long parse_response(const char *buf, size_t len, int *status, const char **body,
			   size_t *blen)
{
	const char *hend = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
	if (hend == NULL)
		return len > 65536 ? -1 : 0;
	size_t hl = (size_t)(hend - buf) + 4;
	if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(buf + 9);
	long long clen = -1;
	bool chunked = false;
	const char *line = memchr(buf, '\n', hl) + 1;
	while (line < buf + hl - 2) {
		const char *eol = memchr(line, '\n', (size_t)(buf + hl - line));
		size_t ll = (size_t)(eol - line);
		if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0)
			clen = strtoll(line + 15, NULL, 10);
		else if (ll > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0 &&
			 memmem(line, ll, "chunked", 7) != NULL)
			chunked = true;
		line = eol + 1;
	}
	*body = buf + hl;
	if (chunked) {
		size_t p = hl;
		for (;;) {
			const char *eol = memmem(buf + p, len - p, "\r\n", 2);
			if (eol == NULL)
				return 0;
			long sz = strtol(buf + p, NULL, 16);
			p = (size_t)(eol - buf) + 2;
			if (sz == 0) {
				/* trailers end with an empty line */
				const char *end = memmem(buf + p - 2, len - (p - 2), "\r\n\r\n", 4);
				if (end == NULL)
					return 0;
				*blen = (size_t)(end - *body);
				return (long)(end - buf) + 4;
			}
			if (len < p + (size_t)sz + 2)
				return 0;
			p += (size_t)sz + 2;
		}
	}
	if (clen < 0)
		clen = 0;
	if (len < hl + (size_t)clen)
		return 0;
	*blen = (size_t)clen;
	return (long)(hl + (size_t)clen);
}

static int connect_to(const struct target *t, bool nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (const struct sockaddr *)&t->sa, sizeof t->sa) != 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- submit ------------------------------------------------------------- */

struct conn {
	int fd;
	int target;
	long run; /* run being submitted, -1 when idle */
	char *req;
	size_t req_len, req_off;
	char *in;
	size_t in_len, in_cap;
	int retries;
};

static long next_run, accepted, resubmitted, failed, shown_errors;
static int epfd;

/* Rate mode (loadgen rate): what became of each run, and the connections
 * waiting for the next run to come due. NULL in the other modes. */
enum run_state { RUN_WAITING, RUN_SENDING, RUN_ACCEPTED, RUN_REJECTED, RUN_DONE };
struct rate_run {
	int64_t fin_us; /* finished_at (wall clock, microseconds), once RUN_DONE */
	unsigned char state;
};
static struct rate_run *rr;
static struct conn **idle;
static int nidle;
static long open_runs; /* accepted, not yet seen terminal */

static void conn_arm(struct conn *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
}

static bool conn_open(struct conn *c)
{
	c->fd = connect_to(&targets[c->target], true);
	if (c->fd < 0)
		return false;
	c->in_len = 0;
	c->req_off = 0;
	conn_arm(c, EPOLLOUT);
	return true;
}

/* Rate mode: c waits, connected, for the next run to come due. */
static void conn_idle(struct conn *c)
{
	c->run = -1;
	if (c->fd >= 0)
		conn_arm(c, EPOLLIN); /* to see the server close it */
	idle[nidle++] = c;
}

/* Starts the next submission on c, or closes c when none is left (in rate
 * mode, c waits for the next run to come due instead). */
static void conn_next(struct conn *c)
{
	free(c->req);
	c->req = NULL;
	if (rr != NULL) {
		conn_idle(c);
		return;
	}
	if (next_run >= nruns) {
		c->run = -1;
		epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		return;
	}
	c->run = next_run++;
	c->retries = 0;
	c->req = submit_request(&targets[c->target], c->run, &c->req_len);
	c->req_off = 0;
	conn_arm(c, EPOLLOUT);
}

/* The connection broke: reconnect and send the same request again (submitting
 * the same run id with the same input is harmless). */
static void conn_retry(struct conn *c)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (++c->retries > 20 || !conn_open(c)) {
		fprintf(stderr, "loadgen: run %s-%ld: connection to %s failed repeatedly\n", prefix,
			c->run, targets[c->target].hostport);
		failed++;
		if (rr != NULL)
			rr[c->run].state = RUN_REJECTED;
		c->run = -1;
		if (c->fd >= 0) {
			epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->fd = -1;
		}
		if (rr != NULL) {
			free(c->req);
			c->req = NULL;
			conn_idle(c);
		}
	}
}

static void conn_event(struct conn *c, uint32_t events)
{
	if (c->run < 0) {
		/* an idle keep-alive connection (rate mode): the server closed it;
		 * it is opened again for its next run */
		epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		return;
	}
	if (c->req_off < c->req_len) {
		if (events & (EPOLLERR | EPOLLHUP)) {
			conn_retry(c);
			return;
		}
		while (c->req_off < c->req_len) {
			ssize_t n = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
			if (n > 0) {
				c->req_off += (size_t)n;
			} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				return;
			} else {
				conn_retry(c);
				return;
			}
		}
		conn_arm(c, EPOLLIN);
		return;
	}
	for (;;) {
		if (c->in_cap - c->in_len < 4096) {
			c->in_cap = c->in_cap ? c->in_cap * 2 : 16384;
			c->in = realloc(c->in, c->in_cap);
		}
		ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n > 0) {
			c->in_len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		conn_retry(c); /* closed before the answer */
		return;
	}
	int status = 0;
	const char *body = NULL;
	size_t blen = 0;
	long total = parse_response(c->in, c->in_len, &status, &body, &blen);
	if (total == 0)
		return;
	if (total < 0) {
		conn_retry(c);
		return;
	}
	if (status == 201) {
		accepted++;
	} else if (status == 200) {
		resubmitted++;
	} else {
		failed++;
		if (shown_errors++ < 5)
			fprintf(stderr, "loadgen: run %s-%ld: HTTP %d: %.*s\n", prefix, c->run,
				status, (int)(blen > 300 ? 300 : blen), body);
	}
	if (rr != NULL) {
		bool ok = status == 201 || status == 200;
		rr[c->run].state = ok ? RUN_ACCEPTED : RUN_REJECTED;
		open_runs += ok;
	}
	memmove(c->in, c->in + total, c->in_len - (size_t)total);
	c->in_len -= (size_t)total;
	conn_next(c);
}

static PGconn *db_open(void)
{
	PGconn *pg = PQconnectdb(conninfo);
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "loadgen: database: %s", PQerrorMessage(pg));
		exit(1);
	}
	return pg;
}

static long long db_int(PGconn *pg, const char *sql, int col)
{
	PGresult *r = PQexec(pg, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
		fprintf(stderr, "loadgen: query failed: %s: %s", sql, PQerrorMessage(pg));
		exit(1);
	}
	long long v = PQgetisnull(r, 0, col) ? -1 : strtoll(PQgetvalue(r, 0, col), NULL, 10);
	PQclear(r);
	return v;
}

static int cmd_submit(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (nconns > nruns)
		nconns = (int)(nruns > 0 ? nruns : 1);
	struct conn *cs = calloc((size_t)nconns, sizeof *cs);
	int64_t t0_wall = wall_ms();
	int64_t t0 = mono_us();
	start_us = t0;
	for (int i = 0; i < nconns; i++) {
		cs[i].target = i % ntargets;
		cs[i].run = -1;
		if (!conn_open(&cs[i])) {
			fprintf(stderr, "loadgen: cannot connect to %s\n",
				targets[cs[i].target].hostport);
			return 1;
		}
		/* the first request goes out once connected */
		cs[i].run = next_run++;
		cs[i].req = submit_request(&targets[cs[i].target], cs[i].run, &cs[i].req_len);
		cs[i].req_off = 0;
	}
	int active = nconns;
	struct epoll_event evs[256];
	int64_t deadline = t0 + (int64_t)timeout_s * 1000000;
	while (active > 0) {
		int n = epoll_wait(epfd, evs, 256, 1000);
		for (int i = 0; i < n; i++)
			conn_event(evs[i].data.ptr, evs[i].events);
		active = 0;
		for (int i = 0; i < nconns; i++)
			active += cs[i].run >= 0;
		if (mono_us() > deadline) {
			fprintf(stderr, "loadgen: submissions did not finish within %d s\n",
				timeout_s);
			failed += nruns - accepted - resubmitted - failed;
			break;
		}
	}
	int64_t t1 = mono_us();
	double submit_s = (double)(t1 - t0) / 1e6;
	printf("runs=%ld\nconns=%d\naccepted=%ld\nresubmitted=%ld\nfailed=%ld\n", nruns, nconns,
	       accepted, resubmitted, failed);
	printf("submit_s=%.3f\nsubmit_rate=%.0f\n", submit_s,
	       (double)(accepted + resubmitted) / submit_s);
	fflush(stdout);
	if (conninfo == NULL)
		return failed == 0 ? 0 : 1;

	/* Wait until every run is terminal: one cheap query (an index-only scan of
	 * the partial index of active runs) every 100 ms. The end time comes from
	 * the database, so the polling period does not matter. */
	PGconn *pg = db_open();
	PGresult *pr = PQprepare(
		pg, "active",
		"SELECT count(*) FROM run WHERE status NOT IN ('succeeded', 'failed', 'cancelled')",
		0, NULL);
	if (PQresultStatus(pr) != PGRES_COMMAND_OK) {
		fprintf(stderr, "loadgen: prepare failed: %s", PQerrorMessage(pg));
		return 1;
	}
	PQclear(pr);
	int64_t last_report = mono_us();
	long long still = 0;
	for (;;) {
		PGresult *r = PQexecPrepared(pg, "active", 0, NULL, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "loadgen: count failed: %s", PQerrorMessage(pg));
			return 1;
		}
		still = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
		if (still == 0)
			break;
		int64_t now = mono_us();
		if (now > deadline) {
			fprintf(stderr, "loadgen: %lld runs still active after %d s\n", still,
				timeout_s);
			break;
		}
		if (now - last_report > 5000000) {
			fprintf(stderr, "loadgen: %lld runs active\n", still);
			last_report = now;
		}
		struct timespec ts = {0, 100 * 1000000};
		nanosleep(&ts, NULL);
	}
	int64_t seen = mono_us();
	long long end_ms = db_int(
		pg, "SELECT (extract(epoch FROM max(finished_at)) * 1000)::bigint FROM run", 0);
	long long total = db_int(pg, "SELECT count(*) FROM run", 0);
	long long terminal = total - still;
	long long succeeded = db_int(pg, "SELECT count(*) FROM run WHERE status = 'succeeded'", 0);
	long long attempts = db_int(pg, "SELECT count(*) FROM step_attempt", 0);
	PQfinish(pg);
	double done_s = (double)(end_ms - t0_wall) / 1000.0;
	if (done_s <= 0)
		done_s = (double)(seen - t0) / 1e6;
	printf("terminal=%lld\nsucceeded=%lld\nstep_attempts=%lld\n", terminal, succeeded,
	       attempts);
	printf("done_s=%.3f\nseen_s=%.3f\nruns_per_s=%.0f\nsteps_per_s=%.0f\n", done_s,
	       (double)(seen - t0) / 1e6, (double)terminal / done_s, (double)attempts / done_s);
	if (due_ms >= 0) {
		/* from the moment the runs came due: how long until the last ended */
		printf("after_due_s=%.3f\n", done_s - (double)due_ms / 1000.0);
	}
	return failed == 0 && terminal == total && succeeded == total ? 0 : 1;
}

/* ---- latency ------------------------------------------------------------ */

/* Sends req on fd and reads one response into *buf; returns the status or -1. */
static int roundtrip(int fd, const char *req, size_t len, char **buf, size_t *cap,
		     const char **body, size_t *blen)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, req + off, len - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		off += (size_t)n;
	}
	size_t have = 0;
	for (;;) {
		if (*cap - have < 4096) {
			*cap = *cap ? *cap * 2 : 65536;
			*buf = realloc(*buf, *cap);
		}
		ssize_t n = read(fd, *buf + have, *cap - have);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		have += (size_t)n;
		int status;
		long total = parse_response(*buf, have, &status, body, blen);
		if (total < 0)
			return -1;
		if (total > 0)
			return status;
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(const int64_t *v, long n, double p)
{
	if (n == 0)
		return 0;
	long i = (long)(p * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

static double median_us(int64_t *v, long n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
	return pct(v, n, 0.5);
}

/* Prints the bd_*_ms medians (see the usage above) of the runs whose POST
 * was written at wall clock t0[i] and whose terminal answer was read at
 * t1[i] (0: the run failed). */
static void breakdown(PGconn *pg, const int64_t *t0, const int64_t *t1)
{
	char sql[768];
	size_t skip = strlen(prefix) + 2;
	snprintf(sql, sizeof sql,
		 "SELECT substr(a.run_id, %zu)::int - %d,"
		 " (extract(epoch FROM r.created_at) * 1e6)::bigint,"
		 " (extract(epoch FROM a.started_at) * 1e6)::bigint,"
		 " (extract(epoch FROM a.finished_at) * 1e6)::bigint"
		 " FROM step_attempt a JOIN run r ON r.run_id = a.run_id"
		 " WHERE a.run_id LIKE '%s-%%' AND substr(a.run_id, %zu)::int >= %d"
		 " ORDER BY 1, a.generation, a.step, a.attempt",
		 skip, warmup, prefix, skip, warmup);
	PGresult *r = PQexec(pg, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "loadgen: %s", PQerrorMessage(pg));
		PQclear(r);
		return;
	}
	long rows = PQntuples(r), ns = 0, nr = 0;
	int64_t *sub = calloc((size_t)nruns, sizeof *sub),
		*ans = calloc((size_t)nruns, sizeof *ans);
	int64_t *claim = calloc((size_t)rows + 1, sizeof *claim);
	int64_t *call = calloc((size_t)rows + 1, sizeof *call);
	for (long k = 0; k < rows; k++) {
		long i = atol(PQgetvalue(r, k, 0));
		int64_t created = atoll(PQgetvalue(r, k, 1)), started = atoll(PQgetvalue(r, k, 2)),
			finished = atoll(PQgetvalue(r, k, 3));
		if (i < 0 || i >= nruns || t1[i] == 0)
			continue;
		bool first = k == 0 || atol(PQgetvalue(r, k - 1, 0)) != i;
		bool last = k + 1 == rows || atol(PQgetvalue(r, k + 1, 0)) != i;
		int64_t ready = first ? created : atoll(PQgetvalue(r, k - 1, 3));
		claim[ns] = started - ready;
		call[ns++] = finished - started;
		if (first)
			sub[nr] = created - t0[i];
		if (last)
			ans[nr++] = t1[i] - finished;
	}
	printf("bd_submit_ms=%.3f\nbd_claim_ms=%.3f\nbd_call_ms=%.3f\nbd_answer_ms=%.3f\n",
	       median_us(sub, nr), median_us(claim, ns), median_us(call, ns), median_us(ans, nr));
	free(sub);
	free(ans);
	free(claim);
	free(call);
	PQclear(r);
}

static int cmd_latency(void)
{
	const struct target *t = &targets[0];
	int fd = connect_to(t, false);
	if (fd < 0) {
		fprintf(stderr, "loadgen: cannot connect to %s\n", t->hostport);
		return 1;
	}
	int64_t *lat = calloc((size_t)nruns, sizeof *lat);
	int64_t *w0 = calloc((size_t)nruns, sizeof *w0), *w1 = calloc((size_t)nruns, sizeof *w1);
	char *buf = NULL;
	size_t cap = 0;
	long bad = 0;
	for (long i = -warmup; i < nruns; i++) {
		size_t len;
		long id = i + warmup; /* ids from 0, warm-up runs included */
		char *req = submit_request(t, id, &len);
		const char *body;
		size_t blen;
		int64_t wall0 = wall_us(), t0 = mono_us();
		int st = roundtrip(fd, req, len, &buf, &cap, &body, &blen);
		free(req);
		if (st != 201) {
			fprintf(stderr, "loadgen: submit %s-%ld: HTTP %d\n", prefix, id, st);
			bad++;
			if (st < 0)
				return 1;
			continue;
		}
		char get[512];
		int gl = snprintf(get, sizeof get,
				  "GET /v1/runs/%s-%ld?wait_ms=30000 HTTP/1.1\r\nHost: %s\r\n\r\n",
				  prefix, id, t->hostport);
		st = roundtrip(fd, get, (size_t)gl, &buf, &cap, &body, &blen);
		int64_t t1 = mono_us(), wall1 = wall_us();
		const char *s = st == 200 ? memmem(body, blen, "\"status\"", 8) : NULL;
		size_t rest = s ? blen - (size_t)(s - body) : 0;
		bool ok =
			s != NULL && memmem(s, rest < 40 ? rest : 40, "\"succeeded\"", 11) != NULL;
		if (!ok) {
			fprintf(stderr, "loadgen: run %s-%ld not succeeded: HTTP %d %.*s\n", prefix,
				id, st, (int)(blen > 300 ? 300 : blen), body);
			bad++;
			continue;
		}
		if (i >= 0) {
			lat[i] = t1 - t0;
			w0[i] = wall0;
			w1[i] = wall1;
		}
	}
	close(fd);
	long n = nruns;
	qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += (double)lat[i];
	printf("count=%ld\nfailed=%ld\np50_ms=%.2f\np90_ms=%.2f\np99_ms=%.2f\nmax_ms=%.2f\nmean_ms="
	       "%.2f\n",
	       n, bad, pct(lat, n, 0.50), pct(lat, n, 0.90), pct(lat, n, 0.99), pct(lat, n, 1.0),
	       n ? sum / (double)n / 1000.0 : 0);
	if (outfile != NULL) {
		FILE *f = fopen(outfile, "w");
		if (f == NULL) {
			perror(outfile);
			return 1;
		}
		for (long i = 0; i < n; i++)
			fprintf(f, "%.3f\n", (double)lat[i] / 1000.0);
		fclose(f);
	}
	if (conninfo != NULL) {
		PGconn *pg = db_open();
		char sql[512];
		snprintf(sql, sizeof sql,
			 "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d), "
			 "percentile_cont(0.99) WITHIN GROUP (ORDER BY d) FROM ("
			 " SELECT extract(epoch FROM finished_at - created_at) * 1000 AS d FROM run"
			 " WHERE run_id LIKE '%s-%%' AND substr(run_id, %zu)::int >= %d) x",
			 prefix, strlen(prefix) + 2, warmup);
		PGresult *r = PQexec(pg, sql);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
			printf("server_p50_ms=%.2f\nserver_p99_ms=%.2f\n",
			       atof(PQgetvalue(r, 0, 0)), atof(PQgetvalue(r, 0, 1)));
		else
			fprintf(stderr, "loadgen: %s", PQerrorMessage(pg));
		PQclear(r);
		breakdown(pg, w0, w1);
		PQfinish(pg);
	}
	free(w0);
	free(w1);
	free(lat);
	free(buf);
	return bad == 0 ? 0 : 1;
}

/* ---- rate (the soak) ---------------------------------------------------- */

#define POLL_US 250000 /* how often finished runs are looked up */
#define POLL_MAX 20000 /* run ids per look-up */
#define LATE_US 10000  /* a submission this late counts as late */

/* Run i is due at t0 + i / rate. */
static int64_t due_offset_us(long i)
{
	return (int64_t)((double)i * 1e6 / rate);
}

/* VmRSS of pid in KiB, 0 when unknown. */
static long rss_kib(long pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	FILE *f = fopen(path, "r");
	long v = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "VmRSS:", 6) == 0)
			v = atol(line + 6);
	fclose(f);
	return v;
}

/* Rate mode: sends run i on c (c is idle, connected or not). */
static void rate_start(struct conn *c, long i)
{
	c->run = i;
	c->retries = 0;
	c->req = submit_request(&targets[c->target], i, &c->req_len);
	c->req_off = 0;
	rr[i].state = RUN_SENDING;
	if (c->fd >= 0) {
		conn_arm(c, EPOLLOUT);
	} else if (!conn_open(c)) {
		fprintf(stderr, "loadgen: cannot connect to %s\n", targets[c->target].hostport);
		failed++;
		rr[i].state = RUN_REJECTED;
		free(c->req);
		c->req = NULL;
		conn_idle(c);
	}
}

struct sample {
	double t_s;     /* since the start */
	long long db;   /* pg_database_size, bytes */
	long rss;       /* hookflow VmRSS, KiB */
	long submitted; /* runs sent so far */
};

/* What the check of finished runs found wrong. */
static long not_succeeded, dup_settled, wrong_steps;

/* One row per run just found terminal: run_id, finished_at (us), whether it
 * succeeded with its last step, its attempts and distinct attempts, its settled
 * attempts and distinct settled steps. */
static const char poll_sql[] =
	"SELECT r.run_id, (extract(epoch FROM r.finished_at) * 1000000)::bigint,"
	" r.status = 'succeeded' AND r.final_step = $2::int - 1, a.n, a.nd, a.s, a.sd"
	" FROM run r CROSS JOIN LATERAL ("
	"  SELECT count(*) AS n, count(DISTINCT (generation, step, attempt)) AS nd,"
	"   count(*) FILTER (WHERE result IN ('continue','succeed','fail','cancel')) AS s,"
	"   count(DISTINCT (generation, step)) FILTER"
	"    (WHERE result IN ('continue','succeed','fail','cancel')) AS sd"
	"  FROM step_attempt x WHERE x.run_id = r.run_id) a"
	" WHERE r.run_id = ANY ($1::text[]) AND r.status IN ('succeeded','failed','cancelled')";

static void poll_result(PGresult *r)
{
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "loadgen: look-up of finished runs failed: %s",
			PQresultErrorMessage(r));
		return;
	}
	size_t pl = strlen(prefix);
	for (int k = 0; k < PQntuples(r); k++) {
		const char *id = PQgetvalue(r, k, 0);
		if (strncmp(id, prefix, pl) != 0 || id[pl] != '-')
			continue;
		long i = atol(id + pl + 1);
		if (i < 0 || i >= nruns || rr[i].state != RUN_ACCEPTED)
			continue;
		rr[i].fin_us = strtoll(PQgetvalue(r, k, 1), NULL, 10);
		rr[i].state = RUN_DONE;
		open_runs--;
		long n = atol(PQgetvalue(r, k, 3)), nd = atol(PQgetvalue(r, k, 4));
		long st = atol(PQgetvalue(r, k, 5)), sd = atol(PQgetvalue(r, k, 6));
		if (strcmp(PQgetvalue(r, k, 2), "t") != 0) {
			if (not_succeeded++ < 5)
				fprintf(stderr,
					"loadgen: run %s did not succeed at its last step\n", id);
		}
		if (n != nd || st != sd) {
			if (dup_settled++ < 5)
				fprintf(stderr,
					"loadgen: run %s: an attempt or a step settled twice (%ld "
					"attempts, %ld distinct; %ld settled, %ld distinct "
					"steps)\n",
					id, n, nd, st, sd);
		} else if (st != steps) {
			if (wrong_steps++ < 5)
				fprintf(stderr, "loadgen: run %s: %ld steps settled, want %d\n", id,
					st, steps);
		}
	}
}

/* Latencies (us) of the runs finished in [from_us, to_us) after the start,
 * sorted, into *out; returns how many. */
static long window(int64_t t0_wall, int64_t from_us, int64_t to_us, int64_t *out)
{
	long n = 0;
	for (long i = 0; i < nruns; i++) {
		if (rr[i].state != RUN_DONE)
			continue;
		int64_t rel = rr[i].fin_us - t0_wall;
		if (rel < from_us || rel >= to_us)
			continue;
		int64_t l = rr[i].fin_us - (t0_wall + due_offset_us(i));
		out[n++] = l > 0 ? l : 0;
	}
	qsort(out, (size_t)n, sizeof *out, cmp_i64);
	return n;
}

static int cmd_rate(void)
{
	if (rate <= 0 || seconds <= 0 || conninfo == NULL || interval_s <= 0)
		die("rate needs -r RUNS_PER_S, -s SECONDS and -d CONNINFO");
	nruns = (long)(rate * seconds);
	if (nruns < 1)
		die("rate: fewer than one run in all");
	rr = calloc((size_t)nruns, sizeof *rr);
	idle = calloc((size_t)nconns, sizeof *idle);
	struct conn *cs = calloc((size_t)nconns, sizeof *cs);
	int nopen = 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);

	PGconn *pg = db_open();
	/* a look-up that hangs must not hang the soak: it fails, the next retries */
	PGresult *pr = PQexec(pg, "SET statement_timeout = '30s'");
	PQclear(pr);
	/* The look-up goes by primary key. Planned on the soak's new, never
	 * analysed database, it scanned the whole history table instead, every
	 * 250 ms, until autovacuum's first ANALYZE replanned it a minute or
	 * more in: the first minute measured the look-up, not hookflow. */
	pr = PQexec(pg, "SET enable_seqscan = off");
	PQclear(pr);
	pr = PQprepare(pg, "poll", poll_sql, 0, NULL);
	if (PQresultStatus(pr) != PGRES_COMMAND_OK) {
		fprintf(stderr, "loadgen: prepare failed: %s", PQerrorMessage(pg));
		return 1;
	}
	PQclear(pr);
	/* the database connection is served by the same epoll loop: one query at
	 * a time, sent asynchronously, so that submissions never wait for it */
	static struct conn pg_tag;
	struct epoll_event pev = {.events = EPOLLIN, .data.ptr = &pg_tag};
	epoll_ctl(epfd, EPOLL_CTL_ADD, PQsocket(pg), &pev);
	enum { Q_NONE, Q_POLL, Q_SIZE } q = Q_NONE;

	int nsamples_max = seconds / interval_s, nsamples = 0;
	struct sample *samples = calloc((size_t)nsamples_max + 1, sizeof *samples);
	size_t idcap = (size_t)POLL_MAX * (strlen(prefix) + 24) + 8;
	char *ids = malloc(idcap);
	char steps_s[16];
	snprintf(steps_s, sizeof steps_s, "%d", steps);
	long lo = 0, cursor = 0, late = 0, polls = 0;
	int64_t max_lag = 0;

	int64_t t0_wall = wall_us();
	int64_t t0 = mono_us();
	start_us = t0;
	int64_t next_poll = t0 + POLL_US, next_sample = t0 + (int64_t)interval_s * 1000000;
	int64_t end = t0 + (int64_t)seconds * 1000000;
	int64_t deadline = end + (int64_t)timeout_s * 1000000;
	struct epoll_event evs[256];
	bool drained = false;
	for (;;) {
		int64_t now = mono_us();
		/* submissions: every run that came due, each on an idle connection
		 * or a new one; the latency counts from when it came due, so a late
		 * submission is not hidden (no coordinated omission) */
		bool starved = false;
		while (next_run < nruns && t0 + due_offset_us(next_run) <= now) {
			struct conn *c = NULL;
			if (nidle > 0) {
				c = idle[--nidle];
			} else if (nopen < nconns) {
				c = &cs[nopen];
				c->target = nopen % ntargets;
				c->fd = -1;
				nopen++;
			} else {
				starved = true;
				break;
			}
			int64_t lag = now - (t0 + due_offset_us(next_run));
			late += lag > LATE_US;
			if (lag > max_lag)
				max_lag = lag;
			rate_start(c, next_run++);
		}
		/* the database: a sample at each interval, else a look-up of the
		 * runs accepted and not yet seen terminal */
		if (q == Q_NONE && nsamples < nsamples_max && now >= next_sample) {
			struct sample *sm = &samples[nsamples];
			sm->t_s = (double)(now - t0) / 1e6;
			sm->rss = watch_pid > 0 ? rss_kib(watch_pid) : 0;
			sm->submitted = next_run;
			if (!PQsendQuery(pg, "SELECT pg_database_size(current_database())")) {
				fprintf(stderr, "loadgen: database: %s", PQerrorMessage(pg));
				return 1;
			}
			q = Q_SIZE;
			next_sample += (int64_t)interval_s * 1000000;
		} else if (q == Q_NONE && now >= next_poll) {
			next_poll = now + POLL_US;
			while (lo < next_run &&
			       (rr[lo].state == RUN_DONE || rr[lo].state == RUN_REJECTED))
				lo++;
			if (cursor < lo)
				cursor = lo;
			size_t len = 0;
			long n = 0, i;
			ids[len++] = '{';
			for (i = cursor; i < next_run && n < POLL_MAX; i++) {
				if (rr[i].state != RUN_ACCEPTED)
					continue;
				len += (size_t)snprintf(ids + len, idcap - len, "%s%s-%ld",
							n ? "," : "", prefix, i);
				n++;
			}
			/* more than POLL_MAX waiting: the next look-up goes on from here */
			cursor = n == POLL_MAX ? i : lo;
			ids[len++] = '}';
			ids[len] = '\0';
			if (n > 0) {
				const char *p[2] = {ids, steps_s};
				if (!PQsendQueryPrepared(pg, "poll", 2, p, NULL, NULL, 0)) {
					fprintf(stderr, "loadgen: database: %s",
						PQerrorMessage(pg));
					return 1;
				}
				q = Q_POLL;
				polls++;
			}
		}
		/* the end: everything submitted and answered, every accepted run seen
		 * terminal, every sample taken (or the drain deadline passed) */
		bool sending = false;
		for (int k = 0; k < nopen; k++)
			sending |= cs[k].run >= 0;
		if (next_run == nruns && !sending && q == Q_NONE &&
		    (nsamples == nsamples_max || now > deadline)) {
			if (open_runs == 0) {
				drained = true;
				break;
			}
			if (now > deadline)
				break;
		}
		/* wait for the next due run, look-up or sample, or for I/O */
		int64_t wake = next_poll;
		if (nsamples < nsamples_max && next_sample < wake)
			wake = next_sample;
		if (next_run < nruns && !starved && t0 + due_offset_us(next_run) < wake)
			wake = t0 + due_offset_us(next_run);
		int64_t wait_us = wake - mono_us();
		int timeout = wait_us <= 0 ? 0 : (int)((wait_us + 999) / 1000);
		int ne = epoll_wait(epfd, evs, 256, timeout);
		for (int k = 0; k < ne; k++) {
			if (evs[k].data.ptr != &pg_tag) {
				conn_event(evs[k].data.ptr, evs[k].events);
				continue;
			}
			if (!PQconsumeInput(pg)) {
				fprintf(stderr, "loadgen: database: %s", PQerrorMessage(pg));
				return 1;
			}
			while (q != Q_NONE && !PQisBusy(pg)) {
				PGresult *r = PQgetResult(pg);
				if (r == NULL) {
					q = Q_NONE;
					break;
				}
				if (q == Q_POLL) {
					poll_result(r);
				} else if (PQresultStatus(r) == PGRES_TUPLES_OK) {
					struct sample *sm = &samples[nsamples++];
					sm->db = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
					fprintf(stderr,
						"loadgen: t=%.0fs submitted=%ld finished=%ld "
						"waiting=%ld "
						"db=%.1f MiB rss=%.1f MiB\n",
						sm->t_s, sm->submitted, sm->submitted - open_runs,
						open_runs, (double)sm->db / 1048576.0,
						(double)sm->rss / 1024.0);
				} else {
					fprintf(stderr, "loadgen: database size: %s",
						PQresultErrorMessage(r));
					nsamples++;
				}
				PQclear(r);
			}
		}
	}
	int64_t t_end = mono_us();
	PQfinish(pg);

	/* per interval: runs finished in it (by finished_at), their latency */
	long finished = 0, lost = 0;
	for (long i = 0; i < nruns; i++) {
		finished += rr[i].state == RUN_DONE;
		lost += rr[i].state == RUN_ACCEPTED || rr[i].state == RUN_SENDING;
	}
	int64_t *lat = malloc(((size_t)nruns + 1) * sizeof *lat);
	if (outfile != NULL) {
		FILE *f = fopen(outfile, "w");
		if (f == NULL) {
			perror(outfile);
			return 1;
		}
		fprintf(f, "# t_s runs_per_s transitions_per_s p50_ms p99_ms db_mib rss_mib "
			   "submitted finished\n");
		long cum = 0;
		for (int k = 0; k < nsamples; k++) {
			int64_t from = (int64_t)k * interval_s * 1000000;
			long n = window(t0_wall, from, from + (int64_t)interval_s * 1000000, lat);
			cum += n;
			fprintf(f, "%d %.1f %.1f %.2f %.2f %.1f %.1f %ld %ld\n",
				(k + 1) * interval_s, (double)n / interval_s,
				(double)n * steps / interval_s, pct(lat, n, 0.50),
				pct(lat, n, 0.99), (double)samples[k].db / 1048576.0,
				(double)samples[k].rss / 1024.0, samples[k].submitted, cum);
		}
		fclose(f);
	}
	/* the first and the last minute (the whole soak when shorter) */
	int w = seconds < 60 ? seconds : 60;
	int64_t w_us = (int64_t)w * 1000000, s_us = (int64_t)seconds * 1000000;
	long n = window(t0_wall, 0, w_us, lat);
	printf("window_s=%d\nfirst_runs_per_s=%.1f\nfirst_p50_ms=%.2f\nfirst_p99_ms=%.2f\n", w,
	       (double)n / w, pct(lat, n, 0.50), pct(lat, n, 0.99));
	n = window(t0_wall, s_us - w_us, s_us, lat);
	printf("last_runs_per_s=%.1f\nlast_p50_ms=%.2f\nlast_p99_ms=%.2f\n", (double)n / w,
	       pct(lat, n, 0.50), pct(lat, n, 0.99));
	n = window(t0_wall, INT64_MIN / 2, INT64_MAX / 2, lat);
	printf("p50_ms=%.2f\np90_ms=%.2f\np99_ms=%.2f\nmax_ms=%.2f\n", pct(lat, n, 0.50),
	       pct(lat, n, 0.90), pct(lat, n, 0.99), pct(lat, n, 1.0));
	printf("rate=%.1f\nseconds=%d\nruns=%ld\naccepted=%ld\nrejected=%ld\nfinished=%ld\n"
	       "lost=%ld\nnot_succeeded=%ld\ndup_settled=%ld\nwrong_steps=%ld\n",
	       rate, seconds, nruns, accepted + resubmitted, failed, finished, lost, not_succeeded,
	       dup_settled, wrong_steps);
	printf("late_submissions=%ld\nmax_lag_ms=%.1f\nconns=%d\nlookups=%ld\ndrain_s=%.3f\n", late,
	       (double)max_lag / 1000.0, nopen, polls, (double)(t_end - end) / 1e6);
	if (!drained)
		fprintf(stderr,
			"loadgen: %ld runs accepted but not seen terminal %d s after the end\n",
			lost, timeout_s);
	free(lat);
	free(samples);
	free(ids);
	return lost == 0 && not_succeeded == 0 && dup_settled == 0 && wrong_steps == 0 ? 0 : 1;
}

/* ---- main --------------------------------------------------------------- */

static void parse_targets(const char *list)
{
	char *copy = strdup(list);
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (ntargets == MAX_TARGETS)
			die("too many targets");
		char *colon = strrchr(tok, ':');
		if (colon == NULL)
			die("-u wants HOST:PORT");
		struct target *t = &targets[ntargets++];
		snprintf(t->hostport, sizeof t->hostport, "%s", tok);
		*colon = '\0';
		t->sa.sin_family = AF_INET;
		t->sa.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, strcmp(tok, "localhost") == 0 ? "127.0.0.1" : tok,
			      &t->sa.sin_addr) != 1)
			die("-u wants an IPv4 address");
	}
	free(copy);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: loadgen submit|latency|rate -u HOST:PORT[,...] -w WORKFLOW [options]");
	const char *cmd = argv[1];
	optind = 2;
	int opt;
	while ((opt = getopt(argc, argv, "u:w:n:c:p:b:Jd:T:W:D:o:r:s:S:i:P:k:")) != -1) {
		switch (opt) {
		case 'u':
			parse_targets(optarg);
			break;
		case 'w':
			workflow = optarg;
			break;
		case 'n':
			nruns = atol(optarg);
			break;
		case 'c':
			nconns = atoi(optarg);
			break;
		case 'p':
			prefix = optarg;
			break;
		case 'b':
			input_bytes = atol(optarg);
			break;
		case 'J':
			json_input = true;
			break;
		case 'd':
			conninfo = optarg;
			break;
		case 'T':
			timeout_s = atoi(optarg);
			break;
		case 'W':
			warmup = atoi(optarg);
			break;
		case 'D':
			due_ms = atol(optarg);
			break;
		case 'o':
			outfile = optarg;
			break;
		case 'r':
			rate = atof(optarg);
			break;
		case 's':
			seconds = atoi(optarg);
			break;
		case 'S':
			steps = atoi(optarg);
			break;
		case 'i':
			interval_s = atoi(optarg);
			break;
		case 'P':
			watch_pid = atol(optarg);
			break;
		case 'k':
			nkeys = atol(optarg);
			break;
		default:
			die("unknown option");
		}
	}
	if (ntargets == 0 || workflow == NULL || nruns < 1 || nconns < 1)
		die("need -u and -w (and -n, except for rate)");
	if (input_bytes > 0)
		pad = make_input(input_bytes, json_input);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int rc;
	if (strcmp(cmd, "submit") == 0)
		rc = cmd_submit();
	else if (strcmp(cmd, "latency") == 0)
		rc = cmd_latency();
	else if (strcmp(cmd, "rate") == 0)
		rc = cmd_rate();
	else
		die("unknown command (submit, latency or rate)");
	printf("cpu_ms=%ld\n", cpu_ms());
	return rc;
}
