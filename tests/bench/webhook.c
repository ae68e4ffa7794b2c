/* webhook: a fast hookflow step webhook for the benchmarks (epoll, HTTP/1.1 keep-alive, libc only).
 *
 * One or more threads, each with its own SO_REUSEPORT listener and epoll
 * instance, serve many non-blocking keep-alive connections. Requests:
 *
 *   POST /steps?n=N&delay_ms=D   a hookflow step call. The step number is read
 *                                from the body ("step":K) and the payload is
 *                                echoed: {"outcome":"continue","payload":P}
 *                                while K+1 < N, then {"outcome":"succeed",
 *                                "result":P}. N defaults to 1. With D > 0 the
 *                                answer is sent D ms later: the connection waits
 *                                in a timer heap, no thread per request.
 *   POST anything else           200 {} (terminal callbacks).
 *   GET  /healthz                200 ok
 *   GET  /stats                  200 JSON counters: requests, steps, callbacks,
 *                                open and peak connections, pending and peak
 *                                pending delayed answers.
 *   POST /stats/reset            zero the peaks and counters.
 *
 * Parsing is deliberately minimal: a request line, Content-Length and
 * Connection headers, a body. Chunked request bodies get 411. The payload is
 * found as the first "payload": key (hookflow writes run_id, workflow and the
 * numeric fields before it) and scanned as one JSON value.
 *
 * Usage: webhook [-a ADDR] [-p PORT] [-t THREADS] [-f PORTFILE]
 *   -p 0 picks a free port; -f writes the port there once listening.
 * SIGTERM/SIGINT stop it. RLIMIT_NOFILE is raised to its hard limit. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEADER_BYTES (64 * 1024)
#define MAX_BODY_BYTES (64 * 1024 * 1024)
#define READ_CHUNK 65536

struct conn {
	int fd;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	bool want_out; /* EPOLLOUT registered */
	bool close_after;
	bool delayed; /* an answer waits in the timer heap */
	int heap_idx;
	int64_t due_ms;
	char *pending; /* the delayed answer */
	size_t pending_len;
};

struct worker {
	int id;
	int lfd;
	int epfd;
	pthread_t th;
	struct conn **heap; /* min-heap on due_ms */
	int heap_len, heap_cap;
};

static struct {
	atomic_long requests, steps, succeeded, callbacks, other;
	atomic_long conns, conns_peak, pending, pending_peak;
} st;

static int max_fd; /* RLIMIT_NOFILE in force */
static volatile sig_atomic_t stopping;
static int nthreads = 1;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void peak(atomic_long *cur, atomic_long *pk, long delta)
{
	long v = atomic_fetch_add_explicit(cur, delta, memory_order_relaxed) + delta;
	long p = atomic_load_explicit(pk, memory_order_relaxed);
	while (v > p && !atomic_compare_exchange_weak(pk, &p, v))
		;
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (q == NULL) {
		fprintf(stderr, "webhook: out of memory\n");
		exit(1);
	}
	return q;
}

/* ---- timer heap ---------------------------------------------------------- */

static void heap_swap(struct worker *w, int a, int b)
{
	struct conn *t = w->heap[a];
	w->heap[a] = w->heap[b];
	w->heap[b] = t;
	w->heap[a]->heap_idx = a;
	w->heap[b]->heap_idx = b;
}

static void heap_up(struct worker *w, int i)
{
	while (i > 0) {
		int p = (i - 1) / 2;
		if (w->heap[p]->due_ms <= w->heap[i]->due_ms)
			break;
		heap_swap(w, p, i);
		i = p;
	}
}

static void heap_down(struct worker *w, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < w->heap_len && w->heap[l]->due_ms < w->heap[m]->due_ms)
			m = l;
		if (r < w->heap_len && w->heap[r]->due_ms < w->heap[m]->due_ms)
			m = r;
		if (m == i)
			return;
		heap_swap(w, i, m);
		i = m;
	}
}

static void heap_push(struct worker *w, struct conn *c)
{
	if (w->heap_len == w->heap_cap) {
		w->heap_cap = w->heap_cap ? w->heap_cap * 2 : 1024;
		w->heap = xrealloc(w->heap, (size_t)w->heap_cap * sizeof *w->heap);
	}
	c->heap_idx = w->heap_len;
	w->heap[w->heap_len++] = c;
	heap_up(w, c->heap_idx);
}

static void heap_remove(struct worker *w, struct conn *c)
{
	int i = c->heap_idx;
	if (i < 0)
		return;
	int last = --w->heap_len;
	if (i != last) {
		w->heap[i] = w->heap[last];
		w->heap[i]->heap_idx = i;
		heap_down(w, i);
		heap_up(w, i);
	}
	c->heap_idx = -1;
}

/* ---- connections --------------------------------------------------------- */

static void conn_close(struct worker *w, struct conn *c)
{
	if (c->delayed) {
		heap_remove(w, c);
		atomic_fetch_sub_explicit(&st.pending, 1, memory_order_relaxed);
	}
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c->pending);
	free(c);
	atomic_fetch_sub_explicit(&st.conns, 1, memory_order_relaxed);
}

static void out_append(struct conn *c, const char *p, size_t n)
{
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + n)
			cap *= 2;
		c->out = xrealloc(c->out, cap);
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

static void set_out_interest(struct worker *w, struct conn *c, bool on)
{
	if (c->want_out == on)
		return;
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = on;
}

/* Writes what it can; returns false when the connection was closed. */
static bool flush_out(struct worker *w, struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			set_out_interest(w, c, true);
			return true;
		}
		conn_close(w, c);
		return false;
	}
	c->out_off = c->out_len = 0;
	set_out_interest(w, c, false);
	if (c->close_after) {
		conn_close(w, c);
		return false;
	}
	return true;
}

/* A whole response (status line, headers, body) in a new buffer of *len bytes. */
static char *build_response(int status, const char *ctype, const char *body, size_t blen,
			    bool close_conn, size_t *len)
{
	const char *reason = status == 200   ? "OK"
			     : status == 404 ? "Not Found"
			     : status == 411 ? "Length Required"
			     : status == 413 ? "Payload Too Large"
					     : "Bad Request";
	char head[256];
	int h = snprintf(head, sizeof head,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
			 status, reason, ctype, blen, close_conn ? "Connection: close\r\n" : "");
	char *r = xrealloc(NULL, (size_t)h + blen);
	memcpy(r, head, (size_t)h);
	memcpy(r + h, body, blen);
	*len = (size_t)h + blen;
	return r;
}

static void reply(struct conn *c, int status, const char *ctype, const char *body, size_t blen)
{
	size_t len;
	char *r = build_response(status, ctype, body, blen, c->close_after, &len);
	out_append(c, r, len);
	free(r);
}

/* ---- the step protocol --------------------------------------------------- */

static long query_int(const char *target, size_t tlen, const char *name, long def)
{
	const char *q = memchr(target, '?', tlen);
	if (q == NULL)
		return def;
	size_t nl = strlen(name);
	const char *end = target + tlen;
	const char *p = q + 1;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;
		if ((size_t)(stop - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=')
			return strtol(p + nl + 1, NULL, 10);
		p = stop + 1;
	}
	return def;
}

/* The end of the JSON value starting at p (after white space), or NULL. */
static const char *json_value_end(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	if (p >= end)
		return NULL;
	if (*p == '"' || *p == '{' || *p == '[') {
		int depth = 0;
		bool in_str = false;
		for (; p < end; p++) {
			char ch = *p;
			if (in_str) {
				if (ch == '\\')
					p++;
				else if (ch == '"') {
					in_str = false;
					if (depth == 0)
						return p + 1;
				}
			} else if (ch == '"') {
				in_str = true;
			} else if (ch == '{' || ch == '[') {
				depth++;
			} else if (ch == '}' || ch == ']') {
				if (--depth == 0)
					return p + 1;
			}
		}
		return NULL;
	}
	while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n')
		p++;
	return p;
}

static const char *find(const char *hay, size_t n, const char *needle)
{
	return memmem(hay, n, needle, strlen(needle));
}

static void answer_step(struct worker *w, struct conn *c, const char *target, size_t tlen,
			const char *body, size_t blen)
{
	long n = query_int(target, tlen, "n", 1);
	long delay = query_int(target, tlen, "delay_ms", 0);
	const char *end = body + blen;
	const char *s = find(body, blen, "\"step\":");
	const char *pl = find(body, blen, "\"payload\":");
	const char *pe = pl ? json_value_end(pl + 10, end) : NULL;
	if (s == NULL || pl == NULL || pe == NULL) {
		static const char bad[] =
			"{\"error\":{\"message\":\"bench webhook: no step or payload\","
			"\"retryable\":false}}";
		reply(c, 400, "application/json", bad, sizeof bad - 1);
		return;
	}
	long step = strtol(s + 7, NULL, 10);
	const char *pv = pl + 10;
	bool last = step + 1 >= n;
	static const char cont[] = "{\"outcome\":\"continue\",\"payload\":";
	static const char succ[] = "{\"outcome\":\"succeed\",\"result\":";
	const char *pre = last ? succ : cont;
	size_t prelen = last ? sizeof succ - 1 : sizeof cont - 1;
	size_t vlen = (size_t)(pe - pv);
	size_t bl = prelen + vlen + 1;
	char *b = xrealloc(NULL, bl);
	memcpy(b, pre, prelen);
	memcpy(b + prelen, pv, vlen);
	b[bl - 1] = '}';
	atomic_fetch_add_explicit(&st.steps, 1, memory_order_relaxed);
	if (last)
		atomic_fetch_add_explicit(&st.succeeded, 1, memory_order_relaxed);
	if (delay > 0) {
		c->pending = build_response(200, "application/json", b, bl, c->close_after,
					    &c->pending_len);
		c->delayed = true;
		c->due_ms = now_ms() + delay;
		heap_push(w, c);
		peak(&st.pending, &st.pending_peak, 1);
	} else {
		reply(c, 200, "application/json", b, bl);
	}
	free(b);
}

static void answer_stats(struct conn *c)
{
	char b[512];
	int n = snprintf(b, sizeof b,
			 "{\"requests\":%ld,\"steps\":%ld,\"succeeded\":%ld,\"callbacks\":%ld,"
			 "\"other\":%ld,\"conns\":%ld,\"conns_peak\":%ld,\"pending\":%ld,"
			 "\"pending_peak\":%ld}",
			 atomic_load(&st.requests), atomic_load(&st.steps),
			 atomic_load(&st.succeeded), atomic_load(&st.callbacks),
			 atomic_load(&st.other), atomic_load(&st.conns),
			 atomic_load(&st.conns_peak), atomic_load(&st.pending),
			 atomic_load(&st.pending_peak));
	reply(c, 200, "application/json", b, (size_t)n);
}

static void stats_reset(void)
{
	atomic_store(&st.requests, 0);
	atomic_store(&st.steps, 0);
	atomic_store(&st.succeeded, 0);
	atomic_store(&st.callbacks, 0);
	atomic_store(&st.other, 0);
	atomic_store(&st.conns_peak, atomic_load(&st.conns));
	atomic_store(&st.pending_peak, atomic_load(&st.pending));
}

/* Parses and answers every complete request in c->in, unless an answer is
 * delayed (later requests on the connection wait for it, in order). Returns
 * false when the connection was closed. */
static bool process(struct worker *w, struct conn *c)
{
	size_t off = 0;
	while (!c->delayed && !c->close_after) {
		char *base = c->in + off;
		size_t avail = c->in_len - off;
		char *hend = avail >= 4 ? memmem(base, avail, "\r\n\r\n", 4) : NULL;
		if (hend == NULL) {
			if (avail > MAX_HEADER_BYTES) {
				c->close_after = true;
				reply(c, 413, "text/plain", "headers too large\n", 18);
			}
			break;
		}
		size_t hlen = (size_t)(hend - base) + 4;
		/* request line */
		char *sp1 = memchr(base, ' ', hlen);
		char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(base + hlen - sp1 - 1)) : NULL;
		if (sp1 == NULL || sp2 == NULL) {
			c->close_after = true;
			reply(c, 400, "text/plain", "bad request line\n", 17);
			break;
		}
		const char *method = base;
		size_t mlen = (size_t)(sp1 - base);
		const char *target = sp1 + 1;
		size_t tlen = (size_t)(sp2 - target);
		bool http10 = memmem(sp2, 12, "HTTP/1.0", 8) != NULL;
		/* headers */
		long long clen = 0;
		bool chunked = false, conn_close = http10;
		char *line = memchr(base, '\n', hlen) + 1;
		while (line < base + hlen - 2) {
			char *eol = memchr(line, '\n', (size_t)(base + hlen - line));
			size_t ll = (size_t)(eol - line);
			if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0)
				clen = strtoll(line + 15, NULL, 10);
			else if (ll > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0)
				chunked = true;
			else if (ll > 11 && strncasecmp(line, "connection:", 11) == 0) {
				const char *v = line + 11;
				while (*v == ' ')
					v++;
				if (strncasecmp(v, "close", 5) == 0)
					conn_close = true;
				else if (strncasecmp(v, "keep-alive", 10) == 0)
					conn_close = false;
			}
			line = eol + 1;
		}
		if (chunked || clen < 0 || clen > MAX_BODY_BYTES) {
			c->close_after = true;
			reply(c, chunked ? 411 : 413, "text/plain", "unsupported body\n", 17);
			break;
		}
		if (avail < hlen + (size_t)clen)
			break; /* body incomplete */
		const char *body = base + hlen;
		off += hlen + (size_t)clen;
		c->close_after = conn_close;
		atomic_fetch_add_explicit(&st.requests, 1, memory_order_relaxed);

		size_t plen = tlen;
		const char *q = memchr(target, '?', tlen);
		if (q)
			plen = (size_t)(q - target);
		bool post = mlen == 4 && memcmp(method, "POST", 4) == 0;
		if (post && plen == 6 && memcmp(target, "/steps", 6) == 0) {
			answer_step(w, c, target, tlen, body, (size_t)clen);
		} else if (post && plen == 12 && memcmp(target, "/stats/reset", 12) == 0) {
			stats_reset();
			reply(c, 200, "application/json", "{}", 2);
		} else if (post) {
			atomic_fetch_add_explicit(&st.callbacks, 1, memory_order_relaxed);
			reply(c, 200, "application/json", "{}", 2);
		} else if (plen == 6 && memcmp(target, "/stats", 6) == 0) {
			answer_stats(c);
		} else if (plen == 8 && memcmp(target, "/healthz", 8) == 0) {
			atomic_fetch_add_explicit(&st.other, 1, memory_order_relaxed);
			reply(c, 200, "text/plain", "ok\n", 3);
		} else {
			atomic_fetch_add_explicit(&st.other, 1, memory_order_relaxed);
			reply(c, 404, "text/plain", "not found\n", 10);
		}
	}
	if (off > 0) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	if (c->out_len > c->out_off)
		return flush_out(w, c);
	return true;
}

static void on_readable(struct worker *w, struct conn *c)
{
	for (;;) {
		if (c->in_cap - c->in_len < READ_CHUNK / 4) {
			size_t cap = c->in_cap ? c->in_cap * 2 : READ_CHUNK;
			if (cap > MAX_BODY_BYTES + MAX_HEADER_BYTES + READ_CHUNK) {
				conn_close(w, c);
				return;
			}
			c->in = xrealloc(c->in, cap);
			c->in_cap = cap;
		}
		ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n > 0) {
			c->in_len += (size_t)n;
			if (c->in_len < c->in_cap)
				break; /* drained for now */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_close(w, c); /* EOF or error */
		return;
	}
	process(w, c);
}

static void fire_timers(struct worker *w)
{
	int64_t now = now_ms();
	while (w->heap_len > 0 && w->heap[0]->due_ms <= now) {
		struct conn *c = w->heap[0];
		heap_remove(w, c);
		c->delayed = false;
		atomic_fetch_sub_explicit(&st.pending, 1, memory_order_relaxed);
		out_append(c, c->pending, c->pending_len);
		free(c->pending);
		c->pending = NULL;
		if (flush_out(w, c))
			process(w, c); /* pipelined requests that waited */
	}
}

static void accept_all(struct worker *w)
{
	for (;;) {
		int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				fprintf(stderr, "webhook: accept: %s\n", strerror(errno));
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct conn *c = calloc(1, sizeof *c);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->heap_idx = -1;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev);
		peak(&st.conns, &st.conns_peak, 1);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[512];
	while (!stopping) {
		int timeout = 500;
		if (w->heap_len > 0) {
			int64_t d = w->heap[0]->due_ms - now_ms();
			timeout = d < 0 ? 0 : d < timeout ? (int)d : timeout;
		}
		int n = epoll_wait(w->epfd, evs, 512, timeout);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == NULL) {
				accept_all(w);
				continue;
			}
			struct conn *c = evs[i].data.ptr;
			if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
				conn_close(w, c);
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && !flush_out(w, c))
				continue;
			if (evs[i].events & EPOLLIN)
				on_readable(w, c);
		}
		fire_timers(w);
	}
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int listen_on(const char *addr, int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 65535) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	const char *addr = "127.0.0.1", *portfile = NULL;
	int port = 0;
	int opt;
	while ((opt = getopt(argc, argv, "a:p:t:f:")) != -1) {
		switch (opt) {
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'f':
			portfile = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: webhook [-a ADDR] [-p PORT] [-t THREADS] [-f PORTFILE]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64)
		nthreads = 1;

	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	max_fd = rl.rlim_cur > 1 << 22 ? 1 << 22 : (int)rl.rlim_cur;
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	for (int i = 0; i < nthreads; i++) {
		struct worker *w = &ws[i];
		w->id = i;
		w->lfd = listen_on(addr, port);
		if (w->lfd < 0) {
			fprintf(stderr, "webhook: cannot listen on %s:%d: %s\n", addr, port,
				strerror(errno));
			return 1;
		}
		if (port == 0) { /* the other threads share the port picked for the first */
			struct sockaddr_in got;
			socklen_t gl = sizeof got;
			getsockname(w->lfd, (struct sockaddr *)&got, &gl);
			port = ntohs(got.sin_port);
		}
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &ev);
	}
	if (portfile) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
		FILE *f = fopen(tmp, "w");
		if (f == NULL || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 ||
		    rename(tmp, portfile) != 0) {
			fprintf(stderr, "webhook: cannot write %s\n", portfile);
			return 1;
		}
	}
	fprintf(stderr, "webhook: listening on %s:%d, %d thread(s), nofile %d\n", addr, port,
		nthreads, max_fd);
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (int i = 1; i < nthreads; i++)
		pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	worker_main(&ws[0]);
	for (int i = 1; i < nthreads; i++)
		pthread_join(ws[i].th, NULL);
	fprintf(stderr,
		"webhook: stopped; requests=%ld steps=%ld conns_peak=%ld pending_peak=%ld\n",
		atomic_load(&st.requests), atomic_load(&st.steps), atomic_load(&st.conns_peak),
		atomic_load(&st.pending_peak));
	return 0;
}
