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
-- index, so they also run with enable_seqscan = off: the plan is the same
-- whatever the table's size when it was made (tests/integration/test_plans.py).

-- Submits one run. Returns 'created', 'duplicate', 'input_mismatch' or
-- 'workflow_not_found'. Defaults (priority, max_attempts) come from the
-- workflow when NULL. The run row, its step-0 job and the kv effects commit
-- together; a duplicate applies nothing: only the input is compared, so a
-- duplicate with other settings (headers, priority, concurrency_key, ...)
-- answers the run as it was first submitted (README, "Flow control").
CREATE FUNCTION hf_submit(p_run_id text, p_workflow text, p_input jsonb, p_input_hash bytea,
			  p_headers jsonb, p_priority integer, p_max_attempts integer,
			  p_due timestamptz, p_callback_url text, p_kv jsonb,
			  p_group_id text, p_group_key text, p_concurrency_key text)
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
	INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, headers,
			 priority, max_attempts, callback_url, seq, next_at, group_id, group_key,
			 concurrency_key)
	VALUES (p_run_id, p_workflow, st, hf_new_id(), p_input, p_input_hash,
		coalesce(p_headers, '{}'), coalesce(p_priority, w.priority),
		coalesce(p_max_attempts, w.max_attempts), p_callback_url,
		CASE WHEN st = 'pending' THEN nextval('hf_seq') END, due, p_group_id, p_group_key,
		p_concurrency_key)
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
-- "priority", "max_attempts", "delay_ms" | "run_at", "callback_url", "kv",
-- "concurrency_key"};
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
			CASE WHEN it ? 'delay_ms' THEN hf_due((it->>'delay_ms')::bigint)
			     ELSE (it->>'run_at')::timestamptz END,
			it->>'callback_url', it->'kv', NULL, NULL, it->>'concurrency_key');
		run_json := NULL;
		IF outcome IN ('created', 'duplicate') THEN
			SELECT hf_run_json(r) INTO run_json FROM run r WHERE r.run_id = rid;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
