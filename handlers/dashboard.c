/* handlers/dashboard: GET /, the operator dashboard (dashboard/index.html,
 * embedded at build time by scripts/embed-text.sh). The page is public: it
 * holds no data of its own and asks for an API token when the API answers
 * 401.
 *
 * It is served with a Content-Security-Policy that allows exactly its own
 * inline <script> and <style> blocks (by their SHA-256, computed from the
 * embedded page once), requests to its own origin, and nothing else: no
 * other script, style, image, frame, form target or base URL, and no page may
 * frame it (frame-ancestors 'none', X-Frame-Options: DENY for older
 * browsers). No referrer leaves it. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/canon.h"
#include "base/sig.h"
#include "handlers/handlers.h"

extern const char hookflow_dashboard[];
extern const unsigned long hookflow_dashboard_len;

/* Writes the CSP source of the bytes between the first `open` tag of `page`
 * and the `close` tag after it: 'sha256-<base64>', or 'none' when there is
 * no such block. */
static void block_source(const char *page, size_t len, const char *open, const char *close,
			 char *out, size_t cap)
{
	const char *a = memmem(page, len, open, strlen(open));
	const char *b = NULL;
	if (a != NULL) {
		a += strlen(open);
		b = memmem(a, len - (size_t)(a - page), close, strlen(close));
	}
	if (b == NULL) {
		snprintf(out, cap, "'none'");
		return;
	}
	unsigned char h[32];
	char b64[48];
	canon_sha256(a, (size_t)(b - a), h);
	sig_base64(h, sizeof h, b64);
	snprintf(out, cap, "'sha256-%s'", b64);
}

void dashboard_csp(const char *page, size_t len, char *out, size_t cap)
{
	char script[64], style[64];
	block_source(page, len, "<script>", "</script>", script, sizeof script);
	block_source(page, len, "<style>", "</style>", style, sizeof style);
	snprintf(out, cap,
		 "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; "
		 "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		 script, style);
}

static char csp[512];
static pthread_once_t csp_once = PTHREAD_ONCE_INIT;

static void build_csp(void)
{
	dashboard_csp(hookflow_dashboard, (size_t)hookflow_dashboard_len, csp, sizeof csp);
}

void handle_dashboard(struct http_req *r)
{
	pthread_once(&csp_once, build_csp);
	http_reply_header(r, "Content-Security-Policy", csp);
	http_reply_header(r, "X-Frame-Options", "DENY");
	http_reply_header(r, "Referrer-Policy", "no-referrer");
	http_reply_bytes(r, 200, "text/html; charset=utf-8", hookflow_dashboard,
			 (size_t)hookflow_dashboard_len);
}
