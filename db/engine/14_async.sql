-- Pending steps (migrations/0008, README "Long-running steps"): a step whose
-- webhook answered {"outcome": "pending"} is completed or kept alive later,
-- from any instance, by the holder of its delivery token, which names the
-- attempt (generation, step, attempt).

-- Why attempt (p_generation, p_step, p_attempt) of run r is not the one
-- that may be completed now: 'already_completed' (it ended with an answer:
-- an outcome, or an error the webhook or a completion gave), 'run_cancelled'
-- (an external cancel ended the run in that attempt) or 'stale_attempt' (an
-- older attempt or generation, or one that timed out or lost its lease).
CREATE FUNCTION hf_attempt_gone(r run, p_generation integer, p_step integer, p_attempt integer)
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN EXISTS (SELECT 1 FROM step_attempt a WHERE a.run_id = r.run_id
			     AND a.generation = p_generation AND a.step = p_step
			     AND a.attempt = p_attempt
			     AND (a.result IN ('continue', 'succeed', 'fail', 'cancel',
					       'permanent_error')
				  OR (a.result = 'transient_error'
				      AND a.error NOT IN ('heartbeat timeout', 'pending timeout'))))
		THEN 'already_completed'
		WHEN r.status = 'cancelled' AND r.generation = p_generation
		     AND r.final_step = p_step AND r.attempt = p_attempt
		THEN 'run_cancelled'
		ELSE 'stale_attempt' END
$$;

-- POST /v1/runs/{id}/steps/{n}/complete: settles the attempt with p_item, a
-- settlement item of hf_settle_steps without run_id and claim_token (a
-- transient error without retry_delay_ms waits the workflow's backoff),
-- exactly as if the webhook had answered it. The attempt may be pending or
-- still have its call in flight (the first settlement of a claim wins).
-- Returns the outcome ('completed', 'not_found', 'run_cancelled' when a
-- cancel overrode the answer, or what hf_attempt_gone says) and the run.
CREATE FUNCTION hf_complete(p_run_id text, p_generation integer, p_step integer,
			    p_attempt integer, p_item jsonb)
RETURNS TABLE (outcome text, run jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	r run;
	item jsonb := p_item;
	st text;
BEGIN
	SELECT * INTO r FROM run x WHERE x.run_id = p_run_id FOR UPDATE;
	IF NOT FOUND THEN
		outcome := 'not_found';
		RETURN NEXT;
		RETURN;
	END IF;
	IF r.generation = p_generation AND r.step = p_step AND r.attempt = p_attempt
	   AND r.status IN ('running', 'cancelling') THEN
		item := item || jsonb_build_object('run_id', p_run_id, 'claim_token', r.claim_token);
		IF item->>'result' = 'transient_error' AND NOT item ? 'retry_delay_ms' THEN
			item := item || jsonb_build_object('retry_delay_ms', (
				SELECT hf_backoff_ms(w.backoff_base_ms, w.backoff_max_ms, r.attempt)
				FROM workflow w WHERE w.name = r.workflow));
		END IF;
		SELECT s.outcome INTO st FROM hf_settle_steps(jsonb_build_array(item)) s;
		outcome := CASE WHEN st = 'cancelled' AND r.cancel_requested
				     AND item->>'result' <> 'cancel' THEN 'run_cancelled'
				WHEN st = 'claim_lost' THEN 'stale_attempt'
				ELSE 'completed' END;
	ELSE
		outcome := hf_attempt_gone(r, p_generation, p_step, p_attempt);
	END IF;
	SELECT hf_run_json(x) INTO run FROM run x WHERE x.run_id = p_run_id;
	RETURN NEXT;
END
$$;

-- POST /v1/runs/{id}/steps/{n}/heartbeat: records p_details (unless
-- p_has_details is false) for the attempt and, while it is pending with a
-- heartbeat timeout, moves that deadline to now + the timeout. Returns 'ok'
-- with whether a cancel is requested (true too when a cancel ended the run
-- in this attempt), 'not_found', or what hf_attempt_gone says.
CREATE FUNCTION hf_heartbeat(p_run_id text, p_generation integer, p_step integer,
			     p_attempt integer, p_details jsonb, p_has_details boolean)
RETURNS TABLE (outcome text, cancel_requested boolean)
LANGUAGE plpgsql AS $$
DECLARE
	r run;
	gone text;
BEGIN
	UPDATE run x SET
		heartbeat = CASE WHEN p_has_details THEN p_details ELSE x.heartbeat END,
		heartbeat_at = now(),
		heartbeat_timeout_at = CASE WHEN x.pending_since IS NOT NULL
						 AND x.heartbeat_timeout_ms IS NOT NULL
					    THEN hf_due(x.heartbeat_timeout_ms) END,
		lease_expires_at = CASE WHEN x.pending_since IS NOT NULL
				   THEN least(x.pending_timeout_at,
					      CASE WHEN x.heartbeat_timeout_ms IS NOT NULL
						   THEN hf_due(x.heartbeat_timeout_ms) END)
				   ELSE x.lease_expires_at END,
		updated_at = now()
	WHERE x.run_id = p_run_id AND x.generation = p_generation AND x.step = p_step
	  AND x.attempt = p_attempt AND x.status IN ('running', 'cancelling')
	RETURNING x.cancel_requested INTO cancel_requested;
	IF FOUND THEN
		outcome := 'ok';
		RETURN NEXT;
		RETURN;
	END IF;
	SELECT * INTO r FROM run x WHERE x.run_id = p_run_id;
	IF NOT FOUND THEN
		outcome := 'not_found';
	ELSE
		gone := hf_attempt_gone(r, p_generation, p_step, p_attempt);
		outcome := CASE WHEN gone = 'run_cancelled' THEN 'ok' ELSE gone END;
		cancel_requested := gone = 'run_cancelled';
	END IF;
	RETURN NEXT;
END
$$;
