-- Submission: a run row with its step-0 job and its kv effects, in one
-- transaction (README, "A first run"; openapi.yaml, POST /v1/runs).
--
-- The functions on the hot path (submit, claim, settle) run with
-- plan_cache_mode = force_generic_plan: their statements take parameters, so
-- PostgreSQL would otherwise re-plan them at every call (custom plans), which
-- cost more than executing them; their plans do not depend on the values.
-- A generic plan is made once per session and kept until the table's
-- statistics change, so it may be made while the tables are empty (a new
-- database): then a scan of the whole table looks cheapest, and it would stay
-- so as the table grows (a claim of 200 runs scanning every run ever kept).
-- Every statement of these functions is meant to find its rows through an
-- index, so they also run with enable_seqscan = off, and with hash and merge
-- joins off: either reads one side of a join whole, and with sequential scans
-- off it does so through an index (a settlement planned on a tiny table
-- hashed every run through run_pkey). Joins are nested loops probing an
-- index, and the plan is the same whatever the table's size when it was
-- made (tests/integration/test_plans.py).
--
-- Every function the service calls that runs statements of its own (these,
-- and the other entry points in db/*.c) runs with jit = off. PostgreSQL
-- compiles a statement whose estimated cost passes jit_above_cost (100,000
-- by default), and the estimate of a generic plan moves with the statistics:
-- after one of autovacuum's ANALYZEs of run under a steady load, the claim's
-- lane statement was estimated at 136,000 and compiled at every claim, 8 to
-- 10 ms each, until the next ANALYZE; the soak stalled for 10 to 60 s
-- (BENCHMARKS.md, "The soak's stalls: JIT"). Statements of a few hundred rows
-- gain nothing from compiling. The setting holds for everything the function
-- calls, on whichever server session a pooler gives it; the service also
-- turns JIT off for its own sessions when it connects directly (db/db.c).
-- The helpers that compute a value from a row the caller read go without it
-- (test_plans.py lists them): a SET would cost each row of a list, and stop
-- PostgreSQL inlining the SQL ones.

-- The active runs of key p_key of workflow p_workflow (key_mode: skip,
-- cancel_active, debounce), found through run_key_active
-- (migrations/0012_run_key.sql) without reading the key's ended runs. The
-- run's own status is checked too, so that a run_key row left active by an
-- engine that did not keep it (an instance of an older release during an
-- upgrade) costs a probe, not a wrong answer.
CREATE FUNCTION hf_key_active(p_workflow text, p_key text) RETURNS SETOF run
LANGUAGE sql STABLE AS $$
	SELECT r.* FROM run_key k JOIN run r ON r.run_id = k.run_id
	WHERE k.workflow = p_workflow AND k.concurrency_key = p_key AND k.active
	  AND r.status NOT IN ('succeeded', 'failed', 'cancelled')
$$;

-- Submits one run. Returns 'created', 'duplicate', 'input_mismatch',
-- 'skipped' (key_mode skip: its key has an active run; nothing written) or
-- 'workflow_not_found'. With a concurrency key and a workflow key_mode other
-- than queue (README "Flow control"), the submissions of one key are decided
-- one at a time (an advisory lock): cancel_active cancels the key's active
-- runs first, debounce supersedes the key's run that has not started yet
-- and starts the new one debounce_ms from now, at the latest debounce_max_ms
-- after the first submission it superseded (never before the time asked).
-- Superseded runs end cancelled with the error 'superseded by <run_id>'. Defaults (priority, max_attempts) come from the
-- workflow when NULL. The run row, its step-0 job and the kv effects commit
-- together; a duplicate applies nothing: only the input is compared, so a
-- duplicate with other settings (headers, priority, concurrency_key, ...)
-- answers the run as it was first submitted (README, "Flow control").
-- p_parent makes the run a child run: {"run_id", "generation", "step",
-- "key", "depth"} (hf_start_children); p_schedule a scheduled one: {"id",
-- "fire_time"} (hf_schedule_start). p_trace places the run in a trace
-- (README "Traces"): {"trace_id", "parent_span_id", "tracestate"} (the
-- caller's traceparent, or a child's parent step attempt); NULL: the run
-- starts a trace of its own. The run's own span id is derived (hf_run_span).
CREATE FUNCTION hf_submit(p_run_id text, p_workflow text, p_input jsonb, p_input_hash bytea,
			  p_headers jsonb, p_priority integer, p_max_attempts integer,
			  p_due timestamptz, p_callback_url text, p_kv jsonb,
			  p_group_id text, p_group_key text, p_concurrency_key text,
			  p_parent jsonb DEFAULT NULL, p_schedule jsonb DEFAULT NULL,
			  p_trace jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w workflow;
	due timestamptz := coalesce(p_due, now());
	st text;
	inserted text;
	old_hash bytea;
	prev text;
	first_at timestamptz;
	created timestamptz;
BEGIN
	SELECT * INTO w FROM workflow WHERE name = p_workflow FOR KEY SHARE;
	IF NOT FOUND THEN
		RETURN 'workflow_not_found';
	END IF;
	IF p_concurrency_key IS NOT NULL AND w.key_mode <> 'queue' THEN
		PERFORM pg_advisory_xact_lock(
			hashtextextended('key/' || p_workflow || '/' || p_concurrency_key, 724392));
		IF NOT EXISTS (SELECT 1 FROM run WHERE run_id = p_run_id) THEN
			IF w.key_mode = 'skip' THEN
				IF EXISTS (SELECT 1 FROM hf_key_active(p_workflow, p_concurrency_key)) THEN
					RETURN 'skipped';
				END IF;
			ELSIF w.key_mode = 'cancel_active' THEN
				PERFORM hf_cancel(r.run_id, 'superseded by ' || p_run_id)
				FROM hf_key_active(p_workflow, p_concurrency_key) r;
			ELSE  -- debounce
				SELECT r.run_id, r.debounce_first_at INTO prev, first_at
				FROM hf_key_active(p_workflow, p_concurrency_key) r
				WHERE r.status = 'scheduled' AND r.debounce_first_at IS NOT NULL
				ORDER BY r.created_at DESC LIMIT 1;
				IF prev IS NOT NULL THEN
					PERFORM hf_cancel(prev, 'superseded by ' || p_run_id);
				END IF;
				first_at := coalesce(first_at, now());
				due := greatest(due, CASE WHEN w.debounce_max_ms > 0
					THEN least(hf_due(w.debounce_ms),
						   first_at + make_interval(secs => w.debounce_max_ms / 1000.0))
					ELSE hf_due(w.debounce_ms) END);
			END IF;
		END IF;
	END IF;
	st := hf_queue_state(due);
	INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, headers,
			 priority, max_attempts, callback_url, seq, next_at, group_id, group_key,
			 concurrency_key, debounce_first_at, parent_run_id, parent_generation,
			 parent_step, child_key, depth, schedule_id, fire_time, trace_id,
			 parent_span_id, tracestate, waited_since)
	VALUES (p_run_id, p_workflow, st, hf_new_id(), p_input, p_input_hash,
		coalesce(p_headers, '{}'), coalesce(p_priority, w.priority),
		coalesce(p_max_attempts, w.max_attempts), p_callback_url,
		CASE WHEN st = 'pending' THEN nextval('hf_seq') END, due, p_group_id, p_group_key,
		p_concurrency_key, first_at, p_parent->>'run_id',
		(p_parent->>'generation')::integer, (p_parent->>'step')::integer, p_parent->>'key',
		coalesce((p_parent->>'depth')::integer, 0), p_schedule->>'id',
		(p_schedule->>'fire_time')::timestamptz,
		coalesce((p_trace->>'trace_id')::uuid, gen_random_uuid()),
		CASE WHEN p_trace->>'trace_id' IS NOT NULL THEN p_trace->>'parent_span_id' END,
		CASE WHEN p_trace->>'trace_id' IS NOT NULL THEN p_trace->>'tracestate' END,
		CASE WHEN due > now() THEN now() END)
	ON CONFLICT (run_id) DO NOTHING
	RETURNING run_id, created_at INTO inserted, created;
	IF inserted IS NULL THEN
		SELECT input_hash INTO old_hash FROM run WHERE run_id = p_run_id;
		IF old_hash = p_input_hash THEN
			RETURN 'duplicate';
		END IF;
		RETURN 'input_mismatch';
	END IF;
	INSERT INTO run_listing (run_id, workflow, created_at)
	VALUES (p_run_id, p_workflow, created);
	IF p_concurrency_key IS NOT NULL THEN
		INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active)
		VALUES (p_run_id, p_workflow, p_concurrency_key, created, true);
	END IF;
	PERFORM hf_apply_kv(p_kv);
	PERFORM hf_notify_due(due);
	RETURN 'created';
END
$$;

-- Submits a batch of runs in one transaction, in order (a run id submitted
-- twice in one batch is a duplicate the second time). p_items is a JSON array
-- of {"run_id", "workflow", "input", "input_hash" (hex), "headers",
-- "priority", "max_attempts", "delay_ms" | "run_at", "callback_url", "kv",
-- "concurrency_key", "trace" (hf_submit's p_trace)};
-- absent keys are NULL. Returns, per item in order, hf_submit's outcome, the
-- run's JSON text (hf_run_text: the API answers it as it is) when it was
-- created or is a duplicate (when it was skipped: the JSON of its key's
-- active run), and the item's run id and workflow (for messages).
--
-- A batch of plain runs (no kv effects, each run id once, a concurrency key
-- only where its workflow's key_mode is queue) is inserted with one
-- statement, the outcomes hf_submit would give; any other batch goes through
-- hf_submit item by item, and so does a batch of one run: hf_submit's
-- one-row insert costs less than the batch's statement, most of whose cost
-- is fixed (BENCHMARKS.md, "Issue 13: what the soak spends its CPU on").
CREATE FUNCTION hf_submit_many(p_items jsonb)
RETURNS TABLE (outcome text, run_json text, rid text, wf text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
DECLARE
	it jsonb;
	created text[];
	dues timestamptz[];      -- the created runs' due times, now() for those due
BEGIN
	IF jsonb_array_length(p_items) > 1
	   AND NOT jsonb_path_exists(p_items, '$[*] ? (@.kv != null)')
	   AND (SELECT count(DISTINCT e->>'run_id') FROM jsonb_array_elements(p_items) e)
	       = jsonb_array_length(p_items)
	   AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_items) e
			   JOIN workflow w ON w.name = e->>'workflow'
			   WHERE e->>'concurrency_key' IS NOT NULL AND w.key_mode <> 'queue') THEN
		-- What hf_submit does for each, at once: the workflows held against
		-- a delete, the runs inserted (a run id that exists is left alone)
		-- with their list rows and, keyed, their run_key rows, the claimers
		-- woken for the runs due now and the timers told of the others.
		PERFORM 1 FROM workflow w
		WHERE w.name IN (SELECT e->>'workflow' FROM jsonb_array_elements(p_items) e)
		FOR KEY SHARE;
		WITH x AS (
			SELECT e.ord, e.item, coalesce(CASE WHEN e.item ? 'delay_ms'
				THEN hf_due((e.item->>'delay_ms')::bigint)
				ELSE (e.item->>'run_at')::timestamptz END, now()) AS due
			FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)),
		ins AS (
			INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, headers,
					 priority, max_attempts, callback_url, seq, next_at, group_id,
					 group_key, concurrency_key, debounce_first_at, parent_run_id,
					 parent_generation, parent_step, child_key, depth, schedule_id,
					 fire_time, trace_id, parent_span_id, tracestate, waited_since)
			SELECT x.item->>'run_id', w.name, hf_queue_state(x.due), hf_new_id(),
			       x.item->'input', decode(x.item->>'input_hash', 'hex'),
			       coalesce(x.item->'headers', '{}'),
			       coalesce((x.item->>'priority')::integer, w.priority),
			       coalesce((x.item->>'max_attempts')::integer, w.max_attempts),
			       x.item->>'callback_url',
			       CASE WHEN x.due <= now() THEN nextval('hf_seq') END, x.due, NULL, NULL,
			       x.item->>'concurrency_key', NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL,
			       coalesce((x.item->'trace'->>'trace_id')::uuid, gen_random_uuid()),
			       CASE WHEN x.item->'trace'->>'trace_id' IS NOT NULL
				    THEN x.item->'trace'->>'parent_span_id' END,
			       CASE WHEN x.item->'trace'->>'trace_id' IS NOT NULL
				    THEN x.item->'trace'->>'tracestate' END,
			       CASE WHEN x.due > now() THEN now() END
			FROM x JOIN workflow w ON w.name = x.item->>'workflow'
			ORDER BY x.ord
			ON CONFLICT (run_id) DO NOTHING
			RETURNING run.run_id, run.workflow, run.created_at, run.next_at,
				  run.concurrency_key),
		listed AS (
			INSERT INTO run_listing (run_id, workflow, created_at)
			SELECT ins.run_id, ins.workflow, ins.created_at FROM ins),
		keyed AS (
			INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active)
			SELECT ins.run_id, ins.workflow, ins.concurrency_key, ins.created_at, true
			FROM ins WHERE ins.concurrency_key IS NOT NULL)
		SELECT array_agg(ins.run_id), array_agg(DISTINCT greatest(ins.next_at, now()))
		INTO created, dues FROM ins;
		PERFORM hf_notify_due(t) FROM unnest(dues) t;
		RETURN QUERY
		SELECT o.outcome, CASE WHEN o.outcome IN ('created', 'duplicate')
				       THEN hf_run_text(r) END,
		       o.rid, o.wf
		FROM (SELECT e.ord, e.item->>'run_id' AS rid, e.item->>'workflow' AS wf,
			     CASE WHEN NOT EXISTS (SELECT 1 FROM workflow w
						   WHERE w.name = e.item->>'workflow')
				  THEN 'workflow_not_found'
				  WHEN e.item->>'run_id' = ANY (created) THEN 'created'
				  WHEN (SELECT r0.input_hash FROM run r0
					WHERE r0.run_id = e.item->>'run_id')
				       = decode(e.item->>'input_hash', 'hex') THEN 'duplicate'
				  ELSE 'input_mismatch' END AS outcome
		      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)) o
		LEFT JOIN run r ON r.run_id = o.rid
		ORDER BY o.ord;
		RETURN;
	END IF;
	FOR it IN SELECT * FROM jsonb_array_elements(p_items) LOOP
		rid := it->>'run_id';
		wf := it->>'workflow';
		outcome := hf_submit(it->>'run_id', it->>'workflow', it->'input',
			decode(it->>'input_hash', 'hex'), it->'headers',
			(it->>'priority')::integer, (it->>'max_attempts')::integer,
			CASE WHEN it ? 'delay_ms' THEN hf_due((it->>'delay_ms')::bigint)
			     ELSE (it->>'run_at')::timestamptz END,
			it->>'callback_url', it->'kv', NULL, NULL, it->>'concurrency_key',
			NULL, NULL, it->'trace');
		run_json := NULL;
		IF outcome IN ('created', 'duplicate') THEN
			SELECT hf_run_text(r) INTO run_json FROM run r WHERE r.run_id = rid;
		ELSIF outcome = 'skipped' THEN
			SELECT hf_run_text(r) INTO run_json
			FROM hf_key_active(wf, it->>'concurrency_key') r
			ORDER BY r.created_at LIMIT 1;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
