-- 0012_run_key: a keyed run's key in a narrow table of its own (issue 14,
-- "Cost"; README "Flow control"; BENCHMARKS.md "Issue 14").
--
-- GET /v1/runs?concurrency_key= and key_mode's lookup of a key's active runs
-- (skip, cancel_active, debounce) read indexes that only keyed runs enter.
-- On run (run_list_key, run_active_key, migrations/0007) every claim and
-- every settlement of a keyed run's step, each a non-HOT update of the wide
-- row, added an entry to both: 20 index entries for a run of 10 steps. Here
-- the row is written when the run is created (hf_submit, hf_group_submit),
-- updated when the run ends (hf_settle_steps: active false) and when a rerun
-- starts it again (hf_restart: active true), and deleted with the run
-- (hf_delete_runs): two or three writes per run, whatever its steps.
--
-- - run_id: the run (run.run_id); workflow and concurrency_key as on the run
--   (set at submission, never changed); created_at is run.created_at, so a
--   list by key is in the order of the list of every run.
-- - active: the run's status is not succeeded, failed or cancelled.
-- - run_key_list: GET /v1/runs?concurrency_key= (newest first, alone or with
--   the other filters, db/run.c q_list_key).
-- - run_key_active: a key's active runs (db/engine/03_submit.sql).
--
--
-- A key's slots (key_concurrency, hf_claim) are counted the same way: the
-- claim counts the key's runs that hold one (run.holds_key_slot, through
-- run_key_slot: an index entry when a keyed step is claimed), under the
-- key's advisory lock, which only a claim takes. flow_key, the counter row
-- each keyed step inserted and its settlement deleted (a trigger per run
-- row, hf_release_key_slot, taking the key's lock), is no longer written or
-- read; the runs in flight at the upgrade hold their slots through
-- holds_key_slot. The table stays, unused (a later migration may drop it).
--
-- run is locked against writes first, so that no keyed run created while
-- the backfill reads escapes it; db/migrate.c loads the new engine in this
-- same transaction, so no run is created by the engine of the release
-- before once the lock is released. The backfill reads run once (its keyed
-- runs), writes waiting meanwhile: about a second for 200,000 runs.

LOCK TABLE run IN SHARE MODE;

CREATE TABLE run_key (
	run_id          text PRIMARY KEY,
	workflow        text NOT NULL,
	concurrency_key text NOT NULL,
	created_at      timestamptz NOT NULL,
	active          boolean NOT NULL
);

INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active)
SELECT run_id, workflow, concurrency_key, created_at,
       status NOT IN ('succeeded', 'failed', 'cancelled')
FROM run WHERE concurrency_key IS NOT NULL;

CREATE INDEX run_key_list ON run_key (concurrency_key, created_at DESC, run_id DESC);
CREATE INDEX run_key_active ON run_key (workflow, concurrency_key) WHERE active;

DROP INDEX run_active_key;
DROP INDEX run_list_key;

CREATE INDEX run_key_slot ON run (workflow, concurrency_key) WHERE holds_key_slot;
