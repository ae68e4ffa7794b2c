-- 0006_list_indexes: what a database that keeps many finished runs needs so
-- that no statement reads all of them (tests/integration/test_size_plans.py
-- shows every statement's plan on 20,000 kept runs):
--
-- - GET /v1/runs?status=failed (or cancelled), alone or with ?workflow=:
--   few runs end so, and the newest-first page walked run_list (or
--   run_list_workflow) over every run that succeeded to find them. These
--   indexes hold only the runs that ended failed or cancelled, so a run that
--   succeeds never writes them.
-- - The retention sweep (hf_sweep, every second while
--   HOOKFLOW_DEAD_RETENTION_MS is on, its default) looks for dead callbacks
--   past their window: it read the whole callback table, where every
--   delivered callback stays as long as its run.
--
-- Building them reads run and callback once, with writes to them waiting
-- meanwhile (about a second for 200,000 runs).

CREATE INDEX run_list_ended ON run (status, created_at DESC, run_id DESC)
	WHERE status IN ('failed', 'cancelled');
CREATE INDEX run_list_workflow_ended ON run (workflow, status, created_at DESC, run_id DESC)
	WHERE status IN ('failed', 'cancelled');
CREATE INDEX callback_dead ON callback (finished_at) WHERE status = 'dead';
