/* fuzz_ids: identifiers from paths and bodies: run and group ids, workflow
 * names, correlation and KV keys, concurrency keys (ids_check_*), UTF-8
 * validation against a
 * reference decoder, and ids_quote, which shows them in error messages. */
#include "tests/fuzz/fuzz.h"

/* RFC 3629 the slow way: decode each sequence to its code point, then reject
 * overlongs, surrogates and values past U+10FFFF. */
static bool ref_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t len;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			len = 2, cp = c & 0x1F, min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3, cp = c & 0x0F, min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static bool charset(const uint8_t *s, size_t n, const char *extra)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      (c != 0 && strchr(extra, c) != NULL)))
			return false;
	}
	return true;
}

/* Whether valid UTF-8 `s` holds a control character (U+0000..U+001F,
 * U+007F..U+009F): the slow way, decoding each code point. */
static bool has_control(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
		uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
		for (size_t k = 1; k < len && i + k < n; k++)
			cp = (cp << 6) | (s[i + k] & 0x3F);
		if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return true;
		i += len;
	}
	return false;
}

static void check(enum err_code rc, const struct err *e, bool want_ok)
{
	if (want_ok)
		FUZZ_CHECK(rc == ERR_OK && e->code == ERR_OK);
	else
		fuzz_check_err(rc, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The checks take a length, not a NUL-terminated string: a copy of
	 * exactly `size` bytes lets ASan see any read past it. */
	char *s = malloc(size ? size : 1);
	FUZZ_CHECK(s != NULL);
	if (size > 0)
		memcpy(s, data, size);
	bool utf8 = ref_utf8_valid(data, size);
	FUZZ_CHECK(ids_utf8_valid(s, size) == utf8);

	struct err e = {0};
	check(ids_check_run_id("run_id", s, size, &e), &e,
	      size >= 1 && size <= IDS_MAX_RUN_ID && charset(data, size, "_-"));
	err_clear(&e);
	check(ids_check_workflow_name("workflow", s, size, &e), &e,
	      size >= 1 && size <= IDS_MAX_NAME && charset(data, size, "_.-"));
	err_clear(&e);
	check(ids_check_key("correlation_key", s, size, &e), &e,
	      size >= 1 && size <= IDS_MAX_KEY && memchr(data, 0, size) == NULL && utf8);
	err_clear(&e);
	check(ids_check_concurrency_key("concurrency_key", s, size, &e), &e,
	      size >= 1 && size <= IDS_MAX_CONCURRENCY_KEY && utf8 && !has_control(data, size));

	/* Quoted for a message: fits, stays valid UTF-8, keeps its quotes. */
	const size_t caps[] = {8, 9, 12, 72, 80, 300};
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
		char *q = malloc(caps[i]);
		FUZZ_CHECK(q != NULL);
		ids_quote(s, size, q, caps[i]);
		size_t n = strnlen(q, caps[i]);
		FUZZ_CHECK(n < caps[i] && n >= 2);
		FUZZ_CHECK(q[0] == '"' && q[n - 1] == '"');
		FUZZ_CHECK(ids_utf8_valid(q, n));
		for (size_t k = 0; k < n; k++)
			FUZZ_CHECK((unsigned char)q[k] >= 0x20 && q[k] != 0x7F);
		free(q);
	}
	free(s);
	return 0;
}
