-- Groups (openapi.yaml, /v1/groups): a recorded, ordered member set; member
-- run ids are the hex SHA-256 of "<group_id>/<key>".

-- Submits a group. p_members: [{"key", "run_id", "input", "input_hash" (hex),
-- "headers", "concurrency_key" (absent: none)}] in order. Returns (outcome,
-- submitted): outcome 'created', 'resubmitted', 'group_mismatch' or
-- 'workflow_not_found'; submitted counts the members started now (new runs,
-- and terminated members that did not succeed, which start a new
-- generation). A member's concurrency key is part of the manifest, so a
-- member that runs again keeps the key it was recorded with. The members
-- this submission starts join its trace (README "Traces"): p_trace
-- {"trace_id", "parent_span_id", "tracestate"} from the request's
-- traceparent, or NULL: a new trace for the request.
CREATE FUNCTION hf_group_submit(p_group_id text, p_workflow text, p_manifest bytea,
				p_members jsonb, p_priority integer, p_max_attempts integer,
				p_trace jsonb DEFAULT NULL)
RETURNS TABLE (outcome text, submitted integer)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	w workflow;
	g run_group;
	created boolean := false;
	n integer := 0;
	m integer := 0;
	r run;
	tr jsonb := CASE WHEN p_trace->>'trace_id' IS NOT NULL THEN p_trace
			 ELSE jsonb_build_object('trace_id', hf_trace_hex(gen_random_uuid())) END;
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

	-- New member runs, in one statement, with their place in the list
	-- (run_listing, migrations/0015_run_listing.sql) and the keys of the keyed
	-- ones (run_key, migrations/0012_run_key.sql).
	WITH ins AS (
		INSERT INTO run (run_id, workflow, status, job_id, input, input_hash, headers,
				 priority, max_attempts, seq, next_at, group_id, group_key,
				 concurrency_key, trace_id, parent_span_id, tracestate)
		SELECT x.m->>'run_id', p_workflow, 'pending', hf_new_id(), x.m->'input',
			decode(x.m->>'input_hash', 'hex'), coalesce(x.m->'headers', '{}'),
			coalesce(p_priority, w.priority), coalesce(p_max_attempts, w.max_attempts),
			nextval('hf_seq'), now(), p_group_id, x.m->>'key', x.m->>'concurrency_key',
			(tr->>'trace_id')::uuid, tr->>'parent_span_id', tr->>'tracestate'
		FROM jsonb_array_elements(p_members) WITH ORDINALITY AS x(m, ord)
		ORDER BY x.ord
		ON CONFLICT (run_id) DO NOTHING
		RETURNING run_id, workflow, concurrency_key, created_at),
	listed AS (
		INSERT INTO run_listing (run_id, workflow, created_at)
		SELECT i.run_id, i.workflow, i.created_at FROM ins i),
	keyed AS (
		INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active)
		SELECT i.run_id, i.workflow, i.concurrency_key, i.created_at, true FROM ins i
		WHERE i.concurrency_key IS NOT NULL)
	SELECT count(*) INTO n FROM ins;

	-- Members whose last termination is not a success run again.
	IF NOT created THEN
		FOR r IN SELECT * FROM run x WHERE x.group_id = p_group_id
			 AND x.status IN ('failed', 'cancelled') ORDER BY x.run_id FOR UPDATE
		LOOP
			PERFORM hf_restart(r, 0, r.input, tr);
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

-- Forgets a group whose members are all terminal: its record, its members
-- and their runs with their history, memos and replay records. Returns
-- 'deleted', 'not_found' or 'group_active'.
CREATE FUNCTION hf_group_forget(p_group_id text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
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
	PERFORM hf_delete_runs(ids);
	DELETE FROM group_member WHERE group_id = p_group_id;
	DELETE FROM run_group WHERE group_id = p_group_id;
	RETURN 'deleted';
END
$$;
