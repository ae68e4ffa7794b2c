/* handlers/dashboard: GET /, the operator dashboard (dashboard/index.html,
 * embedded at build time by scripts/embed-text.sh). The page is public: it
 * holds no data of its own and asks for an API token when the API answers
 * 401. */
#include "handlers/handlers.h"

extern const char hookflow_dashboard[];
extern const unsigned long hookflow_dashboard_len;

void handle_dashboard(struct http_req *r)
{
	http_reply_bytes(r, 200, "text/html; charset=utf-8", hookflow_dashboard,
			 (size_t)hookflow_dashboard_len);
}
