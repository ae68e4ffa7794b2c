/* main: the hookflow binary: `hookflow serve` runs the service, `hookflow
 * migrate` brings the database's schema and engine up to this binary
 * (`--check` only compares), `hookflow version` says what it is, `hookflow
 * help` lists every command. The client commands (`runs`, `signal`,
 * `workflows`, `dead-letters`, `check-webhook`) are cmd/cli.c's: they read
 * no database configuration.
 *
 * Start-up order: configuration (validated, naming the bad variable), schema
 * migrations (retried while the database comes up), then the connection pool,
 * the dispatcher's workers, the listener and the HTTP server. SIGTERM or
 * SIGINT drains: the workers stop claiming, calls in flight get
 * HOOKFLOW_SHUTDOWN_GRACE_MS to finish, what finished is settled, the rest is
 * released for redelivery, and the process exits 0. */
#include <curl/curl.h>
#include <malloc.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/config.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timefmt.h"
#include "base/version.h"
#include "cmd/cli.h"
#include "db/conninfo.h"
#include "db/db.h"
#include "db/jobs.h"
#include "db/keys.h"
#include "db/migrate.h"
#include "db/secrets.h"
#include "db/stats.h"
#include "handlers/routes.h"
#include "service/dispatcher.h"
#include "service/http.h"
#include "service/keyring.h"
#include "service/listener.h"
#include "service/otlp.h"
#include "service/snapshot.h"
#include "service/submitter.h"
#include "service/waiters.h"
#include "service/webhook.h"

#define STARTUP_DB_WAIT_MS 60000

extern const char hookflow_openapi[];
extern const unsigned long hookflow_openapi_len;

static void die(const char *msg)
{
	fprintf(stderr, "hookflow: %s\n", msg);
	exit(2);
}

static void usage(void)
{
	cli_usage(stderr);
	exit(2);
}

/* Opens a connection and applies migrations, retrying while the database is
 * unreachable for up to STARTUP_DB_WAIT_MS. TLS refused (a certificate that
 * does not verify, a missing sslrootcert file...) stops at once, with
 * libpq's reason: waiting would not change it. The connection is the direct
 * one (HOOKFLOW_LISTEN_DATABASE_URL): the migrations hold a session advisory
 * lock across several transactions, which a transaction pooler would split
 * over server sessions. */
static struct db_conn *migrate(const struct config *cfg)
{
	int64_t give_up = timefmt_mono_ms() + STARTUP_DB_WAIT_MS;
	for (;;) {
		struct err e = {0};
		struct db_conn *c = NULL;
		struct db_migrate_report rep = {0};
		if (db_conn_open_startup(cfg->listen_database_url, &c, &e) == ERR_OK &&
		    db_migrate(c, &rep, &e) == ERR_OK) {
			log_info("main", "schema ready", "schema=%s applied=%d engine_loaded=%s",
				 db_schema_version(), rep.applied,
				 rep.engine_loaded ? "true" : "false");
			return c;
		}
		db_conn_free(c);
		if (e.code != ERR_UNAVAILABLE || timefmt_mono_ms() > give_up) {
			log_error("main", "cannot prepare the database", "error=\"%s\"", e.msg);
			exit(1);
		}
		log_warn("main", "database not reachable yet, retrying", "error=\"%s\"", e.msg);
		/* A second between tries. serve blocks SIGTERM and SIGINT for its
		 * sigwait: one that arrives meanwhile is taken here and stops the
		 * start-up at once (`docker stop` while the database is down). */
		sigset_t stop;
		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		struct timespec pause = {.tv_sec = 1};
		if (sigtimedwait(&stop, NULL, &pause) > 0) {
			log_info("main", "stopped while waiting for the database", NULL);
			exit(0);
		}
	}
}

/* Every webhook call and every client connection is a file descriptor:
 * take the hard limit, so HOOKFLOW_MAX_INFLIGHT calls and thousands of
 * clients fit without the operator raising the soft limit by hand. */
static void raise_fd_limit(const struct config *cfg)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)cfg->max_inflight + 1024)
		log_warn("main", "file descriptor limit is low for HOOKFLOW_MAX_INFLIGHT",
			 "limit=%llu max_inflight=%d", (unsigned long long)rl.rlim_cur,
			 cfg->max_inflight);
}

/* Warns when autovacuum is off or visits the database less often than every
 * NAPTIME_MAX_S: every step leaves two dead versions of its run row,
 * and until autovacuum comes each claim reads past them (README "Production
 * PostgreSQL", "Autovacuum and checkpoints"). */
#define NAPTIME_MAX_S 15
static void check_autovacuum(struct db_conn *c)
{
	struct db_autovacuum av;
	struct err e = {0};
	if (db_autovacuum(c, &av, &e)) {
		log_warn("main", "cannot read the autovacuum settings", "error=\"%s\"", e.msg);
		return;
	}
	if (!av.on || av.naptime_s > NAPTIME_MAX_S)
		log_warn("main", "autovacuum visits too seldom for a steady load",
			 "autovacuum=%s autovacuum_naptime_s=%d recommended_max_s=%d",
			 av.on ? "on" : "off", av.naptime_s, NAPTIME_MAX_S);
}

/* Warns when the server's max_connections cannot fit this instance's
 * connections next to those already open (other instances included). */
static void check_conn_room(const struct config *cfg, struct db_conn *c)
{
	struct config_db_budget b;
	config_db_budget(cfg, &b);
	if (cfg->db_transaction_pooler) {
		/* The server sees the pooler's sessions, not these. */
		log_info("main", "database connections through the pooler",
			 "needed=%d direct=1 (LISTEN)", b.total - 1);
		return;
	}
	struct db_conn_room room;
	struct err e = {0};
	if (db_conn_room(c, &room, &e)) {
		log_warn("main", "cannot read max_connections", "error=\"%s\"", e.msg);
		return;
	}
	int free_now = room.max_connections - room.reserved - room.in_use;
	if (b.total > free_now)
		log_warn("main", "max_connections cannot fit this instance's connections",
			 "needed=%d free=%d max_connections=%d superuser_reserved=%d in_use=%d "
			 "workers=%d api_pool=%d",
			 b.total, free_now, room.max_connections, room.reserved, room.in_use,
			 b.workers, b.api_pool);
	else
		log_info("main", "database connections", "needed=%d free=%d max_connections=%d",
			 b.total, free_now, room.max_connections);
}

/* glibc's allocator, set before any thread starts: blocks of 1 MiB and more
 * (a cycle's statement and result with large payloads) are mapped and
 * unmapped on their own, the rest come from the threads' arenas, which give
 * memory back above 32 MiB free at their top. By default glibc raises both
 * thresholds with the largest block freed (to 8 and 16 MiB after one cycle
 * of 100 KB payloads); the arenas of the I/O and database threads then kept
 * their high-water marks apart, and with 1,024 calls of 100 KB in flight
 * the peak RSS came out anywhere from 110 to 275 MiB, 112 to 165 with these
 * (CPU unchanged at 100 B and 100 KB: BENCHMARKS.md). */
static void tune_malloc(void)
{
#ifdef __GLIBC__
	if (mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 32 << 20) != 1)
		log_warn("main", "mallopt failed, glibc's default thresholds stay", NULL);
#endif
}

static int serve(struct config *cfg)
{
	tune_malloc();
	if (cfg->ntokens == 0 && !config_listen_is_loopback(cfg))
		die("HOOKFLOW_LISTEN: refusing to listen on a non-loopback address without "
		    "HOOKFLOW_API_TOKENS");

	/* Signals are taken by sigwait in this thread only; every thread
	 * created below inherits the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit(cfg);

	struct db_conn *c = migrate(cfg);
	struct err e = {0};
	struct keyring *keyring = keyring_new();
	if (keyring == NULL)
		die("out of memory");
	int sealed = 0;
	struct token_key *keys = NULL;
	size_t nkeys = 0;
	if (db_secrets_prepare(c, config_encryption_key(cfg), &sealed, &e) ||
	    db_keys_load(c, config_encryption_key(cfg), &keys, &nkeys, &e)) {
		log_error("main", "cannot read the stored secrets", "error=\"%s\"", e.msg);
		db_conn_free(c);
		keyring_free(keyring);
		return 1;
	}
	if (sealed > 0)
		log_info("main", "sealed the stored secrets with HOOKFLOW_ENCRYPTION_KEY",
			 "count=%d", sealed);
	keyring_replace(keyring, keys, nkeys);
	check_conn_room(cfg, c);
	check_autovacuum(c);
	db_conn_free(c);

	char host[64] = "host";
	gethostname(host, sizeof host - 1);
	host[strcspn(host, ".")] = '\0';
	unsigned char rnd[4];
	RAND_bytes(rnd, sizeof rnd);
	char rhex[9];
	ids_hex(rnd, sizeof rnd, rhex);
	char instance[128];
	snprintf(instance, sizeof instance, "%s-%d-%s", host, (int)getpid(), rhex);

	/* Spans (README "Traces"): the exporter starts before any thread that
	 * builds them, and every connection opened from here on reports the
	 * engine's. */
	if (otlp_start(cfg, instance, &e)) {
		log_error("main", "start-up failed", "error=\"%s\"", e.msg);
		keyring_free(keyring);
		return 1;
	}
	if (otlp_enabled())
		db_set_span_sink(otlp_engine_span);

	struct db_pool *pool = db_pool_new(cfg->database_url, cfg->db_pool);
	struct waiters *ws = waiters_new();
	struct dispatcher *d = ws ? dispatcher_new(cfg, instance, keyring, ws) : NULL;
	struct listener *l = d ? listener_new(cfg, d, ws, keyring) : NULL;
	struct submitter *sub = d ? submitter_new(cfg, d) : NULL;
	struct snapshot *snap = snapshot_new(cfg);
	if (pool == NULL || d == NULL || ws == NULL || l == NULL || sub == NULL || snap == NULL)
		die("out of memory");
	struct app app = {
		.cfg = cfg,
		.pool = pool,
		.dispatcher = d,
		.listener = l,
		.submitter = sub,
		.snapshot = snap,
		.openapi = hookflow_openapi,
		.openapi_len = hookflow_openapi_len,
		.keyring = keyring,
	};
	struct http_server *srv = NULL;
	int rc = 0, grace_ms = 0;
	if (dispatcher_start(d, &e) || listener_start(l, &e) || submitter_start(sub, &e) ||
	    snapshot_start(snap, &e) || http_server_start(&app, routes, routes_count, &srv, &e)) {
		/* What started stops below, as at a shutdown: nothing is in
		 * flight yet, so without a grace period. */
		log_error("main", "start-up failed", "error=\"%s\"", e.msg);
		rc = 1;
	} else {
		log_info("main", "hookflow serving",
			 "instance=%s listen=%s:%d public_url=%s workers=%d max_inflight=%d "
			 "egress=%s",
			 instance, cfg->listen_host, cfg->listen_port, cfg->public_url,
			 cfg->workers, cfg->max_inflight,
			 cfg->egress_proxy ? cfg->egress_proxy : "direct");
		if (cfg->ca_file != NULL || cfg->client_cert != NULL)
			log_info("main", "webhook TLS", "ca_file=%s client_cert=%s",
				 cfg->ca_file ? cfg->ca_file : "none",
				 cfg->client_cert ? cfg->client_cert : "none");
		int sig = 0;
		sigwait(&set, &sig);
		log_info("main", "shutting down", "signal=%d grace_ms=%d", sig,
			 cfg->shutdown_grace_ms);
		grace_ms = cfg->shutdown_grace_ms;
	}
	dispatcher_stop(d, grace_ms);
	listener_close_waits(l); /* long-polls answer with the run as it stands */
	submitter_stop(sub);     /* queued submissions are committed and answered */
	http_server_stop(srv);
	snapshot_free(snap);
	listener_stop(l);
	listener_free(l);
	waiters_free(ws);
	dispatcher_free(d);
	submitter_free(sub);
	db_pool_free(pool);
	keyring_free(keyring);
	otlp_stop(); /* what is queued is sent */
	if (rc == 0)
		log_info("main", "stopped", NULL);
	return rc;
}

/* `hookflow migrate --check`: compares the database with this binary and
 * prints every difference. Exit 0 when current, 1 when not (or the database
 * cannot be read). */
static int migrate_check(const struct config *cfg)
{
	struct err e = {0};
	struct db_conn *c = NULL;
	struct strbuf diff = {0};
	if (db_conn_open_startup(cfg->listen_database_url, &c, &e) == ERR_OK)
		db_schema_check(c, &diff, &e);
	db_conn_free(c);
	if (diff.len > 0)
		fputs(diff.data, stdout);
	if (e.code == ERR_OK)
		printf("current: schema %s, engine of hookflow %s\n", db_schema_version(),
		       HOOKFLOW_VERSION);
	else
		fprintf(stderr, "hookflow: %s\n", e.msg);
	strbuf_cleanup(&diff);
	return e.code == ERR_OK ? 0 : 1;
}

/* `hookflow rotate-keys`: a new delivery-token key becomes current; the
 * old ones stay accepted for `grace_ms`; every instance reloads its keys. */
static int rotate_keys(const struct config *cfg, int64_t grace_ms)
{
	struct err e = {0};
	struct db_conn *c = migrate(cfg);
	char kid[TOKEN_KID_MAX + 1];
	if (db_keys_rotate(c, config_encryption_key(cfg), grace_ms, kid, &e) == ERR_OK)
		printf("delivery-token key %s is current; the previous keys are accepted for %lld "
		       "ms "
		       "more\n",
		       kid, (long long)grace_ms);
	else
		fprintf(stderr, "hookflow: rotate-keys: %s\n", e.msg);
	db_conn_free(c);
	return e.code == ERR_OK ? 0 : 1;
}

/* The default grace of rotated delivery-token keys: longer than any token
 * lives (a step's timeout, at most an hour, plus its lease). */
#define ROTATE_GRACE_MS (2LL * 3600 * 1000)

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		cli_usage(stdout);
		return 0;
	}
	if (argc >= 2 && cli_is_command(argv[1])) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			die("curl_global_init failed");
		int rc = cli_main(argc, argv);
		curl_global_cleanup();
		return rc;
	}
	if (argc < 2 || argc > 4)
		usage();
	const char *cmd = argv[1];
	bool check = argc == 3 && strcmp(cmd, "migrate") == 0 && strcmp(argv[2], "--check") == 0;
	bool rotate = strcmp(cmd, "rotate-keys") == 0;
	int64_t grace_ms = ROTATE_GRACE_MS;
	if (rotate && argc == 4 && strcmp(argv[2], "--grace-ms") == 0) {
		char *end = NULL;
		long long v = strtoll(argv[3], &end, 10);
		if (end == argv[3] || *end != '\0' || v < 0 || v > 30LL * 24 * 3600 * 1000)
			die("rotate-keys: --grace-ms must be an integer from 0 to 2592000000 (30 "
			    "days)");
		grace_ms = v;
	} else if (argc > 2 && !check) {
		usage();
	}
	if (strcmp(cmd, "version") == 0) {
		char hash[65];
		db_engine_hash(hash);
		printf("hookflow %s (schema %s, engine %.12s)\n", HOOKFLOW_VERSION,
		       db_schema_version(), hash);
		return 0;
	}
	if (strcmp(cmd, "serve") != 0 && strcmp(cmd, "migrate") != 0 && !rotate)
		usage();

	struct config cfg = {0};
	struct err e = {0};
	if (config_load(&cfg, true, &e))
		die(e.msg);
	/* Every connection hookflow makes uses a completed URL (a connect
	 * timeout unless it sets one: db/conninfo.h). */
	const char *names[] = {"HOOKFLOW_DATABASE_URL", "HOOKFLOW_LISTEN_DATABASE_URL"};
	char **urls[] = {&cfg.database_url, &cfg.listen_database_url};
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		char *url = NULL;
		if (db_conninfo_complete(names[i], *urls[i], &url, &e))
			die(e.msg);
		free(*urls[i]);
		*urls[i] = url;
	}
	log_setup((enum log_level)cfg.log_level, cfg.log_json);
	db_set_transaction_pooler(cfg.db_transaction_pooler);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		die("curl_global_init failed");
	struct webhook_tls tls = {.extra_cas = cfg.extra_cas};
	if (webhook_tls_check(&tls, &e))
		die(e.msg);

	int rc;
	if (check) {
		rc = migrate_check(&cfg);
	} else if (rotate) {
		rc = rotate_keys(&cfg, grace_ms);
	} else if (strcmp(cmd, "migrate") == 0) {
		db_conn_free(migrate(&cfg));
		rc = 0;
	} else {
		rc = serve(&cfg);
	}
	curl_global_cleanup();
	config_cleanup(&cfg);
	return rc;
}
