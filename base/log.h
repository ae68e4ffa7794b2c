/* log: one line per event, `ts level module msg key=value...`, or one JSON
 * object per line when HOOKFLOW_LOG_FORMAT=json. Thread-safe; never pass secrets
 * or full bodies. */
#ifndef HOOKFLOW_LOG_H
#define HOOKFLOW_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Configures the threshold and the format (json != 0 for JSON lines). Call once
 * at start-up before threads start. */
void log_setup(enum log_level level, int json);

/* Logs `msg` for `module` followed by `kv`, a printf-style list of
 * `key=value` pairs separated by spaces (may be NULL). Values containing
 * spaces must be quoted by the caller. */
void log_msg(enum log_level level, const char *module, const char *msg, const char *kvfmt, ...)
	__attribute__((format(printf, 4, 5)));

#define log_debug(mod, msg, ...) log_msg(LOG_DEBUG, mod, msg, __VA_ARGS__)
#define log_info(mod, msg, ...) log_msg(LOG_INFO, mod, msg, __VA_ARGS__)
#define log_warn(mod, msg, ...) log_msg(LOG_WARN, mod, msg, __VA_ARGS__)
#define log_error(mod, msg, ...) log_msg(LOG_ERROR, mod, msg, __VA_ARGS__)

#endif
