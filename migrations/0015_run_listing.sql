-- 0015_run_listing: the order GET /v1/runs lists runs in, kept in a narrow
-- table of its own (issue 13, items 1 and 5; README "How runs are listed";
-- BENCHMARKS.md "Issue 13: the list order off the run row").
--
-- run_list (created_at DESC, run_id DESC) and run_list_workflow (workflow,
-- created_at DESC, run_id DESC), migrations/0001, index keys that never
-- change; yet every claim and every settlement of a step is a non-HOT update
-- of the wide run row, which adds an entry to each: 4 of the 11 index
-- entries a step wrote. Without them PostgreSQL's time per step of a 10-step
-- run fell by 12% to 23% in alternated benchmarks.
-- Here the same keys are written once per run, when it is created
-- (hf_submit, hf_submit_many, hf_group_submit), and deleted with it
-- (hf_delete_runs), as migrations/0012_run_key.sql did for keys.
--
-- - run_id, workflow, created_at: as on the run (set at submission, never
--   changed; a rerun keeps its created_at).
-- - run_listing_all: GET /v1/runs newest first, with or without
--   ?created_after / ?created_before (db/run.c q_list).
-- - run_listing_workflow: the same with ?workflow.
-- There is no index on run_id alone: a row is found by its (created_at,
-- run_id), which hf_delete_runs has from the run it deletes, through
-- run_listing_all. That index is unique (a run is listed once) and is the
-- table's replica identity, so that a logical replication publication of
-- every table can publish its deletes. Lists filtered by a status only few runs have (failed,
-- cancelled: run_list_ended; the active ones: run_active_workflow) or by a
-- group (run_by_group) read run through those indexes, as before.
--
-- run is locked against writes first, so that no run created while the
-- backfill reads escapes it; db/migrate.c loads the new engine in this same
-- transaction, so no run is created by the engine of the release before
-- once the lock is released. The backfill reads run once, writes waiting
-- meanwhile (about a second for 200,000 runs).

LOCK TABLE run IN SHARE MODE;

CREATE TABLE run_listing (
	run_id     text NOT NULL,
	workflow   text NOT NULL,
	created_at timestamptz NOT NULL
);

INSERT INTO run_listing (run_id, workflow, created_at)
SELECT run_id, workflow, created_at FROM run;

CREATE UNIQUE INDEX run_listing_all ON run_listing (created_at DESC, run_id DESC);
ALTER TABLE run_listing REPLICA IDENTITY USING INDEX run_listing_all;
CREATE INDEX run_listing_workflow ON run_listing (workflow, created_at DESC, run_id DESC);

DROP INDEX run_list;
DROP INDEX run_list_workflow;
