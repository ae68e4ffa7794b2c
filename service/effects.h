/* effects: the `kv` effects object ({"put": {key: value}, "delete": [key]}) of
 * a run submission or a step outcome, validated once for both. Pure. */
#ifndef HOOKFLOW_EFFECTS_H
#define HOOKFLOW_EFFECTS_H

#include <jansson.h>

#include "base/err.h"

#define EFFECTS_MAX_VALUE_BYTES (256 * 1024)
#define EFFECTS_RESERVED_PREFIX "workflow/"

struct effects {
	json_t *put; /* object key -> JSON value (new reference), NULL when absent or empty */
	json_t *del; /* array of key strings (new reference), NULL when absent or empty */
};

/* Validates `kv` (borrowed; NULL or JSON null means no effects) and fills
 * `out` with new references. `field` names the object in messages ("kv").
 * Rules: an object with only "put" (object) and "delete" (array of strings);
 * every key passes ids_check_key and does not start with "workflow/"; every
 * value's canonical JSON is at most 256 KiB; no key both put and deleted.
 * On failure `out` is left empty and ERR_INVALID names the offending field,
 * e.g. "kv.put[\"workflow/x\"]: key prefix workflow/ is reserved". */
enum err_code effects_parse(const json_t *kv, const char *field, struct effects *out,
			    struct err *e);

/* True when `out` holds no put and no delete. */
int effects_empty(const struct effects *fx);

/* Releases the references held by `fx` and zeroes it. A zeroed struct is a no-op. */
void effects_cleanup(struct effects *fx);

#endif
