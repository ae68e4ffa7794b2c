-- Retention (README, HOOKFLOW_RETENTION_MS and HOOKFLOW_DEAD_RETENTION_MS):
-- terminated runs and old dead letters are deleted in batches; active runs
-- are never touched.

-- Deletes terminated runs `ids` (locked by the caller) with their history,
-- memos, replay records, finished callbacks, keys (run_key) and list rows
-- (run_listing).
CREATE FUNCTION hf_delete_runs(ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM step_attempt WHERE run_id = ANY (ids);
	DELETE FROM memo WHERE run_id = ANY (ids);
	DELETE FROM step_output WHERE run_id = ANY (ids);
	DELETE FROM callback WHERE run_id = ANY (ids) AND status IN ('done', 'dead');
	DELETE FROM run_key WHERE run_id = ANY (ids);
	-- a list row is found by its (created_at, run_id), through
	-- run_listing_all (migrations/0015_run_listing.sql)
	WITH gone AS (DELETE FROM run WHERE run_id = ANY (ids) RETURNING run_id, created_at)
	DELETE FROM run_listing l USING gone g
	WHERE l.created_at = g.created_at AND l.run_id = g.run_id;
END
$$;

-- Deletes up to p_limit runs that terminated at least p_retention_ms ago
-- (0: keep forever), and dead letters (and dead callbacks) older than
-- p_dead_ms. Returns how many rows of runs and dead letters went, so the
-- caller repeats while a batch was full.
CREATE FUNCTION hf_sweep(p_retention_ms bigint, p_dead_ms bigint, p_limit integer)
RETURNS integer
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	gone text[];
	n integer := 0;
	d integer := 0;
BEGIN
	IF p_retention_ms > 0 THEN
		SELECT array_agg(run_id) INTO gone FROM (
			SELECT run_id FROM run
			WHERE finished_at <= hf_ago(p_retention_ms)
			  AND status IN ('succeeded', 'failed', 'cancelled')
			ORDER BY finished_at LIMIT p_limit FOR UPDATE SKIP LOCKED) x;
		IF gone IS NOT NULL THEN
			PERFORM hf_delete_runs(gone);
			n := cardinality(gone);
		END IF;
	END IF;
	IF p_dead_ms > 0 THEN
		DELETE FROM dead_letter WHERE id IN (
			SELECT id FROM dead_letter
			WHERE created_at <= hf_ago(p_dead_ms)
			ORDER BY created_at LIMIT p_limit);
		GET DIAGNOSTICS d = ROW_COUNT;
		DELETE FROM callback WHERE id IN (
			SELECT id FROM callback WHERE status = 'dead'
			  AND finished_at <= hf_ago(p_dead_ms)
			LIMIT p_limit);
	END IF;
	-- The dashboard's figures (migrations/0011_step_stats.sql): the shards of
	-- the minutes that are over (by five minutes: no settlement runs that
	-- long) folded into shard 0, one row per minute, workflow and bucket;
	-- minutes older than 7 days deleted.
	WITH gone AS (
		DELETE FROM step_stats s WHERE (s.minute, s.workflow, s.shard, s.bucket) IN (
			SELECT x.minute, x.workflow, x.shard, x.bucket FROM step_stats x
			WHERE x.minute < now() - interval '5 minutes' AND x.shard <> 0
			FOR UPDATE SKIP LOCKED)
		RETURNING s.*)
	INSERT INTO step_stats AS s (minute, workflow, shard, bucket, attempts, errors, succeeded,
				     failed, cancelled)
	SELECT g.minute, g.workflow, 0, g.bucket, sum(g.attempts), sum(g.errors), sum(g.succeeded),
	       sum(g.failed), sum(g.cancelled)
	FROM gone g GROUP BY g.minute, g.workflow, g.bucket
	-- in key order: two instances' sweeps folding rows of one minute take the
	-- shard 0 rows' locks in the same order, never in a deadlock
	ORDER BY g.minute, g.workflow, g.bucket
	ON CONFLICT (minute, workflow, shard, bucket) DO UPDATE SET
		attempts = s.attempts + EXCLUDED.attempts, errors = s.errors + EXCLUDED.errors,
		succeeded = s.succeeded + EXCLUDED.succeeded, failed = s.failed + EXCLUDED.failed,
		cancelled = s.cancelled + EXCLUDED.cancelled;
	DELETE FROM step_stats WHERE (minute, workflow, shard, bucket) IN (
		SELECT x.minute, x.workflow, x.shard, x.bucket FROM step_stats x
		WHERE x.minute < now() - interval '7 days' LIMIT p_limit FOR UPDATE SKIP LOCKED);
	-- Rate-limit windows that are over (hf_claim writes them).
	DELETE FROM flow_rate WHERE (workflow, key) IN (
		SELECT f.workflow, f.key FROM flow_rate f WHERE f.expires_at < now()
		ORDER BY f.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED);
	RETURN greatest(n, d);
END
$$;
