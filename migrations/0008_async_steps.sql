-- 0008_async_steps: steps that stay open past their HTTP call (issue 15;
-- README "Long-running steps").
--
-- A webhook that answers {"outcome": "pending"} keeps its step claimed with
-- no call in flight: the run stays 'running' under the same claim_token, with
-- no lease_owner (no instance renews it) and lease_expires_at at the earlier
-- of its two deadlines, so the reaper that ends expired leases also ends
-- pending steps whose time ran out (a transient error, 'pending timeout' or
-- 'heartbeat timeout'). POST .../complete settles the claim like the
-- webhook's answer; POST .../heartbeat moves the heartbeat deadline.
--
-- - run.pending_since, pending_timeout_at, heartbeat_timeout_ms,
--   heartbeat_timeout_at: set while the step is pending (NULL otherwise).
-- - run.heartbeat, heartbeat_at: the details the current attempt's last
--   heartbeat recorded; kept on the attempt's history row when it settles.
-- - run.last_heartbeat: the details of a previous attempt of this step that
--   did not finish, sent to the next attempt as "last_heartbeat".
-- - workflow.max_pending_ms caps both timeouts (default 24 h).
-- - hf_job carries last_heartbeat and max_pending_ms (the delivery token
--   must outlive a pending step).

ALTER TABLE run
	ADD COLUMN pending_since        timestamptz,
	ADD COLUMN pending_timeout_at   timestamptz,
	ADD COLUMN heartbeat_timeout_ms bigint,
	ADD COLUMN heartbeat_timeout_at timestamptz,
	ADD COLUMN heartbeat            jsonb,
	ADD COLUMN heartbeat_at         timestamptz,
	ADD COLUMN last_heartbeat       jsonb;

ALTER TABLE step_attempt
	ADD COLUMN pending_since timestamptz,
	ADD COLUMN heartbeat     jsonb,
	ADD COLUMN heartbeat_at  timestamptz;

ALTER TABLE workflow
	ADD COLUMN max_pending_ms bigint NOT NULL DEFAULT 86400000
		CHECK (max_pending_ms BETWEEN 1000 AND 31536000000);

ALTER TYPE hf_job ADD ATTRIBUTE last_heartbeat jsonb, ADD ATTRIBUTE max_pending_ms bigint;

-- Waiting for the first of several signals (wait_for_signal with
-- correlation_keys): signal_wait holds every key a waiting run waits on, one
-- waiter per key (its primary key), replacing the unique index on
-- run.wait_key. run.wait_keys lists them all (run.wait_key stays the first).
-- Runs already waiting move in.
CREATE TABLE signal_wait (
	correlation_key text PRIMARY KEY,
	run_id          text NOT NULL
);
CREATE INDEX signal_wait_run ON signal_wait (run_id);
ALTER TABLE run ADD COLUMN wait_keys text[];
INSERT INTO signal_wait (correlation_key, run_id)
	SELECT wait_key, run_id FROM run WHERE status = 'waiting' AND wait_key IS NOT NULL;
UPDATE run SET wait_keys = ARRAY[wait_key] WHERE status = 'waiting' AND wait_key IS NOT NULL;
DROP INDEX run_wait_key;

-- Child runs a step starts and waits for (continue with "children"): a
-- child names its parent (parent_run_id, parent_generation, parent_step,
-- child_key; its run id derived from them) and its depth below the root
-- run. A parent waiting for its children is 'waiting' with wait_children
-- ({"mode", "count", "step"}); when the wait ends its next step receives
-- run.children, the children as they were then. run_children finds a
-- run's children. workflow.on_parent_cancel: what cancelling one of its
-- runs does to that run's active children (cancel them, or abandon them).
ALTER TABLE run
	ADD COLUMN parent_run_id     text,
	ADD COLUMN parent_generation integer,
	ADD COLUMN parent_step       integer,
	ADD COLUMN child_key         text,
	ADD COLUMN depth             integer NOT NULL DEFAULT 0,
	ADD COLUMN wait_children     jsonb,
	ADD COLUMN children          jsonb;
CREATE INDEX run_children ON run (parent_run_id, parent_generation, parent_step,
	child_key COLLATE "C") WHERE parent_run_id IS NOT NULL;
ALTER TABLE workflow ADD COLUMN on_parent_cancel text NOT NULL DEFAULT 'cancel'
	CHECK (on_parent_cancel IN ('cancel', 'abandon'));
ALTER TYPE hf_job ADD ATTRIBUTE children jsonb;
