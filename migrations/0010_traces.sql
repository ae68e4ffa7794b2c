-- 0010_traces: W3C trace context on runs (issue 18; README "Traces").
--
-- Every run belongs to a trace. POST /v1/runs (and PUT /v1/groups) take a
-- W3C traceparent from the caller; without a valid one the run starts a
-- trace of its own. A child run joins its parent's trace under the span of
-- the parent step's attempt that started it; a schedule's fire starts a new
-- trace. Every step call and callback carries a traceparent naming the run's
-- trace and a span of its own, derived from (trace, run, generation, step,
-- attempt), so a redelivery of the same attempt carries the same span id
-- without storing it.
--
-- - run.trace_id: 32 lowercase hex digits.
-- - run.span_id: 16 hex digits, the span of the run's current generation
--   (a rerun starts another one, at span_started_at).
-- - run.parent_span_id: the caller's span (its traceparent), or the parent
--   step attempt's span for a child run; NULL for a root run.
-- - run.tracestate: the caller's tracestate (at most 512 bytes), passed on
--   with every call.
-- - run.span_started_at: when the current generation's span began; NULL:
--   created_at (the first generation).
-- - hf_job carries the run's trace_id, run_span_id and tracestate, and, for
--   the first attempt of a step after a wait, wait_from_ms (when the wait
--   began) and due_ms (when the step became due), from which the dispatcher
--   builds the wait's span.
--
-- Runs still active get a trace now; runs that ended before keep none
-- (trace_id NULL; their pending callbacks carry no traceparent), until a
-- rerun gives them one.

ALTER TABLE run
	ADD COLUMN trace_id        text,
	ADD COLUMN span_id         text,
	ADD COLUMN parent_span_id  text,
	ADD COLUMN tracestate      text,
	ADD COLUMN span_started_at timestamptz;

ALTER TYPE hf_job ADD ATTRIBUTE trace_id text, ADD ATTRIBUTE run_span_id text,
	ADD ATTRIBUTE tracestate text, ADD ATTRIBUTE wait_from_ms bigint,
	ADD ATTRIBUTE due_ms bigint;

UPDATE run SET trace_id = replace(gen_random_uuid()::text, '-', ''),
	span_id = right(replace(gen_random_uuid()::text, '-', ''), 16)
WHERE status NOT IN ('succeeded', 'failed', 'cancelled');
