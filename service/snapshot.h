/* snapshot: what /readyz and /metrics say about the database, kept by one
 * thread of its own on a connection of its own.
 *
 * A probe or a scrape never queries the database and never takes a pooled
 * connection: it copies the latest snapshot. A reader that finds it older
 * than SNAPSHOT_FRESH_MS asks the thread for a new one, so the database sees
 * at most about one check a second however many probes arrive, and none
 * while nobody asks. The reader that asked waits up to SNAPSHOT_WAIT_MS for
 * the new snapshot (so an occasional probe sees the present, not the state of
 * its previous visit); readers arriving while a refresh runs never wait. A
 * snapshot older than SNAPSHOT_STALE_MS (the database does not answer the
 * thread) reports not ready and the database down. */
#ifndef HOOKFLOW_SNAPSHOT_H
#define HOOKFLOW_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "base/strbuf.h"

#define SNAPSHOT_FRESH_MS 1000
#define SNAPSHOT_WAIT_MS 2000
#define SNAPSHOT_STALE_MS 5000

struct snapshot;

/* What a reader gets. */
struct snapshot_view {
	bool ready;     /* database reachable and its schema current */
	bool db_up;     /* the database answered the latest check */
	char why[256];  /* why not ready (never the database's own error text) */
	int64_t age_ms; /* how old the snapshot is */
};

/* `cfg` is borrowed and must outlive the snapshot. NULL when out of memory. */
struct snapshot *snapshot_new(const struct config *cfg);

/* Takes a first snapshot (on the calling thread), then starts the thread. */
enum err_code snapshot_start(struct snapshot *s, struct err *e);

/* Copies the latest snapshot into *v and, when `gauges` is not NULL, appends
 * its database gauges (Prometheus text) to it. Any thread. */
void snapshot_read(struct snapshot *s, struct snapshot_view *v, struct strbuf *gauges);

/* Stops and joins the thread. */
void snapshot_stop(struct snapshot *s);

/* Frees the snapshot and closes its connection. NULL is a no-op. */
void snapshot_free(struct snapshot *s);

#endif
