-- Reruns and redrives: a terminated run starts a new generation of the same
-- run id, from a chosen step (openapi.yaml, POST /v1/runs/{id}/rerun and
-- POST /v1/dead-letters/{id}/redrive).

-- Starts generation n+1 of terminated run `r` (locked by the caller) at step
-- `from_step` with `payload`: the run's memos stay, its history keeps the
-- earlier generations. Step 0 with the run's (current) input keeps no copy
-- of it: hf_step_payload reads step 0's payload from the input. The new
-- generation gets a run span of its own (hf_run_span: the generation is in
-- its key), in the run's trace, or in p_trace
-- ({"trace_id", "parent_span_id", "tracestate"}: a group's re-submission
-- places its members in the request's trace) when given; a run that ended
-- before it had a trace (migrations/0010_traces.sql) starts one. A keyed run
-- is active again for key_mode (run_key, migrations/0012_run_key.sql).
CREATE FUNCTION hf_restart(r run, from_step integer, p_payload jsonb,
			   p_trace jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE run SET status = 'pending', step = from_step, attempt = 0,
		generation = r.generation + 1, job_id = hf_new_id(),
		payload = CASE WHEN from_step = 0 AND p_payload IS NOT DISTINCT FROM input
			       THEN NULL ELSE p_payload END,
		signal = NULL, seq = nextval('hf_seq'), next_at = now(), wait_key = NULL, wait_keys = NULL,
		wait_timeout_at = NULL, cancel_requested = false, cancel_reason = NULL,
		lease_owner = NULL,
		claim_token = NULL, claimed_at = NULL, lease_expires_at = NULL, result = NULL,
		error = NULL, error_kind = NULL, final_step = NULL, finished_at = NULL,
		trace_id = coalesce((p_trace->>'trace_id')::uuid, r.trace_id, gen_random_uuid()),
		parent_span_id = CASE WHEN p_trace->>'trace_id' IS NOT NULL
				      THEN p_trace->>'parent_span_id'
				      WHEN r.trace_id IS NOT NULL THEN r.parent_span_id END,
		tracestate = CASE WHEN p_trace->>'trace_id' IS NOT NULL THEN p_trace->>'tracestate'
				  WHEN r.trace_id IS NOT NULL THEN r.tracestate END,
		span_started_at = now(), waited_since = NULL,
		updated_at = now()
	WHERE run_id = r.run_id;
	IF r.concurrency_key IS NOT NULL THEN
		UPDATE run_key SET active = true WHERE run_id = r.run_id;
	END IF;
	PERFORM pg_notify('hookflow_wake', '');
END
$$;

-- Returns 'ok', 'not_found', 'run_active' or 'step_not_reached'. The payload
-- of `from_step` is the one recorded for it (latest generation); `p_input`
-- replaces the input when rerunning from step 0.
CREATE FUNCTION hf_rerun(p_run_id text, p_from_step integer, p_input jsonb, p_input_hash bytea)
RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
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
			-- The history read step 0's payload from the input: keep the
			-- one its attempts received.
			UPDATE step_attempt a SET payload = r.input
			WHERE a.run_id = r.run_id AND a.step = 0 AND a.payload IS NULL;
			UPDATE run SET input = p_input, input_hash = p_input_hash WHERE run_id = r.run_id;
		END IF;
	ELSE
		SELECT coalesce(a.payload, hf_step_payload(a.run_id, a.generation, a.step, NULL, r.input))
		INTO pl FROM step_attempt a
		WHERE a.run_id = r.run_id AND a.step = p_from_step
		ORDER BY a.generation DESC, a.id DESC LIMIT 1;
		IF NOT FOUND THEN
			IF r.step <> p_from_step THEN
				RETURN 'step_not_reached';
			END IF;
			pl := hf_step_payload(r.run_id, r.generation, r.step, r.payload, r.input);
		END IF;
	END IF;
	PERFORM hf_restart(r, p_from_step, pl);
	RETURN 'ok';
END
$$;

-- Redrives dead letter p_id. A callback is queued again with fresh attempts;
-- a step reruns its run from that step with the dead step's payload.
-- Returns 'callback', 'step', 'not_found' or 'run_active'.
CREATE FUNCTION hf_redrive(p_id text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
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
