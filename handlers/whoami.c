/* handlers/whoami: GET /v1/whoami, what the caller's credential may do (the
 * dashboard disables its actions for a read-only token). */
#include "handlers/handlers.h"

void handle_whoami(struct http_req *r)
{
	const struct app *app = http_req_app(r);
	bool read_only = http_req_scope(r) == TOKEN_SCOPE_READ;
	http_reply_json(r, 200,
			json_pack("{s:s, s:b}", "scope", read_only ? "read" : "admin",
				  "token_required", app->cfg->ntokens > 0));
}
