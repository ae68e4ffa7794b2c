/* config: HOOKFLOW_* environment variables, parsed and validated once at start-up. */
#include "base/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crypt.h"
#include "base/log.h"
#include "base/tlsfiles.h"

static enum err_code int_var(const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out,
			     struct err *e)
{
	const char *v = getenv(name);
	if (v == NULL || *v == '\0') {
		*out = def;
		return ERR_OK;
	}
	errno = 0;
	char *end = NULL;
	long long n = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi)
		return err_set(e, ERR_INVALID, "%s: must be an integer between %lld and %lld", name,
			       (long long)lo, (long long)hi);
	*out = n;
	return ERR_OK;
}

/* HOOKFLOW_WORKERS' default: half the CPUs this process may run on (its
 * affinity mask, which a container's cpuset narrows), at least 1. One worker's
 * I/O thread drives thousands of calls at once; another worker pays only when
 * that thread is short of CPU, and each one more splits the database batches
 * (one transaction per worker cycle) and adds threads taking turns on the
 * cores. README, "Workers". */
static int default_workers(void)
{
	cpu_set_t set;
	long n = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	n /= 2;
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

static enum err_code parse_listen(struct config *c, const char *v, struct err *e)
{
	const char *colon = strrchr(v, ':');
	if (colon == NULL || colon == v)
		return err_set(e, ERR_INVALID, "HOOKFLOW_LISTEN: must be host:port");
	const char *h = v;
	size_t hl = (size_t)(colon - v);
	if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	char *end = NULL;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || end == colon + 1 || port < 0 || port > 65535)
		return err_set(e, ERR_INVALID, "HOOKFLOW_LISTEN: port must be 0..65535");
	c->listen_host = strndup(h, hl);
	c->listen_port = (int)port;
	unsigned char buf[16];
	if (inet_pton(AF_INET, c->listen_host, buf) != 1 &&
	    inet_pton(AF_INET6, c->listen_host, buf) != 1 &&
	    strcmp(c->listen_host, "localhost") != 0)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_LISTEN: host must be an IP address or localhost");
	return ERR_OK;
}

/* One entry of HOOKFLOW_API_TOKENS (`n` bytes at `p`, trimmed): an optional
 * scope (1 to 16 ASCII letters before the first ':', which must be `read`
 * or `admin`), then the token: 16 to 512 visible ASCII characters. A token
 * that itself starts with letters and a ':' is written with its scope
 * (admin:abc:...). Messages never quote the token. */
static enum err_code parse_token(struct config *c, int entry, const char *p, size_t n,
				 struct err *e)
{
	enum token_scope scope = TOKEN_SCOPE_ADMIN;
	size_t k = 0;
	while (k < n && k <= 16 && ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z')))
		k++;
	if (k > 0 && k <= 16 && k < n && p[k] == ':') {
		if (k == 4 && strncmp(p, "read", 4) == 0)
			scope = TOKEN_SCOPE_READ;
		else if (!(k == 5 && strncmp(p, "admin", 5) == 0))
			return err_set(
				e, ERR_INVALID,
				"HOOKFLOW_API_TOKENS: entry %d: unknown scope \"%.*s\" (read or "
				"admin; a token with a ':' of its own is written admin:<token>)",
				entry, (int)k, p);
		p += k + 1;
		n -= k + 1;
	}
	if (n < CONFIG_MIN_TOKEN || n > CONFIG_MAX_TOKEN)
		return err_set(
			e, ERR_INVALID,
			"HOOKFLOW_API_TOKENS: entry %d: each token needs %d to %d characters",
			entry, CONFIG_MIN_TOKEN, CONFIG_MAX_TOKEN);
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_API_TOKENS: entry %d: a token is visible ASCII "
				       "characters, without spaces",
				       entry);
	for (int i = 0; i < c->ntokens; i++)
		if (strlen(c->tokens[i]) == n && memcmp(c->tokens[i], p, n) == 0)
			return err_set(
				e, ERR_INVALID,
				"HOOKFLOW_API_TOKENS: entry %d repeats the token of entry %d",
				entry, i + 1);
	if (c->ntokens == CONFIG_MAX_TOKENS)
		return err_set(e, ERR_INVALID, "HOOKFLOW_API_TOKENS: at most %d tokens",
			       CONFIG_MAX_TOKENS);
	char *t = strndup(p, n);
	if (t == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	c->token_scopes[c->ntokens] = scope;
	c->tokens[c->ntokens++] = t;
	return ERR_OK;
}

/* HOOKFLOW_API_TOKENS: comma-separated entries; empty ones are skipped. */
static enum err_code parse_tokens(struct config *c, const char *v, struct err *e)
{
	const char *p = v;
	int entry = 0;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		while (n > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		entry++;
		if (n > 0 && parse_token(c, entry, p, n, e))
			return e->code;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return ERR_OK;
}

/* HOOKFLOW_EGRESS_PROXY: "http://host:port" or "https://host:port" (an
 * optional "/" after the port, nothing else). The host is a name, an IPv4
 * address or a bracketed IPv6 address; the port is required (curl's default
 * for proxies is 1080, which surprises); credentials are refused, so the value
 * is no secret. Stores the value without the "/" in c->egress_proxy. */
static enum err_code parse_egress_proxy(struct config *c, const char *v, struct err *e)
{
	static const char name[] = "HOOKFLOW_EGRESS_PROXY";
	size_t len = strlen(v);
	if (len > CONFIG_MAX_PROXY_URL)
		return err_set(e, ERR_INVALID, "%s: longer than %d bytes", name,
			       CONFIG_MAX_PROXY_URL);
	const char *p;
	if (strncmp(v, "http://", 7) == 0)
		p = v + 7;
	else if (strncmp(v, "https://", 8) == 0)
		p = v + 8;
	else
		return err_set(e, ERR_INVALID,
			       "%s: must be http://host:port or https://host:port (an HTTP proxy)",
			       name);
	if (strchr(p, '@') != NULL)
		return err_set(e, ERR_INVALID, "%s: credentials in the URL are not supported",
			       name);
	const char *host = p, *host_end;
	if (*p == '[') {
		host_end = strchr(p, ']');
		if (host_end == NULL)
			return err_set(e, ERR_INVALID, "%s: unterminated [IPv6 address]", name);
		char buf[INET6_ADDRSTRLEN];
		unsigned char addr[16];
		size_t n = (size_t)(host_end - p - 1);
		if (n >= sizeof buf)
			return err_set(e, ERR_INVALID, "%s: bad IPv6 address", name);
		memcpy(buf, p + 1, n);
		buf[n] = '\0';
		if (inet_pton(AF_INET6, buf, addr) != 1)
			return err_set(e, ERR_INVALID, "%s: bad IPv6 address", name);
		host_end++;
	} else {
		host_end = p;
		while ((*host_end >= 'a' && *host_end <= 'z') ||
		       (*host_end >= 'A' && *host_end <= 'Z') ||
		       (*host_end >= '0' && *host_end <= '9') || *host_end == '-' ||
		       *host_end == '.')
			host_end++;
		if (host_end == host)
			return err_set(e, ERR_INVALID, "%s: the host is missing", name);
	}
	if (*host_end != ':')
		return err_set(e, ERR_INVALID, "%s: must name the port (http://host:port)", name);
	errno = 0;
	char *end = NULL;
	long port = strtol(host_end + 1, &end, 10);
	if (host_end[1] < '0' || host_end[1] > '9' || errno != 0 || port < 1 || port > 65535)
		return err_set(e, ERR_INVALID, "%s: the port must be 1..65535", name);
	if (*end == '/' && end[1] == '\0')
		len--;
	else if (*end != '\0')
		return err_set(e, ERR_INVALID, "%s: nothing may follow host:port", name);
	c->egress_proxy = strndup(v, len);
	return c->egress_proxy ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

/* HOOKFLOW_CA_FILE, HOOKFLOW_CLIENT_CERT and HOOKFLOW_CLIENT_KEY: the files
 * are read and checked now (README "TLS"), so that a missing or broken one
 * stops start-up naming its variable. The CA file's certificates are kept
 * (they are added to the system's store of every webhook connection); the
 * client certificate and key are only checked here: libcurl reads them again
 * for each new connection, so renewed files at the same paths are taken
 * without a restart. */
static enum err_code parse_tls(struct config *c, struct err *e)
{
	const char *ca = getenv("HOOKFLOW_CA_FILE");
	const char *cert = getenv("HOOKFLOW_CLIENT_CERT");
	const char *key = getenv("HOOKFLOW_CLIENT_KEY");
	if (ca != NULL && *ca != '\0') {
		if (tlsfiles_read_cas("HOOKFLOW_CA_FILE", ca, &c->extra_cas, e))
			return e->code;
		if ((c->ca_file = strdup(ca)) == NULL)
			return err_set(e, ERR_INTERNAL, "out of memory");
	}
	bool has_cert = cert != NULL && *cert != '\0', has_key = key != NULL && *key != '\0';
	if (has_cert != has_key)
		return err_set(e, ERR_INVALID,
			       "%s: required with %s (a client certificate needs both)",
			       has_cert ? "HOOKFLOW_CLIENT_KEY" : "HOOKFLOW_CLIENT_CERT",
			       has_cert ? "HOOKFLOW_CLIENT_CERT" : "HOOKFLOW_CLIENT_KEY");
	if (!has_cert)
		return ERR_OK;
	if (tlsfiles_check_client("HOOKFLOW_CLIENT_CERT", cert, "HOOKFLOW_CLIENT_KEY", key, e))
		return e->code;
	c->client_cert = strdup(cert);
	c->client_key = strdup(key);
	if (c->client_cert == NULL || c->client_key == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	return ERR_OK;
}

/* HOOKFLOW_OTLP_ENDPOINT: the base URL of an OTLP/HTTP collector,
 * "http://host[:port][/path]" or https; spans go to <it>/v1/traces. No
 * credentials in the URL (the value is logged), no white space or control
 * characters. */
static enum err_code parse_otlp_endpoint(struct config *c, const char *v, struct err *e)
{
	static const char name[] = "HOOKFLOW_OTLP_ENDPOINT";
	size_t len = strlen(v);
	if (len > CONFIG_MAX_OTLP_URL)
		return err_set(e, ERR_INVALID, "%s: longer than %d bytes", name,
			       CONFIG_MAX_OTLP_URL);
	const char *p;
	if (strncmp(v, "http://", 7) == 0)
		p = v + 7;
	else if (strncmp(v, "https://", 8) == 0)
		p = v + 8;
	else
		return err_set(e, ERR_INVALID,
			       "%s: must be an http:// or https:// URL (the collector's OTLP/HTTP "
			       "base, e.g. http://127.0.0.1:4318)",
			       name);
	for (const char *q = v; *q; q++)
		if ((unsigned char)*q <= 0x20 || *q == 0x7f)
			return err_set(e, ERR_INVALID, "%s: white space or control character",
				       name);
	size_t host_len = strcspn(p, "/?#");
	if (host_len == 0)
		return err_set(e, ERR_INVALID, "%s: the host is missing", name);
	if (memchr(p, '@', host_len) != NULL)
		return err_set(e, ERR_INVALID, "%s: credentials in the URL are not supported",
			       name);
	if (strpbrk(p, "?#") != NULL)
		return err_set(e, ERR_INVALID, "%s: no query or fragment (/v1/traces is appended)",
			       name);
	c->otlp_endpoint = strdup(v);
	return c->otlp_endpoint ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

enum err_code config_load(struct config *c, bool need_db, struct err *e)
{
	int64_t n;
	const char *v = getenv("HOOKFLOW_DATABASE_URL");
	if (v != NULL && *v != '\0')
		c->database_url = strdup(v);
	else if (need_db)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_DATABASE_URL: required (a libpq connection string)");

	/* A transaction pooler (PgBouncer's pool_mode = transaction) runs each
	 * transaction of a connection in whichever server session is free: what
	 * needs one session throughout (LISTEN, the migrations' advisory lock)
	 * goes to PostgreSQL directly. README "PgBouncer". */
	v = getenv("HOOKFLOW_DATABASE_POOLER");
	if (v != NULL && *v != '\0') {
		if (strcmp(v, "transaction") == 0)
			c->db_transaction_pooler = true;
		else if (strcmp(v, "none") != 0)
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_DATABASE_POOLER: must be none or transaction");
	}
	v = getenv("HOOKFLOW_LISTEN_DATABASE_URL");
	if (v != NULL && *v != '\0') {
		if (strlen(v) > CONFIG_MAX_DATABASE_URL)
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_LISTEN_DATABASE_URL: longer than %d bytes",
				       CONFIG_MAX_DATABASE_URL);
		if (c->db_transaction_pooler && c->database_url != NULL &&
		    strcmp(v, c->database_url) == 0)
			return err_set(
				e, ERR_INVALID,
				"HOOKFLOW_LISTEN_DATABASE_URL: must reach PostgreSQL directly, "
				"not through the pooler of HOOKFLOW_DATABASE_URL");
		if ((c->listen_database_url = strdup(v)) == NULL)
			return err_set(e, ERR_INTERNAL, "out of memory");
	} else if (c->db_transaction_pooler && c->database_url != NULL) {
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_LISTEN_DATABASE_URL: required with "
			       "HOOKFLOW_DATABASE_POOLER=transaction (LISTEN and migrations need a "
			       "direct connection to PostgreSQL)");
	} else if (c->database_url != NULL &&
		   (c->listen_database_url = strdup(c->database_url)) == NULL) {
		return err_set(e, ERR_INTERNAL, "out of memory");
	}

	v = getenv("HOOKFLOW_LISTEN");
	if (parse_listen(c, v && *v ? v : "127.0.0.1:8080", e))
		return e->code;

	v = getenv("HOOKFLOW_API_TOKENS");
	if (v != NULL && parse_tokens(c, v, e))
		return e->code;

	v = getenv("HOOKFLOW_PUBLIC_URL");
	if (v != NULL && *v != '\0') {
		if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_PUBLIC_URL: must start with http:// or https://");
		size_t l = strlen(v);
		c->public_url = strndup(v, v[l - 1] == '/' ? l - 1 : l);
	} else {
		char buf[300];
		bool v6 = strchr(c->listen_host, ':') != NULL;
		snprintf(buf, sizeof buf, "http://%s%s%s:%d", v6 ? "[" : "", c->listen_host,
			 v6 ? "]" : "", c->listen_port);
		c->public_url = strdup(buf);
	}

	if (int_var("HOOKFLOW_WORKERS", default_workers(), 1, 64, &n, e))
		return e->code;
	c->workers = (int)n;
	if (int_var("HOOKFLOW_MAX_INFLIGHT", 1024, 1, 100000, &n, e))
		return e->code;
	c->max_inflight = (int)n;
	if (c->max_inflight < c->workers)
		c->workers = c->max_inflight;
	if (int_var("HOOKFLOW_LEASE_MS", 30000, 500, 3600000, &n, e))
		return e->code;
	c->lease_ms = (int)n;
	if (int_var("HOOKFLOW_MAX_BODY_BYTES", 1 << 20, 1024, 64LL << 20, &c->max_body_bytes, e))
		return e->code;
	if (int_var("HOOKFLOW_MAX_RESPONSE_BYTES", 1 << 20, 1024, 64LL << 20,
		    &c->max_response_bytes, e))
		return e->code;
	if (int_var("HOOKFLOW_MAX_PAGE_BYTES", 4 << 20, 1024, 1LL << 30, &c->max_page_bytes, e))
		return e->code;
	if (int_var("HOOKFLOW_RETENTION_MS", 0, 0, INT64_MAX / 2, &c->retention_ms, e))
		return e->code;
	if (int_var("HOOKFLOW_DEAD_RETENTION_MS", 7LL * 24 * 3600 * 1000, 0, INT64_MAX / 2,
		    &c->dead_retention_ms, e))
		return e->code;
	if (int_var("HOOKFLOW_SHUTDOWN_GRACE_MS", 10000, 0, 3600000, &n, e))
		return e->code;
	c->shutdown_grace_ms = (int)n;
	if (int_var("HOOKFLOW_HTTP_THREADS", 4, 1, 256, &n, e))
		return e->code;
	c->http_threads = (int)n;
	if (int_var("HOOKFLOW_MAX_CONNS_PER_IP", 256, 0, 100000, &n, e))
		return e->code;
	c->max_conns_per_ip = (int)n;
	if (int_var("HOOKFLOW_REQUEST_TIMEOUT_MS", 60000, 1000, 3600000, &n, e))
		return e->code;
	c->request_timeout_ms = (int)n;
	if (int_var("HOOKFLOW_DB_POOL", 8, 1, 256, &n, e))
		return e->code;
	c->db_pool = (int)n;
	if (int_var("HOOKFLOW_POLL_MS", 5000, 50, 600000, &n, e))
		return e->code;
	c->poll_ms = (int)n;

	v = getenv("HOOKFLOW_ENDPOINT_CONTROL");
	c->endpoint_control = true;
	if (v != NULL && *v != '\0') {
		if (strcmp(v, "off") == 0)
			c->endpoint_control = false;
		else if (strcmp(v, "on") != 0)
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_ENDPOINT_CONTROL: must be on or off");
	}
	if (int_var("HOOKFLOW_ENDPOINT_MAX_INFLIGHT", c->max_inflight, 1, 100000, &n, e))
		return e->code;
	c->endpoint_max_inflight = (int)n;
	if (int_var("HOOKFLOW_BREAKER_THRESHOLD", 10, 1, 100000, &n, e))
		return e->code;
	c->breaker_threshold = (int)n;
	if (int_var("HOOKFLOW_BREAKER_WINDOW_MS", 10000, 1, 3600000, &c->breaker_window_ms, e) ||
	    int_var("HOOKFLOW_BREAKER_COOLDOWN_MS", 1000, 1, 3600000, &c->breaker_cooldown_ms, e) ||
	    int_var("HOOKFLOW_BREAKER_COOLDOWN_MAX_MS", 60000, 1, 86400000,
		    &c->breaker_cooldown_max_ms, e))
		return e->code;
	if (c->breaker_cooldown_max_ms < c->breaker_cooldown_ms)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_BREAKER_COOLDOWN_MAX_MS: must not be less than "
			       "HOOKFLOW_BREAKER_COOLDOWN_MS");

	if (int_var("HOOKFLOW_MAX_CHILDREN", 100, 1, 10000, &n, e))
		return e->code;
	c->max_children = (int)n;
	if (int_var("HOOKFLOW_MAX_CHILD_DEPTH", 8, 1, 1000, &n, e))
		return e->code;
	c->max_child_depth = (int)n;

	if (netpolicy_init(&c->egress, getenv("HOOKFLOW_URL_ALLOW"), getenv("HOOKFLOW_URL_DENY"),
			   e))
		return e->code;
	v = getenv("HOOKFLOW_EGRESS_PROXY");
	if (v != NULL && *v != '\0' && parse_egress_proxy(c, v, e))
		return e->code;

	if (parse_tls(c, e))
		return e->code;

	v = getenv("HOOKFLOW_OTLP_ENDPOINT");
	if (v != NULL && *v != '\0' && parse_otlp_endpoint(c, v, e))
		return e->code;
	if (int_var("HOOKFLOW_OTLP_QUEUE", 8192, 16, 1048576, &n, e))
		return e->code;
	c->otlp_queue = (int)n;
	if (int_var("HOOKFLOW_OTLP_TIMEOUT_MS", 10000, 100, 600000, &n, e))
		return e->code;
	c->otlp_timeout_ms = (int)n;

	v = getenv("HOOKFLOW_ENCRYPTION_KEY");
	if (v != NULL && *v != '\0') {
		if (crypt_parse_key("HOOKFLOW_ENCRYPTION_KEY", v, c->encryption_key, e))
			return e->code;
		c->has_encryption_key = true;
	}

	/* Test-only: lets the integration tests stop the process at a chosen
	 * point ("exit_before_settle": after a webhook answered and its replay
	 * record, if any, was stored, before the step's settlement commits;
	 * "deaf_to_wake_and_done": the listener does not LISTEN on
	 * hookflow_wake and hookflow_done). Never set it in production. */
	/* Test-only: moves the schedules' clock (README "Schedules"). */
	if (int_var("HOOKFLOW_CLOCK_OFFSET_MS", 0, -3153600000000LL, 3153600000000LL,
		    &c->clock_offset_ms, e))
		return e->code;
	v = getenv("HOOKFLOW_TEST_FAULT");
	if (v != NULL && *v != '\0') {
		if (strcmp(v, "exit_before_settle") != 0 &&
		    strcmp(v, "deaf_to_wake_and_done") != 0 && strcmp(v, "settle_late") != 0)
			return err_set(e, ERR_INVALID, "HOOKFLOW_TEST_FAULT: unknown fault");
		c->test_fault = strdup(v);
	}

	v = getenv("HOOKFLOW_LOG_LEVEL");
	c->log_level = LOG_INFO;
	if (v != NULL && *v != '\0') {
		if (strcmp(v, "debug") == 0)
			c->log_level = LOG_DEBUG;
		else if (strcmp(v, "info") == 0)
			c->log_level = LOG_INFO;
		else if (strcmp(v, "warn") == 0)
			c->log_level = LOG_WARN;
		else if (strcmp(v, "error") == 0)
			c->log_level = LOG_ERROR;
		else
			return err_set(e, ERR_INVALID,
				       "HOOKFLOW_LOG_LEVEL: must be debug, info, warn or error");
	}
	v = getenv("HOOKFLOW_LOG_FORMAT");
	if (v != NULL && *v != '\0') {
		if (strcmp(v, "json") == 0)
			c->log_json = true;
		else if (strcmp(v, "text") != 0)
			return err_set(e, ERR_INVALID, "HOOKFLOW_LOG_FORMAT: must be text or json");
	}
	return ERR_OK;
}

bool config_listen_is_loopback(const struct config *c)
{
	if (strcmp(c->listen_host, "localhost") == 0 || strcmp(c->listen_host, "::1") == 0)
		return true;
	struct in_addr a;
	if (inet_pton(AF_INET, c->listen_host, &a) == 1)
		return (ntohl(a.s_addr) >> 24) == 127;
	return false;
}

void config_db_budget(const struct config *c, struct config_db_budget *out)
{
	out->workers = c->workers;
	out->submitter = 1;
	out->listener = 2;
	out->snapshot = 1;
	out->api_pool = c->db_pool;
	out->total = out->workers + out->submitter + out->listener + out->snapshot + out->api_pool;
}

void config_cleanup(struct config *c)
{
	free(c->database_url);
	free(c->listen_database_url);
	free(c->listen_host);
	free(c->public_url);
	free(c->test_fault);
	OPENSSL_cleanse(c->encryption_key, sizeof c->encryption_key);
	free(c->egress_proxy);
	free(c->ca_file);
	tlsfiles_free_cas(c->extra_cas);
	free(c->client_cert);
	free(c->client_key);
	free(c->otlp_endpoint);
	for (int i = 0; i < c->ntokens; i++)
		free(c->tokens[i]);
	memset(c, 0, sizeof *c);
}

/* True when `s` is 1..max bytes of visible ASCII (no space, no control). */
static bool visible_ascii(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

enum err_code config_client_load(struct client_config *c, struct err *e)
{
	const char *v = getenv("HOOKFLOW_URL");
	if (v == NULL || *v == '\0')
		v = "http://127.0.0.1:8080";
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_URL: must start with http:// or https:// (the service's "
			       "base URL, e.g. http://127.0.0.1:8080)");
	if (!visible_ascii(v, CONFIG_MAX_CLIENT_URL))
		return err_set(
			e, ERR_INVALID,
			"HOOKFLOW_URL: must be at most %d bytes of visible ASCII (no spaces)",
			CONFIG_MAX_CLIENT_URL);
	if (strpbrk(v, "?#") != NULL)
		return err_set(e, ERR_INVALID,
			       "HOOKFLOW_URL: must be a base URL without a query or fragment");
	const char *host = v + (v[4] == ':' ? 7 : 8);
	if (*host == '\0' || *host == '/')
		return err_set(e, ERR_INVALID, "HOOKFLOW_URL: must name a host after the scheme");
	size_t l = strlen(v);
	while (l > 0 && v[l - 1] == '/')
		l--;
	const char *t = getenv("HOOKFLOW_TOKEN");
	if (t != NULL && *t != '\0' && !visible_ascii(t, CONFIG_MAX_TOKEN))
		return err_set(
			e, ERR_INVALID,
			"HOOKFLOW_TOKEN: must be at most %d bytes of visible ASCII (no spaces)",
			CONFIG_MAX_TOKEN);
	c->url = strndup(v, l);
	c->token = t != NULL && *t != '\0' ? strdup(t) : NULL;
	if (c->url == NULL || (t != NULL && *t != '\0' && c->token == NULL)) {
		config_client_cleanup(c);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	return ERR_OK;
}

void config_client_cleanup(struct client_config *c)
{
	free(c->url);
	if (c->token != NULL)
		OPENSSL_cleanse(c->token, strlen(c->token));
	free(c->token);
	memset(c, 0, sizeof *c);
}
