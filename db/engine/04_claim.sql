-- Claims: queued jobs leased to a worker, due jobs promoted, and the next due
-- time for the dispatcher's timer.

-- Claims up to p_limit jobs for p_owner: step jobs of pending runs, then
-- pending callbacks, in (priority, FIFO) order, skipping rows other instances
-- hold. A workflow's max_concurrency is enforced by a slot counter on its row,
-- taken under that row's lock, so it holds across instances. Each row is an
-- hf_job (migrations/0001_init.sql and 0003), decoded by db/jobs.c's
-- JOB_COLUMNS. A job carries the workflow's secret and, while a rotation's
-- grace period lasts (secret_previous_until, POST /v1/workflows/{name}/secret),
-- the secret it replaced: the call is signed with both.
CREATE FUNCTION hf_claim(p_owner text, p_limit integer, p_lease_ms integer)
RETURNS SETOF hf_job
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	cand text[];
	capped record;
	granted integer;
	slot_ids text[] := '{}';
	any_capped boolean;
	n integer;
	token bigint := nextval('hf_claim_seq');  -- one per claim: (run_id, token) is unique
BEGIN
	SELECT array_agg(c.run_id), bool_or(c.capped) INTO cand, any_capped FROM (
		SELECT r.run_id, w.max_concurrency > 0 AS capped
		FROM run r JOIN workflow w ON w.name = r.workflow
		WHERE r.status = 'pending'
		  AND (w.max_concurrency = 0 OR w.inflight < w.max_concurrency)
		ORDER BY r.priority, r.seq
		LIMIT p_limit
		FOR UPDATE OF r SKIP LOCKED) c;

	IF cand IS NOT NULL AND any_capped THEN
		-- Capped workflows: grant at most the free slots, in claim order.
		FOR capped IN
			SELECT r.workflow AS name, array_agg(r.run_id ORDER BY r.priority, r.seq) AS ids
			FROM run r JOIN workflow w ON w.name = r.workflow
			WHERE r.run_id = ANY (cand) AND w.max_concurrency > 0
			GROUP BY r.workflow
		LOOP
			SELECT least(cardinality(capped.ids), greatest(w.max_concurrency - w.inflight, 0))
			INTO granted FROM workflow w WHERE w.name = capped.name FOR UPDATE;
			UPDATE workflow SET inflight = inflight + granted WHERE name = capped.name;
			slot_ids := slot_ids || capped.ids[1:granted];
			cand := array(SELECT x FROM unnest(cand) x
				      WHERE NOT (x = ANY (capped.ids)) OR x = ANY (capped.ids[1:granted]));
		END LOOP;
	END IF;

	IF cand IS NOT NULL THEN
		RETURN QUERY
		UPDATE run r SET status = 'running', attempt = r.attempt + 1, lease_owner = p_owner,
			claim_token = token, claimed_at = now(),
			lease_expires_at = hf_due(p_lease_ms), holds_slot = (r.run_id = ANY (slot_ids)),
			seq = NULL, updated_at = now()
		FROM workflow w
		WHERE r.run_id = ANY (cand) AND w.name = r.workflow
		RETURNING 'step'::text, r.job_id, r.run_id, r.workflow, r.step, r.attempt,
			r.max_attempts, r.generation,
			hf_step_payload(r.run_id, r.generation, r.step, r.payload, r.input), r.headers, r.signal, r.group_id,
			r.group_key, r.claim_token, r.cancel_requested, w.url, w.timeout_ms,
			w.secret, w.backoff_base_ms, w.backoff_max_ms, w.step_output_replay,
			hf_ms(now()),
			CASE WHEN w.step_output_replay THEN (
				SELECT jsonb_build_object('outcome', so.outcome,
							  'age_ms', hf_ms(now()) - hf_ms(so.stored_at))
				FROM step_output so WHERE so.run_id = r.run_id
				  AND so.generation = r.generation AND so.step = r.step
				  AND so.payload_hash = hf_payload_hash(hf_step_payload(r.run_id,
					r.generation, r.step, r.payload, r.input))) END,
			CASE WHEN w.secret_previous_until > now() THEN w.secret_previous END;
		GET DIAGNOSTICS n = ROW_COUNT;
	ELSE
		n := 0;
	END IF;

	IF n < p_limit THEN
		-- A callback has no step, headers, signal or group.
		RETURN QUERY
		UPDATE callback c SET status = 'running', attempt = c.attempt + 1,
			lease_owner = p_owner, claim_token = token,
			claimed_at = now(), lease_expires_at = hf_due(p_lease_ms), seq = NULL,
			updated_at = now()
		FROM (SELECT x.id, x.workflow FROM callback x WHERE x.status = 'pending'
		      ORDER BY x.priority, x.seq LIMIT p_limit - n
		      FOR UPDATE SKIP LOCKED) picked
		LEFT JOIN workflow w ON w.name = picked.workflow
		WHERE c.id = picked.id
		RETURNING 'callback'::text, c.id, c.run_id, c.workflow, NULL::integer, c.attempt,
			c.max_attempts, c.generation, c.body, NULL::jsonb, NULL::jsonb, NULL::text,
			NULL::text, c.claim_token, false, c.url, coalesce(w.timeout_ms, 30000),
			w.secret, coalesce(w.backoff_base_ms, 1000), coalesce(w.backoff_max_ms, 300000),
			false, hf_ms(now()), NULL::jsonb,
			CASE WHEN w.secret_previous_until > now() THEN w.secret_previous END;
	END IF;
END
$$;

-- Moves due scheduled runs and callbacks to pending, at most p_limit of each.
-- A wait that timed out becomes pending with the signal it receives: one that
-- was buffered meanwhile, else {"status": "timeout"}. Returns how many moved.
CREATE FUNCTION hf_promote(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	a integer;
	b integer;
	c integer := 0;
	w record;
	sig jsonb;
	got boolean;
BEGIN
	UPDATE run SET status = 'pending', seq = nextval('hf_seq'), updated_at = now()
	WHERE run_id IN (SELECT run_id FROM run WHERE status = 'scheduled'
			 AND next_at <= now() ORDER BY next_at LIMIT p_limit
			 FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS a = ROW_COUNT;
	FOR w IN SELECT x.run_id, x.wait_key FROM run x WHERE x.status = 'waiting'
		 AND x.next_at <= now() ORDER BY x.next_at LIMIT p_limit
	LOOP
		PERFORM hf_lock_key(w.wait_key);
		PERFORM 1 FROM run x WHERE x.run_id = w.run_id AND x.status = 'waiting'
			AND x.next_at <= now() FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		DELETE FROM signal_buffer WHERE correlation_key = w.wait_key RETURNING payload INTO sig;
		got := FOUND;
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'),
			signal = CASE WHEN got THEN jsonb_build_object('status', 'delivered', 'payload', sig)
				 ELSE '{"status": "timeout"}'::jsonb END,
			wait_key = NULL, updated_at = now()
		WHERE run_id = w.run_id;
		c := c + 1;
	END LOOP;
	UPDATE callback SET status = 'pending', seq = nextval('hf_seq'), updated_at = now()
	WHERE id IN (SELECT id FROM callback WHERE status = 'scheduled'
		     AND next_at <= now() ORDER BY next_at LIMIT p_limit
		     FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS b = ROW_COUNT;
	IF a + b + c > 0 THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	RETURN greatest(a, b, c);
END
$$;

-- The earliest time something becomes due (a scheduled job or an expiring
-- lease), as epoch ms, or NULL when nothing is timed.
CREATE FUNCTION hf_next_due() RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT hf_ms(min(t)) FROM (
		(SELECT next_at AS t FROM run WHERE status IN ('scheduled', 'waiting')
		 ORDER BY next_at LIMIT 1)
		UNION ALL
		(SELECT lease_expires_at FROM run WHERE status IN ('running', 'cancelling')
		 ORDER BY lease_expires_at LIMIT 1)
		UNION ALL
		(SELECT next_at FROM callback WHERE status = 'scheduled' ORDER BY next_at LIMIT 1)
		UNION ALL
		(SELECT lease_expires_at FROM callback WHERE status = 'running'
		 ORDER BY lease_expires_at LIMIT 1)) due
$$;
