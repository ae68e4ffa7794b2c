/* routes: every endpoint of the service, in one table that the program hands
 * to the HTTP server (http_server_start). */
#ifndef HOOKFLOW_ROUTES_H
#define HOOKFLOW_ROUTES_H

#include "service/http.h"

extern const struct http_route routes[];
extern const int routes_count;

#endif
