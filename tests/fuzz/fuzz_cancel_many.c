/* fuzz_cancel_many: POST /v1/runs:cancel bodies through runs_parse_cancel_many,
 * and the input as the status query of GET /v1/runs (runs_parse_statuses). */
#include "tests/fuzz/fuzz.h"

#include "base/timefmt.h"
#include "handlers/parse.h"

static const char *const statuses[] = {"pending", "scheduled",  "waiting",
				       "running", "cancelling", "succeeded",
				       "failed",  "cancelled",  NULL};

/* A literal runs_parse_statuses accepted: "{a,b}" of known statuses. */
static void check_literal(const char *lit)
{
	size_t n = strlen(lit);
	FUZZ_CHECK(n >= 2 && lit[0] == '{' && lit[n - 1] == '}');
	const char *p = lit + 1;
	while (*p != '}') {
		size_t l = strcspn(p, ",}");
		bool known = false;
		for (int i = 0; statuses[i] != NULL; i++)
			known |= strlen(statuses[i]) == l && strncmp(statuses[i], p, l) == 0;
		FUZZ_CHECK(known);
		p += l;
		if (*p == ',')
			p++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e = {0};
	struct strbuf st = {0};
	char *q = fuzz_str(data, size);
	enum err_code rc = runs_parse_statuses(q, &st, &e);
	if (rc != ERR_OK)
		fuzz_check_err(rc, &e);
	else
		check_literal(st.data);
	strbuf_cleanup(&st);
	free(q);

	json_t *body = fuzz_json_object(data, size);
	if (body == NULL)
		return 0;
	struct run_cancel_filter f = {0};
	err_clear(&e);
	rc = runs_parse_cancel_many(body, &f, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
	} else {
		int64_t ms;
		FUZZ_CHECK(f.workflow != NULL || f.group_id != NULL || f.created_before != NULL ||
			   f.statuses.data != NULL);
		FUZZ_CHECK(f.workflow == NULL ||
			   ids_check_workflow_name("w", f.workflow, strlen(f.workflow), NULL) ==
				   ERR_OK);
		FUZZ_CHECK(f.group_id == NULL ||
			   ids_check_run_id("g", f.group_id, strlen(f.group_id), NULL) == ERR_OK);
		FUZZ_CHECK(f.created_before == NULL ||
			   timefmt_parse_rfc3339(f.created_before, &ms));
		if (f.statuses.data != NULL)
			check_literal(f.statuses.data);
	}
	runs_cancel_filter_cleanup(&f);
	json_decref(body);
	return 0;
}
