/* client: the command line's HTTP calls (libcurl easy interface). */
#include "cmd/client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/timefmt.h"
#include "base/version.h"

struct sink {
	struct strbuf body;
	long cap;
	bool too_large;
	char request_id[128];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;
	if ((long)(s->body.len + len) > s->cap) {
		s->too_large = true;
		return 0; /* aborts the transfer */
	}
	strbuf_add(&s->body, p, len);
	return s->body.oom ? 0 : len;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;
	static const char name[] = "x-request-id:";
	if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
		const char *v = p + sizeof name - 1;
		size_t vl = len - (sizeof name - 1);
		while (vl > 0 && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (vl >= sizeof s->request_id)
			vl = sizeof s->request_id - 1;
		memcpy(s->request_id, v, vl);
		s->request_id[vl] = '\0';
	}
	return len;
}

enum err_code client_send(const struct client_request *req, struct client_reply *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	struct sink s = {.cap = req->max_response};
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	for (const char *const *h = req->headers; h != NULL && *h != NULL; h++) {
		struct curl_slist *more = curl_slist_append(hdrs, *h);
		if (more == NULL) {
			curl_slist_free_all(hdrs);
			hdrs = NULL;
			break;
		}
		hdrs = more;
	}
	if (c == NULL || (req->headers != NULL && req->headers[0] != NULL && hdrs == NULL)) {
		curl_easy_cleanup(c);
		curl_slist_free_all(hdrs);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
	if (req->body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	} else if (strcmp(req->method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "hookflow/" HOOKFLOW_VERSION);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 req->timeout_ms < CLIENT_CONNECT_TIMEOUT_MS ? req->timeout_ms
								     : CLIENT_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (!req->use_env_proxy) {
		curl_easy_setopt(c, CURLOPT_PROXY, "");
		curl_easy_setopt(c, CURLOPT_NOPROXY, "");
	}
	int64_t t0 = timefmt_mono_ms();
	CURLcode rc = curl_easy_perform(c);
	out->duration_ms = timefmt_mono_ms() - t0;
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);

	memcpy(out->request_id, s.request_id, sizeof out->request_id);
	out->too_large = s.too_large;
	out->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
	if (s.body.oom) {
		strbuf_cleanup(&s.body);
		return err_set(e, ERR_INTERNAL, "out of memory");
	}
	out->len = s.body.len;
	out->body = s.body.data != NULL ? strbuf_take(&s.body) : strdup("");
	if (out->body == NULL)
		return err_set(e, ERR_INTERNAL, "out of memory");
	if (rc != CURLE_OK) {
		if (s.too_large)
			snprintf(out->error, sizeof out->error,
				 "the answer's body exceeds %ld bytes", req->max_response);
		else
			snprintf(out->error, sizeof out->error, "%s",
				 errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return err_set(e, ERR_UNAVAILABLE, "%s", out->error);
	}
	out->status = status;
	return ERR_OK;
}

enum err_code client_api(const struct client_config *cfg, const char *method, const char *path,
			 const char *body, long timeout_ms, struct client_reply *out, struct err *e)
{
	struct strbuf url = {0}, auth = {0};
	strbuf_puts(&url, cfg->url);
	strbuf_puts(&url, path);
	if (cfg->token != NULL)
		strbuf_printf(&auth, "Authorization: Bearer %s", cfg->token);
	const char *headers[4];
	int n = 0;
	headers[n++] = "Accept: application/json";
	if (body != NULL)
		headers[n++] = "Content-Type: application/json";
	if (cfg->token != NULL)
		headers[n++] = auth.data;
	headers[n] = NULL;
	enum err_code rc;
	if (url.oom || auth.oom) {
		memset(out, 0, sizeof *out);
		rc = err_set(e, ERR_INTERNAL, "out of memory");
	} else {
		struct client_request req = {
			.method = method,
			.url = url.data,
			.body = body,
			.body_len = body != NULL ? strlen(body) : 0,
			.headers = headers,
			.timeout_ms = timeout_ms,
			.max_response = CLIENT_MAX_API_RESPONSE,
			.use_env_proxy = true,
		};
		struct err te = {0};
		rc = client_send(&req, out, &te);
		if (rc == ERR_UNAVAILABLE && out->too_large)
			rc = err_set(e, ERR_TOO_LARGE, "the answer of %s exceeds %ld bytes",
				     cfg->url, CLIENT_MAX_API_RESPONSE);
		else if (rc == ERR_UNAVAILABLE)
			err_set(e, rc, "cannot reach hookflow at %s: %s", cfg->url, te.msg);
		else if (rc != ERR_OK)
			err_set(e, rc, "%s", te.msg);
	}
	strbuf_cleanup(&url);
	if (auth.data != NULL)
		memset(auth.data, 0, auth.len);
	strbuf_cleanup(&auth);
	return rc;
}

void client_reply_cleanup(struct client_reply *r)
{
	free(r->body);
	memset(r, 0, sizeof *r);
}

void client_escape(const char *s, struct strbuf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char ch = *p;
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '~' || ch == '-') {
			strbuf_add(out, (const char *)p, 1);
		} else {
			char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
			strbuf_add(out, esc, 3);
		}
	}
}
