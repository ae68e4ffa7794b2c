-- Workflows (openapi.yaml, /v1/workflows): rows are written by db/workflow.c
-- (PUT), hf_workflow_rotate (a new signing secret) and hf_workflow_pause
-- (pause and resume); deleting one is refused while it has active runs.

-- Returns 'deleted', 'not_found' or 'in_use'. The row lock waits for
-- submissions in flight (they hold FOR KEY SHARE), and the check that follows
-- sees their runs.
CREATE FUNCTION hf_workflow_delete(p_name text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
	PERFORM 1 FROM workflow WHERE name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF EXISTS (SELECT 1 FROM run WHERE workflow = p_name
		   AND status NOT IN ('succeeded', 'failed', 'cancelled'))
	   OR EXISTS (SELECT 1 FROM schedule WHERE workflow = p_name) THEN
		RETURN 'in_use';
	END IF;
	DELETE FROM workflow WHERE name = p_name;
	RETURN 'deleted';
END
$$;

-- Rotates the signing secret of workflow p_name to p_secret (POST
-- /v1/workflows/{name}/secret). The current secret, when there is one and
-- p_grace_ms > 0, becomes the previous secret: it keeps signing next to the
-- new one until now + p_grace_ms (the claim, hf_claim in 04_claim.sql). An older
-- previous secret is dropped. Returns {"previous_valid_until": ts or null,
-- "workflow": the workflow's JSON}, or NULL when there is no such workflow.
CREATE FUNCTION hf_workflow_rotate(p_name text, p_secret text, p_grace_ms bigint)
RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	w workflow;
BEGIN
	UPDATE workflow x SET
		secret_previous = CASE WHEN p_grace_ms > 0 THEN x.secret END,
		secret_previous_until = CASE WHEN p_grace_ms > 0 AND x.secret IS NOT NULL
					THEN date_trunc('milliseconds', hf_due(p_grace_ms)) END,
		secret = p_secret, updated_at = now()
	WHERE x.name = p_name
	RETURNING x.* INTO w;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	RETURN jsonb_build_object('previous_valid_until', hf_ts(w.secret_previous_until),
				  'workflow', hf_workflow_json(w));
END
$$;

-- Pauses (p_paused true) or resumes workflow p_name (POST
-- /v1/workflows/{name}/pause and /resume): while paused, no step of its runs
-- is claimed (hf_claim, 04_claim.sql); calls in flight finish, and
-- submissions, signals and cancels go on as usual. Pause is state, not
-- configuration: a PUT leaves it alone, and so does this function leave
-- updated_at (the last PUT or rotation). Idempotent: the same state again
-- changes nothing. A resume that changes the state wakes the claimers of
-- every instance (the notification is sent when this transaction commits).
-- Returns the workflow's JSON, or NULL when there is no such workflow.
CREATE FUNCTION hf_workflow_pause(p_name text, p_paused boolean)
RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	w workflow;
BEGIN
	UPDATE workflow x SET paused = p_paused
	WHERE x.name = p_name AND x.paused IS DISTINCT FROM p_paused
	RETURNING x.* INTO w;
	IF FOUND THEN
		IF NOT p_paused THEN
			PERFORM pg_notify('hookflow_wake', '');
		END IF;
	ELSE
		SELECT * INTO w FROM workflow x WHERE x.name = p_name;
		IF NOT FOUND THEN
			RETURN NULL;
		END IF;
	END IF;
	RETURN hf_workflow_json(w);
END
$$;
