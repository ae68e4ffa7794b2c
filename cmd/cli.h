/* cli: the client commands of the hookflow binary (README "Command line"):
 * `runs`, `signal`, `workflows` and `dead-letters` talk to the API at
 * HOOKFLOW_URL with HOOKFLOW_TOKEN (no database, no other configuration);
 * `check-webhook` (cmd/check_webhook.c) probes a webhook. Tables for people,
 * --json for scripts, and exit codes that say what happened. */
#ifndef HOOKFLOW_CMD_CLI_H
#define HOOKFLOW_CMD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"

/* The exit codes of the client commands and of check-webhook. */
enum cli_exit {
	CLI_OK = 0,            /* done (runs get --wait: the run succeeded) */
	CLI_FAILED = 1,        /* the API refused the request (400, 409, 413, 5xx...) or answered
				* something that is not hookflow's; check-webhook: an item failed */
	CLI_USAGE = 2,         /* bad command line or environment: nothing was sent */
	CLI_UNREACHABLE = 3,   /* no answer: connection refused, DNS, TLS, timeout */
	CLI_NOT_FOUND = 4,     /* 404: no such run, workflow, dead letter */
	CLI_DENIED = 5,        /* 401 or 403: HOOKFLOW_TOKEN missing, wrong or read-only */
	CLI_RUN_FAILED = 6,    /* runs get --wait: the run ended failed */
	CLI_RUN_CANCELLED = 7, /* runs get --wait: the run ended cancelled */
	CLI_STILL_ACTIVE = 8,  /* runs get --wait --timeout-ms: not terminal in time */
};

#define CLI_MAX_JSON_ARG (1024 * 1024) /* a JSON argument or file: the API's default body cap */

/* True when `cmd` (borrowed) names a command cli_main runs. */
bool cli_is_command(const char *cmd);

/* Runs the client command argv[1] with its arguments argv[2..argc) (all
 * borrowed); results go to stdout, errors to stderr. Returns the exit code
 * (enum cli_exit). curl_global_init must have been called. */
int cli_main(int argc, char **argv);

/* Writes the usage text of every command of the binary to `out`. */
void cli_usage(FILE *out);

/* Reads the file at `path` (borrowed; "-" is standard input) into *text
 * (malloc'd, NUL-terminated; the caller frees it), refusing more than `cap`
 * bytes and NUL bytes. ERR_INVALID naming `field` otherwise. */
enum err_code cli_read_file(const char *field, const char *path, size_t cap, char **text,
			    struct err *e);

/* Parses `text` (borrowed) as one JSON value of at most `cap` bytes into *out
 * (new reference). ERR_INVALID naming `field` with jansson's reason. */
enum err_code cli_parse_json(const char *field, const char *text, size_t cap, json_t **out,
			     struct err *e);

/* Parses `text` (borrowed) as a decimal integer in lo..hi into *out.
 * ERR_INVALID naming `field` otherwise. */
enum err_code cli_parse_int(const char *field, const char *text, long long lo, long long hi,
			    long long *out, struct err *e);

#endif
