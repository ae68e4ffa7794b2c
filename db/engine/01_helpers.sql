-- Engine helpers: time formats, ids, due times, queue states, wake-ups and kv
-- effects. The SQL ones are declared STABLE, as their bodies are (time zone,
-- encoding), so that the planner inlines them into the statements that call
-- them.
--
-- Every file of db/engine/ is applied whole by the engine loader (db/engine.c)
-- after the migrations, whenever what the database holds differs from the
-- binary's; each object is created afresh, so files hold only functions and
-- triggers (tables, types and indexes belong to migrations/).
--
-- Wake-ups travel by NOTIFY:
--   hookflow_wake   ''           claimable work appeared (pending run or callback)
--   hookflow_sched  '<epoch ms>' something becomes due at that time (delay, backoff, run_at)
--   hookflow_cancel '<run_id>'   cancel requested for a running step: abort its call
--   hookflow_done   '<run_id>'   the run terminated (long-poll waiters; 'group:<id>' too)
--   hookflow_engine ''           the engine was reloaded (instances re-check the schema)

CREATE FUNCTION hf_payload_hash(p jsonb) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT sha256(convert_to(coalesce(p, 'null'::jsonb)::text, 'UTF8'))
$$;

-- The output of the attempt that continued from step p_step - 1 of a run's
-- generation into step p_step: that step's payload (json,
-- migrations/0013_payload_json.sql: read without being parsed). hf_claim
-- looks it up the same way, inline (hf_step_payload says why).
CREATE FUNCTION hf_step_output(p_run_id text, p_generation integer, p_step integer)
RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (SELECT a.output FROM step_attempt a
		WHERE a.run_id = p_run_id AND a.generation = p_generation
		  AND a.step = p_step - 1 AND a.result = 'continue'
		ORDER BY a.attempt DESC LIMIT 1)
$$;

-- The payload of step p_step of a run's generation p_generation
-- (migrations/0005_payload_once.sql), as a jsonb value: the run's own
-- `payload` column when it holds one (a rerun's or a redrive's, or a run
-- queued by an earlier release), else step 0's is the run's input and a later
-- step's the output of the attempt that continued into it. For the readers
-- off the path of every step (the history, reruns, dead letters, the replay
-- hash). The claim (hf_claim) writes the same rule inline, as the json text
-- it hands on: a SQL function with a subquery is not inlined, and PostgreSQL
-- plans its body again at every claim (80 us, BENCHMARKS.md "Issue 13: the
-- settlement's plan").
CREATE FUNCTION hf_step_payload(p_run_id text, p_generation integer, p_step integer,
				p_payload jsonb, p_input jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN p_payload IS NOT NULL THEN p_payload
		    WHEN p_step = 0 THEN p_input
		    ELSE hf_step_output(p_run_id, p_generation, p_step)::jsonb END
$$;

-- The json text at byte range p_at ([offset, length]) of p_texts: a
-- settlement's payload, sent beside its item (db/jobs.c). NULL when p_at is.
-- STABLE as convert_from is, so that the planner inlines it.
CREATE FUNCTION hf_text_at(p_texts bytea, p_at jsonb) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT convert_from(substring(p_texts FROM (p_at->>0)::integer + 1
					  FOR (p_at->>1)::integer), 'UTF8')::json
$$;

-- Serialises everything that registers, delivers or times out a wait on key k.
CREATE FUNCTION hf_lock_key(k text) RETURNS void
LANGUAGE sql AS $$
	SELECT pg_advisory_xact_lock(724390, hashtext(k))
$$;

CREATE FUNCTION hf_ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A new job id: 12 hex digits of milliseconds, then 20 random hex digits, so
-- ids sort by creation time.
CREATE FUNCTION hf_new_id() RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') ||
	       substr(replace(gen_random_uuid()::text, '-', ''), 1, 20)
$$;

CREATE FUNCTION hf_ms(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (extract(epoch FROM t) * 1000)::bigint
$$;

CREATE FUNCTION hf_us(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (extract(epoch FROM t) * 1000000)::bigint
$$;

CREATE FUNCTION hf_from_us(us bigint) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT 'epoch'::timestamptz + us * interval '1 microsecond'
$$;

-- The time `ms` milliseconds from now (NULL or negative: now). Every delay,
-- backoff, signal timeout and lease is computed here.
CREATE FUNCTION hf_due(ms bigint) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT now() + make_interval(secs => greatest(coalesce(ms, 0), 0) / 1000.0)
$$;

-- The retry delay after failed attempt `attempt` (1-based) of a workflow
-- with backoff base_ms and max_ms: min(base_ms * 2^(attempt-1), max_ms), the
-- rule of service/verdict.c's verdict_backoff_ms, for the ends of a call the
-- engine decides itself (a pending step that timed out, an error posted to
-- POST .../complete).
CREATE FUNCTION hf_backoff_ms(base_ms bigint, max_ms bigint, attempt integer) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT least(base_ms::numeric * power(2::numeric, least(greatest(attempt - 1, 0), 62)),
		     max_ms)::bigint
$$;

-- The time `ms` milliseconds ago (retention).
CREATE FUNCTION hf_ago(ms bigint) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT now() - make_interval(secs => ms / 1000.0)
$$;

-- The queue state of a job due at `due`: pending (claimable now) when it is
-- not in the future, scheduled otherwise.
CREATE FUNCTION hf_queue_state(due timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN due <= now() THEN 'pending' ELSE 'scheduled' END
$$;

-- Wakes the claimers for a job due at `due`: at once, or at that time.
CREATE FUNCTION hf_notify_due(due timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF due <= now() THEN
		PERFORM pg_notify('hookflow_wake', '');
	ELSE
		PERFORM pg_notify('hookflow_sched', hf_ms(due)::text);
	END IF;
END
$$;

-- Applies kv effects {"put": {k: v}, "delete": [k]} (validated by the caller).
CREATE FUNCTION hf_apply_kv(fx jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF fx IS NULL OR jsonb_typeof(fx) <> 'object' THEN
		RETURN;
	END IF;
	IF jsonb_typeof(fx->'put') = 'object' THEN
		INSERT INTO kv (key, value, updated_at)
		SELECT e.key, e.value, now() FROM jsonb_each(fx->'put') e
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
	END IF;
	IF jsonb_typeof(fx->'delete') = 'array' THEN
		DELETE FROM kv WHERE key IN (SELECT jsonb_array_elements_text(fx->'delete'));
	END IF;
END
$$;

-- Trace context (README "Traces"; migrations/0010_traces.sql). A trace id is
-- kept as a uuid (gen_random_uuid(): its last 7 bytes are random, as W3C's
-- random flag asks) and shown as 32 lowercase hex digits.
CREATE FUNCTION hf_trace_hex(t uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT replace(t::text, '-', '')
$$;

-- The span id derived from p_key (base/trace.c's trace_derive, which must
-- agree): the first 8 bytes of its SHA-256 in hex, or 0000000000000001
-- should they all be zero. Span ids are derived, never stored. One
-- expression, STABLE as its body is (convert_to), with explicit casts to
-- text, so that the planner inlines it and the two below: an SQL function it
-- cannot inline is planned again at every call, which cost 30 us a run.
CREATE FUNCTION hf_span_of(p_key text) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT regexp_replace(left(encode(sha256(convert_to(p_key, 'UTF8')), 'hex'), 16),
			      '^0{16}$', '0000000000000001')
$$;

-- The span of attempt p_attempt of step p_step (trace_attempt_span):
-- "<trace>/<run_id>/<generation>/<step>/<attempt>". A redelivery of an
-- attempt carries the span id it had, and a child run names its parent
-- step's attempt.
CREATE FUNCTION hf_attempt_span(p_trace uuid, p_run_id text, p_generation integer,
				p_step integer, p_attempt integer) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT hf_span_of(hf_trace_hex(p_trace) || '/' || p_run_id || '/' || p_generation::text
			  || '/' || p_step::text || '/' || p_attempt::text)
$$;

-- The span of generation p_generation of a run (trace_run_span):
-- "<trace>/<run_id>/<generation>/run".
CREATE FUNCTION hf_run_span(p_trace uuid, p_run_id text, p_generation integer) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT hf_span_of(hf_trace_hex(p_trace) || '/' || p_run_id || '/' || p_generation::text
			  || '/run')
$$;

-- True when this session exports spans: an instance with
-- HOOKFLOW_OTLP_ENDPOINT ends the application_name of its connections with
-- ' [hookflow spans]' (db/db.c: a parameter a transaction pooler carries from
-- server session to server session with its client, which a custom setting
-- is not), and then reads the spans the engine reports with RAISE INFO
-- 'hookflow-span <json>' once their transaction has committed.
CREATE FUNCTION hf_tracing() RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT right(current_setting('application_name'), 17) = ' [hookflow spans]'
$$;

-- Reports the span of each run of p_runs that has just ended (the current
-- generation's: from its start to finished_at), for a session that exports
-- spans (service/otlp.c reads them): one JSON object a line, in one INFO
-- message (a message is sent and flushed at once: one for all).
CREATE FUNCTION hf_note_run_spans(p_runs text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	s text;
BEGIN
	SELECT string_agg(json_build_object('span', 'run', 'trace_id', hf_trace_hex(r.trace_id),
			'span_id', hf_run_span(r.trace_id, r.run_id, r.generation),
			'parent_span_id', r.parent_span_id, 'tracestate', r.tracestate,
			'start_us', hf_us(coalesce(r.span_started_at, r.created_at)),
			'end_us', hf_us(coalesce(r.finished_at, now())), 'run_id', r.run_id,
			'workflow', r.workflow, 'generation', r.generation, 'status', r.status,
			'error_kind', r.error_kind, 'error', left(r.error, 200),
			'final_step', r.final_step)::text, E'\n')
	INTO s FROM run r WHERE r.run_id = ANY (p_runs) AND r.trace_id IS NOT NULL;
	IF s IS NOT NULL THEN
		RAISE INFO 'hookflow-span %', s;
	END IF;
END
$$;

-- The duration bucket of a step attempt that started at p_started and is
-- settled now (migrations/0011_step_stats.sql): -2 without a start, 0 under
-- 1 ms, b for [2^((b-1)/4), 2^(b/4)) ms, 99 at most.
CREATE FUNCTION hf_stats_bucket(p_started timestamptz) RETURNS smallint
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN p_started IS NULL THEN -2
		    WHEN now() - p_started < interval '1 millisecond' THEN 0
		    ELSE least(99, 1 + floor(4 * ln(extract(epoch FROM now() - p_started)::float8
						    * 1000) / ln(2.0::float8)))::smallint END
$$;

-- The value a percentile falls on in bucket b: its middle on the log scale
-- (0.5 ms for bucket 0), in ms with one decimal.
CREATE FUNCTION hf_stats_bucket_ms(b integer) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
	SELECT round(CASE WHEN b = 0 THEN 0.5 ELSE power(2.0, (b - 0.5) / 4.0) END::numeric, 1)
$$;
