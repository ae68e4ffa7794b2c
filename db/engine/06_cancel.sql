-- Cancel (openapi.yaml, POST /v1/runs/{id}/cancel and POST /v1/runs:cancel):
-- a queued run ends at once, and so does one whose step is pending (no call
-- in flight, migrations/0008); a running one is flagged and its call aborted
-- wherever it is in flight (NOTIFY hookflow_cancel), then settles cancelled.
-- When the run ends cancelled, its active children are cancelled too
-- (hf_settle_steps; error 'parent <id> cancelled'), unless its workflow's
-- on_parent_cancel is 'abandon'.

-- Returns 'not_found', 'already_terminal', 'cancelled' (a queued or pending
-- step was removed and the run ended, through hf_settle_steps) or 'cancelling' (the
-- call in flight is being aborted). p_reason, when given, is the error the
-- run ends with (a run superseded by a newer submission of its key).
CREATE FUNCTION hf_cancel(p_run_id text, p_reason text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	pend boolean;
	token bigint;
	res text := 'cancelling';
BEGIN
	SELECT status INTO st FROM run WHERE run_id = p_run_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF st IN ('succeeded', 'failed', 'cancelled') THEN
		RETURN 'already_terminal';
	END IF;
	IF st IN ('pending', 'scheduled', 'waiting') THEN
		PERFORM 1 FROM hf_settle_steps(jsonb_build_array(jsonb_build_object(
			'run_id', p_run_id, 'result', 'cancel_queued', 'reason', p_reason)));
		res := 'cancelled';
	ELSIF st = 'running' THEN
		UPDATE run SET cancel_requested = true, status = 'cancelling',
			cancel_reason = p_reason, updated_at = now()
		WHERE run_id = p_run_id
		RETURNING pending_since IS NOT NULL, claim_token INTO pend, token;
		-- A pending step has no call to abort: the run ends now.
		IF pend THEN
			PERFORM 1 FROM hf_settle_steps(jsonb_build_array(jsonb_build_object(
				'run_id', p_run_id, 'claim_token', token, 'result', 'pending')));
			res := 'cancelled';
		ELSE
			PERFORM pg_notify('hookflow_cancel', p_run_id);
		END IF;
	END IF;
	RETURN res;
END
$$;

-- hf_cancel for the API: the outcome and the run as this transaction left it
-- (a later read could already see the settlement of an aborted call).
CREATE FUNCTION hf_cancel_run(p_run_id text) RETURNS TABLE (outcome text, run jsonb)
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
	outcome := hf_cancel(p_run_id);
	SELECT hf_run_json(r) INTO run FROM run r WHERE r.run_id = p_run_id;
	RETURN NEXT;
END
$$;

-- Cancels active runs matching the filters (NULL: any), at most p_limit per
-- call; returns how many were cancelled or asked to cancel.
CREATE FUNCTION hf_cancel_many(p_workflow text, p_statuses text[], p_group_id text,
			       p_created_before timestamptz, p_limit integer)
RETURNS integer
LANGUAGE plpgsql SET jit = off AS $$
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
