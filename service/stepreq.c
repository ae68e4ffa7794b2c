/* stepreq: the body of a step request. */
#include "service/stepreq.h"

#include "base/strbuf.h"
#include "base/timefmt.h"

#include <string.h>

/* The length of JSON text `s`, "null" when NULL. */
static size_t text_len(const char *s)
{
	return s != NULL ? strlen(s) : 4;
}

char *stepreq_body(const struct claimed_job *j, const char *public_url, const char *token,
		   size_t *len)
{
	struct strbuf b = {0};
	size_t payload_len = j->payload == NULL   ? 4
			     : j->payload_len > 0 ? j->payload_len
						  : strlen(j->payload);
	/* Room for it all at once: the JSON texts as they are, the strings
	 * (the run id twice, in the memo's URL too) at most six bytes a byte
	 * escaped, and 512 bytes of names, numbers and the deadline. */
	size_t strings = 2 * strlen(j->run_id) + strlen(j->workflow) +
			 text_len(j->concurrency_key) + text_len(j->group_id) +
			 text_len(j->group_key) + strlen(public_url) + strlen(token) + 16;
	strbuf_reserve(&b, payload_len + text_len(j->headers) + text_len(j->signal) +
				   text_len(j->children) + text_len(j->last_heartbeat) +
				   6 * strings + 512);
	char deadline[TIMEFMT_RFC3339_LEN + 1];
	timefmt_rfc3339(j->now_ms + j->timeout_ms, deadline);

	strbuf_puts(&b, "{\"run_id\":");
	strbuf_json_string(&b, j->run_id);
	strbuf_puts(&b, ",\"workflow\":");
	strbuf_json_string(&b, j->workflow);
	strbuf_printf(&b, ",\"step\":%d,\"attempt\":%d,\"max_attempts\":%d,\"generation\":%d",
		      j->step, j->attempt, j->max_attempts, j->generation);
	strbuf_puts(&b, ",\"payload\":");
	strbuf_add(&b, j->payload ? j->payload : "null", payload_len);
	strbuf_puts(&b, ",\"headers\":");
	strbuf_puts(&b, j->headers ? j->headers : "{}");
	strbuf_puts(&b, ",\"concurrency_key\":");
	if (j->concurrency_key != NULL)
		strbuf_json_string(&b, j->concurrency_key);
	else
		strbuf_puts(&b, "null");
	if (j->signal != NULL) {
		strbuf_puts(&b, ",\"signal\":");
		strbuf_puts(&b, j->signal);
	}
	if (j->children != NULL) {
		strbuf_puts(&b, ",\"children\":");
		strbuf_puts(&b, j->children);
	}
	if (j->last_heartbeat != NULL) {
		strbuf_puts(&b, ",\"last_heartbeat\":");
		strbuf_puts(&b, j->last_heartbeat);
	}
	if (j->group_id != NULL) {
		strbuf_puts(&b, ",\"group\":{\"id\":");
		strbuf_json_string(&b, j->group_id);
		strbuf_puts(&b, ",\"key\":");
		strbuf_json_string(&b, j->group_key ? j->group_key : "");
		strbuf_puts(&b, "}");
	}
	strbuf_puts(&b, ",\"deadline\":");
	strbuf_json_string(&b, deadline);
	strbuf_puts(&b, ",\"memo\":{\"url\":");
	struct strbuf url = {0};
	strbuf_printf(&url, "%s/v1/runs/%s", public_url, j->run_id);
	strbuf_json_string(&b, url.data ? url.data : "");
	bool url_oom = url.oom;
	strbuf_cleanup(&url);
	strbuf_puts(&b, ",\"token\":");
	strbuf_json_string(&b, token);
	strbuf_puts(&b, "}}");
	if (b.oom || url_oom) {
		strbuf_cleanup(&b);
		return NULL;
	}
	if (len != NULL)
		*len = b.len;
	return strbuf_take(&b);
}
