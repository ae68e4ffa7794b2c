-- Pending steps (migrations/0008, README "Long-running steps"): a step whose
-- webhook answered {"outcome": "pending"} is completed or kept alive later,
-- from any instance, by the holder of its delivery token, which names the
-- attempt (generation, step, attempt).

-- Why attempt (p_generation, p_step, p_attempt) of run r is not the one
-- that may be completed now: 'already_completed' (it ended with an outcome,
-- from its webhook or a completion, or with an error a completion gave),
-- 'run_cancelled' (an external cancel ended the run in that attempt) or
-- 'stale_attempt' (an older attempt or generation, or one whose call failed,
-- timed out, lost its lease or stayed pending too long).
CREATE FUNCTION hf_attempt_gone(r run, p_generation integer, p_step integer, p_attempt integer)
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN EXISTS (SELECT 1 FROM step_attempt a WHERE a.run_id = r.run_id
			     AND a.generation = p_generation AND a.step = p_step
			     AND a.attempt = p_attempt
			     AND (a.result IN ('continue', 'succeed', 'fail', 'cancel')
				  OR (a.result IN ('transient_error', 'permanent_error')
				      AND a.pending_since IS NOT NULL
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
LANGUAGE plpgsql SET jit = off AS $$
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
LANGUAGE plpgsql SET jit = off AS $$
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

-- Child runs (migrations/0008, README "Child runs"): a step's outcome starts
-- them in its settlement (hf_settle_steps calls hf_start_children) and its
-- run waits for them; every end of a child checks its parent's wait
-- (hf_children_wake), and the wait's timeout ends it too (hf_promote).

-- The run id of child `p_key` of step p_step of generation p_generation of
-- run p_parent: the same for every settlement of that step, so that a
-- redelivered step starts no second child.
CREATE FUNCTION hf_child_id(p_parent text, p_generation integer, p_step integer, p_key text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT encode(sha256(convert_to(p_parent || '/' || p_generation || '/' || p_step || '/'
					|| p_key, 'UTF8')), 'hex')
$$;

-- Why a step of run p_run_id may not start p_children (a JSON array of
-- {"key", "workflow", ...}), or NULL: more than p_max children, a depth
-- past p_max_depth, or a workflow that does not exist.
CREATE FUNCTION hf_children_refused(p_run_id text, p_children jsonb, p_max integer,
				    p_max_depth integer)
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN jsonb_array_length(p_children) > p_max THEN format(
			'children: at most %s child runs per step (HOOKFLOW_MAX_CHILDREN); %s asked',
			p_max, jsonb_array_length(p_children))
		WHEN (SELECT r.depth FROM run r WHERE r.run_id = p_run_id) + 1 > p_max_depth
		THEN format('children: a child run would be at depth %s, more than '
			    'HOOKFLOW_MAX_CHILD_DEPTH (%s)',
			    (SELECT r.depth FROM run r WHERE r.run_id = p_run_id) + 1, p_max_depth)
		ELSE (SELECT format('children[%s].workflow: workflow %s not found', c.i - 1,
				    c.item->>'workflow')
		      FROM jsonb_array_elements(p_children) WITH ORDINALITY AS c(item, i)
		      WHERE NOT EXISTS (SELECT 1 FROM workflow w WHERE w.name = c.item->>'workflow')
		      ORDER BY c.i LIMIT 1) END
$$;

-- Submits the children of step p_step of generation p_generation of
-- waiting run p_run_id (at depth p_depth), then ends the wait at once if it
-- is already over (every child skipped by its key_mode, or already ended).
-- The children join the parent's trace, under the span of attempt
-- p_attempt of the step that started them (README "Traces").
CREATE FUNCTION hf_start_children(p_run_id text, p_generation integer, p_step integer,
				  p_attempt integer, p_depth integer, p_children jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	tr jsonb;
BEGIN
	SELECT CASE WHEN r.trace_id IS NOT NULL THEN jsonb_build_object(
		'trace_id', hf_trace_hex(r.trace_id),
		'parent_span_id', hf_attempt_span(r.trace_id, r.run_id, p_generation, p_step,
						  p_attempt),
		'tracestate', r.tracestate) END
	INTO tr FROM run r WHERE r.run_id = p_run_id;
	PERFORM hf_submit(hf_child_id(p_run_id, p_generation, p_step, c->>'key'), c->>'workflow',
			  coalesce(c->'input', 'null'),
			  sha256(convert_to(coalesce(c->'input', 'null')::text, 'UTF8')),
			  nullif(c->'headers', 'null'::jsonb),
			  NULL, NULL, NULL, NULL, NULL, NULL, NULL, c->>'concurrency_key',
			  jsonb_build_object('run_id', p_run_id, 'generation', p_generation,
					     'step', p_step, 'key', c->>'key', 'depth', p_depth + 1),
			  NULL, tr)
	FROM jsonb_array_elements(p_children) c;
	PERFORM hf_children_wake(ARRAY[p_run_id]);
END
$$;

-- The children of step p_step of generation p_generation of run p_run_id
-- as the parent's next step receives them, in key order (bytes): {"key", "run_id",
-- "status", "result", "error"}; with p_timed_out, a child not ended yet
-- has status 'timeout'.
CREATE FUNCTION hf_children_json(p_run_id text, p_generation integer, p_step integer,
				 p_timed_out boolean)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT coalesce(jsonb_agg(jsonb_build_object('key', c.child_key, 'run_id', c.run_id,
		'status', CASE WHEN p_timed_out
				    AND c.status NOT IN ('succeeded', 'failed', 'cancelled')
			       THEN 'timeout' ELSE c.status END,
		'result', c.result, 'error', c.error) ORDER BY c.child_key COLLATE "C"), '[]')
	FROM run c WHERE c.parent_run_id = p_run_id AND c.parent_generation = p_generation
	  AND c.parent_step = p_step
$$;

-- Ends the waits of the runs p_parents whose children are done as their
-- wait asks: all of them, any one, or `count` of them (all when there are
-- fewer). Each parent is locked first, then its children counted, so of two
-- children ending at once the later one sees the earlier.
CREATE FUNCTION hf_children_wake(p_parents text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	p record;
	total integer;
	ended integer;
	woke boolean := false;
BEGIN
	FOR p IN SELECT r.run_id, r.generation, r.wait_children AS wc FROM run r
		 WHERE r.run_id = ANY (p_parents) AND r.status = 'waiting'
		   AND r.wait_children IS NOT NULL
		 ORDER BY r.run_id FOR UPDATE
	LOOP
		SELECT count(*), count(*) FILTER (WHERE c.status IN ('succeeded', 'failed', 'cancelled'))
		INTO total, ended
		FROM run c WHERE c.parent_run_id = p.run_id AND c.parent_generation = p.generation
		  AND c.parent_step = (p.wc->>'step')::integer;
		CONTINUE WHEN ended < least(total, CASE p.wc->>'mode' WHEN 'all' THEN total
			WHEN 'any' THEN 1 ELSE (p.wc->>'count')::integer END);
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
			children = hf_children_json(p.run_id, p.generation,
						    (p.wc->>'step')::integer, false),
			wait_children = NULL, updated_at = now()
		WHERE run_id = p.run_id;
		woke := true;
	END LOOP;
	IF woke THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
END
$$;
