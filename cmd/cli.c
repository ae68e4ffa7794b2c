/* cli: the client commands (runs, signal, workflows, dead-letters). */
#include "cmd/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/ids.h"
#include "base/strbuf.h"
#include "base/table.h"
#include "base/timefmt.h"
#include "cmd/check_webhook.h"
#include "cmd/client.h"

#define CLI_MAX_CURSOR 1024
#define CLI_MAX_ALL_ROWS 100000  /* --all stops (and fails) past this many rows */
#define CLI_MAX_PAGES 100000     /* --all: a server that never ends its pages */
#define CLI_CELL 40              /* code points of a table cell (the last column: 4x) */
#define CLI_VALUE 400            /* code points of a value in a vertical listing */
#define CLI_SERVER_TEXT 300      /* code points of a server's text in an error message */
#define CLI_LONGPOLL_MS 300000   /* GET /v1/runs/{id}?wait_ms=: the API's maximum */
#define CLI_LONGPOLL_SLACK 30000 /* the call's timeout beyond wait_ms */
#define CLI_MAX_WAIT_MS (30LL * 24 * 3600 * 1000)

/* ---- options --------------------------------------------------------- */

enum opt_bit {
	O_JSON = 1u << 0,
	O_LIMIT = 1u << 1,
	O_CURSOR = 1u << 2,
	O_ALL = 1u << 3,
	O_WORKFLOW = 1u << 4,
	O_STATUS = 1u << 5,
	O_GROUP = 1u << 6,
	O_CKEY = 1u << 7,
	O_AFTER = 1u << 8,
	O_BEFORE = 1u << 9,
	O_KIND = 1u << 10,
	O_FROM_STEP = 1u << 11,
	O_INPUT = 1u << 12,
	O_WAIT = 1u << 13,
	O_TIMEOUT = 1u << 14,
	O_NAME = 1u << 15,
};

#define O_PAGING (O_LIMIT | O_CURSOR | O_ALL)

static const struct optdef {
	const char *name;
	unsigned bit;
	bool arg;
} optdefs[] = {
	{"--json", O_JSON, false},          {"--limit", O_LIMIT, true},
	{"--cursor", O_CURSOR, true},       {"--all", O_ALL, false},
	{"--workflow", O_WORKFLOW, true},   {"--status", O_STATUS, true},
	{"--group", O_GROUP, true},         {"--concurrency-key", O_CKEY, true},
	{"--created-after", O_AFTER, true}, {"--created-before", O_BEFORE, true},
	{"--kind", O_KIND, true},           {"--from-step", O_FROM_STEP, true},
	{"--input", O_INPUT, true},         {"--wait", O_WAIT, false},
	{"--timeout-ms", O_TIMEOUT, true},  {"--name", O_NAME, true},
};

#define CLI_MAX_POS 2

/* A parsed command line. Strings are borrowed from argv; `input` is owned. */
struct opts {
	unsigned seen;
	long long limit;
	const char *cursor, *workflow, *status, *group, *ckey, *after, *before, *kind, *name;
	long long from_step;
	json_t *input;
	long long timeout_ms;
	const char *pos[CLI_MAX_POS];
	int npos;
};

static const char *const run_statuses[] = {"pending",    "scheduled", "waiting", "running",
					   "cancelling", "succeeded", "failed",  "cancelled"};

static enum err_code check_status_list(const char *v, struct err *e)
{
	const char *p = v;
	if (*p == '\0')
		return err_set(e, ERR_INVALID, "--status: must not be empty");
	for (;;) {
		size_t n = strcspn(p, ",");
		bool known = false;
		for (size_t i = 0; i < sizeof run_statuses / sizeof *run_statuses; i++)
			known |=
				strlen(run_statuses[i]) == n && strncmp(p, run_statuses[i], n) == 0;
		if (!known) {
			char q[64];
			ids_quote(p, n, q, sizeof q);
			return err_set(
				e, ERR_INVALID,
				"--status: %s is not a run status (pending, scheduled, "
				"waiting, running, cancelling, succeeded, failed, cancelled; "
				"several separated by commas)",
				q);
		}
		if (p[n] == '\0')
			return ERR_OK;
		p += n + 1;
	}
}

enum err_code cli_parse_int(const char *field, const char *text, long long lo, long long hi,
			    long long *out, struct err *e)
{
	errno = 0;
	char *end = NULL;
	long long v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
		return err_set(e, ERR_INVALID, "%s: must be an integer from %lld to %lld", field,
			       lo, hi);
	*out = v;
	return ERR_OK;
}

enum err_code cli_parse_json(const char *field, const char *text, size_t cap, json_t **out,
			     struct err *e)
{
	*out = NULL;
	size_t len = strlen(text);
	if (len > cap)
		return err_set(e, ERR_INVALID, "%s: exceeds %zu bytes", field, cap);
	json_error_t je;
	*out = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
	if (*out == NULL)
		return err_set(e, ERR_INVALID, "%s: not JSON: %s (line %d, column %d)", field,
			       je.text, je.line, je.column);
	return ERR_OK;
}

enum err_code cli_read_file(const char *field, const char *path, size_t cap, char **text,
			    struct err *e)
{
	*text = NULL;
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (f == NULL)
		return err_set(e, ERR_INVALID, "%s: cannot open %.200s: %s", field, path,
			       strerror(errno));
	struct strbuf b = {0};
	char buf[8192];
	size_t n;
	bool too_large = false;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
		if (b.len + n > cap) {
			too_large = true;
			break;
		}
		strbuf_add(&b, buf, n);
	}
	bool failed = ferror(f) != 0;
	if (f != stdin)
		fclose(f);
	if (too_large || failed || b.oom || memchr(b.data ? b.data : "", '\0', b.len) != NULL) {
		strbuf_cleanup(&b);
		if (too_large)
			return err_set(e, ERR_INVALID, "%s: %.200s exceeds %zu bytes", field, path,
				       cap);
		if (failed)
			return err_set(e, ERR_INVALID, "%s: cannot read %.200s", field, path);
		return err_set(e, ERR_INVALID, "%s: %.200s is not text (it holds a NUL byte)",
			       field, path);
	}
	*text = b.data != NULL ? strbuf_take(&b) : strdup("");
	return *text != NULL ? ERR_OK : err_set(e, ERR_INTERNAL, "out of memory");
}

static enum err_code opt_value(struct opts *o, unsigned bit, const char *name, const char *v,
			       struct err *e)
{
	int64_t when;
	switch (bit) {
	case O_LIMIT:
		return cli_parse_int(name, v, 1, 1000, &o->limit, e);
	case O_CURSOR:
		if (*v == '\0' || strlen(v) > CLI_MAX_CURSOR)
			return err_set(e, ERR_INVALID,
				       "--cursor: must be 1 to %d bytes (a page's "
				       "next_cursor)",
				       CLI_MAX_CURSOR);
		o->cursor = v;
		return ERR_OK;
	case O_WORKFLOW:
		o->workflow = v;
		return ids_check_workflow_name("--workflow", v, strlen(v), e);
	case O_STATUS:
		o->status = v;
		return check_status_list(v, e);
	case O_GROUP:
		o->group = v;
		return ids_check_run_id("--group", v, strlen(v), e);
	case O_CKEY:
		o->ckey = v;
		return ids_check_concurrency_key("--concurrency-key", v, strlen(v), e);
	case O_AFTER:
	case O_BEFORE:
		if (!timefmt_parse_rfc3339(v, &when))
			return err_set(e, ERR_INVALID,
				       "%s: must be an RFC 3339 time (2026-12-02T10:00:00Z)", name);
		*(bit == O_AFTER ? &o->after : &o->before) = v;
		return ERR_OK;
	case O_KIND:
		if (strcmp(v, "step") != 0 && strcmp(v, "callback") != 0)
			return err_set(e, ERR_INVALID, "--kind: must be step or callback");
		o->kind = v;
		return ERR_OK;
	case O_FROM_STEP:
		return cli_parse_int(name, v, 0, 2147483647, &o->from_step, e);
	case O_INPUT:
		return cli_parse_json("--input", v, CLI_MAX_JSON_ARG, &o->input, e);
	case O_TIMEOUT:
		return cli_parse_int(name, v, 1, CLI_MAX_WAIT_MS, &o->timeout_ms, e);
	case O_NAME:
		o->name = v;
		return ids_check_workflow_name("--name", v, strlen(v), e);
	default:
		return ERR_OK;
	}
}

/* Parses argv[first..argc): the options in `allowed` (as "--opt value" or
 * "--opt=value", each at most once) and min_pos..max_pos positional
 * arguments ("--" ends the options, for an id that starts with '-'). */
static enum err_code parse_opts(int argc, char **argv, int first, unsigned allowed, int min_pos,
				int max_pos, const char *args, struct opts *o, struct err *e)
{
	bool options = true;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		if (options && strcmp(a, "--") == 0) {
			options = false;
			continue;
		}
		if (!options || a[0] != '-' || a[1] == '\0') {
			if (o->npos >= max_pos)
				return err_set(e, ERR_INVALID, "unexpected argument %.100s", a);
			o->pos[o->npos++] = a;
			continue;
		}
		size_t nl = strcspn(a, "=");
		const struct optdef *d = NULL;
		for (size_t k = 0; k < sizeof optdefs / sizeof *optdefs; k++)
			if (strlen(optdefs[k].name) == nl && strncmp(optdefs[k].name, a, nl) == 0)
				d = &optdefs[k];
		if (d == NULL || !(allowed & d->bit))
			return err_set(e, ERR_INVALID, "unknown option %.*s",
				       (int)(nl > 100 ? 100 : nl), a);
		if (o->seen & d->bit)
			return err_set(e, ERR_INVALID, "%s: given twice", d->name);
		o->seen |= d->bit;
		const char *v = NULL;
		if (a[nl] == '=') {
			if (!d->arg)
				return err_set(e, ERR_INVALID, "%s: takes no value", d->name);
			v = a + nl + 1;
		} else if (d->arg) {
			if (i + 1 >= argc)
				return err_set(e, ERR_INVALID, "%s: needs a value", d->name);
			v = argv[++i];
		}
		if (v != NULL && opt_value(o, d->bit, d->name, v, e))
			return e->code;
	}
	if (o->npos < min_pos)
		return err_set(e, ERR_INVALID, "missing argument: it takes %s", args);
	if ((o->seen & O_TIMEOUT) && (allowed & O_WAIT) && !(o->seen & O_WAIT))
		return err_set(e, ERR_INVALID, "--timeout-ms: only with --wait");
	if ((o->seen & O_ALL) && (o->seen & O_CURSOR))
		return err_set(e, ERR_INVALID,
			       "--all: starts from the first page; not with --cursor");
	return ERR_OK;
}

/* ---- answers ----------------------------------------------------------- */

/* Reports a bad argument (nothing was sent) and returns CLI_USAGE. */
static int usage_error(const char *what, const char *msg)
{
	fprintf(stderr,
		"hookflow: %s: %s\nRun `hookflow help` for the commands and their options.\n", what,
		msg);
	return CLI_USAGE;
}

struct ctx {
	struct client_config cfg;
	const char *what; /* "runs get": the start of every error message */
	bool json;
};

static void print_clean(FILE *out, const char *s, size_t max)
{
	struct strbuf b = {0};
	table_clean(s, max, &b);
	if (b.data != NULL)
		fputs(b.data, out);
	strbuf_cleanup(&b);
}

/* Prints what went wrong with an API call and returns its exit code. */
static int report_failure(const struct ctx *c, enum err_code rc, const struct err *e,
			  const struct client_reply *r)
{
	fprintf(stderr, "hookflow: %s: ", c->what);
	if (rc == ERR_UNAVAILABLE) {
		print_clean(stderr, e->msg, CLI_SERVER_TEXT);
		fputs(" (is the service running? HOOKFLOW_URL names it)\n", stderr);
		return CLI_UNREACHABLE;
	}
	if (rc != ERR_OK) {
		fprintf(stderr, "%s\n", e->msg);
		return CLI_FAILED;
	}
	json_t *doc = json_loadb(r->body, r->len, 0, NULL);
	json_t *err = json_object_get(doc, "error");
	const char *code = json_string_value(json_object_get(err, "code"));
	const char *msg = json_string_value(json_object_get(err, "message"));
	if (code != NULL && msg != NULL) {
		print_clean(stderr, msg, CLI_SERVER_TEXT);
		fprintf(stderr, " (HTTP %ld, ", r->status);
		print_clean(stderr, code, 64);
		fputs(")", stderr);
		if (r->status >= 500 && r->request_id[0] != '\0') {
			fputs("; request id ", stderr);
			print_clean(stderr, r->request_id, 128);
		}
		if (r->status == 401)
			fputs(c->cfg.token == NULL
				      ? "; set HOOKFLOW_TOKEN to one of the service's API tokens"
				      : "; the service refused HOOKFLOW_TOKEN",
			      stderr);
		fputs("\n", stderr);
	} else {
		fprintf(stderr, "HTTP %ld from %s, not an answer of hookflow", r->status,
			c->cfg.url);
		if (r->len > 0) {
			fputs(": ", stderr);
			print_clean(stderr, r->body, 200);
		}
		fputs(" (does HOOKFLOW_URL name a hookflow service?)\n", stderr);
	}
	json_decref(doc);
	if (r->status == 404)
		return CLI_NOT_FOUND;
	if (r->status == 401 || r->status == 403)
		return CLI_DENIED;
	return CLI_FAILED;
}

/* Calls the API and checks its answer: 2xx with a JSON object gives CLI_OK
 * and *doc (new reference) and fills *reply (the caller cleans it up);
 * anything else is reported and its exit code returned. */
static int call(const struct ctx *c, const char *method, const char *path, const char *body,
		long timeout_ms, struct client_reply *reply, json_t **doc)
{
	*doc = NULL;
	struct err e = {0};
	enum err_code rc = client_api(&c->cfg, method, path, body, timeout_ms, reply, &e);
	if (rc != ERR_OK || reply->status < 200 || reply->status > 299)
		return report_failure(c, rc, &e, reply);
	*doc = json_loadb(reply->body, reply->len, 0, NULL);
	if (!json_is_object(*doc)) {
		json_decref(*doc);
		*doc = NULL;
		fprintf(stderr,
			"hookflow: %s: the answer of %s (HTTP %ld) is not a JSON object (does "
			"HOOKFLOW_URL name a hookflow service?)\n",
			c->what, c->cfg.url, reply->status);
		return CLI_FAILED;
	}
	return CLI_OK;
}

static void print_raw(const struct client_reply *r)
{
	fwrite(r->body, 1, r->len, stdout);
	if (r->len == 0 || r->body[r->len - 1] != '\n')
		fputs("\n", stdout);
}

/* A JSON value as a cell: strings as they are, null (or absent) as "-",
 * the rest as compact JSON. Malloc'd; NULL when out of memory. */
static char *cell_text(const json_t *v)
{
	if (v == NULL || json_is_null(v))
		return strdup("-");
	if (json_is_string(v))
		return strdup(json_string_value(v));
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Prints `obj` one member a line, names aligned, in the API's order. */
static void print_vertical(const json_t *obj)
{
	size_t w = 0;
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)obj, k, v) {
		size_t kw = table_width(k);
		w = kw > w ? kw : w;
	}
	struct strbuf b = {0};
	json_object_foreach ((json_t *)obj, k, v) {
		size_t at = b.len;
		table_clean(k, 64, &b);
		strbuf_printf(&b, "%*s", (int)(w - table_width(b.data + at) + TABLE_GAP), "");
		char *t = cell_text(v);
		table_clean(t, CLI_VALUE, &b);
		free(t);
		strbuf_puts(&b, "\n");
	}
	if (b.data != NULL)
		fputs(b.data, stdout);
	strbuf_cleanup(&b);
}

/* ---- lists ----------------------------------------------------------- */

#define MAX_COLS 10

struct listing {
	const char *path; /* "/v1/runs" (escaped) */
	const char *key;  /* the array's member: "runs" */
	int ncols;
	const char *headers[MAX_COLS];
	const char *fields[MAX_COLS]; /* the member shown in each column */
};

static void add_query(struct strbuf *q, const char *name, const char *value)
{
	if (value == NULL)
		return;
	strbuf_puts(q, q->len == 0 ? "?" : "&");
	strbuf_puts(q, name);
	strbuf_puts(q, "=");
	client_escape(value, q);
}

static void print_table(const struct listing *l, const json_t *items)
{
	struct table t;
	table_init(&t, l->ncols, l->headers, CLI_CELL);
	size_t i;
	json_t *item;
	json_array_foreach (items, i, item) {
		char *cells[MAX_COLS] = {0};
		for (int c = 0; c < l->ncols; c++)
			cells[c] = cell_text(json_object_get(item, l->fields[c]));
		table_add_row(&t, (const char *const *)cells);
		for (int c = 0; c < l->ncols; c++)
			free(cells[c]);
	}
	struct strbuf b = {0};
	table_render(&t, &b);
	if (b.data != NULL)
		fputs(b.data, stdout);
	if (t.oom || b.oom)
		fputs("hookflow: out of memory: rows are missing\n", stderr);
	strbuf_cleanup(&b);
	table_cleanup(&t);
}

/* Lists one page (--cursor, --limit) or every page (--all) of `l`, with the
 * filters already in `query` ("?a=b&c=d" or ""). */
static int list(const struct ctx *c, const struct listing *l, const struct opts *o,
		const char *query)
{
	json_t *all = json_array();
	char *cursor = o->cursor != NULL ? strdup(o->cursor) : NULL;
	char *next = NULL;
	int rc = CLI_OK;
	bool every = (o->seen & O_ALL) != 0;
	for (int page = 0; all != NULL; page++) {
		struct strbuf path = {0};
		strbuf_puts(&path, l->path);
		strbuf_puts(&path, query);
		if (o->limit > 0) {
			strbuf_puts(&path, *query ? "&" : "?");
			strbuf_printf(&path, "limit=%lld", o->limit);
		}
		if (cursor != NULL) {
			strbuf_puts(&path, *query || o->limit > 0 ? "&" : "?");
			strbuf_puts(&path, "cursor=");
			client_escape(cursor, &path);
		}
		struct client_reply r = {0};
		json_t *doc = NULL;
		rc = path.oom ? CLI_FAILED
			      : call(c, "GET", path.data, NULL, CLIENT_API_TIMEOUT_MS, &r, &doc);
		strbuf_cleanup(&path);
		if (rc == CLI_OK && c->json && !every) {
			print_raw(&r);
			client_reply_cleanup(&r);
			json_decref(doc);
			json_decref(all);
			free(cursor);
			return CLI_OK;
		}
		client_reply_cleanup(&r);
		json_t *items = json_object_get(doc, l->key);
		json_t *nc = json_object_get(doc, "next_cursor");
		if (rc == CLI_OK &&
		    (!json_is_array(items) || (nc && !json_is_null(nc) && !json_is_string(nc)))) {
			fprintf(stderr,
				"hookflow: %s: the answer has no \"%s\" list (does HOOKFLOW_URL "
				"name "
				"a hookflow service?)\n",
				c->what, l->key);
			rc = CLI_FAILED;
		}
		if (rc != CLI_OK) {
			json_decref(doc);
			break;
		}
		json_array_extend(all, items);
		free(next);
		next = json_is_string(nc) ? strdup(json_string_value(nc)) : NULL;
		json_decref(doc);
		if (!every || next == NULL)
			break;
		if (json_array_size(all) > CLI_MAX_ALL_ROWS || page + 1 >= CLI_MAX_PAGES) {
			fprintf(stderr,
				"hookflow: %s: --all: more than %d rows; narrow the filters or "
				"page "
				"with --limit and --cursor\n",
				c->what, CLI_MAX_ALL_ROWS);
			rc = CLI_FAILED;
			break;
		}
		free(cursor);
		cursor = next;
		next = NULL;
	}
	if (all == NULL) {
		fprintf(stderr, "hookflow: %s: out of memory\n", c->what);
		rc = CLI_FAILED;
	}
	if (rc == CLI_OK && c->json) {
		/* --all --json: every page's items in one answer of the same shape. */
		json_t *out = json_pack("{s:O,s:n}", l->key, all, "next_cursor");
		char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
		if (text != NULL)
			puts(text);
		free(text);
		json_decref(out);
	} else if (rc == CLI_OK) {
		print_table(l, all);
		if (json_array_size(all) == 0)
			printf("(no %s)\n",
			       strcmp(l->key, "dead_letters") == 0 ? "dead letters" : l->key);
		if (next != NULL) {
			fputs("more: add --cursor ", stderr);
			print_clean(stderr, next, CLI_MAX_CURSOR);
			fputs(" for the next page, or --all\n", stderr);
		}
	}
	json_decref(all);
	free(cursor);
	free(next);
	return rc;
}

/* ---- commands ---------------------------------------------------------- */

static int runs_list(struct ctx *c, struct opts *o)
{
	struct strbuf q = {0};
	add_query(&q, "workflow", o->workflow);
	add_query(&q, "status", o->status);
	add_query(&q, "group_id", o->group);
	add_query(&q, "concurrency_key", o->ckey);
	add_query(&q, "created_after", o->after);
	add_query(&q, "created_before", o->before);
	static const struct listing l = {
		.path = "/v1/runs",
		.key = "runs",
		.ncols = 7,
		.headers = {"RUN_ID", "WORKFLOW", "STATUS", "STEP", "ATTEMPT", "CREATED_AT",
			    "ERROR"},
		.fields = {"run_id", "workflow", "status", "step", "attempt", "created_at",
			   "error"},
	};
	int rc = q.oom ? CLI_FAILED : list(c, &l, o, q.data ? q.data : "");
	strbuf_cleanup(&q);
	return rc;
}

/* "/v1/runs/<escaped id><suffix>" into `b`. */
static void run_path(struct strbuf *b, const char *run_id, const char *suffix)
{
	strbuf_puts(b, "/v1/runs/");
	client_escape(run_id, b);
	strbuf_puts(b, suffix);
}

static bool terminal(const char *status)
{
	return status != NULL &&
	       (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
		strcmp(status, "cancelled") == 0);
}

static int runs_get(struct ctx *c, struct opts *o)
{
	const char *id = o->pos[0];
	struct err e = {0};
	if (ids_check_run_id("RUN_ID", id, strlen(id), &e)) {
		return usage_error(c->what, e.msg);
	}
	bool wait = (o->seen & O_WAIT) != 0;
	int64_t deadline = (o->seen & O_TIMEOUT) ? timefmt_mono_ms() + o->timeout_ms : 0;
	struct client_reply r = {0};
	json_t *doc = NULL;
	const char *status = NULL;
	int rc;
	for (;;) {
		int64_t wait_ms = 0;
		if (wait) {
			wait_ms = CLI_LONGPOLL_MS;
			if (deadline > 0 && deadline - timefmt_mono_ms() < wait_ms)
				wait_ms = deadline - timefmt_mono_ms();
			if (wait_ms < 0)
				wait_ms = 0;
		}
		struct strbuf path = {0};
		run_path(&path, id, "");
		if (wait_ms > 0)
			strbuf_printf(&path, "?wait_ms=%lld", (long long)wait_ms);
		client_reply_cleanup(&r);
		json_decref(doc);
		int64_t asked = timefmt_mono_ms();
		rc = path.oom ? CLI_FAILED
			      : call(c, "GET", path.data, NULL,
				     (long)(wait_ms +
					    (wait ? CLI_LONGPOLL_SLACK : CLIENT_API_TIMEOUT_MS)),
				     &r, &doc);
		strbuf_cleanup(&path);
		if (rc != CLI_OK)
			break;
		status = json_string_value(json_object_get(doc, "status"));
		if (!wait || terminal(status) || (deadline > 0 && timefmt_mono_ms() >= deadline))
			break;
		/* A long-poll answered early without an end (its instance is
		 * shutting down): ask again after a second, not at once. */
		if (timefmt_mono_ms() - asked < wait_ms / 2)
			sleep(1);
	}
	if (rc == CLI_OK) {
		if (c->json)
			print_raw(&r);
		else
			print_vertical(doc);
		if (wait) {
			if (status != NULL && strcmp(status, "failed") == 0)
				rc = CLI_RUN_FAILED;
			else if (status != NULL && strcmp(status, "cancelled") == 0)
				rc = CLI_RUN_CANCELLED;
			else if (!terminal(status))
				rc = CLI_STILL_ACTIVE;
			if (rc == CLI_STILL_ACTIVE)
				fprintf(stderr, "hookflow: %s: run %s is still %s after %lld ms\n",
					c->what, id, status ? status : "active", o->timeout_ms);
		}
	}
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

static int runs_steps(struct ctx *c, struct opts *o)
{
	const char *id = o->pos[0];
	struct err e = {0};
	if (ids_check_run_id("RUN_ID", id, strlen(id), &e)) {
		return usage_error(c->what, e.msg);
	}
	struct strbuf path = {0};
	run_path(&path, id, "/steps");
	struct listing l = {
		.path = path.data,
		.key = "steps",
		.ncols = 9,
		.headers = {"GEN", "STEP", "ATTEMPT", "RESULT", "HTTP", "DURATION_MS", "STARTED_AT",
			    "FINISHED_AT", "ERROR"},
		.fields = {"generation", "step", "attempt", "result", "http_status", "duration_ms",
			   "started_at", "finished_at", "error"},
	};
	int rc = path.oom ? CLI_FAILED : list(c, &l, o, "");
	strbuf_cleanup(&path);
	return rc;
}

static int runs_cancel(struct ctx *c, struct opts *o)
{
	const char *id = o->pos[0];
	struct err e = {0};
	if (ids_check_run_id("RUN_ID", id, strlen(id), &e)) {
		return usage_error(c->what, e.msg);
	}
	struct strbuf path = {0};
	run_path(&path, id, "/cancel");
	struct client_reply r = {0};
	json_t *doc = NULL;
	int rc = path.oom ? CLI_FAILED
			  : call(c, "POST", path.data, NULL, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	if (rc == CLI_OK && c->json)
		print_raw(&r);
	else if (rc == CLI_OK && r.status == 202)
		printf("run %s is cancelling: its webhook call in flight is being aborted\n", id);
	else if (rc == CLI_OK)
		printf("run %s cancelled\n", id);
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

static int runs_rerun(struct ctx *c, struct opts *o)
{
	const char *id = o->pos[0];
	struct err e = {0};
	if (ids_check_run_id("RUN_ID", id, strlen(id), &e)) {
		return usage_error(c->what, e.msg);
	}
	json_t *body = json_object();
	if (o->seen & O_FROM_STEP)
		json_object_set_new(body, "from_step", json_integer(o->from_step));
	if (o->input != NULL)
		json_object_set(body, "input", o->input);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct strbuf path = {0};
	run_path(&path, id, "/rerun");
	struct client_reply r = {0};
	json_t *doc = NULL;
	int rc = path.oom || text == NULL
			 ? CLI_FAILED
			 : call(c, "POST", path.data, text, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	free(text);
	if (rc == CLI_OK && c->json) {
		print_raw(&r);
	} else if (rc == CLI_OK) {
		json_int_t gen = json_integer_value(json_object_get(doc, "generation"));
		json_int_t step = json_integer_value(json_object_get(doc, "step"));
		const char *st = json_string_value(json_object_get(doc, "status"));
		printf("run %s: generation %lld starts at step %lld (%s)\n", id, (long long)gen,
		       (long long)step, st ? st : "?");
	}
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

static int signal_send(struct ctx *c, struct opts *o)
{
	const char *key = o->pos[0];
	struct err e = {0};
	json_t *payload = NULL;
	if (ids_check_key("KEY", key, strlen(key), &e) ||
	    cli_parse_json("JSON", o->pos[1], CLI_MAX_JSON_ARG, &payload, &e)) {
		return usage_error(c->what, e.msg);
	}
	json_t *body = json_pack("{s:o}", "payload", payload);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct strbuf path = {0};
	strbuf_puts(&path, "/v1/signals/");
	client_escape(key, &path);
	struct client_reply r = {0};
	json_t *doc = NULL;
	int rc = path.oom || text == NULL
			 ? CLI_FAILED
			 : call(c, "POST", path.data, text, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	free(text);
	if (rc == CLI_OK && c->json) {
		print_raw(&r);
	} else if (rc == CLI_OK) {
		const char *out = json_string_value(json_object_get(doc, "outcome"));
		fputs("signal ", stdout);
		print_clean(stdout, key, 200);
		if (out != NULL && strcmp(out, "delivered") == 0)
			puts(": delivered to the run waiting on it");
		else if (out != NULL && strcmp(out, "buffered") == 0)
			puts(": buffered (no run waits on it now; the next step that waits on it "
			     "takes it)");
		else
			printf(": %s\n", out ? out : "?");
	}
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

static int workflows_list(struct ctx *c, struct opts *o)
{
	static const struct listing l = {
		.path = "/v1/workflows",
		.key = "workflows",
		.ncols = 7,
		.headers = {"NAME", "SIGNED", "PAUSED", "TIMEOUT_MS", "MAX_ATTEMPTS", "UPDATED_AT",
			    "URL"},
		.fields = {"name", "signed", "paused", "timeout_ms", "max_attempts", "updated_at",
			   "url"},
	};
	return list(c, &l, o, "");
}

static int workflows_get(struct ctx *c, struct opts *o)
{
	const char *name = o->pos[0];
	struct err e = {0};
	if (ids_check_workflow_name("NAME", name, strlen(name), &e)) {
		return usage_error(c->what, e.msg);
	}
	struct strbuf path = {0};
	strbuf_puts(&path, "/v1/workflows/");
	client_escape(name, &path);
	struct client_reply r = {0};
	json_t *doc = NULL;
	int rc = path.oom ? CLI_FAILED
			  : call(c, "GET", path.data, NULL, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	if (rc == CLI_OK && c->json)
		print_raw(&r);
	else if (rc == CLI_OK)
		print_vertical(doc);
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

static int workflows_put(struct ctx *c, struct opts *o)
{
	struct err e = {0};
	char *text = NULL;
	json_t *wf = NULL;
	const char *name = o->name;
	int rc = CLI_USAGE;
	if (cli_read_file("FILE", o->pos[0], CLI_MAX_JSON_ARG, &text, &e) ||
	    cli_parse_json("FILE", text, CLI_MAX_JSON_ARG, &wf, &e))
		goto out;
	if (!json_is_object(wf)) {
		err_set(&e, ERR_INVALID, "FILE: must hold a JSON object (the workflow)");
		goto out;
	}
	json_t *jn = json_object_get(wf, "name");
	if (jn != NULL && !json_is_string(jn)) {
		err_set(&e, ERR_INVALID, "FILE: name: must be a string");
		goto out;
	}
	const char *fname = json_string_value(jn);
	if (name != NULL && fname != NULL && strcmp(name, fname) != 0) {
		char q[160];
		ids_quote(fname, strlen(fname), q, sizeof q);
		err_set(&e, ERR_INVALID, "--name: %s differs from the file's name %s", name, q);
		goto out;
	}
	if (name == NULL)
		name = fname;
	if (name == NULL) {
		err_set(&e, ERR_INVALID,
			"FILE: has no \"name\": give the workflow's name there or with --name");
		goto out;
	}
	if (ids_check_workflow_name("FILE: name", name, strlen(name), &e))
		goto out;
	struct strbuf path = {0};
	strbuf_puts(&path, "/v1/workflows/");
	client_escape(name, &path);
	struct client_reply r = {0};
	json_t *doc = NULL;
	rc = path.oom ? CLI_FAILED
		      : call(c, "PUT", path.data, text, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	if (rc == CLI_OK && c->json)
		print_raw(&r);
	else if (rc == CLI_OK)
		printf("workflow %s %s\n", name, r.status == 201 ? "created" : "replaced");
	client_reply_cleanup(&r);
	json_decref(doc);
out:
	if (e.code)
		usage_error(c->what, e.msg);
	json_decref(wf);
	free(text);
	return rc;
}

static int dead_letters_list(struct ctx *c, struct opts *o)
{
	struct strbuf q = {0};
	add_query(&q, "workflow", o->workflow);
	add_query(&q, "kind", o->kind);
	static const struct listing l = {
		.path = "/v1/dead-letters",
		.key = "dead_letters",
		.ncols = 9,
		.headers = {"ID", "KIND", "WORKFLOW", "RUN_ID", "STEP", "ATTEMPTS", "HTTP",
			    "CREATED_AT", "LAST_ERROR"},
		.fields = {"id", "kind", "workflow", "run_id", "step", "attempts",
			   "last_http_status", "created_at", "last_error"},
	};
	int rc = q.oom ? CLI_FAILED : list(c, &l, o, q.data ? q.data : "");
	strbuf_cleanup(&q);
	return rc;
}

static int dead_letters_redrive(struct ctx *c, struct opts *o)
{
	const char *id = o->pos[0];
	struct err e = {0};
	if (ids_check_run_id("ID", id, strlen(id), &e)) {
		return usage_error(c->what, e.msg);
	}
	struct strbuf path = {0};
	strbuf_puts(&path, "/v1/dead-letters/");
	client_escape(id, &path);
	strbuf_puts(&path, "/redrive");
	struct client_reply r = {0};
	json_t *doc = NULL;
	int rc = path.oom ? CLI_FAILED
			  : call(c, "POST", path.data, NULL, CLIENT_API_TIMEOUT_MS, &r, &doc);
	strbuf_cleanup(&path);
	if (rc == CLI_OK && c->json) {
		print_raw(&r);
	} else if (rc == CLI_OK) {
		const char *kind = json_string_value(json_object_get(doc, "kind"));
		printf("dead letter %s redriven (%s)\n", id,
		       kind != NULL && strcmp(kind, "callback") == 0
			       ? "its callback is delivered again"
			       : "its run reruns from the dead step");
	}
	client_reply_cleanup(&r);
	json_decref(doc);
	return rc;
}

/* ---- the table of commands ------------------------------------------- */

struct command {
	const char *group; /* argv[1] */
	const char *verb;  /* argv[2], or NULL for a command of one word */
	unsigned opts;
	int min_pos, max_pos;
	const char *args; /* the positional arguments, for messages */
	int (*fn)(struct ctx *c, struct opts *o);
};

static const struct command commands[] = {
	{"runs", "list",
	 O_JSON | O_PAGING | O_WORKFLOW | O_STATUS | O_GROUP | O_CKEY | O_AFTER | O_BEFORE, 0, 0,
	 "", runs_list},
	{"runs", "get", O_JSON | O_WAIT | O_TIMEOUT, 1, 1, "RUN_ID", runs_get},
	{"runs", "steps", O_JSON | O_PAGING, 1, 1, "RUN_ID", runs_steps},
	{"runs", "cancel", O_JSON, 1, 1, "RUN_ID", runs_cancel},
	{"runs", "rerun", O_JSON | O_FROM_STEP | O_INPUT, 1, 1, "RUN_ID", runs_rerun},
	{"signal", NULL, O_JSON, 2, 2, "KEY JSON", signal_send},
	{"workflows", "list", O_JSON | O_PAGING, 0, 0, "", workflows_list},
	{"workflows", "get", O_JSON, 1, 1, "NAME", workflows_get},
	{"workflows", "put", O_JSON | O_NAME, 1, 1, "FILE", workflows_put},
	{"dead-letters", "list", O_JSON | O_PAGING | O_WORKFLOW | O_KIND, 0, 0, "",
	 dead_letters_list},
	{"dead-letters", "redrive", O_JSON, 1, 1, "ID", dead_letters_redrive},
};

void cli_usage(FILE *out)
{
	fputs("usage: hookflow COMMAND [ARGUMENTS]\n"
	      "\n"
	      "The service (configured by HOOKFLOW_* variables, README.md \"Configuration\"):\n"
	      "  serve                          run the service\n"
	      "  migrate [--check]              bring the database up to this binary (--check: "
	      "only compare)\n"
	      "  rotate-keys [--grace-ms N]     a new delivery-token key; the old ones stay "
	      "accepted N ms\n"
	      "  version                        what this binary is\n"
	      "  help                           this text\n"
	      "\n"
	      "The client (talks to HOOKFLOW_URL, default http://127.0.0.1:8080, with the bearer "
	      "token\n"
	      "HOOKFLOW_TOKEN; no database needed):\n"
	      "  runs list [--workflow NAME] [--status S[,S...]] [--group ID] [--concurrency-key "
	      "KEY]\n"
	      "            [--created-after TIME] [--created-before TIME] [--limit N] [--cursor "
	      "C] [--all]\n"
	      "  runs get RUN_ID [--wait [--timeout-ms N]]\n"
	      "  runs steps RUN_ID [--limit N] [--cursor C] [--all]\n"
	      "  runs cancel RUN_ID\n"
	      "  runs rerun RUN_ID [--from-step N] [--input JSON]\n"
	      "  signal KEY JSON                the JSON is the signal's payload\n"
	      "  workflows list [--limit N] [--cursor C] [--all]\n"
	      "  workflows get NAME\n"
	      "  workflows put FILE [--name NAME]   FILE holds the workflow's JSON (\"-\": "
	      "standard input)\n"
	      "  dead-letters list [--workflow NAME] [--kind step|callback] [--limit N] [--cursor "
	      "C] [--all]\n"
	      "  dead-letters redrive ID\n"
	      "  Each takes --json: the API's JSON as it is (--all: every page's items in one "
	      "object)\n"
	      "  instead of a table. \"--\" ends the options (for an id that starts with '-').\n"
	      "\n"
	      "The webhook check (calls only URL; changes nothing in hookflow):\n"
	      "  check-webhook URL [--secret whsec_... | --secret-file FILE] [--timeout-ms N] "
	      "[--json]\n"
	      "                [--step N] [--payload JSON] [--headers JSON] [--workflow NAME]\n"
	      "                [--error-step N] [--error-payload JSON] [--memo-listen HOST:PORT] "
	      "[--memo-url URL]\n"
	      "\n"
	      "Exit codes: 0 done; 1 the API refused the request, or a check-webhook item "
	      "failed;\n"
	      "2 bad usage (nothing was sent); 3 cannot reach the service (or the webhook); 4 not "
	      "found;\n"
	      "5 unauthenticated or forbidden (HOOKFLOW_TOKEN); runs get --wait: 0 succeeded, 6 "
	      "failed,\n"
	      "7 cancelled, 8 still active after --timeout-ms.\n",
	      out);
}

bool cli_is_command(const char *cmd)
{
	if (strcmp(cmd, "check-webhook") == 0)
		return true;
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		if (strcmp(commands[i].group, cmd) == 0)
			return true;
	return false;
}

int cli_main(int argc, char **argv)
{
	if (strcmp(argv[1], "check-webhook") == 0)
		return check_webhook_main(argc, argv);
	const struct command *cmd = NULL;
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
		const struct command *k = &commands[i];
		if (strcmp(k->group, argv[1]) != 0)
			continue;
		if (k->verb == NULL || (argc > 2 && strcmp(k->verb, argv[2]) == 0))
			cmd = k;
	}
	if (cmd == NULL) {
		/* A known group (cli_is_command said so) without a known verb. */
		struct strbuf msg = {0};
		if (argc > 2)
			strbuf_printf(&msg, "%.60s: unknown command; ", argv[2]);
		strbuf_puts(&msg, "one of");
		const char *sep = " ";
		for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
			if (strcmp(commands[i].group, argv[1]) == 0) {
				strbuf_printf(&msg, "%s%s %s", sep, argv[1], commands[i].verb);
				sep = ", ";
			}
		int rc = usage_error(argv[1], msg.data ? msg.data : "unknown command");
		strbuf_cleanup(&msg);
		return rc;
	}
	char what[64];
	snprintf(what, sizeof what, "%s%s%s", cmd->group, cmd->verb ? " " : "",
		 cmd->verb ? cmd->verb : "");
	struct ctx c = {.what = what};
	struct opts o = {0};
	struct err e = {0};
	int first = cmd->verb != NULL ? 3 : 2;
	if (parse_opts(argc, argv, first, cmd->opts, cmd->min_pos, cmd->max_pos, cmd->args, &o,
		       &e)) {
		json_decref(o.input);
		return usage_error(what, e.msg);
	}
	if (config_client_load(&c.cfg, &e)) {
		json_decref(o.input);
		return usage_error(what, e.msg);
	}
	c.json = (o.seen & O_JSON) != 0;
	int rc = cmd->fn(&c, &o);
	fflush(stdout);
	json_decref(o.input);
	config_client_cleanup(&c.cfg);
	return rc;
}
