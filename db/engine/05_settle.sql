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
--   {"run_id", "claim_token", "result", "payload" or "payload_at", "delay_ms", "run_at",
--    "wait_key", "wait_timeout_ms", "value", "reason", "kv", "http_status",
--    "retry_delay_ms", "timeout_ms", "heartbeat_timeout_ms"}
-- where "result" is what ended the job:
--   continue | succeed | fail | cancel        the webhook's outcome ("run_at",
--                                            a time, instead of "delay_ms")
--   pending                                  the call ended but the step stays
--                                            open (migrations/0008): the run
--                                            keeps its claim, with no owner,
--                                            until POST .../complete or its
--                                            "timeout_ms" (or a missed
--                                            "heartbeat_timeout_ms") runs out
--   transient_error | permanent_error        a failed call ("reason": the error)
--   lease_expired                            the claim's lease ran out
--   interrupted                              a draining instance released the call
--   cancel_queued                            a cancel of a queued run (no claim;
--                                            "reason": the run's error, or none)
-- Every item but cancel_queued names the claim it settles (claim_token); an
-- item whose claim is no longer current settles nothing ('claim_lost').
-- Returns one row per item: its run_id and the run's new status, or
-- 'claim_lost'. Steps it queues for now wake the claimers (NOTIFY
-- hookflow_wake) unless p_wake is false: hf_cycle claims them itself.
-- p_again is internal: the second pass over items whose run changed while
-- they were decided. An item's payload is either inline ("payload") or, as
-- db/jobs.c sends it, the JSON text at byte range "payload_at" ([offset,
-- length]) of p_texts, stored as it is (migrations/0013_payload_json.sql).
CREATE FUNCTION hf_settle_steps(p_items jsonb, p_wake boolean DEFAULT true,
					   p_again boolean DEFAULT true, p_texts bytea DEFAULT NULL)
RETURNS TABLE (run_id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
DECLARE
	waits jsonb := '{}';
	it record;
	sig jsonb;
	ords bigint[];
	rids text[];
	sts text[];
	kv_ords bigint[];
	done text[];
	keyed_done text[];
	dead text[];
	cb_runs text[];
	grp text[];
	sched timestamptz;
	queued boolean;
	cbs integer := 0;
	pend_rids text[];
	pend_due timestamptz;
	wkeys text[];
	wkey text;
	waiting text[];
	unwaited text[];
	parents text[];
	schedules text[];
	cancelled text[];
	spawn jsonb;
BEGIN
	-- Pending answers first: the claim stays, without an owner to renew it;
	-- its lease is the earlier deadline, so the reaper ends it (hf_reap). A
	-- run whose cancel was requested meanwhile is settled below instead
	-- (cancelled, as any answer would be).
	IF jsonb_path_exists(p_items, '$[*] ? (@.result == "pending")') THEN
		WITH x AS (
			SELECT e.ord, e.item->>'run_id' AS rid, (e.item->>'claim_token')::bigint AS token,
			       hf_due((e.item->>'timeout_ms')::bigint) AS timeout_at,
			       (e.item->>'heartbeat_timeout_ms')::bigint AS hb_ms
			FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			WHERE e.item->>'result' = 'pending'),
		u AS (
			UPDATE run r SET pending_since = now(), pending_timeout_at = x.timeout_at,
				heartbeat_timeout_ms = x.hb_ms,
				heartbeat_timeout_at = CASE WHEN x.hb_ms IS NOT NULL THEN hf_due(x.hb_ms) END,
				lease_owner = NULL,
				lease_expires_at = least(x.timeout_at,
					CASE WHEN x.hb_ms IS NOT NULL THEN hf_due(x.hb_ms) END),
				updated_at = now()
			FROM x
			WHERE r.run_id = x.rid AND r.claim_token = x.token AND r.status = 'running'
			  AND NOT r.cancel_requested AND r.pending_since IS NULL
			RETURNING x.ord, r.run_id, r.lease_expires_at)
		SELECT array_agg(u.run_id), min(u.lease_expires_at), array_agg(u.ord)
		INTO pend_rids, pend_due, ords FROM u;
		IF pend_rids IS NOT NULL THEN
			PERFORM pg_notify('hookflow_sched', hf_ms(pend_due)::text);
			RETURN QUERY SELECT p, 'running'::text FROM unnest(pend_rids) p;
			IF cardinality(pend_rids) = jsonb_array_length(p_items) THEN
				RETURN;
			END IF;
			SELECT jsonb_agg(e.item ORDER BY e.ord) INTO p_items
			FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			WHERE NOT e.ord = ANY (ords);
			ords := NULL;
		END IF;
	END IF;

	-- Waits first, in item order: on a current claim without a cancel
	-- request, lock the run and its keys (in key order), refuse a second
	-- waiter on any key and take the oldest signal buffered on one. waits
	-- maps the item's position to {"refused": why} or {"buffered",
	-- "signal", "key"}. An item waits on "wait_keys" (the first of several
	-- signals), or on "wait_key" alone.
	IF jsonb_path_exists(p_items, '$[*].wait_key') THEN
		FOR it IN SELECT e.ord, e.item FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			  WHERE e.item->>'result' = 'continue' AND e.item->>'wait_key' IS NOT NULL
			  ORDER BY e.ord LOOP
			PERFORM 1 FROM run x WHERE x.run_id = it.item->>'run_id'
				AND x.claim_token = (it.item->>'claim_token')::bigint
				AND x.status = 'running' AND NOT x.cancel_requested FOR UPDATE;
			CONTINUE WHEN NOT FOUND;
			wkeys := hf_wait_keys(it.item->'wait_keys', it.item->>'wait_key');
			FOREACH wkey IN ARRAY wkeys LOOP
				PERFORM hf_lock_key(wkey);
			END LOOP;
			SELECT w.correlation_key INTO wkey FROM signal_wait w
			WHERE w.correlation_key = ANY (wkeys) AND w.run_id <> it.item->>'run_id'
			ORDER BY w.correlation_key LIMIT 1;
			IF FOUND THEN
				waits := waits || jsonb_build_object(it.ord::text, jsonb_build_object(
					'refused', format('a waiter is already registered for correlation key %s',
							  wkey)));
			ELSE
				SELECT b.key, b.payload INTO wkey, sig FROM hf_take_buffered(wkeys) b;
				waits := waits || jsonb_build_object(it.ord::text, jsonb_build_object(
					'buffered', wkey IS NOT NULL, 'signal', sig, 'key', wkey));
			END IF;
		END LOOP;
	END IF;

	-- Children next: a step may not start them past the caps or for a
	-- workflow that does not exist (waits maps its position to {"refused"}).
	IF jsonb_path_exists(p_items, '$[*].children') THEN
		FOR it IN SELECT e.ord, e.item FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			  WHERE e.item->>'result' = 'continue' AND e.item ? 'children'
			  ORDER BY e.ord LOOP
			wkey := hf_children_refused(it.item->>'run_id', it.item->'children',
						    (it.item->>'max_children')::integer,
						    (it.item->>'max_depth')::integer);
			IF wkey IS NOT NULL THEN
				waits := waits || jsonb_build_object(it.ord::text,
								     jsonb_build_object('refused', wkey));
			END IF;
		END LOOP;
	END IF;

	-- Every item's rule, in one statement: `d` reads each item's run and
	-- decides, `u` applies it, `hist` writes the history row. The decision is
	-- made on the run as this statement's snapshot shows it; a run that
	-- changed before its update (a cancel requested, a reap) is left alone
	-- and settled again below.
	WITH x AS (
		SELECT e.*, waits->(e.ord::text)->>'refused' AS refused,
		       coalesce((waits->(e.ord::text)->>'buffered')::boolean, false) AS buffered
		FROM ROWS FROM (jsonb_to_recordset(p_items) AS (run_id text, claim_token bigint,
			result text, payload jsonb, value jsonb, reason text, http_status integer,
			delay_ms bigint, retry_delay_ms bigint, wait_key text, wait_timeout_ms bigint,
			kv jsonb, run_at timestamptz, wait_keys jsonb, children jsonb,
			wait_children jsonb, payload_at jsonb)) WITH ORDINALITY AS e(run_id, claim_token,
			result, payload, value, reason, http_status, delay_ms, retry_delay_ms, wait_key,
			wait_timeout_ms, kv, run_at, wait_keys, children, wait_children, payload_at, ord)),
	d AS (
		SELECT x.ord, x.run_id AS rid, x.claim_token AS token, x.result AS res, x.payload,
		       x.payload_at,
		       x.value, x.reason, x.http_status, x.kv, x.wait_key, x.buffered,
		       CASE WHEN x.wait_key IS NOT NULL THEN hf_wait_keys(x.wait_keys, x.wait_key)
		       END AS wait_keys, x.children, x.wait_children,
		       r.cancel_requested, r.step AS o_step, r.attempt AS o_attempt,
		       r.generation AS o_generation, r.job_id AS o_job_id, r.payload AS o_payload,
		       r.signal AS o_signal, r.claimed_at AS o_claimed_at,
		       r.pending_since AS o_pending_since, r.heartbeat AS o_heartbeat,
		       r.heartbeat_at AS o_heartbeat_at, c.ext_cancel,
		       CASE WHEN c.ext_cancel OR x.result IN ('cancel_queued', 'cancel') THEN 'cancelled'
			    WHEN x.result = 'succeed' THEN 'succeeded'
			    WHEN x.result IN ('fail', 'permanent_error') OR c.last_attempt
				 OR x.refused IS NOT NULL THEN 'failed'
			    WHEN x.result = 'continue' AND x.wait_key IS NOT NULL AND NOT x.buffered
				 THEN 'waiting'
			    WHEN x.result = 'continue' AND x.children IS NOT NULL THEN 'waiting'
			    WHEN x.result IN ('continue', 'transient_error', 'lease_expired', 'interrupted')
				 THEN 'queued'
			    ELSE hf_raise(format('hf_settle_steps: unknown result %s', x.result))
		       END AS st,
		       -- when a queued or waiting step comes due; NULL when the run ends
		       CASE WHEN c.ext_cancel OR x.refused IS NOT NULL OR c.last_attempt THEN NULL
			    WHEN x.result = 'continue' AND x.wait_key IS NOT NULL
			    THEN CASE WHEN x.buffered THEN now() ELSE hf_due(x.wait_timeout_ms) END
			    WHEN x.result = 'continue' AND x.children IS NOT NULL
			    THEN hf_due(coalesce((x.wait_children->>'timeout_ms')::bigint, 31622400000))
			    WHEN x.result = 'continue' AND x.run_at IS NOT NULL
			    THEN greatest(x.run_at, now())
			    WHEN x.result = 'continue' THEN hf_due(x.delay_ms)
			    WHEN x.result = 'transient_error' THEN hf_due(x.retry_delay_ms)
			    WHEN x.result IN ('lease_expired', 'interrupted') THEN now()
		       END AS due,
		       -- the run's error when it ends (and the history row's)
		       CASE WHEN c.ext_cancel THEN r.cancel_reason
			    WHEN x.refused IS NOT NULL THEN x.refused
			    WHEN x.result = 'lease_expired' THEN 'lease expired'
			    WHEN x.result IN ('cancel', 'fail', 'transient_error', 'permanent_error',
					      'cancel_queued')
				 THEN x.reason END AS err,
		       CASE WHEN c.ext_cancel THEN NULL
			    WHEN x.result IN ('fail', 'permanent_error') OR x.refused IS NOT NULL
				 THEN 'permanent'
			    WHEN x.result = 'transient_error' THEN 'transient' END AS kind,
		       -- the history row's result; NULL: no row (no answer was awaited)
		       CASE WHEN c.ext_cancel THEN 'cancelled'
			    WHEN x.result IN ('cancel_queued', 'interrupted', 'pending') THEN NULL
			    WHEN x.refused IS NOT NULL THEN 'permanent_error'
			    ELSE x.result END AS hist,
		       NOT c.ext_cancel AND (x.result = 'permanent_error' OR x.refused IS NOT NULL
					     OR c.last_attempt) AS dead,
		       NOT c.ext_cancel AND x.refused IS NULL AND x.kv IS NOT NULL
			   AND x.result IN ('continue', 'succeed', 'fail', 'cancel') AS has_kv,
		       NOT c.ext_cancel AND x.refused IS NULL AND x.result = 'continue' AS advance
		FROM x JOIN run r ON r.run_id = x.run_id
		CROSS JOIN LATERAL (SELECT
			-- An external cancel beats any result but the webhook's own cancel.
			r.cancel_requested AND x.result NOT IN ('cancel', 'cancel_queued') AS ext_cancel,
			x.result IN ('transient_error', 'lease_expired') AND r.attempt >= r.max_attempts
				AS last_attempt) c
		WHERE CASE WHEN x.result = 'cancel_queued'
			   THEN r.status IN ('pending', 'scheduled', 'waiting')
			   ELSE r.claim_token = x.claim_token AND r.status IN ('running', 'cancelling') END
		  -- a pending answer is settled here only when a cancel overrides it
		  AND (x.result <> 'pending' OR r.cancel_requested)),
	u AS (
		UPDATE run rr SET
			status = CASE WHEN d.st = 'queued' THEN hf_queue_state(d.due) ELSE d.st END,
			step = CASE WHEN d.advance THEN d.o_step + 1 ELSE rr.step END,
			attempt = CASE WHEN d.advance THEN 0
				       WHEN d.res = 'interrupted' AND NOT d.ext_cancel THEN rr.attempt - 1
				       ELSE rr.attempt END,
			job_id = CASE WHEN d.advance THEN hf_new_id() ELSE rr.job_id END,
			-- the next step's payload is this attempt's output (hist)
			payload = CASE WHEN d.advance THEN NULL ELSE rr.payload END,
			children = CASE WHEN NOT d.advance THEN rr.children END,
			-- a step that waits before it starts: when (for the wait's span)
			waited_since = CASE WHEN d.advance AND d.due > now() THEN now() END,
			wait_children = CASE WHEN d.st = 'waiting' AND d.children IS NOT NULL
					THEN jsonb_build_object(
						'mode', coalesce(d.wait_children->>'mode', 'all'),
						'count', CASE coalesce(d.wait_children->>'mode', 'all')
							 WHEN 'all' THEN jsonb_array_length(d.children)
							 WHEN 'any' THEN 1
							 ELSE (d.wait_children->>'count')::integer END,
						'step', d.o_step) END,
			signal = CASE WHEN NOT d.advance THEN rr.signal
				      WHEN d.buffered THEN hf_delivered(waits->(d.ord::text)->>'key',
					cardinality(d.wait_keys), waits->(d.ord::text)->'signal') END,
			result = CASE WHEN d.st = 'succeeded' THEN coalesce(d.value, 'null') END,
			error = CASE WHEN d.due IS NULL THEN d.err END,
			error_kind = CASE WHEN d.due IS NULL THEN d.kind END,
			final_step = CASE WHEN d.due IS NULL THEN d.o_step END,
			finished_at = CASE WHEN d.due IS NULL THEN now() END,
			seq = CASE WHEN d.st = 'queued' AND d.due <= now() THEN nextval('hf_seq') END,
			next_at = d.due,
			wait_key = CASE WHEN d.st = 'waiting' THEN d.wait_key END,
			wait_keys = CASE WHEN d.st = 'waiting' THEN d.wait_keys END,
			wait_timeout_at = CASE WHEN d.st = 'waiting' THEN d.due END,
			cancel_requested = rr.cancel_requested OR d.res = 'cancel_queued',
			lease_owner = NULL, claim_token = NULL, claimed_at = NULL,
			lease_expires_at = NULL, holds_slot = false, holds_key_slot = false,
			pending_since = NULL, pending_timeout_at = NULL, heartbeat_timeout_ms = NULL,
			heartbeat_timeout_at = NULL, heartbeat = NULL, heartbeat_at = NULL,
			-- a retried attempt of the step hears what the last one reported
			last_heartbeat = CASE WHEN d.advance OR d.due IS NULL THEN NULL
					      ELSE coalesce(rr.heartbeat, rr.last_heartbeat) END,
			updated_at = now()
		FROM d
		WHERE rr.run_id = d.rid AND rr.cancel_requested = d.cancel_requested
		  AND CASE WHEN d.res = 'cancel_queued'
			   THEN rr.status IN ('pending', 'scheduled', 'waiting')
			   ELSE rr.claim_token = d.token AND rr.status IN ('running', 'cancelling') END
		RETURNING d.ord, d.rid, d.res, rr.parent_run_id, rr.depth, d.children, rr.schedule_id,
			  d.o_step, d.o_attempt, d.o_generation, d.o_job_id, d.o_payload,
			  d.o_signal, d.o_claimed_at, d.o_pending_since, d.o_heartbeat, d.o_heartbeat_at,
			  rr.status AS st, rr.workflow, rr.group_id, rr.concurrency_key, d.hist, d.dead,
			  d.has_kv, d.http_status, rr.next_at, d.due IS NULL AS term,
			  d.advance, d.payload, d.payload_at,
			  CASE WHEN d.due IS NULL THEN coalesce(rr.callback_url,
				(SELECT w.callback_url FROM workflow w WHERE w.name = rr.workflow)) END
				AS cb_url,
			  CASE WHEN d.ext_cancel THEN d.reason
			       WHEN d.hist IN ('transient_error', 'permanent_error', 'lease_expired')
			       THEN d.err END AS hist_err),
	hist AS (
		INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload,
					  signal, started_at, result, http_status, error, output,
					  pending_since, heartbeat, heartbeat_at)
		SELECT u.rid, u.o_generation, u.o_step, u.o_attempt, u.o_job_id, u.o_payload,
		       u.o_signal, u.o_claimed_at, u.hist, u.http_status, u.hist_err,
		       -- the output, made here only: a value carried through the
		       -- joins above would be hashed (and spilled) with them
		       CASE WHEN u.advance THEN coalesce(hf_text_at(p_texts, u.payload_at),
							  u.payload::json, 'null') END,
		       u.o_pending_since, u.o_heartbeat, u.o_heartbeat_at
		FROM u WHERE u.hist IS NOT NULL),
	-- The dashboard's figures (migrations/0011_step_stats.sql): what this
	-- settlement recorded, added to the rows of this backend's shard.
	stats AS (
		INSERT INTO step_stats AS s (minute, workflow, shard, bucket, attempts, errors,
					     succeeded, failed, cancelled)
		SELECT date_trunc('minute', now()), u.workflow, pg_backend_pid(), x.bucket,
		       sum(x.attempts), sum(x.errors), sum(x.succeeded), sum(x.failed),
		       sum(x.cancelled)
		FROM u CROSS JOIN LATERAL (VALUES
			(CASE WHEN u.hist IS NOT NULL THEN hf_stats_bucket(u.o_claimed_at) END, 1,
			 (u.hist IN ('transient_error', 'permanent_error', 'lease_expired'))::int,
			 0, 0, 0),
			(CASE WHEN u.term THEN -1 END, 0, 0, (u.st = 'succeeded')::int,
			 (u.st = 'failed')::int, (u.st = 'cancelled')::int)
		) AS x(bucket, attempts, errors, succeeded, failed, cancelled)
		WHERE x.bucket IS NOT NULL
		GROUP BY u.workflow, x.bucket
		ON CONFLICT (minute, workflow, shard, bucket) DO UPDATE SET
			attempts = s.attempts + EXCLUDED.attempts, errors = s.errors + EXCLUDED.errors,
			succeeded = s.succeeded + EXCLUDED.succeeded, failed = s.failed + EXCLUDED.failed,
			cancelled = s.cancelled + EXCLUDED.cancelled)
	SELECT array_agg(u.ord), array_agg(u.rid), array_agg(u.st),
	       array_agg(u.ord ORDER BY u.ord) FILTER (WHERE u.has_kv),
	       array_agg(u.rid) FILTER (WHERE u.term),
	       array_agg(u.rid) FILTER (WHERE u.term AND u.concurrency_key IS NOT NULL),
	       array_agg(u.rid) FILTER (WHERE u.dead),
	       array_agg(u.rid) FILTER (WHERE u.cb_url IS NOT NULL),
	       array_agg(DISTINCT u.group_id) FILTER (WHERE u.term AND u.group_id IS NOT NULL),
	       min(u.next_at) FILTER (WHERE u.st IN ('scheduled', 'waiting')),
	       coalesce(bool_or(u.st = 'pending'), false),
	       array_agg(u.rid) FILTER (WHERE u.st = 'waiting'),
	       array_agg(u.rid) FILTER (WHERE u.res = 'cancel_queued'),
	       array_agg(DISTINCT u.parent_run_id) FILTER (WHERE u.term AND u.parent_run_id IS NOT NULL),
	       array_agg(DISTINCT u.schedule_id) FILTER (WHERE u.term AND u.schedule_id IS NOT NULL),
	       array_agg(u.rid) FILTER (WHERE u.st = 'cancelled'),
	       jsonb_agg(jsonb_build_object('run_id', u.rid, 'generation', u.o_generation,
					    'step', u.o_step, 'attempt', u.o_attempt, 'depth', u.depth,
					    'children', u.children))
		   FILTER (WHERE u.st = 'waiting' AND u.children IS NOT NULL)
	INTO ords, rids, sts, kv_ords, done, keyed_done, dead, cb_runs, grp, sched, queued, waiting, unwaited,
	     parents, schedules, cancelled, spawn
	FROM u;

	-- A keyed run that ended is no longer among its key's active runs
	-- (run_key, migrations/0012_run_key.sql).
	IF keyed_done IS NOT NULL THEN
		UPDATE run_key SET active = false WHERE run_key.run_id = ANY (keyed_done);
	END IF;

	-- Children: those the outcomes start, and the waits of the parents of
	-- the runs that ended.
	IF spawn IS NOT NULL THEN
		PERFORM hf_start_children(s->>'run_id', (s->>'generation')::integer,
					  (s->>'step')::integer, (s->>'attempt')::integer,
					  (s->>'depth')::integer, s->'children')
		FROM jsonb_array_elements(spawn) s;
	END IF;
	IF parents IS NOT NULL THEN
		PERFORM hf_children_wake(parents);
	END IF;
	-- A schedule whose run ended may start a buffered fire.
	IF schedules IS NOT NULL THEN
		PERFORM hf_schedule_runs_ended(schedules);
	END IF;
	-- A run that ended cancelled (a cancel, or its own cancel outcome)
	-- takes its active children with it, unless its workflow abandons them.
	IF cancelled IS NOT NULL THEN
		PERFORM hf_cancel(c.run_id, format('parent %s cancelled', c.parent_run_id))
		FROM run c JOIN run p ON p.run_id = c.parent_run_id
		JOIN workflow w ON w.name = p.workflow AND w.on_parent_cancel = 'cancel'
		WHERE c.parent_run_id = ANY (cancelled)
		  AND c.status NOT IN ('succeeded', 'failed', 'cancelled');
	END IF;

	-- The keys the waiting runs wait on (one waiter per key: a second one in
	-- this batch fails it, and the caller settles its items one by one); a
	-- cancelled run waits no more.
	IF unwaited IS NOT NULL THEN
		DELETE FROM signal_wait w WHERE w.run_id = ANY (unwaited);
	END IF;
	IF waiting IS NOT NULL THEN
		INSERT INTO signal_wait (correlation_key, run_id)
		SELECT unnest(r.wait_keys), r.run_id FROM run r WHERE r.run_id = ANY (waiting)
		  AND r.wait_keys IS NOT NULL;
	END IF;

	-- Dead letters: the history row of each dead attempt, kept.
	IF dead IS NOT NULL THEN
		INSERT INTO dead_letter (id, kind, run_id, workflow, generation, step, attempts,
					 last_error, last_http_status, payload)
		SELECT a.job_id, 'step', a.run_id, r.workflow, a.generation, a.step, a.attempt,
		       a.error, a.http_status,
		       hf_step_payload(r.run_id, r.generation, r.step, r.payload, r.input)
		FROM run r JOIN step_attempt a ON a.run_id = r.run_id AND a.generation = r.generation
		     AND a.step = r.step AND a.attempt = r.attempt
		WHERE r.run_id = ANY (dead)
		ON CONFLICT ON CONSTRAINT dead_letter_pkey DO UPDATE SET attempts = EXCLUDED.attempts,
			last_error = EXCLUDED.last_error,
			last_http_status = EXCLUDED.last_http_status, created_at = now();
	END IF;
	-- Terminal callbacks: one per run and generation that ended with a
	-- callback URL (its own, else its workflow's), its body the ended run.
	IF cb_runs IS NOT NULL THEN
		INSERT INTO callback (id, run_id, generation, workflow, url, body, status,
				      max_attempts, priority, seq, next_at)
		SELECT hf_new_id(), r.run_id, r.generation, r.workflow,
		       coalesce(r.callback_url, w.callback_url), hf_callback_json(r), 'pending',
		       r.max_attempts, r.priority, nextval('hf_seq'), r.finished_at
		FROM run r LEFT JOIN workflow w ON w.name = r.workflow
		WHERE r.run_id = ANY (cb_runs)
		ON CONFLICT ON CONSTRAINT callback_run_id_generation_key DO NOTHING;
		GET DIAGNOSTICS cbs = ROW_COUNT;
	END IF;
	IF done IS NOT NULL THEN
		PERFORM pg_notify('hookflow_done', rd) FROM unnest(done) rd;
		IF hf_tracing() THEN
			PERFORM hf_note_run_spans(done);
		END IF;
	END IF;
	-- kv effects of the outcomes that keep them, in item order.
	IF kv_ords IS NOT NULL THEN
		FOR it IN SELECT e.item FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			  WHERE e.ord = ANY (kv_ords) ORDER BY e.ord LOOP
			PERFORM hf_apply_kv(it.item->'kv');
		END LOOP;
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

	RETURN QUERY SELECT * FROM unnest(rids, sts);
	IF coalesce(cardinality(ords), 0) = jsonb_array_length(p_items) THEN
		RETURN;
	END IF;
	-- Items not settled above: their claim was lost, or their run changed
	-- between the decision and the update (then it is settled again, now
	-- seeing the change; a claim is cancelled or reaped only once).
	IF p_again THEN
		RETURN QUERY SELECT * FROM hf_settle_steps((
			SELECT jsonb_agg(e.item ORDER BY e.ord)
			FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
			WHERE NOT e.ord = ANY (coalesce(ords, '{}'))), p_wake, false, p_texts);
		RETURN;
	END IF;
	RETURN QUERY SELECT e.item->>'run_id', 'claim_lost'::text
	FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
	WHERE NOT e.ord = ANY (coalesce(ords, '{}'));
END
$$;

-- Settles callback jobs. p_items: [{"id", "claim_token", "result", "reason",
-- "http_status", "retry_delay_ms"}] where "result" is ok, transient_error,
-- permanent_error, lease_expired or interrupted (as for steps). Returns one
-- row per item: its id and the callback's new status, or 'claim_lost'.
CREATE FUNCTION hf_settle_callbacks(p_items jsonb)
RETURNS TABLE (id text, outcome text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
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
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	n integer;
BEGIN
	INSERT INTO step_output (run_id, generation, step, payload_hash, outcome)
	SELECT r.run_id, r.generation, r.step,
	       hf_payload_hash(hf_step_payload(r.run_id, r.generation, r.step, r.payload, r.input)),
	       x.outcome
	FROM jsonb_to_recordset(p_items) AS x(run_id text, claim_token bigint, outcome jsonb)
	JOIN run r ON r.run_id = x.run_id AND r.claim_token = x.claim_token
	ON CONFLICT (run_id, generation, step, payload_hash) DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
