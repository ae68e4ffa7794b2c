-- The JSON shapes the API and the callbacks show: a run (GET /v1/runs/{id},
-- openapi.yaml's Run), a workflow (openapi.yaml's Workflow; never a secret,
-- only whether it signs and until when a rotated-out secret still does)
-- and a terminal callback's body (docs/webhook-protocol.md, "Terminal
-- callbacks").

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

CREATE FUNCTION hf_workflow_json(w workflow) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'name', w.name, 'url', w.url, 'callback_url', w.callback_url,
		'timeout_ms', w.timeout_ms, 'max_attempts', w.max_attempts,
		'priority', w.priority,
		'retry_backoff', jsonb_build_object('base_ms', w.backoff_base_ms,
						    'max_ms', w.backoff_max_ms),
		'max_concurrency', w.max_concurrency, 'signed', w.secret IS NOT NULL,
		'previous_secret_valid_until',
			CASE WHEN w.secret_previous IS NOT NULL AND w.secret_previous_until > now()
			THEN hf_ts(w.secret_previous_until) END,
		'step_output_replay', w.step_output_replay,
		'created_at', hf_ts(w.created_at), 'updated_at', hf_ts(w.updated_at))
$$;

-- The body of the terminal callback of run `r`, which has just ended.
CREATE FUNCTION hf_callback_json(r run) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'run_id', r.run_id, 'workflow', r.workflow, 'status', r.status,
		'result', r.result, 'error', r.error, 'error_kind', r.error_kind,
		'headers', r.headers, 'final_step', r.final_step,
		'generation', r.generation, 'finished_at', hf_ts(r.finished_at),
		'group', CASE WHEN r.group_id IS NOT NULL THEN jsonb_build_object(
			'id', r.group_id, 'key', r.group_key) END)
$$;
