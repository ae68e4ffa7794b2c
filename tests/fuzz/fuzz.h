/* tests/fuzz/fuzz.h: what the libFuzzer targets share: the prototypes libFuzzer
 * calls, reading the input the way the service reads a request body, and the
 * checks every parser's answer must pass.
 *
 * A failed check aborts, which libFuzzer reports as a crash with the input
 * that caused it. */
#ifndef HOOKFLOW_FUZZ_H
#define HOOKFLOW_FUZZ_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ids.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

/* A NUL-terminated copy of the input (malloc'd; aborts when out of memory). */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	FUZZ_CHECK(s != NULL);
	if (size > 0)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* What every failed parse must look like: the code it returned is the code in
 * `e`, a client error (the inputs are never big enough to run out of memory),
 * with a message that names something and is valid UTF-8, because it goes
 * into a JSON error body or a run's error text. */
static inline void fuzz_check_err(enum err_code rc, const struct err *e)
{
	FUZZ_CHECK(rc == e->code);
	FUZZ_CHECK(rc == ERR_INVALID);
	size_t n = strnlen(e->msg, sizeof e->msg);
	FUZZ_CHECK(n > 0 && n < sizeof e->msg);
	FUZZ_CHECK(ids_utf8_valid(e->msg, n));
}

/* The input as http_req_json reads a request body: a JSON object (new
 * reference), or NULL when the service answers 400 before the parser, whose
 * error (same text as http_req_json's) must pass fuzz_check_err too. */
static inline json_t *fuzz_json_object(const uint8_t *data, size_t size)
{
	json_error_t je;
	struct err e = {0};
	if (size == 0)
		return NULL;
	json_t *v = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
	if (v == NULL) {
		fuzz_check_err(err_set(&e, ERR_INVALID,
				       "body: invalid JSON: %s (line %d, column %d)", je.text,
				       je.line, je.column),
			       &e);
	} else if (!json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

/* A JSON text the parser produced must read back as JSON (any value). */
static inline void fuzz_check_json_text(const char *text)
{
	FUZZ_CHECK(text != NULL);
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	FUZZ_CHECK(v != NULL);
	json_decref(v);
}

#endif
