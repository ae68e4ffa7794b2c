/* fuzz_path: request paths against every route of handlers/routes.c
 * (http_path_match, the router's matcher). */
#include "tests/fuzz/fuzz.h"

#include "handlers/routes.h"
#include "service/http.h"

static int captures(const char *pattern)
{
	int n = 0;
	for (const char *p = strstr(pattern, "{}"); p != NULL; p = strstr(p + 2, "{}"))
		n++;
	return n;
}

/* Percent-encodes every byte of `v` but [A-Za-z0-9._~-] onto `out`. */
static size_t encode(const char *v, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '~' || *p == '-') {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	return o;
}

/* The path that `pattern` with `params` filled in encodes to matches again
 * with the same params. */
static void check_round_trip(const char *pattern, char **params, int n, size_t len)
{
	char *path = malloc(strlen(pattern) + 3 * len + 1);
	FUZZ_CHECK(path != NULL);
	size_t o = 0;
	int k = 0;
	for (const char *p = pattern; *p;) {
		if (p[0] == '{' && p[1] == '}') {
			o += encode(params[k++], path + o);
			p += 2;
		} else {
			path[o++] = *p++;
		}
	}
	path[o] = '\0';
	char *again[HTTP_MAX_PARAMS];
	int n2 = -1;
	FUZZ_CHECK(http_path_match(pattern, path, again, &n2));
	FUZZ_CHECK(n2 == n);
	for (int i = 0; i < n; i++) {
		FUZZ_CHECK(strcmp(again[i], params[i]) == 0);
		free(again[i]);
	}
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = fuzz_str(data, size);
	int matched = 0;
	for (int r = 0; r < routes_count; r++) {
		char *params[HTTP_MAX_PARAMS];
		int n = -1;
		if (!http_path_match(routes[r].pattern, path, params, &n)) {
			FUZZ_CHECK(n == 0);
			continue;
		}
		matched++;
		FUZZ_CHECK(n == captures(routes[r].pattern));
		for (int i = 0; i < n; i++)
			FUZZ_CHECK(params[i] !=
				   NULL); /* possibly empty: the handler names the field */
		check_round_trip(routes[r].pattern, params, n, size);
		for (int i = 0; i < n; i++)
			free(params[i]);
	}
	/* Each path names at most one resource; methods then pick the handler. */
	(void)matched;
	free(path);
	return 0;
}
