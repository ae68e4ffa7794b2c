-- 0016_analyze: what autovacuum's ANALYZE reads of the churning tables (issue
-- 13, item 5; README "Autovacuum and checkpoints"; BENCHMARKS.md
-- "Issue 13: the soak's ten-second beat: ANALYZE").
--
-- Under a steady load the run table's rows change about twenty times each (a
-- claim and a settlement a step), so with PostgreSQL's defaults
-- (autovacuum_analyze_scale_factor 0.1) autovacuum analyzed run and
-- step_attempt at every visit, every 10 s at the recommended naptime. Each
-- ANALYZE of run took 0.3 s of a core (0.5 s elapsed), most of it sorting a
-- 30,000-row sample of every column, the jsonb payloads included; of
-- step_attempt 0.13 s. On a machine the service keeps busy that slowed the
-- dispatcher's cycles threefold for a second or two, and the backlog took
-- seconds more to drain: in make soak the p99 of a 10 s interval moved
-- between 170 and 620 ms in step with autovacuum's visits.
--
-- Columns that no statement selects, joins, groups or sorts rows by (the
-- payloads, texts and bookkeeping read only with the row found by its key)
-- now have no statistics gathered (SET STATISTICS 0): the planner never uses
-- them. Every column a WHERE, JOIN, ORDER BY or index names keeps the default.
-- ANALYZE of a soak's run table: 0.30 -> 0.12 s; step_attempt 0.17 -> 0.11 s.
-- How often autovacuum analyzes is left as it is: analyzing run and
-- step_attempt less often (autovacuum_analyze_scale_factor 10 and 1) made no
-- difference the soak could tell, with this or without it.
--
-- SET STATISTICS takes a SHARE UPDATE EXCLUSIVE lock only: settlements,
-- claims and submissions go on meanwhile.

ALTER TABLE run
	ALTER COLUMN job_id SET STATISTICS 0,
	ALTER COLUMN input SET STATISTICS 0,
	ALTER COLUMN input_hash SET STATISTICS 0,
	ALTER COLUMN payload SET STATISTICS 0,
	ALTER COLUMN signal SET STATISTICS 0,
	ALTER COLUMN headers SET STATISTICS 0,
	ALTER COLUMN callback_url SET STATISTICS 0,
	ALTER COLUMN claim_token SET STATISTICS 0,
	ALTER COLUMN claimed_at SET STATISTICS 0,
	ALTER COLUMN result SET STATISTICS 0,
	ALTER COLUMN error SET STATISTICS 0,
	ALTER COLUMN error_kind SET STATISTICS 0,
	ALTER COLUMN final_step SET STATISTICS 0,
	ALTER COLUMN group_key SET STATISTICS 0,
	ALTER COLUMN updated_at SET STATISTICS 0,
	ALTER COLUMN cancel_reason SET STATISTICS 0,
	ALTER COLUMN heartbeat_timeout_ms SET STATISTICS 0,
	ALTER COLUMN heartbeat SET STATISTICS 0,
	ALTER COLUMN heartbeat_at SET STATISTICS 0,
	ALTER COLUMN last_heartbeat SET STATISTICS 0,
	ALTER COLUMN wait_keys SET STATISTICS 0,
	ALTER COLUMN depth SET STATISTICS 0,
	ALTER COLUMN wait_children SET STATISTICS 0,
	ALTER COLUMN children SET STATISTICS 0,
	ALTER COLUMN trace_id SET STATISTICS 0,
	ALTER COLUMN parent_span_id SET STATISTICS 0,
	ALTER COLUMN tracestate SET STATISTICS 0,
	ALTER COLUMN span_started_at SET STATISTICS 0,
	ALTER COLUMN waited_since SET STATISTICS 0;

ALTER TABLE step_attempt
	ALTER COLUMN job_id SET STATISTICS 0,
	ALTER COLUMN payload SET STATISTICS 0,
	ALTER COLUMN signal SET STATISTICS 0,
	ALTER COLUMN started_at SET STATISTICS 0,
	ALTER COLUMN http_status SET STATISTICS 0,
	ALTER COLUMN error SET STATISTICS 0,
	ALTER COLUMN heartbeat SET STATISTICS 0,
	ALTER COLUMN heartbeat_at SET STATISTICS 0,
	ALTER COLUMN output SET STATISTICS 0;

-- A callback's body is its run's outcome, payload and all.
ALTER TABLE callback ALTER COLUMN body SET STATISTICS 0;
