/* routes: the table from (method, path pattern) to handler. A pattern segment
 * "{}" captures one percent-decoded path segment. */
#ifndef HOOKFLOW_ROUTES_H
#define HOOKFLOW_ROUTES_H

#include "service/http.h"

enum route_auth {
	ROUTE_PUBLIC = 0, /* no credentials (health, metrics, openapi) */
	ROUTE_API,        /* an API token when tokens are configured */
	ROUTE_MEMO,       /* an API token, or the delivery token of the run in the path */
};

struct route {
	const char *method;
	const char *pattern;
	http_handler_fn fn;
	enum route_auth auth;
};

extern const struct route routes[];
extern const int routes_count;

#endif
