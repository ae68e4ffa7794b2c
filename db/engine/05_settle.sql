-- Settlement: what a step's or a callback's call (or its lease running out,
-- or its cancel) does to the job, one statement for every rule. The table of
-- rules is docs/webhook-protocol.md ("Settlement") and docs/run-states.md.
--
-- Every way a step job ends goes through hf_settle_steps, and every way a
-- callback job ends through hf_settle_callbacks: the dispatcher's answers
-- (db/jobs.c encodes them), the reaper's expired and released leases
-- (hf_reap), and the cancel of a queued run (hf_cancel). So ending a run,
-- enqueueing its callback, releasing a lease, computing the next due time and
-- dead-lettering are each written once, below.

CREATE FUNCTION hf_raise(msg text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '%', msg;
END
$$;

-- Settles step jobs. p_items is a JSON array of objects:
--   {"run_id", "claim_token", "result", "payload", "delay_ms", "wait_key",
--    "wait_timeout_ms", "value", "reason", "kv", "http_status", "retry_delay_ms"}
-- where "result" is what ended the job:
--   continue | succeed | fail | cancel        the webhook's outcome
--   transient_error | permanent_error        a failed call ("reason": the error)
--   lease_expired                            the claim's lease ran out
--   interrupted                              a draining instance released the call
--   cancel_queued                            an API cancel of a queued run (no claim)
-- Every item but cancel_queued names the claim it settles (claim_token); an
-- item whose claim is no longer current settles nothing ('claim_lost').
-- Returns one row per item: its run_id and the run's new status, or
-- 'claim_lost'. Steps it queues for now wake the claimers (NOTIFY
-- hookflow_wake) unless p_wake is false: hf_cycle claims them itself.
CREATE FUNCTION hf_settle_steps(p_items jsonb, p_wake boolean DEFAULT true)
RETURNS TABLE (run_id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	waits jsonb := '{}';
	it record;
	sig jsonb;
	ords bigint[];
	sts text[];
	kv_ords bigint[];
	done text[];
	grp text[];
	sched timestamptz;
	queued boolean;
	cbs integer;
BEGIN
	-- Waits first, in item order: on a current claim without a cancel
	-- request, lock the key, refuse a second waiter and take a buffered
	-- signal. waits maps the item's position to {"conflict"} or
	-- {"buffered", "signal"}.
	FOR it IN SELECT e.ord, e.item FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
		  WHERE e.item->>'result' = 'continue' AND e.item->>'wait_key' IS NOT NULL
		  ORDER BY e.ord LOOP
		PERFORM 1 FROM run x WHERE x.run_id = it.item->>'run_id'
			AND x.claim_token = (it.item->>'claim_token')::bigint
			AND x.status = 'running' AND NOT x.cancel_requested FOR UPDATE;
		CONTINUE WHEN NOT FOUND;
		PERFORM hf_lock_key(it.item->>'wait_key');
		IF EXISTS (SELECT 1 FROM run x WHERE x.wait_key = it.item->>'wait_key'
			   AND x.status = 'waiting' AND x.run_id <> it.item->>'run_id') THEN
			waits := waits || jsonb_build_object(it.ord::text, '{"conflict": true}'::jsonb);
		ELSE
			DELETE FROM signal_buffer b WHERE b.correlation_key = it.item->>'wait_key'
			RETURNING b.payload INTO sig;
			waits := waits || jsonb_build_object(it.ord::text, jsonb_build_object(
				'buffered', FOUND, 'signal', sig));
		END IF;
	END LOOP;

	-- Every item's rule, in one statement: `d` locks the runs, `v` and `e`
	-- decide, `u` applies, then the history, the dead letters and the terminal
	-- callbacks.
	WITH x AS (
		SELECT e.ord, e.item->>'run_id' AS rid, (e.item->>'claim_token')::bigint AS token,
		       e.item->>'result' AS res, coalesce(e.item->'payload', 'null') AS payload,
		       coalesce(e.item->'value', 'null') AS value, e.item->>'reason' AS reason,
		       (e.item->>'http_status')::integer AS http_status,
		       (e.item->>'delay_ms')::bigint AS delay_ms,
		       (e.item->>'retry_delay_ms')::bigint AS retry_delay_ms,
		       e.item->>'wait_key' AS wait_key,
		       (e.item->>'wait_timeout_ms')::bigint AS wait_timeout_ms,
		       e.item->'kv' AS kv, waits->(e.ord::text) AS w
		FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)),
	d AS (
		SELECT x.*, r AS old, coalesce(r.callback_url, wf.callback_url) AS cb_url,
		       CASE WHEN x.res = 'cancel_queued'
			    THEN r.status IN ('pending', 'scheduled', 'waiting')
			    ELSE r.claim_token = x.token AND r.status IN ('running', 'cancelling')
		       END AS valid,
		       -- An external cancel beats any result but the webhook's own cancel.
		       r.cancel_requested AND x.res NOT IN ('cancel', 'cancel_queued') AS ext_cancel,
		       x.res IN ('transient_error', 'lease_expired') AND r.attempt >= r.max_attempts
			       AS last_attempt
		FROM x JOIN run r ON r.run_id = x.rid
		LEFT JOIN workflow wf ON wf.name = r.workflow
		FOR UPDATE OF r),
	v AS (
		SELECT d.*, coalesce((d.w->>'conflict')::boolean, false) AS conflict,
		       coalesce((d.w->>'buffered')::boolean, false) AS buffered,
		       CASE WHEN d.ext_cancel THEN NULL
			    WHEN d.res = 'continue' AND d.wait_key IS NOT NULL
			    THEN CASE WHEN (d.w->>'buffered')::boolean THEN now()
				      ELSE hf_due(d.wait_timeout_ms) END
			    WHEN d.res = 'continue' THEN hf_due(d.delay_ms)
			    WHEN d.res = 'transient_error' THEN hf_due(d.retry_delay_ms)
			    WHEN d.res IN ('lease_expired', 'interrupted') THEN now()
		       END AS due
		FROM d WHERE d.valid),
	e AS (
		SELECT v.*,
		       CASE WHEN v.ext_cancel OR v.res IN ('cancel_queued', 'cancel') THEN 'cancelled'
			    WHEN v.res = 'succeed' THEN 'succeeded'
			    WHEN v.res IN ('fail', 'permanent_error') OR v.last_attempt OR v.conflict
				 THEN 'failed'
			    WHEN v.res = 'continue' AND v.wait_key IS NOT NULL AND NOT v.buffered
				 THEN 'waiting'
			    WHEN v.res IN ('continue', 'transient_error', 'lease_expired', 'interrupted')
				 THEN hf_queue_state(v.due)
			    ELSE hf_raise(format('hf_settle_steps: unknown result %s', v.res))
		       END AS st,
		       -- the run's error when it ends
		       CASE WHEN v.ext_cancel THEN NULL
			    WHEN v.conflict THEN format(
				'a waiter is already registered for correlation key %s', v.wait_key)
			    WHEN v.res = 'lease_expired' THEN 'lease expired'
			    WHEN v.res IN ('cancel', 'fail', 'transient_error', 'permanent_error')
				 THEN v.reason END AS err,
		       CASE WHEN v.ext_cancel OR v.res IN ('cancel_queued', 'cancel', 'succeed',
							   'lease_expired') THEN NULL
			    WHEN v.res IN ('fail', 'permanent_error') OR v.conflict THEN 'permanent'
			    WHEN v.res = 'transient_error' THEN 'transient' END AS kind,
		       -- the history row's result; NULL: no row (no answer was awaited)
		       CASE WHEN v.ext_cancel THEN 'cancelled'
			    WHEN v.res IN ('cancel_queued', 'interrupted') THEN NULL
			    WHEN v.conflict THEN 'permanent_error'
			    ELSE v.res END AS hist,
		       NOT v.ext_cancel AND (v.res = 'permanent_error' OR v.conflict OR v.last_attempt)
			   AS dead,
		       NOT v.ext_cancel AND NOT v.conflict
			   AND v.res IN ('continue', 'succeed', 'fail', 'cancel') AS apply_kv,
		       NOT v.ext_cancel AND NOT v.conflict AND v.res = 'continue' AS advance
		FROM v),
	u AS (
		UPDATE run rr SET
			status = e.st,
			step = CASE WHEN e.advance THEN (e.old).step + 1 ELSE rr.step END,
			attempt = CASE WHEN e.advance THEN 0
				       WHEN e.res = 'interrupted' AND NOT e.ext_cancel THEN rr.attempt - 1
				       ELSE rr.attempt END,
			job_id = CASE WHEN e.advance THEN hf_new_id() ELSE rr.job_id END,
			payload = CASE WHEN e.advance THEN e.payload ELSE rr.payload END,
			signal = CASE WHEN NOT e.advance THEN rr.signal
				      WHEN e.buffered THEN jsonb_build_object(
					'status', 'delivered', 'payload', e.w->'signal') END,
			result = CASE WHEN e.st = 'succeeded' THEN e.value END,
			error = CASE WHEN e.st IN ('failed', 'cancelled') THEN e.err END,
			error_kind = CASE WHEN e.st IN ('failed', 'cancelled') THEN e.kind END,
			final_step = CASE WHEN e.st IN ('succeeded', 'failed', 'cancelled')
					  THEN (e.old).step END,
			finished_at = CASE WHEN e.st IN ('succeeded', 'failed', 'cancelled')
					   THEN now() END,
			seq = CASE WHEN e.st = 'pending' THEN nextval('hf_seq') END,
			next_at = CASE WHEN e.st IN ('pending', 'scheduled', 'waiting') THEN e.due END,
			wait_key = CASE WHEN e.st = 'waiting' THEN e.wait_key END,
			wait_timeout_at = CASE WHEN e.st = 'waiting' THEN e.due END,
			cancel_requested = rr.cancel_requested OR e.res = 'cancel_queued',
			lease_owner = NULL, claim_token = NULL, claimed_at = NULL,
			lease_expires_at = NULL, holds_slot = false, updated_at = now()
		FROM e
		WHERE rr.run_id = e.rid
		RETURNING e.ord, e.old, e.st, e.err, e.kind, e.hist, e.dead, e.apply_kv, e.cb_url,
			  e.http_status, rr.result, rr.next_at, rr.finished_at,
			  e.st IN ('succeeded', 'failed', 'cancelled') AS term,
			  -- the history row's error
			  CASE WHEN e.ext_cancel THEN e.reason
			       WHEN e.hist IN ('transient_error', 'permanent_error', 'lease_expired')
			       THEN e.err END AS hist_err),
	hist AS (
		INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload,
					  signal, started_at, result, http_status, error)
		SELECT (u.old).run_id, (u.old).generation, (u.old).step, (u.old).attempt,
		       (u.old).job_id, (u.old).payload, (u.old).signal, (u.old).claimed_at,
		       u.hist, u.http_status, u.hist_err
		FROM u WHERE u.hist IS NOT NULL),
	dead AS (
		INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
					 last_error, last_http_status, payload)
		SELECT (u.old).job_id, 'step', (u.old).run_id, (u.old).workflow,
		       (u.old).generation, (u.old).step, (u.old).attempt, u.err, u.http_status,
		       (u.old).payload
		FROM u WHERE u.dead
		ON CONFLICT ON CONSTRAINT dead_letter_pkey DO UPDATE SET attempts = EXCLUDED.attempts,
			last_error = EXCLUDED.last_error,
			last_http_status = EXCLUDED.last_http_status, created_at = now()),
	cb AS (
		INSERT INTO callback (id, run_id, generation, workflow, url, body, status,
				      max_attempts, priority, seq, next_at)
		SELECT hf_new_id(), (u.old).run_id, (u.old).generation, (u.old).workflow, u.cb_url,
		       hf_callback_body(u.old, u.st, u.result, u.err, u.kind, u.finished_at),
		       'pending', (u.old).max_attempts, (u.old).priority, nextval('hf_seq'),
		       u.finished_at
		FROM u WHERE u.term AND u.cb_url IS NOT NULL
		ON CONFLICT ON CONSTRAINT callback_run_id_generation_key DO NOTHING
		RETURNING 1)
	SELECT coalesce(array_agg(u.ord), '{}'), array_agg(u.st),
	       array_agg(u.ord ORDER BY u.ord) FILTER (WHERE u.apply_kv),
	       array_agg((u.old).run_id) FILTER (WHERE u.term),
	       array_agg(DISTINCT (u.old).group_id) FILTER (WHERE u.term
							   AND (u.old).group_id IS NOT NULL),
	       min(u.next_at) FILTER (WHERE u.st IN ('scheduled', 'waiting')),
	       coalesce(bool_or(u.st = 'pending'), false),
	       (SELECT count(*) FROM cb)
	INTO ords, sts, kv_ords, done, grp, sched, queued, cbs
	FROM u;

	-- kv effects of the outcomes that keep them, in item order.
	IF kv_ords IS NOT NULL THEN
		FOR it IN SELECT e.ord, e.item FROM jsonb_array_elements(p_items)
			  WITH ORDINALITY AS e(item, ord)
			  WHERE e.ord = ANY (kv_ords) AND e.item ? 'kv' ORDER BY e.ord LOOP
			PERFORM hf_apply_kv(it.item->'kv');
		END LOOP;
	END IF;

	IF done IS NOT NULL THEN
		PERFORM pg_notify('hookflow_done', rd) FROM unnest(done) rd;
	END IF;
	IF grp IS NOT NULL THEN
		PERFORM pg_notify('hookflow_done', 'group:' || g) FROM unnest(grp) g;
	END IF;
	IF sched IS NOT NULL THEN
		PERFORM pg_notify('hookflow_sched', hf_ms(sched)::text);
	END IF;
	IF cbs > 0 OR (p_wake AND queued) THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;

	RETURN QUERY
	SELECT e.item->>'run_id', coalesce(s.st, 'claim_lost')
	FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
	LEFT JOIN unnest(ords, sts) AS s(ord, st) ON s.ord = e.ord
	ORDER BY e.ord;
END
$$;

-- Settles callback jobs. p_items: [{"id", "claim_token", "result", "reason",
-- "http_status", "retry_delay_ms"}] where "result" is ok, transient_error,
-- permanent_error, lease_expired or interrupted (as for steps). Returns one
-- row per item: its id and the callback's new status, or 'claim_lost'.
CREATE FUNCTION hf_settle_callbacks(p_items jsonb)
RETURNS TABLE (id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	ords bigint[];
	sts text[];
	sched timestamptz;
	queued boolean;
BEGIN
	WITH x AS (
		SELECT e.ord, e.item->>'id' AS cid, (e.item->>'claim_token')::bigint AS token,
		       e.item->>'result' AS res, e.item->>'reason' AS reason,
		       (e.item->>'http_status')::integer AS http_status,
		       (e.item->>'retry_delay_ms')::bigint AS retry_delay_ms
		FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)),
	d AS (
		SELECT x.*, c AS old
		FROM x JOIN callback c ON c.id = x.cid
		WHERE c.claim_token = x.token AND c.status = 'running'
		FOR UPDATE OF c),
	e AS (
		SELECT d.*,
		       CASE WHEN d.res = 'ok' THEN 'done'
			    WHEN d.res = 'permanent_error'
				 OR (d.res IN ('transient_error', 'lease_expired')
				     AND (d.old).attempt >= (d.old).max_attempts) THEN 'dead'
			    WHEN d.res = 'transient_error' THEN hf_queue_state(hf_due(d.retry_delay_ms))
			    WHEN d.res IN ('lease_expired', 'interrupted') THEN 'pending'
			    ELSE hf_raise(format('hf_settle_callbacks: unknown result %s', d.res))
		       END AS st,
		       CASE WHEN d.res = 'lease_expired' THEN 'lease expired'
			    WHEN d.res = 'interrupted' THEN 'call interrupted: instance shutting down'
			    ELSE d.reason END AS err,
		       CASE WHEN d.res = 'transient_error' THEN hf_due(d.retry_delay_ms)
			    ELSE now() END AS due
		FROM d),
	u AS (
		UPDATE callback cc SET
			status = e.st,
			attempt = CASE WHEN e.res = 'interrupted' THEN cc.attempt - 1
				       ELSE cc.attempt END,
			seq = CASE WHEN e.st = 'pending' THEN nextval('hf_seq') END,
			next_at = CASE WHEN e.st IN ('pending', 'scheduled') THEN e.due
				       ELSE cc.next_at END,
			last_error = CASE WHEN e.st = 'done' THEN cc.last_error ELSE e.err END,
			last_http_status = CASE WHEN e.res IN ('lease_expired', 'interrupted')
						THEN cc.last_http_status ELSE e.http_status END,
			finished_at = CASE WHEN e.st IN ('done', 'dead') THEN now() END,
			lease_owner = NULL, claim_token = NULL, claimed_at = NULL,
			lease_expires_at = NULL, updated_at = now()
		FROM e
		WHERE cc.id = e.cid
		RETURNING e.ord, e.old, e.st, e.err, e.http_status, cc.next_at),
	dead AS (
		INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
					 last_error, last_http_status, payload)
		SELECT (u.old).id, 'callback', (u.old).run_id, (u.old).workflow,
		       (u.old).generation, NULL, (u.old).attempt, u.err, u.http_status, (u.old).body
		FROM u WHERE u.st = 'dead'
		ON CONFLICT ON CONSTRAINT dead_letter_pkey DO UPDATE SET attempts = EXCLUDED.attempts,
			last_error = EXCLUDED.last_error,
			last_http_status = EXCLUDED.last_http_status, created_at = now())
	SELECT coalesce(array_agg(u.ord), '{}'), array_agg(u.st),
	       min(u.next_at) FILTER (WHERE u.st = 'scheduled'),
	       coalesce(bool_or(u.st = 'pending'), false)
	INTO ords, sts, sched, queued
	FROM u;

	IF sched IS NOT NULL THEN
		PERFORM pg_notify('hookflow_sched', hf_ms(sched)::text);
	END IF;
	IF queued THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;

	RETURN QUERY
	SELECT e.item->>'id', coalesce(s.st, 'claim_lost')
	FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
	LEFT JOIN unnest(ords, sts) AS s(ord, st) ON s.ord = e.ord
	ORDER BY e.ord;
END
$$;

-- Stores replay records for step calls still claimed by the caller. p_items:
-- [{"run_id", "claim_token", "outcome"}]. The key is the claimed step's payload.
CREATE FUNCTION hf_store_outputs(p_items jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	INSERT INTO step_output (run_id, generation, step, payload_hash, outcome)
	SELECT r.run_id, r.generation, r.step, hf_payload_hash(r.payload), x.outcome
	FROM jsonb_to_recordset(p_items) AS x(run_id text, claim_token bigint, outcome jsonb)
	JOIN run r ON r.run_id = x.run_id AND r.claim_token = x.claim_token
	ON CONFLICT (run_id, generation, step, payload_hash) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
