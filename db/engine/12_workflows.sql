-- Workflows (openapi.yaml, /v1/workflows): rows are written by db/workflow.c;
-- deleting one is refused while it has active runs.

-- Returns 'deleted', 'not_found' or 'in_use'. The row lock waits for
-- submissions in flight (they hold FOR KEY SHARE), and the check that follows
-- sees their runs.
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
