/* log: line-oriented logging to stderr, text or JSON, one write per line. */
#include "base/log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum log_level threshold = LOG_INFO;
static int json_format;

void log_setup(enum log_level level, int json)
{
	threshold = level;
	json_format = json;
}

static const char *level_name(enum log_level l)
{
	switch (l) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	default:
		return "error";
	}
}

/* Adds each key=value pair of `kv` (space separated, values optionally
 * "quoted") to `obj`. */
static void kv_to_json(json_t *obj, const char *kv)
{
	char key[64];
	char val[1024];
	const char *p = kv;
	while (*p) {
		while (*p == ' ')
			p++;
		size_t k = 0;
		while (*p && *p != '=' && *p != ' ' && k + 1 < sizeof key)
			key[k++] = *p++;
		key[k] = '\0';
		if (*p != '=') {
			while (*p && *p != ' ')
				p++;
			continue;
		}
		p++;
		size_t v = 0;
		if (*p == '"') {
			p++;
			while (*p && *p != '"' && v + 1 < sizeof val)
				val[v++] = *p++;
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ' ' && v + 1 < sizeof val)
				val[v++] = *p++;
		}
		val[v] = '\0';
		if (k > 0)
			json_object_set_new(obj, key, json_string(val));
	}
}

void log_msg(enum log_level level, const char *module, const char *msg, const char *kvfmt, ...)
{
	if (level < threshold)
		return;
	char kv[2048] = "";
	if (kvfmt != NULL) {
		va_list ap;
		va_start(ap, kvfmt);
		vsnprintf(kv, sizeof kv, kvfmt, ap);
		va_end(ap);
	}
	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct tm tm;
	gmtime_r(&tv.tv_sec, &tm);
	char ts[96];
	snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (long)(tv.tv_usec / 1000));
	char line[4096];
	int n;
	if (json_format) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level", level_name(level),
				      "module", module, "msg", msg);
		kv_to_json(o, kv);
		char *s = json_dumps(o, JSON_COMPACT);
		n = snprintf(line, sizeof line, "%s\n", s ? s : "{}");
		free(s);
		json_decref(o);
	} else {
		n = snprintf(line, sizeof line, "%s %s %s %s%s%s\n", ts, level_name(level), module,
			     msg, kv[0] ? " " : "", kv);
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line) {
		n = sizeof line - 1;
		line[n - 1] = '\n';
	}
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
