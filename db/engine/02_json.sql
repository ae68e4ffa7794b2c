-- The JSON shapes the API and the callbacks show: a run (GET /v1/runs/{id},
-- openapi.yaml's Run), a workflow (openapi.yaml's Workflow; never a secret,
-- only whether it signs and until when a rotated-out secret still does;
-- its flow-control settings and whether it is paused)
-- and a terminal callback's body (docs/webhook-protocol.md, "Terminal
-- callbacks").

-- A run's JSON as text, exactly as hf_run_json(r)::text renders it: jsonb's
-- key order (by length, then bytes) and its ", " and ": " separators, strings
-- escaped by to_json (the same escape_json as jsonb's output), embedded jsonb
-- values as their ::text. GET /v1/runs passes this text through (its byte
-- cap counts it), and GET /v1/runs/{id} and POST /v1/runs (hf_submit_many)
-- answer it. Built by concatenation, which costs half of jsonb_build_object
-- plus ::text (about 9 us against 20 per run: no type lookup per argument, no
-- key sort, no second serialisation). PL/pgSQL, so that its expression is
-- planned once per session: inlined into the list's statement, which is
-- planned at each call (custom plans), it added more planning than it saved.
-- A key added to a run goes into both functions, here in jsonb's order:
-- test_runs_read.py checks that the two agree byte for byte on runs in every
-- state.
CREATE FUNCTION hf_run_text(r run) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN '{"step": ' || r.step::text
		|| ', "error": ' || coalesce(to_json(r.error)::text, 'null')
		|| ', "group": ' || CASE WHEN r.group_id IS NOT NULL
			THEN '{"id": ' || to_json(r.group_id)::text
				|| ', "key": ' || coalesce(to_json(r.group_key)::text, 'null') || '}'
			ELSE 'null' END
		|| ', "input": ' || coalesce(r.input::text, 'null')
		|| ', "parent": ' || CASE WHEN r.parent_run_id IS NOT NULL
			THEN '{"key": ' || to_json(r.child_key)::text
				|| ', "step": ' || r.parent_step::text
				|| ', "run_id": ' || to_json(r.parent_run_id)::text
				|| ', "generation": ' || r.parent_generation::text || '}'
			ELSE 'null' END
		|| ', "result": ' || coalesce(r.result::text, 'null')
		|| ', "run_id": ' || to_json(r.run_id)::text
		|| ', "status": ' || to_json(r.status)::text
		|| ', "attempt": ' || r.attempt::text
		|| ', "headers": ' || coalesce(r.headers::text, 'null')
		|| ', "waiting": ' || CASE WHEN r.status = 'waiting'
			THEN '{"children": ' || coalesce(r.wait_children::text, 'null')
				|| ', "timeout_at": ' || coalesce(to_json(hf_ts(r.wait_timeout_at))::text, 'null')
				|| ', "correlation_key": ' || coalesce(to_json(r.wait_key)::text, 'null')
				|| ', "correlation_keys": '
				|| coalesce(to_jsonb(r.wait_keys)::text, 'null')
				|| '}'
			ELSE 'null' END
		|| ', "priority": ' || r.priority::text
		|| ', "schedule": ' || CASE WHEN r.schedule_id IS NOT NULL
			THEN '{"id": ' || to_json(r.schedule_id)::text
				|| ', "fire_time": ' || coalesce('"' || hf_ts(r.fire_time) || '"', 'null')
				|| '}'
			ELSE 'null' END
		|| ', "trace_id": ' || coalesce('"' || hf_trace_hex(r.trace_id) || '"', 'null')
		|| ', "workflow": ' || to_json(r.workflow)::text
		|| ', "created_at": "' || hf_ts(r.created_at) || '"'
		|| ', "error_kind": ' || coalesce(to_json(r.error_kind)::text, 'null')
		|| ', "final_step": ' || coalesce(r.final_step::text, 'null')
		|| ', "generation": ' || r.generation::text
		|| ', "updated_at": "' || hf_ts(r.updated_at) || '"'
		|| ', "finished_at": ' || coalesce('"' || hf_ts(r.finished_at) || '"', 'null')
		|| ', "max_attempts": ' || r.max_attempts::text
		|| ', "pending_since": ' || coalesce('"' || hf_ts(r.pending_since) || '"', 'null')
		|| ', "concurrency_key": ' || coalesce(to_json(r.concurrency_key)::text, 'null')
		|| ', "next_attempt_at": ' || CASE WHEN r.status IN ('pending', 'scheduled', 'waiting')
			THEN coalesce('"' || hf_ts(r.next_at) || '"', 'null') ELSE 'null' END
		|| ', "cancel_requested": ' || r.cancel_requested::text
		|| ', "pending_timeout_at": '
			|| coalesce('"' || hf_ts(r.pending_timeout_at) || '"', 'null')
		|| ', "heartbeat_timeout_at": '
			|| coalesce('"' || hf_ts(r.heartbeat_timeout_at) || '"', 'null')
		|| '}';
END
$$;

-- The run as jsonb (cancels, completions): the same object as hf_run_text,
-- built as jsonb, which costs less than parsing hf_run_text's text would.
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
				'correlation_key', r.wait_key, 'correlation_keys', to_jsonb(r.wait_keys),
				'children', r.wait_children,
				'timeout_at', hf_ts(r.wait_timeout_at)) END,
		'cancel_requested', r.cancel_requested,
		'result', r.result, 'error', r.error, 'error_kind', r.error_kind,
		'final_step', r.final_step, 'finished_at', hf_ts(r.finished_at),
		'group', CASE WHEN r.group_id IS NOT NULL THEN jsonb_build_object(
				'id', r.group_id, 'key', r.group_key) END,
		'concurrency_key', r.concurrency_key, 'trace_id', hf_trace_hex(r.trace_id),
		'schedule', CASE WHEN r.schedule_id IS NOT NULL THEN jsonb_build_object(
				'id', r.schedule_id, 'fire_time', hf_ts(r.fire_time)) END,
		'parent', CASE WHEN r.parent_run_id IS NOT NULL THEN jsonb_build_object(
				'run_id', r.parent_run_id, 'generation', r.parent_generation,
				'step', r.parent_step, 'key', r.child_key) END,
		'pending_since', hf_ts(r.pending_since),
		'pending_timeout_at', hf_ts(r.pending_timeout_at),
		'heartbeat_timeout_at', hf_ts(r.heartbeat_timeout_at))
$$;

CREATE FUNCTION hf_workflow_json(w workflow) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'name', w.name, 'url', w.url, 'callback_url', w.callback_url,
		'timeout_ms', w.timeout_ms, 'max_attempts', w.max_attempts,
		'priority', w.priority,
		'retry_backoff', jsonb_build_object('base_ms', w.backoff_base_ms,
						    'max_ms', w.backoff_max_ms),
		'max_concurrency', w.max_concurrency, 'key_concurrency', w.key_concurrency,
		'key_mode', w.key_mode,
		'debounce_ms', CASE WHEN w.key_mode = 'debounce' THEN w.debounce_ms END,
		'debounce_max_ms', CASE WHEN w.key_mode = 'debounce' THEN w.debounce_max_ms END,
		'rate_limit', CASE WHEN w.rate_limit > 0 THEN jsonb_build_object(
			'limit', w.rate_limit, 'period_ms', w.rate_period_ms,
			'per_key', w.rate_per_key) END,
		'endpoint', w.endpoint, 'endpoint_control', w.endpoint_control,
		'paused', w.paused, 'signed', w.secret IS NOT NULL,
		'previous_secret_valid_until',
			CASE WHEN w.secret_previous IS NOT NULL AND w.secret_previous_until > now()
			THEN hf_ts(w.secret_previous_until) END,
		'step_output_replay', w.step_output_replay, 'max_pending_ms', w.max_pending_ms,
		'on_parent_cancel', w.on_parent_cancel,
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
			'id', r.group_id, 'key', r.group_key) END,
		'concurrency_key', r.concurrency_key)
$$;
