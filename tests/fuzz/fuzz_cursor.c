/* fuzz_cursor: the opaque `cursor` query value of every list (db_cursor_decode),
 * and the round trip through db_cursor_encode. */
#include "tests/fuzz/fuzz.h"

#include "db/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size);
	int64_t ms = -1;
	char *id = NULL;
	struct err e = {0};
	enum err_code rc = db_cursor_decode(s, &ms, &id, &e);
	if (rc != ERR_OK) {
		fuzz_check_err(rc, &e);
		FUZZ_CHECK(id == NULL);
	} else {
		FUZZ_CHECK(ms >= 0 && id != NULL && id[0] != '\0');
		char *again = db_cursor_encode(ms, id);
		if (again != NULL) {
			int64_t ms2;
			char *id2 = NULL;
			FUZZ_CHECK(db_cursor_decode(again, &ms2, &id2, &e) == ERR_OK);
			FUZZ_CHECK(ms2 == ms && strcmp(id2, id) == 0);
			free(id2);
		}
		free(again);
	}
	free(id);
	free(s);
	return 0;
}
