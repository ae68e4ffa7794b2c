-- 0001_init: workflows, runs (each run row is also its current step job),
-- step attempt history, terminal callbacks, dead letters, application KV, and
-- the transition functions that change them. Every state change of a run is
-- one call of one function below, so it commits in one transaction.
--
-- Wake-ups travel by NOTIFY:
--   hookflow_wake   ''           claimable work appeared (pending run or callback)
--   hookflow_sched  '<epoch ms>' something became due at that time (delay, backoff, run_at)
--   hookflow_cancel '<run_id>'   cancel requested for a running step: abort its call
--   hookflow_done   '<run_id>'   the run terminated (long-poll waiters)

CREATE TABLE hf_meta (
	key   text PRIMARY KEY,
	value bytea NOT NULL
);

-- Key of the memo delivery tokens, shared by every instance on this database.
INSERT INTO hf_meta (key, value)
VALUES ('memo_key', decode(replace(gen_random_uuid()::text, '-', '') ||
			   replace(gen_random_uuid()::text, '-', ''), 'hex'));

CREATE SEQUENCE hf_seq;        -- FIFO order of claimable jobs
CREATE SEQUENCE hf_claim_seq;  -- claim tokens

CREATE TABLE workflow (
	name               text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.-]{1,128}$'),
	url                text NOT NULL,
	callback_url       text,
	timeout_ms         integer NOT NULL CHECK (timeout_ms BETWEEN 1 AND 3600000),
	max_attempts       integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
	priority           integer NOT NULL CHECK (priority >= 0),
	backoff_base_ms    bigint NOT NULL CHECK (backoff_base_ms >= 0),
	backoff_max_ms     bigint NOT NULL CHECK (backoff_max_ms >= 0),
	max_concurrency    integer NOT NULL DEFAULT 0 CHECK (max_concurrency >= 0),
	secret             text,
	step_output_replay boolean NOT NULL DEFAULT false,
	-- step calls holding a concurrency slot (only counted for capped workflows)
	inflight           integer NOT NULL DEFAULT 0 CHECK (inflight >= 0),
	created_at         timestamptz NOT NULL DEFAULT now(),
	updated_at         timestamptz NOT NULL DEFAULT now()
);

-- A run row exists for every run ever submitted (until retention removes it).
-- While the run is active the row is also its current step job: status,
-- attempt, lease and schedule live here, so a transition touches one row.
-- The hot tables (run, step_attempt, callback) carry no CHECK constraints:
-- PostgreSQL re-plans them for every statement that writes a row, and only
-- the functions below write these columns.
CREATE TABLE run (
	run_id           text PRIMARY KEY,             -- [A-Za-z0-9_-]{1,128}, checked by the API
	workflow         text NOT NULL,
	-- pending, scheduled, waiting, running, cancelling | succeeded, failed, cancelled
	status           text NOT NULL,
	step             integer NOT NULL DEFAULT 0,
	attempt          integer NOT NULL DEFAULT 0,   -- attempts used on the current step
	generation       integer NOT NULL DEFAULT 1,
	job_id           text NOT NULL,                -- webhook-id of the current step
	input            jsonb,
	input_hash       bytea NOT NULL,
	payload          jsonb,                        -- the current step's payload
	signal           jsonb,                        -- what the current step receives as "signal"
	headers          jsonb NOT NULL DEFAULT '{}',
	priority         integer NOT NULL,
	max_attempts     integer NOT NULL,
	callback_url     text,
	seq              bigint,                       -- FIFO order among pending runs
	next_at          timestamptz,                  -- when the step is (or was) claimable
	wait_key         text,
	wait_timeout_at  timestamptz,
	cancel_requested boolean NOT NULL DEFAULT false,
	lease_owner      text,
	claim_token      bigint,
	claimed_at       timestamptz,
	lease_expires_at timestamptz,
	holds_slot       boolean NOT NULL DEFAULT false,
	result           jsonb,
	error            text,
	error_kind       text,                         -- transient, permanent
	final_step       integer,
	finished_at      timestamptz,
	group_id         text,
	group_key        text,
	created_at       timestamptz NOT NULL DEFAULT now(),
	updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX run_claim ON run (priority, seq) WHERE status = 'pending';
CREATE INDEX run_due ON run (next_at) WHERE status IN ('scheduled', 'waiting');
CREATE INDEX run_lease ON run (lease_expires_at) WHERE status IN ('running', 'cancelling');
CREATE INDEX run_lease_owner ON run (lease_owner) WHERE status IN ('running', 'cancelling');
CREATE INDEX run_list ON run (created_at DESC, run_id DESC);
CREATE INDEX run_list_workflow ON run (workflow, created_at DESC, run_id DESC);
CREATE INDEX run_active_workflow ON run (workflow)
	WHERE status NOT IN ('succeeded', 'failed', 'cancelled');
CREATE INDEX run_by_group ON run (group_id) WHERE group_id IS NOT NULL;
CREATE INDEX run_finished ON run (finished_at) WHERE finished_at IS NOT NULL;

-- One row per settled attempt of a step: the run's history.
CREATE TABLE step_attempt (
	id          bigserial PRIMARY KEY,
	run_id      text NOT NULL,
	generation  integer NOT NULL,
	step        integer NOT NULL,
	attempt     integer NOT NULL,
	job_id      text NOT NULL,
	payload     jsonb,
	signal      jsonb,
	started_at  timestamptz,
	finished_at timestamptz NOT NULL DEFAULT now(),
	-- continue, succeed, fail, cancel, transient_error, permanent_error,
	-- cancelled, lease_expired
	result      text NOT NULL,
	http_status integer,
	error       text,
	-- an attempt is settled once, whatever instance settles it
	UNIQUE (run_id, generation, step, attempt)
);

-- Terminal callbacks: one job per run termination.
CREATE TABLE callback (
	id               text PRIMARY KEY,
	run_id           text NOT NULL,
	generation       integer NOT NULL,
	workflow         text NOT NULL,
	url              text NOT NULL,
	body             jsonb NOT NULL,
	status           text NOT NULL,                -- pending, scheduled, running, done, dead
	attempt          integer NOT NULL DEFAULT 0,
	max_attempts     integer NOT NULL,
	priority         integer NOT NULL,
	seq              bigint,
	next_at          timestamptz,
	lease_owner      text,
	claim_token      bigint,
	claimed_at       timestamptz,
	lease_expires_at timestamptz,
	last_error       text,
	last_http_status integer,
	created_at       timestamptz NOT NULL DEFAULT now(),
	updated_at       timestamptz NOT NULL DEFAULT now(),
	finished_at      timestamptz,
	UNIQUE (run_id, generation)
);

CREATE INDEX callback_claim ON callback (priority, seq) WHERE status = 'pending';
CREATE INDEX callback_due ON callback (next_at) WHERE status = 'scheduled';
CREATE INDEX callback_lease ON callback (lease_expires_at) WHERE status = 'running';
CREATE INDEX callback_lease_owner ON callback (lease_owner) WHERE status = 'running';

-- Dead steps and dead callbacks.
CREATE TABLE dead_letter (
	id               text PRIMARY KEY,   -- the dead job's id (webhook-id)
	kind             text NOT NULL CHECK (kind IN ('step', 'callback')),
	run_id           text NOT NULL,
	workflow         text NOT NULL,
	generation       integer NOT NULL,
	step             integer,
	attempts         integer NOT NULL,
	last_error       text,
	last_http_status integer,
	payload          jsonb,
	created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dead_letter_list ON dead_letter (created_at DESC, id DESC);

-- The application KV namespace written by kv effects.
CREATE TABLE kv (
	key        text COLLATE "C" PRIMARY KEY,
	value      jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- Signals sent while no run waited on their key: the latest per key.
CREATE TABLE signal_buffer (
	correlation_key text PRIMARY KEY,
	payload         jsonb,
	created_at      timestamptz NOT NULL DEFAULT now()
);

-- One waiter per correlation key.
CREATE UNIQUE INDEX run_wait_key ON run (wait_key) WHERE status = 'waiting';

-- Memos: a durable cache for work inside a step. scope -1 is the run scope,
-- n >= 0 the scope of step n.
CREATE TABLE memo (
	run_id     text NOT NULL,
	scope      integer NOT NULL,
	key        text NOT NULL,
	value      jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, scope, key)
);

-- Step-output replay records: the validated outcome of a 2xx answer, stored
-- before its settlement, keyed by the step's payload hash.
CREATE TABLE step_output (
	run_id       text NOT NULL,
	generation   integer NOT NULL,
	step         integer NOT NULL,
	payload_hash bytea NOT NULL,
	outcome      jsonb NOT NULL,
	stored_at    timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, generation, step, payload_hash)
);

-- The functions on the hot path (submit, claim, settle) run with
-- plan_cache_mode = force_generic_plan: their statements take parameters, so
-- PostgreSQL would otherwise re-plan them at every call (custom plans), which
-- cost more than executing them; their plans do not depend on the values.
-- A generic plan is made once per session and kept until the table's
-- statistics change, so it may be made while the tables are empty (a new
-- database): then a scan of the whole table looks cheapest, and it would stay
-- so as the table grows (a claim of 200 runs scanning every run ever kept).
-- Every statement of these functions is meant to find its rows through an
-- index, so they also run with enable_seqscan = off: the plan is the same
-- whatever the table's size when it was made.

-- ---------------------------------------------------------------------------
-- Helpers. The SQL ones are declared STABLE, as their bodies are (time zone,
-- encoding), so that the planner inlines them.

CREATE FUNCTION hf_payload_hash(p jsonb) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT sha256(convert_to(coalesce(p, 'null'::jsonb)::text, 'UTF8'))
$$;

-- Serialises everything that registers, delivers or times out a wait on key k.
CREATE FUNCTION hf_lock_key(k text) RETURNS void
LANGUAGE sql AS $$
	SELECT pg_advisory_xact_lock(724390, hashtext(k))
$$;

CREATE FUNCTION hf_ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A new job id: 12 hex digits of milliseconds, then 20 random hex digits, so
-- ids sort by creation time.
CREATE FUNCTION hf_new_id() RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') ||
	       substr(replace(gen_random_uuid()::text, '-', ''), 1, 20)
$$;

CREATE FUNCTION hf_ms(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (extract(epoch FROM t) * 1000)::bigint
$$;

CREATE FUNCTION hf_us(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (extract(epoch FROM t) * 1000000)::bigint
$$;

CREATE FUNCTION hf_from_us(us bigint) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT 'epoch'::timestamptz + us * interval '1 microsecond'
$$;

-- The public JSON of a run (SPEC section 4).
CREATE FUNCTION hf_run_json(r run) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'run_id', r.run_id, 'workflow', r.workflow, 'status', r.status,
		'step', r.step, 'attempt', r.attempt, 'input', r.input, 'headers', r.headers,
		'priority', r.priority, 'max_attempts', r.max_attempts,
		'generation', r.generation,
		'created_at', hf_ts(r.created_at), 'updated_at', hf_ts(r.updated_at),
		'next_attempt_at', CASE WHEN r.status IN ('pending', 'scheduled', 'waiting')
				   THEN hf_ts(r.next_at) END,
		'waiting', CASE WHEN r.status = 'waiting' THEN jsonb_build_object(
				'correlation_key', r.wait_key,
				'timeout_at', hf_ts(r.wait_timeout_at)) END,
		'cancel_requested', r.cancel_requested,
		'result', r.result, 'error', r.error, 'error_kind', r.error_kind,
		'final_step', r.final_step, 'finished_at', hf_ts(r.finished_at),
		'group', CASE WHEN r.group_id IS NOT NULL THEN jsonb_build_object(
				'id', r.group_id, 'key', r.group_key) END)
$$;

-- Applies kv effects {"put": {k: v}, "delete": [k]} (validated by the caller).
CREATE FUNCTION hf_apply_kv(fx jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF fx IS NULL OR jsonb_typeof(fx) <> 'object' THEN
		RETURN;
	END IF;
	IF jsonb_typeof(fx->'put') = 'object' THEN
		INSERT INTO kv (key, value, updated_at)
		SELECT e.key, e.value, now() FROM jsonb_each(fx->'put') e
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
	END IF;
	IF jsonb_typeof(fx->'delete') = 'array' THEN
		DELETE FROM kv WHERE key IN (SELECT jsonb_array_elements_text(fx->'delete'));
	END IF;
END
$$;

-- Ends run `r` (locked by the caller) with `st`, and enqueues its terminal
-- callback when it has a callback URL (its own, else its workflow's).
CREATE FUNCTION hf_terminate(r run, st text, res jsonb, err text, kind text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	cb_url text;
	fin timestamptz := now();
BEGIN
	UPDATE run SET status = st, result = res, error = err, error_kind = kind,
		final_step = r.step, finished_at = fin, lease_owner = NULL,
		claim_token = NULL, lease_expires_at = NULL, holds_slot = false,
		next_at = NULL, seq = NULL, wait_key = NULL, wait_timeout_at = NULL,
		updated_at = fin
	WHERE run_id = r.run_id;

	cb_url := r.callback_url;
	IF cb_url IS NULL THEN
		SELECT callback_url INTO cb_url FROM workflow WHERE name = r.workflow;
	END IF;
	IF cb_url IS NOT NULL THEN
		INSERT INTO callback (id, run_id, generation, workflow, url, body, status,
				      max_attempts, priority, seq, next_at)
		VALUES (hf_new_id(), r.run_id, r.generation, r.workflow, cb_url,
			jsonb_build_object(
				'run_id', r.run_id, 'workflow', r.workflow, 'status', st,
				'result', res, 'error', err, 'error_kind', kind,
				'headers', r.headers, 'final_step', r.step,
				'generation', r.generation, 'finished_at', hf_ts(fin),
				'group', CASE WHEN r.group_id IS NOT NULL THEN jsonb_build_object(
					'id', r.group_id, 'key', r.group_key) END),
			'pending', r.max_attempts, r.priority, nextval('hf_seq'), fin)
		ON CONFLICT (run_id, generation) DO NOTHING;
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	PERFORM pg_notify('hookflow_done', r.run_id);
	IF r.group_id IS NOT NULL THEN
		PERFORM pg_notify('hookflow_done', 'group:' || r.group_id);
	END IF;
END
$$;

-- Releases the concurrency slot a step call held.
CREATE FUNCTION hf_release_slot() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE workflow SET inflight = greatest(inflight - 1, 0) WHERE name = OLD.workflow;
	RETURN NULL;
END
$$;

CREATE TRIGGER run_release_slot AFTER UPDATE OF holds_slot ON run
	FOR EACH ROW WHEN (OLD.holds_slot AND NOT NEW.holds_slot)
	EXECUTE FUNCTION hf_release_slot();
CREATE TRIGGER run_release_slot_delete AFTER DELETE ON run
	FOR EACH ROW WHEN (OLD.holds_slot)
	EXECUTE FUNCTION hf_release_slot();

-- Schedules run `r`'s current step (step, attempt and payload already set):
-- pending now when `due` is not in the future, scheduled otherwise.
CREATE FUNCTION hf_queue_state(due timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN due <= now() THEN 'pending' ELSE 'scheduled' END
$$;

CREATE FUNCTION hf_notify_due(due timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF due <= now() THEN
		PERFORM pg_notify('hookflow_wake', '');
	ELSE
		PERFORM pg_notify('hookflow_sched', hf_ms(due)::text);
	END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- Submit (SPEC 4). Returns 'created', 'duplicate', 'input_mismatch' or
-- 'workflow_not_found'. Defaults (priority, max_attempts) come from the
-- workflow when NULL. The run row, its step-0 job and the kv effects commit
-- together; a duplicate applies nothing.
CREATE FUNCTION hf_submit(p_run_id text, p_workflow text, p_input jsonb, p_input_hash bytea,
			  p_headers jsonb, p_priority integer, p_max_attempts integer,
			  p_due timestamptz, p_callback_url text, p_kv jsonb,
			  p_group_id text, p_group_key text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w workflow;
	due timestamptz := coalesce(p_due, now());
	st text;
	inserted text;
	old_hash bytea;
BEGIN
	SELECT * INTO w FROM workflow WHERE name = p_workflow FOR KEY SHARE;
	IF NOT FOUND THEN
		RETURN 'workflow_not_found';
	END IF;
	st := hf_queue_state(due);
	INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, payload, headers,
			 priority, max_attempts, callback_url, seq, next_at, group_id, group_key)
	VALUES (p_run_id, p_workflow, st, hf_new_id(), p_input, p_input_hash, p_input,
		coalesce(p_headers, '{}'), coalesce(p_priority, w.priority),
		coalesce(p_max_attempts, w.max_attempts), p_callback_url,
		CASE WHEN st = 'pending' THEN nextval('hf_seq') END, due, p_group_id, p_group_key)
	ON CONFLICT (run_id) DO NOTHING
	RETURNING run_id INTO inserted;
	IF inserted IS NULL THEN
		SELECT input_hash INTO old_hash FROM run WHERE run_id = p_run_id;
		IF old_hash = p_input_hash THEN
			RETURN 'duplicate';
		END IF;
		RETURN 'input_mismatch';
	END IF;
	PERFORM hf_apply_kv(p_kv);
	PERFORM hf_notify_due(due);
	RETURN 'created';
END
$$;

-- Submits a batch of runs in one transaction, in order (a run id submitted
-- twice in one batch is a duplicate the second time). p_items is a JSON array
-- of {"run_id", "workflow", "input", "input_hash" (hex), "headers",
-- "priority", "max_attempts", "delay_ms" | "run_at", "callback_url", "kv"};
-- absent keys are NULL. Returns, per item in order, hf_submit's outcome, the
-- run's JSON when it was created or is a duplicate, and the item's run id and
-- workflow (for messages).
CREATE FUNCTION hf_submit_many(p_items jsonb)
RETURNS TABLE (outcome text, run_json jsonb, rid text, wf text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	it jsonb;
BEGIN
	FOR it IN SELECT * FROM jsonb_array_elements(p_items) LOOP
		rid := it->>'run_id';
		wf := it->>'workflow';
		outcome := hf_submit(it->>'run_id', it->>'workflow', it->'input',
			decode(it->>'input_hash', 'hex'), it->'headers',
			(it->>'priority')::integer, (it->>'max_attempts')::integer,
			CASE WHEN it ? 'delay_ms'
			     THEN now() + make_interval(secs => (it->>'delay_ms')::bigint / 1000.0)
			     ELSE (it->>'run_at')::timestamptz END,
			it->>'callback_url', it->'kv', NULL, NULL);
		run_json := NULL;
		IF outcome IN ('created', 'duplicate') THEN
			SELECT hf_run_json(r) INTO run_json FROM run r WHERE r.run_id = rid;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;

-- A claimed job as the dispatcher receives it (hf_claim, hf_cycle): kind
-- 'step' or 'callback', with what the call needs; `replayed` is the step's
-- replay record, when its workflow keeps them and one exists.
CREATE TYPE hf_job AS (kind text, id text, run_id text, workflow text, step integer,
		       attempt integer, max_attempts integer, generation integer, payload jsonb,
		       headers jsonb, signal jsonb, group_id text, group_key text,
		       claim_token bigint, cancel_requested boolean, url text, timeout_ms integer,
		       secret text, backoff_base_ms bigint, backoff_max_ms bigint, replay boolean,
		       now_ms bigint, replayed jsonb);

-- ---------------------------------------------------------------------------
-- Claim up to p_limit jobs for p_owner: step jobs of pending runs, then
-- pending callbacks, in (priority, FIFO) order, skipping rows other instances
-- hold. A workflow's max_concurrency is enforced by a slot counter on its row,
-- taken under that row's lock, so it holds across instances.
CREATE FUNCTION hf_claim(p_owner text, p_limit integer, p_lease_ms integer)
RETURNS SETOF hf_job
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	lease interval := make_interval(secs => p_lease_ms / 1000.0);
	cand text[];
	capped record;
	granted integer;
	slot_ids text[] := '{}';
	any_capped boolean;
	n integer;
	token bigint := nextval('hf_claim_seq');  -- one per claim: (run_id, token) is unique
BEGIN
	SELECT array_agg(c.run_id), bool_or(c.capped) INTO cand, any_capped FROM (
		SELECT r.run_id, w.max_concurrency > 0 AS capped
		FROM run r JOIN workflow w ON w.name = r.workflow
		WHERE r.status = 'pending'
		  AND (w.max_concurrency = 0 OR w.inflight < w.max_concurrency)
		ORDER BY r.priority, r.seq
		LIMIT p_limit
		FOR UPDATE OF r SKIP LOCKED) c;

	IF cand IS NOT NULL AND any_capped THEN
		-- Capped workflows: grant at most the free slots, in claim order.
		FOR capped IN
			SELECT r.workflow AS name, array_agg(r.run_id ORDER BY r.priority, r.seq) AS ids
			FROM run r JOIN workflow w ON w.name = r.workflow
			WHERE r.run_id = ANY (cand) AND w.max_concurrency > 0
			GROUP BY r.workflow
		LOOP
			SELECT least(cardinality(capped.ids), greatest(w.max_concurrency - w.inflight, 0))
			INTO granted FROM workflow w WHERE w.name = capped.name FOR UPDATE;
			UPDATE workflow SET inflight = inflight + granted WHERE name = capped.name;
			slot_ids := slot_ids || capped.ids[1:granted];
			cand := array(SELECT x FROM unnest(cand) x
				      WHERE NOT (x = ANY (capped.ids)) OR x = ANY (capped.ids[1:granted]));
		END LOOP;
	END IF;

	IF cand IS NOT NULL THEN
		RETURN QUERY
		UPDATE run r SET status = 'running', attempt = r.attempt + 1, lease_owner = p_owner,
			claim_token = token, claimed_at = now(),
			lease_expires_at = now() + lease, holds_slot = (r.run_id = ANY (slot_ids)),
			seq = NULL, updated_at = now()
		FROM workflow w
		WHERE r.run_id = ANY (cand) AND w.name = r.workflow
		RETURNING 'step'::text, r.job_id, r.run_id, r.workflow, r.step, r.attempt,
			r.max_attempts, r.generation, r.payload, r.headers, r.signal, r.group_id,
			r.group_key, r.claim_token, r.cancel_requested, w.url, w.timeout_ms,
			w.secret, w.backoff_base_ms, w.backoff_max_ms, w.step_output_replay,
			hf_ms(now()),
			CASE WHEN w.step_output_replay THEN (
				SELECT jsonb_build_object('outcome', so.outcome,
							  'age_ms', hf_ms(now()) - hf_ms(so.stored_at))
				FROM step_output so WHERE so.run_id = r.run_id
				  AND so.generation = r.generation AND so.step = r.step
				  AND so.payload_hash = hf_payload_hash(r.payload)) END;
		GET DIAGNOSTICS n = ROW_COUNT;
	ELSE
		n := 0;
	END IF;

	IF n < p_limit THEN
		RETURN QUERY
		UPDATE callback c SET status = 'running', attempt = c.attempt + 1,
			lease_owner = p_owner, claim_token = token,
			claimed_at = now(), lease_expires_at = now() + lease, seq = NULL,
			updated_at = now()
		FROM (SELECT x.id, x.workflow FROM callback x WHERE x.status = 'pending'
		      ORDER BY x.priority, x.seq LIMIT p_limit - n
		      FOR UPDATE SKIP LOCKED) picked
		LEFT JOIN workflow w ON w.name = picked.workflow
		WHERE c.id = picked.id
		RETURNING 'callback'::text, c.id, c.run_id, c.workflow, NULL::integer, c.attempt,
			c.max_attempts, c.generation, c.body, NULL::jsonb, NULL::jsonb, NULL::text,
			NULL::text, c.claim_token, false, c.url, coalesce(w.timeout_ms, 30000),
			w.secret, coalesce(w.backoff_base_ms, 1000), coalesce(w.backoff_max_ms, 300000),
			false, hf_ms(now()), NULL::jsonb;
	END IF;
END
$$;

-- Moves due scheduled runs and callbacks to pending, at most p_limit of each.
-- A wait that timed out becomes pending with the signal it receives: one that
-- was buffered meanwhile, else {"status": "timeout"}. Returns how many moved.
CREATE FUNCTION hf_promote(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	a integer;
	b integer;
	c integer := 0;
	w record;
	sig jsonb;
	got boolean;
BEGIN
	UPDATE run SET status = 'pending', seq = nextval('hf_seq'), updated_at = now()
	WHERE run_id IN (SELECT run_id FROM run WHERE status = 'scheduled'
			 AND next_at <= now() ORDER BY next_at LIMIT p_limit
			 FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS a = ROW_COUNT;
	FOR w IN SELECT x.run_id, x.wait_key FROM run x WHERE x.status = 'waiting'
		 AND x.next_at <= now() ORDER BY x.next_at LIMIT p_limit
	LOOP
		PERFORM hf_lock_key(w.wait_key);
		PERFORM 1 FROM run x WHERE x.run_id = w.run_id AND x.status = 'waiting'
			AND x.next_at <= now() FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		DELETE FROM signal_buffer WHERE correlation_key = w.wait_key RETURNING payload INTO sig;
		got := FOUND;
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'),
			signal = CASE WHEN got THEN jsonb_build_object('status', 'delivered', 'payload', sig)
				 ELSE '{"status": "timeout"}'::jsonb END,
			wait_key = NULL, updated_at = now()
		WHERE run_id = w.run_id;
		c := c + 1;
	END LOOP;
	UPDATE callback SET status = 'pending', seq = nextval('hf_seq'), updated_at = now()
	WHERE id IN (SELECT id FROM callback WHERE status = 'scheduled'
		     AND next_at <= now() ORDER BY next_at LIMIT p_limit
		     FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS b = ROW_COUNT;
	IF a + b + c > 0 THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	RETURN greatest(a, b, c);
END
$$;

-- The earliest time something becomes due (a scheduled job or an expiring
-- lease), as epoch ms, or NULL when nothing is timed.
CREATE FUNCTION hf_next_due() RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT hf_ms(min(t)) FROM (
		(SELECT next_at AS t FROM run WHERE status IN ('scheduled', 'waiting')
		 ORDER BY next_at LIMIT 1)
		UNION ALL
		(SELECT lease_expires_at FROM run WHERE status IN ('running', 'cancelling')
		 ORDER BY lease_expires_at LIMIT 1)
		UNION ALL
		(SELECT next_at FROM callback WHERE status = 'scheduled' ORDER BY next_at LIMIT 1)
		UNION ALL
		(SELECT lease_expires_at FROM callback WHERE status = 'running'
		 ORDER BY lease_expires_at LIMIT 1)) due
$$;

-- ---------------------------------------------------------------------------
-- Settle step calls. p_items is a JSON array of objects:
--   {"run_id", "claim_token", "result": continue|succeed|fail|cancel|
--    transient_error|permanent_error, "payload", "delay_ms", "wait_key",
--    "wait_timeout_ms", "value" (succeed), "reason" (fail/cancel/error text),
--    "kv", "http_status", "retry_delay_ms"}
-- Returns one row per item: run_id and what happened ('claim_lost', or the
-- run's new status). Steps it queues for now wake the claimers (NOTIFY
-- hookflow_wake) unless p_wake is false: hf_cycle claims them itself.
CREATE FUNCTION hf_settle_steps(p_items jsonb, p_wake boolean DEFAULT true)
RETURNS TABLE (run_id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	fast bigint[];
	it jsonb;
	r run;
	res text;
	ext_cancel boolean;
	due timestamptz;
	st text;
	dead boolean;
	wkey text;
	sig jsonb;
	ids text[];
	sts text[];
	done text[];
	grp text[];
	sched timestamptz;
	cbs integer;
BEGIN
	-- The common case, set-based: a current claim without a cancel request,
	-- answered with a continue (not a wait) or a succeed, without kv effects.
	-- The update's own row locks and recheck decide which items it takes
	-- (a cancel or a reap that committed meanwhile excludes the run); the
	-- history rows come from what it updated, with the claimed step's values
	-- read from `o` (which a concurrent cancel or reap does not change). The
	-- rest settles one by one below.
	WITH x AS (
		SELECT e.ord, e.item->>'run_id' AS run_id, (e.item->>'claim_token')::bigint AS token,
		       e.item->>'result' AS result, coalesce(e.item->'payload', 'null') AS payload,
		       coalesce(e.item->'value', 'null') AS value,
		       (e.item->>'http_status')::integer AS http_status,
		       now() + make_interval(secs => coalesce((e.item->>'delay_ms')::bigint, 0)
						     / 1000.0) AS due
		FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
		WHERE e.item->'kv' IS NULL
		  AND (e.item->>'result' = 'succeed'
		       OR (e.item->>'result' = 'continue' AND e.item->'wait_key' IS NULL))),
	u AS (
		UPDATE run rr SET
			status = CASE WHEN x.result = 'succeed' THEN 'succeeded'
				      WHEN x.due <= now() THEN 'pending' ELSE 'scheduled' END,
			step = CASE WHEN x.result = 'succeed' THEN rr.step ELSE rr.step + 1 END,
			attempt = CASE WHEN x.result = 'succeed' THEN rr.attempt ELSE 0 END,
			job_id = CASE WHEN x.result = 'succeed' THEN rr.job_id ELSE hf_new_id() END,
			payload = CASE WHEN x.result = 'succeed' THEN rr.payload ELSE x.payload END,
			signal = CASE WHEN x.result = 'succeed' THEN rr.signal END,
			result = CASE WHEN x.result = 'succeed' THEN x.value END,
			final_step = CASE WHEN x.result = 'succeed' THEN rr.step END,
			finished_at = CASE WHEN x.result = 'succeed' THEN now() END,
			seq = CASE WHEN x.result = 'continue' AND x.due <= now()
				   THEN nextval('hf_seq') END,
			next_at = CASE WHEN x.result = 'continue' THEN x.due END,
			wait_key = NULL, wait_timeout_at = NULL, lease_owner = NULL,
			claim_token = NULL, claimed_at = NULL, lease_expires_at = NULL,
			holds_slot = false, updated_at = now()
		FROM x JOIN run o ON o.run_id = x.run_id
		WHERE rr.run_id = x.run_id AND rr.claim_token = x.token AND rr.status = 'running'
		  AND NOT rr.cancel_requested
		RETURNING rr.*, x.ord, x.result AS settled, x.http_status, o.step AS o_step,
			  o.attempt AS o_attempt, o.job_id AS o_job_id, o.payload AS o_payload,
			  o.signal AS o_signal, o.claimed_at AS o_claimed_at),
	hist AS (
		INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload,
					  signal, started_at, result, http_status)
		SELECT u.run_id, u.generation, u.o_step, u.o_attempt, u.o_job_id, u.o_payload,
		       u.o_signal, u.o_claimed_at, u.settled, u.http_status
		FROM u),
	cb AS (
		INSERT INTO callback (id, run_id, generation, workflow, url, body, status,
				      max_attempts, priority, seq, next_at)
		SELECT hf_new_id(), u.run_id, u.generation, u.workflow,
		       coalesce(u.callback_url, w.callback_url),
		       jsonb_build_object(
				'run_id', u.run_id, 'workflow', u.workflow, 'status', u.status,
				'result', u.result, 'error', NULL, 'error_kind', NULL,
				'headers', u.headers, 'final_step', u.final_step,
				'generation', u.generation, 'finished_at', hf_ts(u.finished_at),
				'group', CASE WHEN u.group_id IS NOT NULL THEN jsonb_build_object(
					'id', u.group_id, 'key', u.group_key) END),
		       'pending', u.max_attempts, u.priority, nextval('hf_seq'), u.finished_at
		FROM u JOIN workflow w ON w.name = u.workflow
		WHERE u.status = 'succeeded' AND coalesce(u.callback_url, w.callback_url) IS NOT NULL
		ON CONFLICT ON CONSTRAINT callback_run_id_generation_key DO NOTHING
		RETURNING 1)
	SELECT coalesce(array_agg(u.ord), '{}'), array_agg(u.run_id), array_agg(u.status),
	       array_agg(u.run_id) FILTER (WHERE u.status = 'succeeded'),
	       array_agg(DISTINCT u.group_id) FILTER (WHERE u.status = 'succeeded'
						    AND u.group_id IS NOT NULL),
	       min(u.next_at) FILTER (WHERE u.status = 'scheduled'),
	       (SELECT count(*) FROM cb)
	INTO fast, ids, sts, done, grp, sched, cbs
	FROM u;

	IF cardinality(fast) > 0 THEN
		RETURN QUERY SELECT * FROM unnest(ids, sts);
		IF done IS NOT NULL THEN
			PERFORM pg_notify('hookflow_done', d) FROM unnest(done) d;
		END IF;
		IF grp IS NOT NULL THEN
			PERFORM pg_notify('hookflow_done', 'group:' || g) FROM unnest(grp) g;
		END IF;
		IF sched IS NOT NULL THEN
			PERFORM pg_notify('hookflow_sched', hf_ms(sched)::text);
		END IF;
		IF cbs > 0 OR (p_wake AND 'pending' = ANY (sts)) THEN
			PERFORM pg_notify('hookflow_wake', '');
		END IF;
	END IF;

	IF cardinality(fast) = jsonb_array_length(p_items) THEN
		RETURN;
	END IF;
	FOR it IN SELECT e.item FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
		  WHERE NOT (e.ord = ANY (fast)) LOOP
		SELECT * INTO r FROM run x WHERE x.run_id = it->>'run_id' FOR UPDATE;
		IF NOT FOUND OR r.claim_token IS DISTINCT FROM (it->>'claim_token')::bigint
		   OR r.status NOT IN ('running', 'cancelling') THEN
			run_id := it->>'run_id';
			outcome := 'claim_lost';
			RETURN NEXT;
			CONTINUE;
		END IF;
		res := it->>'result';
		-- An external cancel beats any result but the webhook's own cancel.
		ext_cancel := r.cancel_requested AND res <> 'cancel';
		UPDATE run SET holds_slot = false WHERE run.run_id = r.run_id AND holds_slot;
		dead := false;

		IF ext_cancel THEN
			PERFORM hf_terminate(r, 'cancelled', NULL, NULL, NULL);
		ELSIF res = 'cancel' THEN
			PERFORM hf_apply_kv(it->'kv');
			PERFORM hf_terminate(r, 'cancelled', NULL, it->>'reason', NULL);
		ELSIF res = 'succeed' THEN
			PERFORM hf_apply_kv(it->'kv');
			PERFORM hf_terminate(r, 'succeeded', coalesce(it->'value', 'null'), NULL, NULL);
		ELSIF res = 'fail' THEN
			PERFORM hf_apply_kv(it->'kv');
			PERFORM hf_terminate(r, 'failed', NULL, it->>'reason', 'permanent');
		ELSIF res = 'continue' AND it->>'wait_key' IS NOT NULL THEN
			-- Wait for a signal: consume a buffered one at once, else wait
			-- (scheduled at the timeout), unless another run waits on the key.
			wkey := it->>'wait_key';
			PERFORM hf_lock_key(wkey);
			IF EXISTS (SELECT 1 FROM run x WHERE x.wait_key = wkey AND x.status = 'waiting'
				   AND x.run_id <> r.run_id) THEN
				res := 'permanent_error';
				it := it || jsonb_build_object('reason', format(
					'a waiter is already registered for correlation key %s', wkey));
				dead := true;
			ELSE
				PERFORM hf_apply_kv(it->'kv');
				DELETE FROM signal_buffer b WHERE b.correlation_key = wkey
				RETURNING b.payload INTO sig;
				IF FOUND THEN
					st := 'pending';
					due := now();
				ELSE
					st := 'waiting';
					due := now() + make_interval(secs =>
						coalesce((it->>'wait_timeout_ms')::bigint, 0) / 1000.0);
				END IF;
				UPDATE run SET status = st, step = r.step + 1, attempt = 0,
					job_id = hf_new_id(), payload = coalesce(it->'payload', 'null'),
					signal = CASE WHEN st = 'pending' THEN jsonb_build_object(
						'status', 'delivered', 'payload', sig) END,
					wait_key = CASE WHEN st = 'waiting' THEN wkey END,
					wait_timeout_at = CASE WHEN st = 'waiting' THEN due END,
					seq = CASE WHEN st = 'pending' THEN nextval('hf_seq') END,
					next_at = due, lease_owner = NULL, claim_token = NULL,
					claimed_at = NULL, lease_expires_at = NULL, updated_at = now()
				WHERE run.run_id = r.run_id;
				IF st = 'waiting' THEN
					PERFORM pg_notify('hookflow_sched', hf_ms(due)::text);
				ELSE
					PERFORM pg_notify('hookflow_wake', '');
				END IF;
			END IF;
		ELSIF res = 'continue' THEN
			PERFORM hf_apply_kv(it->'kv');
			due := now() + make_interval(secs => coalesce((it->>'delay_ms')::bigint, 0) / 1000.0);
			st := hf_queue_state(due);
			UPDATE run SET status = st, step = r.step + 1, attempt = 0, job_id = hf_new_id(),
				payload = coalesce(it->'payload', 'null'), signal = NULL,
				wait_key = NULL, wait_timeout_at = NULL,
				seq = CASE WHEN st = 'pending' THEN nextval('hf_seq') END,
				next_at = due, lease_owner = NULL, claim_token = NULL,
				claimed_at = NULL, lease_expires_at = NULL, updated_at = now()
			WHERE run.run_id = r.run_id;
			PERFORM hf_notify_due(due);
		ELSIF res = 'permanent_error' OR r.attempt >= r.max_attempts THEN
			dead := true;
		ELSIF res <> 'transient_error' THEN
			RAISE EXCEPTION 'hf_settle_steps: unknown result %', res;
		ELSE
			due := now() + make_interval(secs => coalesce((it->>'retry_delay_ms')::bigint, 0) / 1000.0);
			st := hf_queue_state(due);
			UPDATE run SET status = st, seq = CASE WHEN st = 'pending' THEN nextval('hf_seq') END,
				next_at = due, lease_owner = NULL, claim_token = NULL, claimed_at = NULL,
				lease_expires_at = NULL, updated_at = now()
			WHERE run.run_id = r.run_id;
			PERFORM hf_notify_due(due);
		END IF;

		-- The history row carries the final result (a refused wait is an error).
		INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload, signal,
					  started_at, result, http_status, error)
		VALUES (r.run_id, r.generation, r.step, r.attempt, r.job_id, r.payload, r.signal,
			r.claimed_at, CASE WHEN ext_cancel THEN 'cancelled' ELSE res END,
			(it->>'http_status')::integer,
			CASE WHEN res IN ('transient_error', 'permanent_error') OR ext_cancel
			     THEN it->>'reason' END);

		IF dead THEN
			INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
						 last_error, last_http_status, payload)
			VALUES (r.job_id, 'step', r.run_id, r.workflow, r.generation, r.step, r.attempt,
				it->>'reason', (it->>'http_status')::integer, r.payload)
			ON CONFLICT (id) DO NOTHING;
			PERFORM hf_terminate(r, 'failed', NULL, it->>'reason',
					     CASE WHEN res = 'permanent_error' THEN 'permanent'
						  ELSE 'transient' END);
		END IF;

		run_id := r.run_id;
		SELECT x.status INTO outcome FROM run x WHERE x.run_id = r.run_id;
		RETURN NEXT;
	END LOOP;
END
$$;

-- Settle callback calls. p_items: [{"id", "claim_token", "result": ok|
-- transient_error|permanent_error, "reason", "http_status", "retry_delay_ms"}].
CREATE FUNCTION hf_settle_callbacks(p_items jsonb)
RETURNS TABLE (id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	it jsonb;
	c callback;
	res text;
	due timestamptz;
	st text;
BEGIN
	FOR it IN SELECT * FROM jsonb_array_elements(p_items) LOOP
		SELECT * INTO c FROM callback x WHERE x.id = it->>'id' FOR UPDATE;
		IF NOT FOUND OR c.claim_token IS DISTINCT FROM (it->>'claim_token')::bigint
		   OR c.status <> 'running' THEN
			id := it->>'id';
			outcome := 'claim_lost';
			RETURN NEXT;
			CONTINUE;
		END IF;
		res := it->>'result';
		IF res = 'ok' THEN
			st := 'done';
			UPDATE callback SET status = st, lease_owner = NULL, claim_token = NULL,
				lease_expires_at = NULL, last_http_status = (it->>'http_status')::integer,
				finished_at = now(), updated_at = now()
			WHERE callback.id = c.id;
		ELSIF res = 'permanent_error' OR c.attempt >= c.max_attempts THEN
			st := 'dead';
			UPDATE callback SET status = st, lease_owner = NULL, claim_token = NULL,
				lease_expires_at = NULL, last_error = it->>'reason',
				last_http_status = (it->>'http_status')::integer,
				finished_at = now(), updated_at = now()
			WHERE callback.id = c.id;
			INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
						 last_error, last_http_status, payload)
			VALUES (c.id, 'callback', c.run_id, c.workflow, c.generation, NULL, c.attempt,
				it->>'reason', (it->>'http_status')::integer, c.body)
			ON CONFLICT ON CONSTRAINT dead_letter_pkey DO UPDATE SET attempts = EXCLUDED.attempts,
				last_error = EXCLUDED.last_error,
				last_http_status = EXCLUDED.last_http_status, created_at = now();
		ELSE
			due := now() + make_interval(secs => coalesce((it->>'retry_delay_ms')::bigint, 0) / 1000.0);
			st := hf_queue_state(due);
			UPDATE callback SET status = st,
				seq = CASE WHEN st = 'pending' THEN nextval('hf_seq') END, next_at = due,
				lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL,
				last_error = it->>'reason', last_http_status = (it->>'http_status')::integer,
				updated_at = now()
			WHERE callback.id = c.id;
			PERFORM hf_notify_due(due);
		END IF;
		id := c.id;
		outcome := st;
		RETURN NEXT;
	END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- One cycle of a dispatcher worker, in one transaction (one commit): settle
-- the step and callback calls that ended, then claim up to p_limit jobs
-- (0: none), which takes the steps this settlement just queued too. Returns
-- the claimed jobs as hf_claim does, then one row per settlement refused
-- because its claim was lost: kind 'lost_step' (id: the run) or
-- 'lost_callback' (id: the callback). The claimers are woken only when this
-- claim left queued steps behind.
CREATE FUNCTION hf_cycle(p_steps jsonb, p_callbacks jsonb, p_owner text, p_limit integer,
			 p_lease_ms integer)
RETURNS SETOF hf_job
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	lost text[] := '{}';
	lost_kind text[] := '{}';
	queued boolean := false;
	n integer := 0;
BEGIN
	IF jsonb_array_length(p_steps) > 0 THEN
		SELECT coalesce(array_agg(s.run_id) FILTER (WHERE s.outcome = 'claim_lost'), '{}'),
		       coalesce(bool_or(s.outcome = 'pending'), false)
		INTO lost, queued FROM hf_settle_steps(p_steps, false) s;
		lost_kind := array_fill('lost_step'::text, ARRAY[cardinality(lost)]);
	END IF;
	IF jsonb_array_length(p_callbacks) > 0 THEN
		SELECT lost || coalesce(array_agg(s.id), '{}'),
		       lost_kind || array_fill('lost_callback'::text, ARRAY[count(*)::integer])
		INTO lost, lost_kind
		FROM hf_settle_callbacks(p_callbacks) s WHERE s.outcome = 'claim_lost';
	END IF;
	IF jsonb_array_length(p_steps) = 0 AND jsonb_array_length(p_callbacks) = 0 THEN
		-- A claim alone records only a lease: if a crash loses it, the job is
		-- pending again and delivered again (same webhook-id and attempt), as
		-- after an expired lease. It need not wait for the disk; the next
		-- settlement's commit flushes it.
		PERFORM set_config('synchronous_commit', 'off', true);
	END IF;
	IF p_limit > 0 THEN
		RETURN QUERY SELECT * FROM hf_claim(p_owner, p_limit, p_lease_ms);
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF queued AND n >= p_limit THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	RETURN QUERY SELECT l.k, l.i, NULL::text, NULL::text, NULL::integer, NULL::integer,
		NULL::integer, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::text,
		NULL::text, NULL::bigint, NULL::boolean, NULL::text, NULL::integer, NULL::text,
		NULL::bigint, NULL::bigint, NULL::boolean, NULL::bigint, NULL::jsonb
	FROM unnest(lost_kind, lost) AS l(k, i);
END
$$;

-- ---------------------------------------------------------------------------
-- Cancel (SPEC 4). Returns 'not_found', 'already_terminal', 'cancelled' (a
-- queued step was removed and the run ended) or 'cancelling' (the call in
-- flight is being aborted).
CREATE FUNCTION hf_cancel(p_run_id text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r run;
BEGIN
	SELECT * INTO r FROM run WHERE run_id = p_run_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF r.status IN ('succeeded', 'failed', 'cancelled') THEN
		RETURN 'already_terminal';
	END IF;
	IF r.status IN ('pending', 'scheduled', 'waiting') THEN
		UPDATE run SET cancel_requested = true WHERE run_id = r.run_id;
		r.cancel_requested := true;
		PERFORM hf_terminate(r, 'cancelled', NULL, NULL, NULL);
		RETURN 'cancelled';
	END IF;
	IF r.status = 'running' THEN
		UPDATE run SET cancel_requested = true, status = 'cancelling', updated_at = now()
		WHERE run_id = r.run_id;
		PERFORM pg_notify('hookflow_cancel', r.run_id);
	END IF;
	RETURN 'cancelling';
END
$$;

-- hf_cancel for the API: the outcome and the run as this transaction left it
-- (a later read could already see the settlement of an aborted call).
CREATE FUNCTION hf_cancel_run(p_run_id text) RETURNS TABLE (outcome text, run jsonb)
LANGUAGE plpgsql AS $$
BEGIN
	outcome := hf_cancel(p_run_id);
	SELECT hf_run_json(r) INTO run FROM run r WHERE r.run_id = p_run_id;
	RETURN NEXT;
END
$$;

-- ---------------------------------------------------------------------------
-- Reap claims: those whose lease expired (p_owner NULL), or every claim of
-- p_owner (a draining instance releasing what it could not finish). A step
-- whose run has a cancel request ends cancelled; one out of attempts is
-- dead-lettered with "lease expired" and its run fails (error_kind null), with
-- its callback, in this same transaction; any other goes back to pending at
-- once. Returns how many claims were reaped.
CREATE FUNCTION hf_reap(p_owner text, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	r run;
	c callback;
	n integer := 0;
	msg text := CASE WHEN p_owner IS NULL THEN 'lease expired'
			 ELSE 'call interrupted: instance shutting down' END;
BEGIN
	FOR r IN SELECT * FROM run x WHERE x.status IN ('running', 'cancelling')
		  AND (CASE WHEN p_owner IS NULL THEN x.lease_expires_at < now()
			    ELSE x.lease_owner = p_owner END)
		  ORDER BY x.lease_expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED
	LOOP
		n := n + 1;
		-- A call a draining instance interrupted got no answer and is refunded
		-- below, so it leaves no attempt in the history.
		IF p_owner IS NULL OR r.cancel_requested THEN
			INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload,
						  signal, started_at, result, error)
			VALUES (r.run_id, r.generation, r.step, r.attempt, r.job_id, r.payload, r.signal,
				r.claimed_at, CASE WHEN r.cancel_requested THEN 'cancelled'
						   ELSE 'lease_expired' END,
				CASE WHEN r.cancel_requested THEN NULL ELSE msg END);
		END IF;
		UPDATE run SET holds_slot = false WHERE run_id = r.run_id AND holds_slot;
		IF r.cancel_requested THEN
			PERFORM hf_terminate(r, 'cancelled', NULL, NULL, NULL);
		ELSIF r.attempt >= r.max_attempts AND p_owner IS NULL THEN
			INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
						 last_error, payload)
			VALUES (r.job_id, 'step', r.run_id, r.workflow, r.generation, r.step, r.attempt,
				msg, r.payload)
			ON CONFLICT (id) DO NOTHING;
			PERFORM hf_terminate(r, 'failed', NULL, msg, NULL);
		ELSE
			-- An interrupted call of a draining instance does not use up the attempt.
			UPDATE run SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
				attempt = CASE WHEN p_owner IS NULL THEN attempt ELSE attempt - 1 END,
				lease_owner = NULL, claim_token = NULL, claimed_at = NULL,
				lease_expires_at = NULL, updated_at = now()
			WHERE run_id = r.run_id;
			PERFORM pg_notify('hookflow_wake', '');
		END IF;
	END LOOP;

	FOR c IN SELECT * FROM callback x WHERE x.status = 'running'
		  AND (CASE WHEN p_owner IS NULL THEN x.lease_expires_at < now()
			    ELSE x.lease_owner = p_owner END)
		  ORDER BY x.lease_expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED
	LOOP
		n := n + 1;
		IF c.attempt >= c.max_attempts AND p_owner IS NULL THEN
			UPDATE callback SET status = 'dead', lease_owner = NULL, claim_token = NULL,
				lease_expires_at = NULL, last_error = msg, finished_at = now(),
				updated_at = now()
			WHERE id = c.id;
			INSERT INTO dead_letter (id, kind, run_id, workflow, generation, attempts,
						 last_error, payload)
			VALUES (c.id, 'callback', c.run_id, c.workflow, c.generation, c.attempt, msg,
				c.body)
			ON CONFLICT (id) DO NOTHING;
		ELSE
			UPDATE callback SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
				attempt = CASE WHEN p_owner IS NULL THEN attempt ELSE attempt - 1 END,
				lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL,
				last_error = msg, updated_at = now()
			WHERE id = c.id;
			PERFORM pg_notify('hookflow_wake', '');
		END IF;
	END LOOP;
	RETURN n;
END
$$;

-- Extends the leases of every claim p_owner holds. Returns the run ids (and
-- callback ids) still held, with whether a cancel was requested, so the owner
-- can abort calls whose claim it lost or whose run is being cancelled.
CREATE FUNCTION hf_renew(p_owner text, p_lease_ms integer)
RETURNS TABLE (kind text, id text, cancel_requested boolean)
LANGUAGE sql AS $$
	WITH a AS (
		UPDATE run SET lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000.0)
		WHERE lease_owner = p_owner AND status IN ('running', 'cancelling')
		RETURNING 'step'::text, run_id, cancel_requested),
	b AS (
		UPDATE callback SET lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000.0)
		WHERE lease_owner = p_owner AND status = 'running'
		RETURNING 'callback'::text, id, false)
	SELECT * FROM a UNION ALL SELECT * FROM b
$$;

-- The public JSON of a workflow (SPEC section 3); never the secret.
CREATE FUNCTION hf_workflow_json(w workflow) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'name', w.name, 'url', w.url, 'callback_url', w.callback_url,
		'timeout_ms', w.timeout_ms, 'max_attempts', w.max_attempts,
		'priority', w.priority,
		'retry_backoff', jsonb_build_object('base_ms', w.backoff_base_ms,
						    'max_ms', w.backoff_max_ms),
		'max_concurrency', w.max_concurrency, 'signed', w.secret IS NOT NULL,
		'step_output_replay', w.step_output_replay,
		'created_at', hf_ts(w.created_at), 'updated_at', hf_ts(w.updated_at))
$$;

-- Deletes a workflow unless it has active runs. Returns 'deleted',
-- 'not_found' or 'in_use'. The row lock waits for submissions in flight (they
-- hold FOR KEY SHARE), and the check that follows sees their runs.
CREATE FUNCTION hf_workflow_delete(p_name text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM workflow WHERE name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF EXISTS (SELECT 1 FROM run WHERE workflow = p_name
		   AND status NOT IN ('succeeded', 'failed', 'cancelled')) THEN
		RETURN 'in_use';
	END IF;
	DELETE FROM workflow WHERE name = p_name;
	RETURN 'deleted';
END
$$;

-- ---------------------------------------------------------------------------
-- Signals (SPEC 7). Returns 'delivered' when a run waited on the key (its next
-- step becomes claimable now with the payload), else 'buffered' (kept, the
-- latest per key, for the next wait on the key).
CREATE FUNCTION hf_signal(p_key text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	rid text;
BEGIN
	PERFORM hf_lock_key(p_key);
	SELECT run_id INTO rid FROM run WHERE wait_key = p_key AND status = 'waiting' FOR UPDATE;
	IF FOUND THEN
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
			signal = jsonb_build_object('status', 'delivered', 'payload', p_payload),
			wait_key = NULL, updated_at = now()
		WHERE run_id = rid;
		PERFORM pg_notify('hookflow_wake', '');
		RETURN 'delivered';
	END IF;
	INSERT INTO signal_buffer (correlation_key, payload) VALUES (p_key, p_payload)
	ON CONFLICT (correlation_key) DO UPDATE SET payload = EXCLUDED.payload, created_at = now();
	RETURN 'buffered';
END
$$;

-- Stores replay records for step calls still claimed by the caller. p_items:
-- [{"run_id", "claim_token", "outcome"}]. The key is the claimed step's payload.
CREATE FUNCTION hf_store_outputs(p_items jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	INSERT INTO step_output (run_id, generation, step, payload_hash, outcome)
	SELECT r.run_id, r.generation, r.step, hf_payload_hash(r.payload), x.outcome
	FROM jsonb_to_recordset(p_items) AS x(run_id text, claim_token bigint, outcome jsonb)
	JOIN run r ON r.run_id = x.run_id AND r.claim_token = x.claim_token
	ON CONFLICT (run_id, generation, step, payload_hash) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

-- Retention (SPEC 8): deletes up to p_limit runs that terminated at least
-- p_retention_ms ago (0: keep forever), with their history, memos, replay
-- records and finished callbacks, and dead letters older than p_dead_ms.
-- Active runs are never touched. Returns how many rows of runs and dead
-- letters went, so the caller repeats while a batch was full.
CREATE FUNCTION hf_sweep(p_retention_ms bigint, p_dead_ms bigint, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	gone text[];
	n integer := 0;
	d integer := 0;
BEGIN
	IF p_retention_ms > 0 THEN
		SELECT array_agg(run_id) INTO gone FROM (
			SELECT run_id FROM run
			WHERE finished_at <= now() - make_interval(secs => p_retention_ms / 1000.0)
			  AND status IN ('succeeded', 'failed', 'cancelled')
			ORDER BY finished_at LIMIT p_limit FOR UPDATE SKIP LOCKED) x;
		IF gone IS NOT NULL THEN
			DELETE FROM step_attempt WHERE run_id = ANY (gone);
			DELETE FROM memo WHERE run_id = ANY (gone);
			DELETE FROM step_output WHERE run_id = ANY (gone);
			DELETE FROM callback WHERE run_id = ANY (gone) AND status IN ('done', 'dead');
			DELETE FROM run WHERE run_id = ANY (gone);
			n := cardinality(gone);
		END IF;
	END IF;
	IF p_dead_ms > 0 THEN
		DELETE FROM dead_letter WHERE id IN (
			SELECT id FROM dead_letter
			WHERE created_at <= now() - make_interval(secs => p_dead_ms / 1000.0)
			ORDER BY created_at LIMIT p_limit);
		GET DIAGNOSTICS d = ROW_COUNT;
		DELETE FROM callback WHERE id IN (
			SELECT id FROM callback WHERE status = 'dead'
			  AND finished_at <= now() - make_interval(secs => p_dead_ms / 1000.0)
			LIMIT p_limit);
	END IF;
	RETURN greatest(n, d);
END
$$;

-- ---------------------------------------------------------------------------
-- Groups (SPEC 9): a recorded, ordered member set; member run ids are the hex
-- SHA-256 of "<group_id>/<key>".
CREATE TABLE run_group (
	group_id      text PRIMARY KEY CHECK (group_id ~ '^[A-Za-z0-9_-]{1,128}$'),
	workflow      text NOT NULL,
	manifest_hash bytea NOT NULL,
	total         integer NOT NULL,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE group_member (
	group_id text NOT NULL,
	ord      integer NOT NULL,
	key      text NOT NULL,
	run_id   text NOT NULL,
	PRIMARY KEY (group_id, ord),
	UNIQUE (group_id, key)
);

-- Starts generation n+1 of terminated run `r` (locked by the caller) at step
-- `from_step` with `payload`: the run's memos stay, its history keeps the
-- earlier generations.
CREATE FUNCTION hf_restart(r run, from_step integer, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE run SET status = 'pending', step = from_step, attempt = 0,
		generation = r.generation + 1, job_id = hf_new_id(), payload = p_payload,
		signal = NULL, seq = nextval('hf_seq'), next_at = now(), wait_key = NULL,
		wait_timeout_at = NULL, cancel_requested = false, lease_owner = NULL,
		claim_token = NULL, claimed_at = NULL, lease_expires_at = NULL, result = NULL,
		error = NULL, error_kind = NULL, final_step = NULL, finished_at = NULL,
		updated_at = now()
	WHERE run_id = r.run_id;
	PERFORM pg_notify('hookflow_wake', '');
END
$$;

-- Rerun (SPEC 4). Returns 'ok', 'not_found', 'run_active' or 'step_not_reached'.
-- The payload of `from_step` is the one recorded for it (latest generation);
-- `p_input` replaces the input when rerunning from step 0.
CREATE FUNCTION hf_rerun(p_run_id text, p_from_step integer, p_input jsonb, p_input_hash bytea)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r run;
	pl jsonb;
BEGIN
	SELECT * INTO r FROM run WHERE run_id = p_run_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF r.status NOT IN ('succeeded', 'failed', 'cancelled') THEN
		RETURN 'run_active';
	END IF;
	IF p_from_step = 0 THEN
		pl := CASE WHEN p_input_hash IS NOT NULL THEN p_input ELSE r.input END;
		IF p_input_hash IS NOT NULL THEN
			UPDATE run SET input = p_input, input_hash = p_input_hash WHERE run_id = r.run_id;
		END IF;
	ELSE
		SELECT a.payload INTO pl FROM step_attempt a
		WHERE a.run_id = r.run_id AND a.step = p_from_step
		ORDER BY a.generation DESC, a.id DESC LIMIT 1;
		IF NOT FOUND THEN
			IF r.step <> p_from_step THEN
				RETURN 'step_not_reached';
			END IF;
			pl := r.payload;
		END IF;
	END IF;
	PERFORM hf_restart(r, p_from_step, pl);
	RETURN 'ok';
END
$$;

-- Submits a group. p_members: [{"key", "run_id", "input", "input_hash" (hex),
-- "headers"}] in order. Returns (outcome, submitted): outcome 'created',
-- 'resubmitted', 'group_mismatch' or 'workflow_not_found'; submitted counts
-- the members started now (new runs, and terminated members that did not
-- succeed, which start a new generation).
CREATE FUNCTION hf_group_submit(p_group_id text, p_workflow text, p_manifest bytea,
				p_members jsonb, p_priority integer, p_max_attempts integer)
RETURNS TABLE (outcome text, submitted integer)
LANGUAGE plpgsql AS $$
DECLARE
	w workflow;
	g run_group;
	created boolean := false;
	n integer := 0;
	m integer := 0;
	r run;
BEGIN
	SELECT * INTO w FROM workflow WHERE name = p_workflow FOR KEY SHARE;
	IF NOT FOUND THEN
		outcome := 'workflow_not_found';
		submitted := 0;
		RETURN NEXT;
		RETURN;
	END IF;
	INSERT INTO run_group (group_id, workflow, manifest_hash, total)
	VALUES (p_group_id, p_workflow, p_manifest, jsonb_array_length(p_members))
	ON CONFLICT (group_id) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	created := n > 0;
	SELECT * INTO g FROM run_group WHERE group_id = p_group_id FOR UPDATE;
	IF NOT created AND (g.manifest_hash <> p_manifest OR g.workflow <> p_workflow) THEN
		outcome := 'group_mismatch';
		submitted := 0;
		RETURN NEXT;
		RETURN;
	END IF;
	IF created THEN
		INSERT INTO group_member (group_id, ord, key, run_id)
		SELECT p_group_id, x.ord - 1, x.m->>'key', x.m->>'run_id'
		FROM jsonb_array_elements(p_members) WITH ORDINALITY AS x(m, ord);
	END IF;

	-- New member runs, in one statement.
	INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, payload, headers,
			 priority, max_attempts, seq, next_at, group_id, group_key)
	SELECT x.m->>'run_id', p_workflow, 'pending', hf_new_id(), x.m->'input',
		decode(x.m->>'input_hash', 'hex'), x.m->'input', coalesce(x.m->'headers', '{}'),
		coalesce(p_priority, w.priority), coalesce(p_max_attempts, w.max_attempts),
		nextval('hf_seq'), now(), p_group_id, x.m->>'key'
	FROM jsonb_array_elements(p_members) WITH ORDINALITY AS x(m, ord)
	ORDER BY x.ord
	ON CONFLICT (run_id) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;

	-- Members whose last termination is not a success run again.
	IF NOT created THEN
		FOR r IN SELECT * FROM run x WHERE x.group_id = p_group_id
			 AND x.status IN ('failed', 'cancelled') ORDER BY x.run_id FOR UPDATE
		LOOP
			PERFORM hf_restart(r, 0, r.input);
			m := m + 1;
		END LOOP;
	END IF;
	UPDATE run_group SET updated_at = now() WHERE group_id = p_group_id;
	IF n + m > 0 THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	outcome := CASE WHEN created THEN 'created' ELSE 'resubmitted' END;
	submitted := n + m;
	RETURN NEXT;
END
$$;

-- Cancels active runs matching the filters (NULL: any), at most p_limit per
-- call; returns how many were cancelled or asked to cancel.
CREATE FUNCTION hf_cancel_many(p_workflow text, p_statuses text[], p_group_id text,
			       p_created_before timestamptz, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	rid text;
	n integer := 0;
	res text;
BEGIN
	FOR rid IN SELECT run_id FROM run
		   WHERE status IN ('pending', 'scheduled', 'waiting', 'running')
		     AND (p_workflow IS NULL OR workflow = p_workflow)
		     AND (p_statuses IS NULL OR status = ANY (p_statuses))
		     AND (p_group_id IS NULL OR group_id = p_group_id)
		     AND (p_created_before IS NULL OR created_at < p_created_before)
		   ORDER BY created_at LIMIT p_limit
	LOOP
		res := hf_cancel(rid);
		IF res IN ('cancelled', 'cancelling') THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$$;

-- Forgets a group whose members are all terminal: its record, its members
-- and their runs with their history, memos and replay records. Returns
-- 'deleted', 'not_found' or 'group_active'.
CREATE FUNCTION hf_group_forget(p_group_id text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	ids text[];
BEGIN
	PERFORM 1 FROM run_group WHERE group_id = p_group_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	SELECT array_agg(run_id) INTO ids FROM group_member WHERE group_id = p_group_id;
	PERFORM 1 FROM run WHERE run_id = ANY (ids) FOR UPDATE;
	IF EXISTS (SELECT 1 FROM run WHERE run_id = ANY (ids)
		   AND status NOT IN ('succeeded', 'failed', 'cancelled')) THEN
		RETURN 'group_active';
	END IF;
	DELETE FROM step_attempt WHERE run_id = ANY (ids);
	DELETE FROM memo WHERE run_id = ANY (ids);
	DELETE FROM step_output WHERE run_id = ANY (ids);
	DELETE FROM callback WHERE run_id = ANY (ids) AND status IN ('done', 'dead');
	DELETE FROM run WHERE run_id = ANY (ids);
	DELETE FROM group_member WHERE group_id = p_group_id;
	DELETE FROM run_group WHERE group_id = p_group_id;
	RETURN 'deleted';
END
$$;

-- Redrives dead letter p_id. A callback is queued again with fresh attempts;
-- a step reruns its run from that step with the dead step's payload.
-- Returns 'callback', 'step', 'not_found' or 'run_active'.
CREATE FUNCTION hf_redrive(p_id text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	d dead_letter;
	r run;
BEGIN
	SELECT * INTO d FROM dead_letter WHERE id = p_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF d.kind = 'callback' THEN
		UPDATE callback SET status = 'pending', attempt = 0, seq = nextval('hf_seq'),
			next_at = now(), last_error = NULL, finished_at = NULL, updated_at = now()
		WHERE id = d.id;
		IF NOT FOUND THEN
			-- The callback row was swept: queue it again from the dead letter.
			INSERT INTO callback (id, run_id, generation, workflow, url, body, status,
					      max_attempts, priority, seq, next_at)
			SELECT d.id, d.run_id, d.generation, d.workflow,
				coalesce(r2.callback_url, w.callback_url), d.payload, 'pending',
				coalesce(r2.max_attempts, w.max_attempts, 3),
				coalesce(r2.priority, w.priority, 1000), nextval('hf_seq'), now()
			FROM (SELECT 1) one
			LEFT JOIN run r2 ON r2.run_id = d.run_id
			LEFT JOIN workflow w ON w.name = d.workflow
			WHERE coalesce(r2.callback_url, w.callback_url) IS NOT NULL
			ON CONFLICT (run_id, generation) DO UPDATE SET status = 'pending',
				attempt = 0, seq = EXCLUDED.seq, next_at = now(), updated_at = now();
		END IF;
		DELETE FROM dead_letter WHERE id = d.id;
		PERFORM pg_notify('hookflow_wake', '');
		RETURN 'callback';
	END IF;
	SELECT * INTO r FROM run WHERE run_id = d.run_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF r.status NOT IN ('succeeded', 'failed', 'cancelled') THEN
		RETURN 'run_active';
	END IF;
	PERFORM hf_restart(r, d.step, d.payload);
	DELETE FROM dead_letter WHERE id = d.id;
	RETURN 'step';
END
$$;
