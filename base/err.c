/* err: the error currency, and the one table from codes to wire names and HTTP statuses. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int status;
} table[ERR__COUNT] = {
	[ERR_OK] = {"ok", 200},
	[ERR_INVALID] = {"invalid_argument", 400},
	[ERR_UNAUTHENTICATED] = {"unauthenticated", 401},
	[ERR_FORBIDDEN] = {"forbidden", 403},
	[ERR_NOT_FOUND] = {"not_found", 404},
	[ERR_METHOD] = {"method_not_allowed", 405},
	[ERR_CONFLICT] = {"conflict", 409},
	[ERR_INPUT_MISMATCH] = {"input_mismatch", 409},
	[ERR_ALREADY_TERMINAL] = {"already_terminal", 409},
	[ERR_RUN_ACTIVE] = {"run_active", 409},
	[ERR_GROUP_MISMATCH] = {"group_mismatch", 409},
	[ERR_GROUP_ACTIVE] = {"group_active", 409},
	[ERR_WORKFLOW_IN_USE] = {"workflow_in_use", 409},
	[ERR_ALREADY_COMPLETED] = {"already_completed", 409},
	[ERR_STALE_ATTEMPT] = {"stale_attempt", 409},
	[ERR_RUN_CANCELLED] = {"run_cancelled", 409},
	[ERR_TOO_LARGE] = {"payload_too_large", 413},
	[ERR_MEDIA_TYPE] = {"unsupported_media_type", 415},
	[ERR_INTERNAL] = {"internal", 500},
	[ERR_UNAVAILABLE] = {"unavailable", 503},
	[ERR_BUSY] = {"unavailable", 503},
};

/* The length of the well-formed UTF-8 sequence at `p` (NUL-terminated; no
 * byte past a NUL is read), or 0 when the bytes there are not one. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xBF;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xC2 && p[0] <= 0xDF) {
		n = 2;
	} else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
		n = 3;
		lo = p[0] == 0xE0 ? 0xA0 : 0x80; /* overlong */
		hi = p[0] == 0xED ? 0x9F : 0xBF; /* surrogates */
	} else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
		n = 4;
		lo = p[0] == 0xF0 ? 0x90 : 0x80; /* overlong */
		hi = p[0] == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
	} else {
		return 0;
	}
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return n;
}

enum err_code err_set(struct err *e, enum err_code code, const char *fmt, ...)
{
	if (e == NULL)
		return code;
	if (e->code != ERR_OK)
		return e->code;
	e->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	/* The message goes into a JSON body or a run's error text (Postgres
	 * text): a byte that is not UTF-8 (outside input quoted by a parser, a
	 * character cut short by the buffer) becomes '?'. */
	for (unsigned char *p = (unsigned char *)e->msg; *p != '\0';) {
		size_t n = utf8_len(p);
		if (n == 0)
			*p++ = '?';
		else
			p += n;
	}
	return code;
}

void err_clear(struct err *e)
{
	e->code = ERR_OK;
	e->msg[0] = '\0';
}

const char *err_code_name(enum err_code code)
{
	if ((int)code < 0 || code >= ERR__COUNT)
		return "internal";
	return table[code].name;
}

int err_code_http_status(enum err_code code)
{
	if ((int)code < 0 || code >= ERR__COUNT)
		return 500;
	return table[code].status;
}
