-- 0007_flow_control: a flow-control key per run, per-key concurrency, pause
-- (issue 14; README "Flow control").
--
-- - run.concurrency_key: the run's key (NULL: none), set at submission and
--   never changed, shown on the run, sent to the webhook, a list filter.
-- - workflow.key_concurrency: at most that many runs of one key have a step
--   call in flight at once (0: no limit). The count is flow_key.inflight,
--   taken under that row's lock by the claim and given back when the step's
--   claim ends (run.holds_key_slot, like holds_slot for max_concurrency), so
--   it holds across instances. A row exists only while its key holds a slot.
-- - workflow.key_mode (queue, skip, cancel_active, debounce; with
--   debounce_ms and debounce_max_ms): what a submission does when its key
--   has an active run. run_active_key finds a key's active runs;
--   run.debounce_first_at is when a debounced key's first submission came
--   (a superseding run starts at the latest debounce_max_ms after it);
--   run.cancel_reason is the error a superseded run ends with.
-- - workflow.rate_limit, rate_period_ms, rate_per_key: at most rate_limit
--   step calls start in any rate_period_ms, for the workflow or per key (0:
--   no limit). flow_rate keeps the start times of the calls of the last
--   period per (workflow, key or ''), oldest first, under its row's lock;
--   the retention sweep deletes the rows whose period is over.
-- - workflow.paused: no step of its runs is claimed while it is set.
-- - workflow.endpoint: the origin (scheme://host:port) of its URL, shared by
--   every workflow that calls it: each instance keeps an in-flight
--   allowance and a circuit breaker per endpoint (service/endpoints.c) and
--   tells the claim how many calls each constrained endpoint may still
--   start; endpoint_control false leaves a workflow's calls out of it.
-- - run_claim_lane replaces run_claim: the claim takes the pending runs lane
--   by lane, a lane being (priority, workflow, key), in turn within a
--   priority (fair share), and skips a whole lane or workflow that may not
--   run now (paused, at max_concurrency, key at key_concurrency) with one
--   index probe instead of reading its queued runs.
--
-- Building the index reads run once, with writes waiting meanwhile (about a
-- second for 200,000 runs).

ALTER TABLE run
	ADD COLUMN concurrency_key text,
	ADD COLUMN holds_key_slot  boolean NOT NULL DEFAULT false,
	ADD COLUMN debounce_first_at timestamptz,
	ADD COLUMN cancel_reason   text;  -- the run's error when a cancel ends it

ALTER TABLE workflow
	ADD COLUMN paused          boolean NOT NULL DEFAULT false,
	ADD COLUMN key_concurrency integer NOT NULL DEFAULT 0 CHECK (key_concurrency >= 0),
	ADD COLUMN key_mode        text NOT NULL DEFAULT 'queue'
		CHECK (key_mode IN ('queue', 'skip', 'cancel_active', 'debounce')),
	ADD COLUMN debounce_ms     integer NOT NULL DEFAULT 0 CHECK (debounce_ms >= 0),
	ADD COLUMN debounce_max_ms integer NOT NULL DEFAULT 0 CHECK (debounce_max_ms >= 0),
	ADD COLUMN rate_limit      integer NOT NULL DEFAULT 0 CHECK (rate_limit >= 0),
	ADD COLUMN rate_period_ms  integer NOT NULL DEFAULT 0 CHECK (rate_period_ms >= 0),
	ADD COLUMN rate_per_key    boolean NOT NULL DEFAULT false,
	ADD COLUMN endpoint_control boolean NOT NULL DEFAULT true,
	ADD COLUMN endpoint text GENERATED ALWAYS AS (
		lower(substring(url from '^([A-Za-z][A-Za-z0-9+.-]*)://')) || '://' ||
		lower(substring(url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)')) ||
		CASE WHEN substring(url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)')
			  ~ ':[0-9]+$' THEN ''
		     WHEN url ~* '^https:' THEN ':443' ELSE ':80' END) STORED;

CREATE TABLE flow_key (
	workflow text NOT NULL,
	key      text NOT NULL,
	inflight integer NOT NULL CHECK (inflight >= 0),
	PRIMARY KEY (workflow, key)
);

CREATE TABLE flow_rate (
	workflow text NOT NULL,
	key      text NOT NULL,           -- '' for a workflow-wide limit
	starts   timestamptz[] NOT NULL,  -- ascending, within the last period
	expires_at timestamptz NOT NULL,  -- the last start + the period: then useless
	PRIMARY KEY (workflow, key)
);
CREATE INDEX flow_rate_expires ON flow_rate (expires_at);

CREATE INDEX run_claim_lane ON run (priority, workflow, (coalesce(concurrency_key, '')), seq)
	WHERE status = 'pending';
DROP INDEX run_claim;

CREATE INDEX run_active_key ON run (workflow, concurrency_key)
	WHERE concurrency_key IS NOT NULL AND status NOT IN ('succeeded', 'failed', 'cancelled');

-- GET /v1/runs?concurrency_key= (newest first, alone or with ?workflow=).
CREATE INDEX run_list_key ON run (concurrency_key, created_at DESC, run_id DESC)
	WHERE concurrency_key IS NOT NULL;

-- The claimed job carries the run's key (sent to the webhook) and priority
-- (the lane the claim stopped at) and its workflow's endpoint when the
-- allowance applies to it (db/jobs.h JOB_COLUMNS, last columns).
ALTER TYPE hf_job ADD ATTRIBUTE concurrency_key text, ADD ATTRIBUTE priority integer,
	ADD ATTRIBUTE endpoint text;
