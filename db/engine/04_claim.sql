-- Claims: queued jobs leased to a worker, due jobs promoted, and the next due
-- time for the dispatcher's timer.

-- Whether no flow control holds back the lane of workflow w (NULL: a run
-- whose workflow is gone) and concurrency key p_key ('' or NULL: none), for
-- the caller's constrained endpoints p_room: the conditions hf_claim_lanes
-- checks, for hf_claim's common cases, which skip the visit. SQL, inlined.
CREATE FUNCTION hf_lane_free(w workflow, p_key text, p_room jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT NOT coalesce(w.paused, false) AND coalesce(w.max_concurrency, 0) = 0
	   AND coalesce(w.rate_limit, 0) = 0
	   AND NOT (coalesce(w.endpoint_control, false) AND coalesce(p_room ? w.endpoint, false))
	   AND (coalesce(p_key, '') = ''
		OR (coalesce(w.key_concurrency, 0) = 0 AND w.key_mode IS DISTINCT FROM 'cancel_active'))
$$;

-- Claims up to p_limit jobs for p_owner: step jobs of pending runs, then
-- pending callbacks, skipping rows other instances hold. Each row is an
-- hf_job (migrations/0001_init.sql, 0003, 0007, 0008, 0010, 0013), decoded by db/jobs.c's
-- JOB_COLUMNS. A job carries the workflow's secret and, while a rotation's
-- grace period lasts (secret_previous_until, POST /v1/workflows/{name}/secret),
-- the secret it replaced: the call is signed with both.
--
-- Pending runs are taken lane by lane (README "Flow control"): a lane is
-- (priority, workflow, concurrency key), the runs without a key of a workflow
-- forming one lane, FIFO within it. The lowest priority number comes first;
-- within a priority the lanes take turns, starting after p_lane, the lane
-- the caller's previous claim stopped at ({"priority", "workflow", "key"};
-- NULL: from the start), so that one lane's backlog cannot hold back the
-- others: a batch of p_limit visits up to p_limit lanes and shares itself
-- among them. Where the claim stopped comes back as a row of kind 'lane'
-- (workflow, priority, concurrency_key; every other column NULL): with L
-- lanes at the first priority, a lane waits at most about
-- ceil(L / p_limit) claims of one claimer for its turn.
--
-- A lane that may not run now is passed over with one index probe, without
-- reading its runs: a paused workflow, one at its max_concurrency (a slot
-- counter on its row), a key at the workflow's key_concurrency (its runs
-- holding a slot, counted through run_key_slot), a workflow or key whose rate limit allows no call
-- now (the start times of the period's calls in flow_rate; the claimers'
-- timers are told when the window opens), a workflow whose endpoint may
-- start no call now: p_room is {"<endpoint>": calls it may still start}
-- for the caller's constrained endpoints (service/endpoints.c; an endpoint
-- not named is not limited), for the workflows with endpoint_control. The
-- counters are taken under their row's lock, so they hold across instances;
-- a row another transaction holds is passed over this time (never waited
-- for). The runs that take a slot are marked
-- (holds_slot, holds_key_slot) and give it back when their claim ends
-- (hf_release_slot; a key's slot by the mark's clearing: migrations/0012).
-- Two common cases skip the visit, and the cursor stays (no 'lane' row):
-- every pending run is in one lane that no flow control holds back (the
-- visit would give that lane the whole batch, FIFO: the runs are taken so,
-- with one walk of the lane's index entries), or every pending run fits in
-- the claim (at most 32 of them) and none is under flow control (the visit
-- would take them all: they are taken at once). hf_lane_free says what
-- holds a lane back.
--
-- A lease begins at the clock's time when the claim's UPDATE starts (not at
-- now(), the transaction's start: hf_cycle settles before it claims).
CREATE FUNCTION hf_claim(p_owner text, p_limit integer, p_lease_ms integer,
			 p_lane jsonb DEFAULT NULL, p_room jsonb DEFAULT NULL)
RETURNS SETOF hf_job
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
	SET work_mem = '64MB' AS $$
DECLARE
	one_p integer;           -- the lane of the last pending run in
	one_w text;              -- run_claim_lane's order
	one_k text;
	few text[];              -- every pending run, when they are few and free
	cand text[];             -- the runs taken
	slot_ids text[] := '{}'; -- those that take a workflow's slot
	key_ids text[] := '{}';  -- those that take their key's slot
	lane jsonb;              -- where the lane visit stopped
	token bigint := nextval('hf_claim_seq');  -- one per claim: (run_id, token) is unique
	-- When the lease begins: the clock's time, not now(), which is when the
	-- transaction began (hf_cycle settles first and may wait for rows there:
	-- a claim stamped with now() could begin before the run was created).
	leased timestamptz;
	lease interval := make_interval(secs => greatest(p_lease_ms, 0) / 1000.0);
	tracing boolean := hf_tracing();
	n integer := 0;
BEGIN
	-- The common cases first (BENCHMARKS.md, "Issue 13: the idle path" and
	-- "Issue 13: one lane claimed without the visit"). One lane: the last
	-- pending entry in run_claim_lane's order names it (read from the end,
	-- where the live entries are: each claimed run leaves a dead entry before
	-- its lane's live ones until vacuum), and nothing pending sorts before it.
	SELECT r.priority, r.workflow, coalesce(r.concurrency_key, '')
	INTO one_p, one_w, one_k
	FROM run r WHERE r.status = 'pending'
	ORDER BY r.priority DESC, r.workflow DESC, coalesce(r.concurrency_key, '') DESC, r.seq DESC
	LIMIT 1;
	IF NOT FOUND THEN
		cand := '{}';
	-- (The workflow's row as a column of a join, not as a subquery's value:
	-- with a subquery for its argument hf_lane_free is not inlined, and its
	-- body is planned again at every claim.)
	ELSIF (SELECT hf_lane_free(w, one_k, p_room)
	       FROM (SELECT) one LEFT JOIN workflow w ON w.name = one_w)
	      -- A column at a time, each probe ordered as run_claim_lane is, so
	      -- that it ends at the lane's first entry: a row comparison would
	      -- not end the scan there, and would read every pending entry.
	      AND (SELECT 1 FROM run r WHERE r.status = 'pending' AND r.priority < one_p
		   ORDER BY r.priority LIMIT 1) IS NULL
	      AND (SELECT 1 FROM run r WHERE r.status = 'pending' AND r.priority = one_p
		     AND r.workflow < one_w
		   ORDER BY r.priority, r.workflow, coalesce(r.concurrency_key, '') LIMIT 1) IS NULL
	      AND (one_k = '' OR (SELECT 1 FROM run r WHERE r.status = 'pending'
				   AND r.priority = one_p AND r.workflow = one_w
				   AND coalesce(r.concurrency_key, '') < one_k
				 ORDER BY r.priority, r.workflow, coalesce(r.concurrency_key, '')
				 LIMIT 1) IS NULL) THEN
		cand := array(SELECT r.run_id FROM run r
			      WHERE r.status = 'pending' AND r.priority = one_p
				AND r.workflow = one_w AND coalesce(r.concurrency_key, '') = one_k
			      ORDER BY r.seq LIMIT p_limit FOR UPDATE SKIP LOCKED);
	ELSE
		-- No more runs pending than this claim takes (at most 32: a backlog
		-- costs this test 33 index entries) and none under flow control:
		-- visiting the lanes would take every one of them, so they are
		-- taken at once.
		SELECT coalesce(array_agg(f.run_id), '{}') INTO few
		FROM (SELECT r.run_id, r.concurrency_key, w
		      FROM run r LEFT JOIN workflow w ON w.name = r.workflow
		      WHERE r.status = 'pending' LIMIT least(p_limit, 32) + 1) f
		HAVING count(*) <= least(p_limit, 32)
		   AND coalesce(bool_and(hf_lane_free(f.w, f.concurrency_key, p_room)), true);
		IF few IS NOT NULL THEN
			cand := array(SELECT r.run_id FROM run r WHERE r.run_id = ANY (few)
				      AND r.status = 'pending' FOR UPDATE SKIP LOCKED);
		ELSE
			SELECT l.cand, l.slot_ids, l.key_ids, l.lane INTO cand, slot_ids, key_ids, lane
			FROM hf_claim_lanes(p_limit, p_lane, p_room) l;
		END IF;
	END IF;

	IF cardinality(cand) > 0 THEN
		leased := clock_timestamp();
		RETURN QUERY
		UPDATE run r SET status = 'running', attempt = r.attempt + 1, lease_owner = p_owner,
			claim_token = token, claimed_at = leased,
			lease_expires_at = leased + lease,
			-- (every run taken takes a slot, or none: the common cases,
			-- without a search of the array for each row)
			holds_slot = CASE cardinality(slot_ids) WHEN 0 THEN false
				     WHEN cardinality(cand) THEN true ELSE r.run_id = ANY (slot_ids) END,
			holds_key_slot = CASE cardinality(key_ids) WHEN 0 THEN false
					 WHEN cardinality(cand) THEN true ELSE r.run_id = ANY (key_ids) END,
			seq = NULL, updated_at = now()
		FROM workflow w
		WHERE r.run_id = ANY (cand) AND w.name = r.workflow
		RETURNING 'step'::text, r.job_id, r.run_id, r.workflow, r.step, r.attempt,
			r.max_attempts, r.generation,
			-- the step's payload: hf_step_payload's rule (01_helpers.sql),
			-- inline so that it is planned with this statement, as json text
			CASE WHEN r.payload IS NOT NULL THEN r.payload::json
			     WHEN r.step = 0 THEN r.input::json
			     ELSE (SELECT a.output FROM step_attempt a
				   WHERE a.run_id = r.run_id AND a.generation = r.generation
				     AND a.step = r.step - 1 AND a.result = 'continue'
				   ORDER BY a.attempt DESC LIMIT 1) END,
			r.headers, r.signal, r.group_id,
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
			CASE WHEN w.secret_previous_until > now() THEN w.secret_previous END,
			r.concurrency_key, r.priority, CASE WHEN w.endpoint_control THEN w.endpoint END,
			r.last_heartbeat, w.max_pending_ms, r.children,
			r.trace_id::text, r.tracestate,
			-- a session that exports spans hears when the wait before the
			-- step began and when the step came due
			CASE WHEN tracing AND r.attempt = 1 THEN hf_ms(r.waited_since) END,
			CASE WHEN tracing AND r.attempt = 1 AND r.waited_since IS NOT NULL
			     THEN hf_ms(r.next_at) END;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF lane IS NOT NULL THEN
		RETURN QUERY SELECT j.* FROM jsonb_populate_record(NULL::hf_job, lane) j;
	END IF;

	-- (The probe first: starting the UPDATE below costs more than it does.)
	IF n < p_limit AND EXISTS (SELECT 1 FROM callback x WHERE x.status = 'pending') THEN
		-- A callback has no step, headers, signal or group; it carries its
		-- run's trace (none when the run is gone).
		leased := clock_timestamp();
		RETURN QUERY
		UPDATE callback c SET status = 'running', attempt = c.attempt + 1,
			lease_owner = p_owner, claim_token = token,
			claimed_at = leased, lease_expires_at = leased + lease, seq = NULL,
			updated_at = now()
		FROM (SELECT x.id, x.workflow, x.run_id FROM callback x WHERE x.status = 'pending'
		      ORDER BY x.priority, x.seq LIMIT p_limit - n
		      FOR UPDATE SKIP LOCKED) picked
		LEFT JOIN workflow w ON w.name = picked.workflow
		LEFT JOIN run rr ON rr.run_id = picked.run_id
		WHERE c.id = picked.id
		RETURNING 'callback'::text, c.id, c.run_id, c.workflow, NULL::integer, c.attempt,
			c.max_attempts, c.generation, c.body::json, NULL::jsonb, NULL::jsonb, NULL::text,
			NULL::text, c.claim_token, false, c.url, coalesce(w.timeout_ms, 30000),
			w.secret, coalesce(w.backoff_base_ms, 1000), coalesce(w.backoff_max_ms, 300000),
			false, hf_ms(now()), NULL::jsonb,
			CASE WHEN w.secret_previous_until > now() THEN w.secret_previous END,
			NULL::text, NULL::integer, NULL::text, NULL::jsonb, NULL::bigint, NULL::jsonb,
			rr.trace_id::text, rr.tracestate, NULL::bigint, NULL::bigint;
	END IF;
END
$$;

-- The lane visit of hf_claim (its header says how it goes): which pending
-- runs the claim may take (cand, locked), those of them that take a
-- workflow's slot (slot_ids) or their key's (key_ids), the flow-control
-- counters taken for them, and where the next claim goes on (lane: the
-- hf_job of kind 'lane' as JSON; NULL when no lane was visited).
CREATE FUNCTION hf_claim_lanes(p_limit integer, p_lane jsonb, p_room jsonb,
			       OUT cand text[], OUT slot_ids text[], OUT key_ids text[],
			       OUT lane jsonb)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
DECLARE
	lvl integer;             -- the priority whose lanes are being visited
	cw text;                 -- the last lane visited in it (workflow, key)
	ck text;
	lap_w text;              -- the lap of this level ends after this lane
	lap_k text;
	wrapped boolean;
	entering boolean := true;  -- the visit enters priority lvl
	skip_wf boolean := false;
	probes integer := 0;
	max_probes integer := 4 * p_limit + 16;  -- the most lanes one visit sees
	lw text;                 -- the lane being visited
	lk text;
	got_lane boolean;
	buf_w text[] := '{}';    -- the next lanes, fetched a batch at a time
	buf_k text[] := '{}';
	buf_kc integer[];        -- their key limit (0: none, -1: key locked elsewhere)
	buf_free integer[];      -- their key's free slots (NULL: no key limit)
	bi integer := 1;
	bsize integer;
	walked bigint;           -- pending entries the walk read
	add_k text[];            -- lanes visited at once after lane lk
	add_f integer[];         -- (their keys and free slots)
	last_n bigint;           -- the last of them in the buffer
	sw text;                 -- where the next batch of lanes starts
	sk text;
	wf workflow;
	wf_free integer;
	key_free integer;
	lane_p integer[] := '{}';
	lane_w text[] := '{}';
	lane_k text[] := '{}';
	lane_room integer[] := '{}';  -- the key's free slots, NULL: no key cap
	lane_rate integer[] := '{}';  -- the lane's rate bucket in rates, NULL: none
	rates text[] := '{}';    -- rate buckets seen ('workflow/key'), and the
	rates_free integer[] := '{}';  -- calls each may still start
	rates_wf text[] := '{}';
	rates_key text[] := '{}';
	rates_ms integer[] := '{}';
	bk text;
	r_i integer;
	starts timestamptz[];
	caps text[] := '{}';     -- capped workflows seen, and their free slots
	caps_free integer[] := '{}';
	lane_ep integer[] := '{}';  -- the lane's endpoint in eps, NULL: not limited
	eps text[] := '{}';      -- constrained endpoints seen, and their room
	eps_free integer[] := '{}';
	e_i integer;
	i integer;
	q integer;
	lane_q integer[];        -- what a lane is offered in this pass
	lane_n integer[];        -- what it took in this pass
	lane_got integer[];      -- what it took in all
	lane_full boolean[];     -- it took all it was offered: it may have more
	took_i integer[];
	took_id text[];
	pass integer;
	left_ integer;
	budget integer;
	t_k integer;
	n integer := 0;
	served integer;          -- the last lane that got runs
	unserved boolean := false;  -- a lane that may run got none (slots ran out)
	vis_p integer;           -- the last lane visited
	vis_w text;
	vis_k text;
BEGIN
	cand := '{}';
	slot_ids := '{}';
	key_ids := '{}';
	SELECT r.priority INTO lvl FROM run r WHERE r.status = 'pending'
	ORDER BY r.priority LIMIT 1;

	-- Visit the lanes in turn from the cursor until p_limit lanes may run or
	-- every lane was seen, visiting at most 4 x p_limit + 16 lanes.
	WHILE lvl IS NOT NULL AND cardinality(lane_p) < p_limit AND probes < max_probes LOOP
		IF entering THEN
			-- A priority's lap goes on after the cursor when the cursor is
			-- at that priority, wraps to the priority's start ('' sorts
			-- before every workflow name) and ends with the cursor's lane;
			-- else it goes from the start to the end.
			entering := false;
			cw := '';
			ck := '';
			lap_w := NULL;
			lap_k := NULL;
			wrapped := true;
			buf_w := '{}';
			IF (p_lane->>'priority')::integer = lvl THEN
				cw := p_lane->>'workflow';
				ck := p_lane->>'key';
				lap_w := cw;
				lap_k := ck;
				wrapped := false;
			END IF;
		END IF;
		IF skip_wf THEN  -- past the rest of this workflow's buffered lanes
			WHILE bi <= cardinality(buf_w) AND buf_w[bi] = cw LOOP
				bi := bi + 1;
			END LOOP;
		END IF;
		IF bi > cardinality(buf_w) THEN
			-- The next lanes from the position, one index probe each in one
			-- statement (a skip scan of run_claim_lane), then their key
			-- limits and counts in two more.
			bsize := least(p_limit, 64) + 1;  -- the lane it starts at too
			-- From the next workflow's first lane, or on from the lane
			-- just visited (the statement starts at it: it is left out).
			sw := cw;
			sk := ck;
			IF skip_wf THEN
				SELECT r.workflow INTO sw FROM run r
				WHERE r.status = 'pending' AND r.priority = lvl AND r.workflow > cw
				ORDER BY r.workflow LIMIT 1;
				sk := '';
			END IF;
			-- Most lanes hold a run or two: one walk of the next 2 x bsize
			-- entries finds their lanes. When it ends inside a deep lane,
			-- short of bsize lanes, the rest are found from there by a skip
			-- scan of run_claim_lane (an index probe per lane).
			SELECT coalesce(array_agg(l.w ORDER BY l.w, l.k), '{}'),
			       coalesce(array_agg(l.k ORDER BY l.w, l.k), '{}'), coalesce(sum(l.c), 0)
			INTO buf_w, buf_k, walked
			FROM (SELECT e.w, e.k, count(*) AS c FROM (
				SELECT r.workflow AS w, coalesce(r.concurrency_key, '') AS k FROM run r
				WHERE r.status = 'pending' AND r.priority = lvl
				  AND (r.workflow, coalesce(r.concurrency_key, '')) >= (sw, sk)
				ORDER BY r.workflow, coalesce(r.concurrency_key, ''), r.seq
				LIMIT 2 * bsize) e GROUP BY e.w, e.k) l;
			IF walked = 2 * bsize AND cardinality(buf_w) < bsize THEN
				WITH RECURSIVE s(w, k, n) AS (
					SELECT buf_w[cardinality(buf_w)], buf_k[cardinality(buf_w)],
					       cardinality(buf_w)
					UNION ALL
					SELECT x.w, x.k, s.n + 1 FROM s CROSS JOIN LATERAL (
						SELECT r.workflow AS w, coalesce(r.concurrency_key, '') AS k
						FROM run r
						WHERE r.status = 'pending' AND r.priority = lvl
						  AND (r.workflow, coalesce(r.concurrency_key, '')) > (s.w, s.k)
						ORDER BY r.workflow, coalesce(r.concurrency_key, '') LIMIT 1) x
					WHERE s.n < bsize)
				SELECT buf_w || coalesce(array_agg(s.w ORDER BY s.n) FILTER (WHERE s.n > cardinality(buf_w)), '{}'),
				       buf_k || coalesce(array_agg(s.k ORDER BY s.n) FILTER (WHERE s.n > cardinality(buf_w)), '{}')
				INTO buf_w, buf_k FROM s;
			END IF;
			buf_w := buf_w[1:bsize];
			buf_k := buf_k[1:bsize];
			bi := CASE WHEN NOT skip_wf AND buf_w[1] = cw AND buf_k[1] = ck THEN 2 ELSE 1 END;
			-- The key limit of each lane, and the key's advisory lock where
			-- there is one (a lane whose key another transaction holds gets
			-- -1: nothing this time). cancel_active starts a key's new run
			-- once the cancelled one's call has ended: one call of a key at
			-- a time unless the workflow says more.
			SELECT coalesce(array_agg(CASE
				WHEN x.kc > 0 AND NOT pg_try_advisory_xact_lock(
					hashtextextended(x.w || '/' || x.k, 724391)) THEN -1
				ELSE x.kc END ORDER BY x.n), '{}') INTO buf_kc
			FROM (SELECT t.n, t.w, t.k,
				     CASE WHEN t.k = '' THEN 0
					  WHEN w.key_concurrency > 0 THEN w.key_concurrency
					  WHEN w.key_mode = 'cancel_active' THEN 1 ELSE 0 END AS kc
			      FROM unnest(buf_w, buf_k) WITH ORDINALITY AS t(w, k, n)
			      LEFT JOIN workflow w ON w.name = t.w) x;
			-- Then, locks held, the counts: the key's runs that hold a
			-- slot (run_key_slot, at most the limit read). Only a claim
			-- holding the key's lock takes a slot, so none is taken
			-- meanwhile; a slot given back meanwhile (a settlement) is
			-- seen by the next claim.
			buf_free := array_fill(NULL::integer, ARRAY[cardinality(buf_w)]);
			IF EXISTS (SELECT 1 FROM unnest(buf_kc) c WHERE c <> 0) THEN
				SELECT array_agg(CASE WHEN buf_kc[t.n] < 0 THEN 0
						      WHEN buf_kc[t.n] > 0
						      THEN greatest(buf_kc[t.n] - (SELECT count(*) FROM (
								SELECT 1 FROM run f WHERE f.holds_key_slot
								  AND f.workflow = t.w AND f.concurrency_key = t.k
								LIMIT buf_kc[t.n]) h)::integer, 0) END
						 ORDER BY t.n) INTO buf_free
				FROM unnest(buf_w, buf_k) WITH ORDINALITY AS t(w, k, n);
			END IF;
		END IF;
		skip_wf := false;
		got_lane := bi <= cardinality(buf_w);
		IF got_lane THEN
			probes := probes + 1;
			lw := buf_w[bi];
			lk := buf_k[bi];
			key_free := buf_free[bi];
			bi := bi + 1;
		END IF;
		IF NOT got_lane AND NOT wrapped THEN
			wrapped := true;
			cw := '';
			ck := '';
			buf_w := '{}';
			CONTINUE;
		END IF;
		IF NOT got_lane OR (lap_w IS NOT NULL AND wrapped AND (lw, lk) > (lap_w, lap_k)) THEN
			-- This priority's lap is done: the next priority.
			SELECT r.priority INTO lvl FROM run r WHERE r.status = 'pending'
			  AND r.priority > lvl ORDER BY r.priority LIMIT 1;
			entering := true;
			CONTINUE;
		END IF;
		cw := lw;
		ck := lk;
		vis_p := lvl;
		vis_w := lw;
		vis_k := lk;

		IF wf.name IS DISTINCT FROM lw THEN
			SELECT * INTO wf FROM workflow x WHERE x.name = lw;
			IF wf.max_concurrency > 0 AND NOT (lw = ANY (caps)) THEN
				-- The slot counter under the row's lock (the latest
				-- committed value); locked elsewhere: pass over it.
				SELECT greatest(wf.max_concurrency - x.inflight, 0) INTO wf_free
				FROM workflow x WHERE x.name = lw FOR NO KEY UPDATE SKIP LOCKED;
				caps := caps || lw;
				caps_free := caps_free || coalesce(wf_free, 0);
			END IF;
		END IF;
		e_i := NULL;
		IF wf.endpoint_control AND p_room ? wf.endpoint THEN
			e_i := array_position(eps, wf.endpoint);
			IF e_i IS NULL THEN
				eps := eps || wf.endpoint;
				eps_free := eps_free || greatest((p_room->>wf.endpoint)::integer, 0);
				e_i := cardinality(eps);
			END IF;
		END IF;
		-- (What holds a lane back is hf_lane_free's too, for hf_claim's
		-- common cases: a condition added here goes there as well.)
		IF wf.paused OR caps_free[array_position(caps, lw)] = 0 OR eps_free[e_i] = 0 THEN
			skip_wf := true;
			CONTINUE;
		END IF;

		CONTINUE WHEN key_free = 0;  -- its key is at its limit (or locked)

		r_i := NULL;
		IF wf.rate_limit > 0 THEN
			-- The calls the rate limit still allows in the period, for the
			-- workflow or the key: the window's start times under the
			-- bucket's lock (an advisory lock guards the first insert).
			bk := CASE WHEN wf.rate_per_key THEN lk ELSE '' END;
			r_i := array_position(rates, lw || '/' || bk);
			IF r_i IS NULL THEN
				starts := NULL;
				IF pg_try_advisory_xact_lock(hashtextextended('rate/' || lw || '/' || bk, 724391))
				THEN
					SELECT array(SELECT t FROM unnest(f.starts) t
						     WHERE t > clock_timestamp() - make_interval(secs => wf.rate_period_ms / 1000.0)
						     ORDER BY t) INTO starts
					FROM flow_rate f WHERE f.workflow = lw AND f.key = bk FOR UPDATE SKIP LOCKED;
					IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM flow_rate f
								     WHERE f.workflow = lw AND f.key = bk) THEN
						starts := '{}';
					END IF;
				END IF;
				rates := rates || (lw || '/' || bk);
				rates_wf := rates_wf || lw;
				rates_key := rates_key || bk;
				rates_ms := rates_ms || wf.rate_period_ms;
				rates_free := rates_free || CASE WHEN starts IS NULL THEN 0
					ELSE greatest(wf.rate_limit - cardinality(starts), 0) END;
				r_i := cardinality(rates);
				IF cardinality(starts) >= wf.rate_limit THEN
					-- The window opens when its oldest call leaves it:
					-- the dispatchers' timers come back then.
					PERFORM pg_notify('hookflow_sched', hf_ms(starts[cardinality(starts)
						- wf.rate_limit + 1] + make_interval(secs => wf.rate_period_ms / 1000.0))::text);
				END IF;
			END IF;
			IF rates_free[r_i] = 0 THEN
				skip_wf := NOT wf.rate_per_key;
				CONTINUE;
			END IF;
		END IF;
		add_k := '{}';
		add_f := '{}';
		IF r_i IS NULL AND e_i IS NULL AND array_position(caps, lw) IS NULL THEN
			-- Nothing but a key limit holds this workflow's lanes back: the
			-- buffered lanes after this one of the same workflow are visited
			-- at once, as the loop would visit them one by one (within the
			-- lap and the visit's bounds; a key at its limit is visited and
			-- passed over; the visit ends at the lane that fills it).
			SELECT coalesce(array_agg(x.k ORDER BY x.n) FILTER (WHERE x.f IS DISTINCT FROM 0), '{}'),
			       coalesce(array_agg(x.f ORDER BY x.n) FILTER (WHERE x.f IS DISTINCT FROM 0), '{}'),
			       max(x.n)
			INTO add_k, add_f, last_n
			FROM (SELECT t.n, t.k, t.f,
				     count(*) FILTER (WHERE t.f IS DISTINCT FROM 0)
					OVER (ORDER BY t.n ROWS UNBOUNDED PRECEDING)
				     - (t.f IS DISTINCT FROM 0)::integer AS before
			      FROM unnest(buf_w, buf_k, buf_free) WITH ORDINALITY AS t(w, k, f, n)
			      WHERE t.n >= bi AND t.n < bi + max_probes - probes AND t.w = lw
				AND NOT (lap_w IS NOT NULL AND wrapped AND (t.w, t.k) > (lap_w, lap_k))) x
			WHERE x.before < p_limit - cardinality(lane_p) - 1;
			IF last_n IS NOT NULL THEN
				probes := probes + last_n - bi + 1;
				bi := last_n + 1;
				cw := buf_w[last_n];
				ck := buf_k[last_n];
				vis_k := ck;
			END IF;
		END IF;
		lane_p := lane_p || array_fill(lvl, ARRAY[1 + cardinality(add_k)]);
		lane_w := lane_w || array_fill(lw, ARRAY[1 + cardinality(add_k)]);
		lane_k := lane_k || lk || add_k;
		lane_room := lane_room || key_free || add_f;
		lane_rate := lane_rate || array_fill(r_i, ARRAY[1 + cardinality(add_k)]);
		lane_ep := lane_ep || array_fill(e_i, ARRAY[1 + cardinality(add_k)]);
	END LOOP;

	-- Share the batch among the lanes in visiting order, within their key's
	-- free slots and the shared room (a workflow's slots, a rate window, an
	-- endpoint: reserved here, the unused part given back below), take
	-- every lane's runs in one statement, then offer what is left to the
	-- lanes that took all they were offered.
	lane_got := array_fill(0, ARRAY[cardinality(lane_p)]);
	lane_full := array_fill(true, ARRAY[cardinality(lane_p)]);
	FOR pass IN 1 .. 2 LOOP
		left_ := p_limit - cardinality(cand);
		n := (SELECT count(*) FROM unnest(lane_full) x WHERE x);
		EXIT WHEN left_ <= 0 OR n = 0;
		budget := left_;
		lane_q := array_fill(0, ARRAY[cardinality(lane_p)]);
		FOR i IN 1 .. cardinality(lane_p) LOOP
			CONTINUE WHEN NOT lane_full[i];
			q := least(ceil(left_::numeric / n), budget, lane_room[i] - lane_got[i],
				   rates_free[lane_rate[i]], eps_free[lane_ep[i]],
				   caps_free[array_position(caps, lane_w[i])]);
			IF q <= 0 THEN
				-- passed over for want of shared room: the next claim
				-- starts from it
				unserved := unserved OR pass = 1;
				lane_full[i] := false;
				CONTINUE;
			END IF;
			lane_q[i] := q;
			budget := budget - q;
			IF array_position(caps, lane_w[i]) IS NOT NULL THEN
				caps_free[array_position(caps, lane_w[i])] :=
					caps_free[array_position(caps, lane_w[i])] - q;
			END IF;
			IF lane_rate[i] IS NOT NULL THEN
				rates_free[lane_rate[i]] := rates_free[lane_rate[i]] - q;
			END IF;
			IF lane_ep[i] IS NOT NULL THEN
				eps_free[lane_ep[i]] := eps_free[lane_ep[i]] - q;
			END IF;
		END LOOP;
		SELECT coalesce(array_agg(x.i), '{}'), coalesce(array_agg(x.run_id), '{}')
		INTO took_i, took_id
		FROM generate_subscripts(lane_p, 1) AS t(i) CROSS JOIN LATERAL (
			SELECT t.i, r.run_id FROM run r
			WHERE r.status = 'pending' AND r.priority = lane_p[t.i]
			  AND r.workflow = lane_w[t.i] AND coalesce(r.concurrency_key, '') = lane_k[t.i]
			  AND r.run_id <> ALL (cand)  -- a row this claim holds is not skipped
			ORDER BY r.seq LIMIT lane_q[t.i] FOR UPDATE SKIP LOCKED) x
		WHERE lane_q[t.i] > 0;
		cand := cand || took_id;
		lane_n := array_fill(0, ARRAY[cardinality(lane_p)]);
		FOR t_k IN 1 .. cardinality(took_i) LOOP
			i := took_i[t_k];
			lane_n[i] := lane_n[i] + 1;
			IF array_position(caps, lane_w[i]) IS NOT NULL THEN
				slot_ids := slot_ids || took_id[t_k];
			END IF;
			IF lane_room[i] IS NOT NULL THEN
				key_ids := key_ids || took_id[t_k];
			END IF;
		END LOOP;
		FOR i IN 1 .. cardinality(lane_p) LOOP
			CONTINUE WHEN lane_q[i] = 0;
			q := lane_n[i];
			IF q > 0 THEN
				served := i;
			END IF;
			IF array_position(caps, lane_w[i]) IS NOT NULL THEN
				caps_free[array_position(caps, lane_w[i])] :=
					caps_free[array_position(caps, lane_w[i])] + lane_q[i] - q;
			END IF;
			IF lane_rate[i] IS NOT NULL THEN
				rates_free[lane_rate[i]] := rates_free[lane_rate[i]] + lane_q[i] - q;
			END IF;
			IF lane_ep[i] IS NOT NULL THEN
				eps_free[lane_ep[i]] := eps_free[lane_ep[i]] + lane_q[i] - q;
			END IF;
			lane_got[i] := lane_got[i] + q;
			lane_full[i] := q = lane_q[i];
		END LOOP;
	END LOOP;

	-- The counters, for what was taken: a capped workflow's slots, the rate
	-- windows (a key's slots are its runs marked holds_key_slot below).
	FOR i IN 1 .. cardinality(caps) LOOP
		q := 0;
		FOR t_k IN 1 .. cardinality(lane_p) LOOP
			IF lane_w[t_k] = caps[i] THEN
				q := q + lane_got[t_k];
			END IF;
		END LOOP;
		IF q > 0 THEN
			UPDATE workflow SET inflight = inflight + q WHERE name = caps[i];
		END IF;
	END LOOP;
	FOR r_i IN 1 .. cardinality(rates) LOOP
		q := 0;
		FOR t_k IN 1 .. cardinality(lane_p) LOOP
			IF lane_rate[t_k] = r_i THEN
				q := q + lane_got[t_k];
			END IF;
		END LOOP;
		CONTINUE WHEN q = 0;
		INSERT INTO flow_rate AS f (workflow, key, starts, expires_at)
		VALUES (rates_wf[r_i], rates_key[r_i], array_fill(clock_timestamp(), ARRAY[q]),
			clock_timestamp() + make_interval(secs => rates_ms[r_i] / 1000.0))
		ON CONFLICT (workflow, key) DO UPDATE SET
			starts = array(SELECT t FROM unnest(f.starts) t
				       WHERE t > clock_timestamp() - make_interval(secs => rates_ms[r_i] / 1000.0)
				       ORDER BY t) || EXCLUDED.starts,
			expires_at = EXCLUDED.expires_at;
	END LOOP;

	-- The next claim goes on after the last lane served when a lane that
	-- may run got nothing, else after the last lane visited (those visited
	-- after the last served could not run).
	IF unserved AND served IS NOT NULL THEN
		lane := jsonb_build_object('kind', 'lane', 'workflow', lane_w[served],
					  'priority', lane_p[served], 'concurrency_key', lane_k[served]);
	ELSIF NOT unserved AND vis_w IS NOT NULL THEN
		lane := jsonb_build_object('kind', 'lane', 'workflow', vis_w, 'priority', vis_p,
					  'concurrency_key', vis_k);
	END IF;
END
$$;


-- Moves due scheduled runs and callbacks to pending, at most p_limit of each.
-- A wait that timed out becomes pending with the signal it receives: one that
-- was buffered meanwhile, else {"status": "timeout"}; or, waiting for
-- children, with their states. Returns how many moved.
CREATE FUNCTION hf_promote(p_limit integer) RETURNS integer
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	a integer;
	b integer;
	c integer := 0;
	w record;
	sig jsonb;
	k text;
BEGIN
	UPDATE run SET status = 'pending', seq = nextval('hf_seq'), updated_at = now()
	WHERE run_id IN (SELECT run_id FROM run WHERE status = 'scheduled'
			 AND next_at <= now() ORDER BY next_at LIMIT p_limit
			 FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS a = ROW_COUNT;
	FOR w IN SELECT x.run_id, x.generation, x.wait_children AS wc,
			hf_wait_keys(to_jsonb(x.wait_keys), x.wait_key) AS keys
		 FROM run x WHERE x.status = 'waiting'
		 AND x.next_at <= now() ORDER BY x.next_at LIMIT p_limit
	LOOP
		-- A wait for children that timed out: the next step hears of
		-- those not ended as 'timeout'.
		IF w.wc IS NOT NULL THEN
			UPDATE run SET status = 'pending', seq = nextval('hf_seq'),
				children = hf_children_json(w.run_id, w.generation,
							    (w.wc->>'step')::integer, true),
				wait_children = NULL, updated_at = now()
			WHERE run_id = (SELECT x.run_id FROM run x WHERE x.run_id = w.run_id
					AND x.status = 'waiting' AND x.next_at <= now()
					FOR UPDATE SKIP LOCKED);
			c := c + 1;
			CONTINUE;
		END IF;
		FOREACH k IN ARRAY w.keys LOOP
			PERFORM hf_lock_key(k);
		END LOOP;
		PERFORM 1 FROM run x WHERE x.run_id = w.run_id AND x.status = 'waiting'
			AND x.next_at <= now() FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		k := NULL;
		SELECT b.key, b.payload INTO k, sig FROM hf_take_buffered(w.keys) b;
		DELETE FROM signal_wait sw WHERE sw.run_id = w.run_id;
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'),
			signal = CASE WHEN k IS NOT NULL THEN hf_delivered(k, cardinality(w.keys), sig)
				 ELSE '{"status": "timeout"}'::jsonb END,
			wait_key = NULL, wait_keys = NULL, updated_at = now()
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

-- The earliest time something becomes due (a scheduled job, an expiring
-- lease, a schedule's fire time: on the schedules' clock, p_offset_ms ahead
-- of the database's), as epoch ms, or NULL when nothing is timed.
CREATE FUNCTION hf_next_due(p_offset_ms bigint DEFAULT 0) RETURNS bigint
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT hf_ms(min(t)) FROM (
		(SELECT next_fire_at - make_interval(secs => p_offset_ms / 1000.0) AS t FROM schedule
		 WHERE NOT paused ORDER BY next_fire_at LIMIT 1)
		UNION ALL
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
