-- 0010_traces: W3C trace context on runs (issue 18; README "Traces").
--
-- Every run belongs to a trace. POST /v1/runs (and PUT /v1/groups) take a
-- W3C traceparent from the caller; without a valid one the run starts a
-- trace of its own. A child run joins its parent's trace under the span of
-- the parent step's attempt that started it; a schedule's fire starts a new
-- trace. Span ids are derived, never stored: a step attempt's from (trace,
-- run, generation, step, attempt), so that a redelivery of the same attempt
-- carries the same span id, and the run's own span (one per generation)
-- from (trace, run, generation).
--
-- - run.trace_id: the trace (16 bytes, kept as a uuid: the narrowest column
--   for them, and every claim and settlement rewrites the run row; shown as
--   32 lowercase hex digits).
-- - run.parent_span_id: the caller's span (its traceparent), or the parent
--   step attempt's span for a child run, as 16 hex digits; NULL for a root
--   run.
-- - run.tracestate: the caller's tracestate (at most 512 bytes), passed on
--   with every call; NULL when none.
-- - run.span_started_at: when the current generation's run span began;
--   NULL: created_at (the first generation).
-- - run.waited_since: when the wait before the current step began (a delay,
--   a signal, children: the settlement that started it, or a submission due
--   later), for the wait's span; NULL when the step did not wait.
-- - hf_job carries the run's trace_id and tracestate, and, on a connection
--   that exports spans, for the first attempt of a step after a wait,
--   wait_from_ms (waited_since) and due_ms (when the step became due), from
--   which the dispatcher builds the wait's span.
--
-- Runs still active get a trace now; runs that ended before keep none
-- (trace_id NULL; their pending callbacks carry no traceparent), until a
-- rerun gives them one.

ALTER TABLE run
	ADD COLUMN trace_id        uuid,
	ADD COLUMN parent_span_id  text,
	ADD COLUMN tracestate      text,
	ADD COLUMN span_started_at timestamptz,
	ADD COLUMN waited_since    timestamptz;

ALTER TYPE hf_job ADD ATTRIBUTE trace_id text, ADD ATTRIBUTE tracestate text,
	ADD ATTRIBUTE wait_from_ms bigint, ADD ATTRIBUTE due_ms bigint;

UPDATE run SET trace_id = gen_random_uuid()
WHERE status NOT IN ('succeeded', 'failed', 'cancelled');
