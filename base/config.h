/* config: the service's configuration, read once from HOOKFLOW_* environment
 * variables (the only getenv in the service) and validated at start-up. */
#ifndef HOOKFLOW_CONFIG_H
#define HOOKFLOW_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "base/netpolicy.h"

struct stack_st_X509; /* OpenSSL's STACK_OF(X509) (base/tlsfiles.h) */

#define CONFIG_MAX_TOKENS 64
#define CONFIG_MAX_PROXY_URL 512
#define CONFIG_MAX_DATABASE_URL 4096
#define CONFIG_MAX_OTLP_URL 512
#define CONFIG_MIN_TOKEN 16
#define CONFIG_MAX_TOKEN 512

/* What an API token may do. */
enum token_scope {
	TOKEN_SCOPE_ADMIN = 0, /* everything (a token written without a scope) */
	TOKEN_SCOPE_READ,      /* GET only */
};

struct config {
	char *database_url;              /* HOOKFLOW_DATABASE_URL (required) */
	char *listen_database_url;       /* HOOKFLOW_LISTEN_DATABASE_URL: direct, for LISTEN and
					  * migrations; default HOOKFLOW_DATABASE_URL */
	bool db_transaction_pooler;      /* HOOKFLOW_DATABASE_POOLER none|transaction
					  * (README "PgBouncer") */
	char *listen_host;               /* HOOKFLOW_LISTEN host part, default 127.0.0.1 */
	int listen_port;                 /* HOOKFLOW_LISTEN port part, default 8080 */
	char *tokens[CONFIG_MAX_TOKENS]; /* HOOKFLOW_API_TOKENS: [read:|admin:]TOKEN,... */
	enum token_scope token_scopes[CONFIG_MAX_TOKENS];
	int ntokens;
	char *public_url;           /* HOOKFLOW_PUBLIC_URL, default http://<listen> */
	int workers;                /* HOOKFLOW_WORKERS, default CPUs / 2, at least 1 */
	int max_inflight;           /* HOOKFLOW_MAX_INFLIGHT, default 1024 (all workers) */
	int lease_ms;               /* HOOKFLOW_LEASE_MS, default 30000 */
	int64_t max_body_bytes;     /* HOOKFLOW_MAX_BODY_BYTES, default 1 MiB */
	int64_t max_response_bytes; /* HOOKFLOW_MAX_RESPONSE_BYTES, default 1 MiB */
	int64_t max_page_bytes;     /* HOOKFLOW_MAX_PAGE_BYTES, default 4 MiB */
	int64_t retention_ms;       /* HOOKFLOW_RETENTION_MS, default 0 (keep) */
	int64_t dead_retention_ms;  /* HOOKFLOW_DEAD_RETENTION_MS, default 7 days */
	int log_level;              /* HOOKFLOW_LOG_LEVEL debug|info|warn|error */
	bool log_json;              /* HOOKFLOW_LOG_FORMAT text|json */
	int shutdown_grace_ms;      /* HOOKFLOW_SHUTDOWN_GRACE_MS, default 10000 */
	int http_threads;           /* HOOKFLOW_HTTP_THREADS, default 4 */
	int max_conns_per_ip;       /* HOOKFLOW_MAX_CONNS_PER_IP, default 256; 0: no limit */
	int request_timeout_ms;     /* HOOKFLOW_REQUEST_TIMEOUT_MS, default 60000 */
	int db_pool;                /* HOOKFLOW_DB_POOL, default 8 */
	int poll_ms;                /* HOOKFLOW_POLL_MS: safety re-check interval, default 5000 */
	int64_t clock_offset_ms;    /* HOOKFLOW_CLOCK_OFFSET_MS: test-only, shifts the clock
				     * schedules are evaluated against; default 0 */
	/* Endpoints that push back (README "Flow control"): */
	bool endpoint_control;           /* HOOKFLOW_ENDPOINT_CONTROL on|off, default on */
	int endpoint_max_inflight;       /* HOOKFLOW_ENDPOINT_MAX_INFLIGHT: the allowance's
					    cap, default HOOKFLOW_MAX_INFLIGHT */
	int breaker_threshold;           /* HOOKFLOW_BREAKER_THRESHOLD, default 10 failures */
	int64_t breaker_window_ms;       /* HOOKFLOW_BREAKER_WINDOW_MS, default 10000 */
	int64_t breaker_cooldown_ms;     /* HOOKFLOW_BREAKER_COOLDOWN_MS, default 1000 */
	int64_t breaker_cooldown_max_ms; /* HOOKFLOW_BREAKER_COOLDOWN_MAX_MS, default 60000 */
	/* Child runs (README "Child runs"): */
	int max_children;        /* HOOKFLOW_MAX_CHILDREN: per step, default 100 */
	int max_child_depth;     /* HOOKFLOW_MAX_CHILD_DEPTH: levels below a root run, default 8 */
	struct netpolicy egress; /* HOOKFLOW_URL_ALLOW / HOOKFLOW_URL_DENY */
	bool has_encryption_key; /* HOOKFLOW_ENCRYPTION_KEY set */
	unsigned char encryption_key[32]; /* its 32 bytes: seals secrets at rest */
	char *egress_proxy;               /* HOOKFLOW_EGRESS_PROXY ("http://host:port") or NULL */
	/* TLS to webhooks (README "TLS"): */
	char *ca_file;                   /* HOOKFLOW_CA_FILE: PEM CAs trusted besides the
					    system's store, or NULL */
	struct stack_st_X509 *extra_cas; /* its certificates, read at start-up, or NULL */
	char *client_cert;               /* HOOKFLOW_CLIENT_CERT: PEM certificate, or NULL */
	char *client_key;                /* HOOKFLOW_CLIENT_KEY: its PEM key (both or neither) */
	/* Traces (README "Traces"): */
	char *otlp_endpoint; /* HOOKFLOW_OTLP_ENDPOINT: OTLP/HTTP base URL, or NULL: no export */
	int otlp_queue;      /* HOOKFLOW_OTLP_QUEUE: finished spans waiting, default 8192 */
	int otlp_timeout_ms; /* HOOKFLOW_OTLP_TIMEOUT_MS: one export request, default 10000 */
	char *test_fault;    /* HOOKFLOW_TEST_FAULT: test-only fault injection, or NULL */
};

/* The key that seals secrets at rest (HOOKFLOW_ENCRYPTION_KEY), or NULL
 * when none is configured. Borrowed from `c`. */
static inline const unsigned char *config_encryption_key(const struct config *c)
{
	return c->has_encryption_key ? c->encryption_key : NULL;
}

/* Reads and validates the environment into `c` (zeroed by the caller). On a
 * bad value returns ERR_INVALID with a message naming the variable. With
 * `need_db` false, HOOKFLOW_DATABASE_URL may be absent. Strings are owned by
 * `c`; release with config_cleanup. */
enum err_code config_load(struct config *c, bool need_db, struct err *e);

/* True when the listen host is a loopback address (127.0.0.0/8, ::1,
 * localhost). */
bool config_listen_is_loopback(const struct config *c);

/* The PostgreSQL connections one serving instance opens at most, by who
 * holds them (kept in step with the modules named). */
struct config_db_budget {
	int workers;   /* service/dispatcher.c: one per worker thread (HOOKFLOW_WORKERS) */
	int submitter; /* service/submitter.c: 1, the batched submissions */
	int listener;  /* service/listener.c: 2, LISTEN and the timer/scheduler's */
	int snapshot;  /* service/snapshot.c: 1, /readyz and /metrics gauges */
	int api_pool;  /* the API's pool, opened on demand (HOOKFLOW_DB_POOL) */
	int total;
};

/* Fills `out` from `c` (borrowed). */
void config_db_budget(const struct config *c, struct config_db_budget *out);

void config_cleanup(struct config *c);

/* ---- the command line client (README "Command line") ---------------- */

#define CONFIG_MAX_CLIENT_URL 2048

/* What `hookflow runs ...` and the other client commands talk to. Strings
 * owned by the struct; release with config_client_cleanup. */
struct client_config {
	char *url;   /* HOOKFLOW_URL without a trailing '/', default http://127.0.0.1:8080 */
	char *token; /* HOOKFLOW_TOKEN (sent as "Authorization: Bearer"), or NULL */
};

/* Reads HOOKFLOW_URL (http:// or https://, at most 2048 bytes of visible
 * ASCII, no query or fragment) and HOOKFLOW_TOKEN (at most 512 bytes of
 * visible ASCII) into `c` (zeroed by the caller). Nothing else is read: the
 * client needs no database. ERR_INVALID naming the variable on a bad value. */
enum err_code config_client_load(struct client_config *c, struct err *e);

/* Frees what `c` owns and zeroes it. */
void config_client_cleanup(struct client_config *c);

#endif
