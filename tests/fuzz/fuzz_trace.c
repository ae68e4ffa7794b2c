/* fuzz_trace: W3C traceparent and tracestate header values
 * (trace_parent_parse): the first line of the input is the traceparent, the
 * rest the tracestate. */
#include "tests/fuzz/fuzz.h"

#include "base/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size);
	char *nl = strchr(s, '\n');
	const char *state = NULL;
	if (nl != NULL) {
		*nl = '\0';
		state = nl + 1;
	}
	struct trace_parent t;
	if (trace_parent_parse(s, state, &t)) {
		FUZZ_CHECK(strlen(t.trace_id) == TRACE_ID_HEX);
		FUZZ_CHECK(trace_hex_id_valid(t.trace_id, TRACE_ID_HEX));
		FUZZ_CHECK(strlen(t.span_id) == TRACE_SPAN_HEX);
		FUZZ_CHECK(trace_hex_id_valid(t.span_id, TRACE_SPAN_HEX));
		/* A kept tracestate is short, printable ASCII (safe in a header),
		 * and reads back as itself. */
		size_t n = strlen(t.tracestate);
		FUZZ_CHECK(n <= TRACE_STATE_MAX);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(t.tracestate[i] >= 0x20 && t.tracestate[i] <= 0x7e);
		/* What hookflow sends with it, it reads back. */
		char tp[TRACE_PARENT_LEN + 1];
		struct trace_parent again;
		trace_format_parent(t.trace_id, t.span_id, tp);
		FUZZ_CHECK(trace_parent_parse(tp, n ? t.tracestate : NULL, &again));
		FUZZ_CHECK(strcmp(again.trace_id, t.trace_id) == 0);
		FUZZ_CHECK(strcmp(again.tracestate, t.tracestate) == 0);
		struct trace_span span;
		trace_attempt_span(t.trace_id, s, 1, 0, 1, &span);
		FUZZ_CHECK(trace_hex_id_valid(span.hex, TRACE_SPAN_HEX));
	} else {
		FUZZ_CHECK(t.trace_id[0] == '\0' && t.span_id[0] == '\0' &&
			   t.tracestate[0] == '\0');
	}
	free(s);
	return 0;
}
