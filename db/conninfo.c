/* db/conninfo: the database URL completed with a connect timeout. */
#include "db/conninfo.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether libpq takes `s` as a URI (its own test: the scheme prefix). */
static bool is_uri(const char *s)
{
	return strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0;
}

enum err_code db_conninfo_complete(const char *name, const char *url, char **out, struct err *e)
{
	*out = NULL;
	char *why = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &why);
	if (opts == NULL) {
		char msg[200];
		snprintf(msg, sizeof msg, "%s", why ? why : "out of memory");
		msg[strcspn(msg, "\n")] = '\0';
		PQfreemem(why);
		return err_set(e, ERR_INVALID, "%s: not a libpq connection string: %s", name, msg);
	}
	bool has_timeout = false, has_service = false;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
		if (o->val == NULL || o->val[0] == '\0')
			continue;
		if (strcmp(o->keyword, "connect_timeout") == 0)
			has_timeout = true;
		else if (strcmp(o->keyword, "service") == 0)
			has_service = true;
	}
	PQconninfoFree(opts);
	/* libpq's own defaults carry PGCONNECT_TIMEOUT when it is set. */
	PQconninfoOption *defs = PQconndefaults();
	for (PQconninfoOption *o = defs; o != NULL && o->keyword != NULL; o++)
		if (strcmp(o->keyword, "connect_timeout") == 0 && o->val != NULL &&
		    o->val[0] != '\0')
			has_timeout = true;
	PQconninfoFree(defs);
	bool keep = has_timeout || has_service;

	size_t len = strlen(url);
	const char *sep = "";
	if (!keep && is_uri(url)) {
		const char *q = strchr(url, '?');
		sep = q == NULL ? "?" : (url[len - 1] == '?' || url[len - 1] == '&') ? "" : "&";
	} else if (!keep) {
		sep = len > 0 ? " " : "";
	}
	char extra[64] = "";
	if (!keep)
		snprintf(extra, sizeof extra, "%sconnect_timeout=%d", sep, DB_CONNECT_TIMEOUT_S);
	size_t n = len + strlen(extra) + 1;
	*out = malloc(n);
	if (*out == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	snprintf(*out, n, "%s%s", url, extra);
	return ERR_OK;
}
