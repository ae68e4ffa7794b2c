-- 0011_step_stats: the figures of the dashboard and of /v1/workflows/{name}/stats
-- and /v1/stats/series, counted as they happen (issue 18; README "Dashboard").
--
-- Every settlement (db/engine/05_settle.sql, the one place where a step
-- attempt is recorded and where a run ends) adds what it settled to the row
-- of its minute, workflow and duration bucket:
--
-- - attempts and errors (transient_error, permanent_error, lease_expired) of
--   the step attempts whose duration, from the call's start to its
--   settlement, falls in `bucket`: 0 for under 1 ms, b >= 1 for
--   [2^((b-1)/4), 2^(b/4)) ms (four buckets per doubling, so that a
--   percentile read from them is within 9% of the true one), 99 for 2^24.5
--   ms and more, -2 for an attempt without a start (a cancel before the call);
-- - bucket -1: the runs that ended, by status.
--
-- `shard` is the PostgreSQL backend that wrote the row (pg_backend_pid()), so
-- that concurrent settlements never wait on one another's row; the retention
-- sweep folds the shards of minutes that are over into shard 0 and deletes
-- minutes older than 7 days. Each read is then one row per minute and bucket,
-- however busy the system was: exact counts, and percentiles within a bucket.
--
-- The figures start with this migration: attempts and runs settled before
-- it are not counted.

CREATE TABLE step_stats (
	minute    timestamptz NOT NULL,
	workflow  text NOT NULL,
	shard     integer NOT NULL,
	bucket    smallint NOT NULL,
	attempts  bigint NOT NULL DEFAULT 0,
	errors    bigint NOT NULL DEFAULT 0,
	succeeded bigint NOT NULL DEFAULT 0,
	failed    bigint NOT NULL DEFAULT 0,
	cancelled bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (minute, workflow, shard, bucket)
);
CREATE INDEX step_stats_workflow ON step_stats (workflow, minute);
-- The rows the sweep folds (few: a few minutes' worth).
CREATE INDEX step_stats_unfolded ON step_stats (minute) WHERE shard <> 0;
