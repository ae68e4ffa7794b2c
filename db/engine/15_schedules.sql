-- Schedules (migrations/0009, README "Schedules"). Fire times are computed in
-- C (base/cron.c, base/tz.c: cron in IANA zones); the engine starts the runs
-- and keeps each schedule's state, one transaction per pass.

-- The run id of a schedule's fire time: "<id>-<YYYYMMDDTHHMMSSZ>" (UTC),
-- the same for every instance that fires it.
CREATE FUNCTION hf_fire_run_id(p_id text, p_fire timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_id || '-' || to_char(p_fire AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MISS"Z"')
$$;

-- A schedule as the API shows it, but for next_fire_times (computed in C):
-- its settings with their defaults, state, counts and last ten runs.
CREATE FUNCTION hf_schedule_json(s schedule) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'id', s.id, 'workflow', s.workflow, 'cron', s.cron, 'every_ms', s.every_ms,
		'timezone', s.timezone, 'input', s.input, 'headers', s.headers,
		'priority', s.priority, 'max_attempts', s.max_attempts,
		'concurrency_key', s.concurrency_key, 'overlap', s.overlap,
		'catchup_window_ms', s.catchup_window_ms, 'jitter_ms', s.jitter_ms,
		'start_at', hf_ts(s.start_at), 'end_at', hf_ts(s.end_at), 'paused', s.paused,
		'note', s.note, 'fired', s.fired, 'skipped', s.skipped, 'missed', s.missed,
		'next_fire_time', hf_ts(s.next_fire_at),
		'buffered', jsonb_array_length(s.buffered),
		'recent_runs', (SELECT coalesce(jsonb_agg(jsonb_build_object(
				'run_id', r.run_id, 'fire_time', hf_ts(r.fire_time),
				'status', r.status) ORDER BY r.created_at DESC, r.fire_time DESC,
				r.run_id DESC), '[]')
			FROM (SELECT x.run_id, x.fire_time, x.status, x.created_at FROM run x
			      WHERE x.schedule_id = s.id
			      ORDER BY x.created_at DESC, x.fire_time DESC, x.run_id DESC LIMIT 10) r),
		'created_at', hf_ts(s.created_at), 'updated_at', hf_ts(s.updated_at))
$$;

-- Creates or replaces schedule p_id from p_def (the validated body, keys as
-- in the API) with its first fire time p_next (NULL: none). A replaced
-- schedule keeps its counts, runs and buffered fires. Returns 'created',
-- 'replaced' or 'workflow_not_found', and the schedule.
CREATE FUNCTION hf_schedule_put(p_id text, p_def jsonb, p_next timestamptz)
RETURNS TABLE (outcome text, schedule jsonb)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	s schedule;
	fresh boolean;
BEGIN
	PERFORM 1 FROM workflow WHERE name = p_def->>'workflow' FOR KEY SHARE;
	IF NOT FOUND THEN
		outcome := 'workflow_not_found';
		RETURN NEXT;
		RETURN;
	END IF;
	INSERT INTO schedule AS x (id, workflow, cron, every_ms, timezone, input, headers,
		priority, max_attempts, concurrency_key, overlap, catchup_window_ms, jitter_ms,
		start_at, end_at, paused, note, next_fire_at)
	SELECT p_id, d.workflow, d.cron, d.every_ms, coalesce(d.timezone, 'UTC'), d.input,
	       coalesce(d.headers, '{}'), d.priority, d.max_attempts, d.concurrency_key,
	       coalesce(d.overlap, 'skip'), coalesce(d.catchup_window_ms, 60000),
	       coalesce(d.jitter_ms, 0), d.start_at, d.end_at, coalesce(d.paused, false), d.note,
	       p_next
	FROM jsonb_to_record(p_def) AS d(workflow text, cron text, every_ms bigint, timezone text,
		input jsonb, headers jsonb, priority integer, max_attempts integer,
		concurrency_key text, overlap text, catchup_window_ms bigint, jitter_ms bigint,
		start_at timestamptz, end_at timestamptz, paused boolean, note text)
	ON CONFLICT (id) DO UPDATE SET workflow = EXCLUDED.workflow, cron = EXCLUDED.cron,
		every_ms = EXCLUDED.every_ms, timezone = EXCLUDED.timezone, input = EXCLUDED.input,
		headers = EXCLUDED.headers, priority = EXCLUDED.priority,
		max_attempts = EXCLUDED.max_attempts, concurrency_key = EXCLUDED.concurrency_key,
		overlap = EXCLUDED.overlap, catchup_window_ms = EXCLUDED.catchup_window_ms,
		jitter_ms = EXCLUDED.jitter_ms, start_at = EXCLUDED.start_at,
		end_at = EXCLUDED.end_at, paused = EXCLUDED.paused, note = EXCLUDED.note,
		next_fire_at = EXCLUDED.next_fire_at, updated_at = now()
	RETURNING (xmax = 0) INTO fresh;
	SELECT * INTO s FROM schedule WHERE id = p_id;
	IF NOT s.paused THEN
		PERFORM pg_notify('hookflow_sched', hf_ms(s.next_fire_at)::text)
		WHERE s.next_fire_at IS NOT NULL;
	END IF;
	outcome := CASE WHEN fresh THEN 'created' ELSE 'replaced' END;
	schedule := hf_schedule_json(s);
	RETURN NEXT;
END
$$;

-- The active run of schedule p_id, if any.
CREATE FUNCTION hf_schedule_active(p_id text) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT r.run_id FROM run r WHERE r.schedule_id = p_id
	  AND r.status NOT IN ('succeeded', 'failed', 'cancelled')
	ORDER BY r.created_at LIMIT 1
$$;

-- Starts run p_run_id of schedule s for fire time p_fire after p_delay_ms.
-- Returns true when it was created (false: it existed already).
CREATE FUNCTION hf_schedule_start(s schedule, p_run_id text, p_fire timestamptz,
				  p_delay_ms bigint)
RETURNS boolean
LANGUAGE sql AS $$
	SELECT hf_submit(p_run_id, s.workflow, coalesce(s.input, 'null'),
			 sha256(convert_to(coalesce(s.input, 'null')::text, 'UTF8')), s.headers,
			 s.priority, s.max_attempts, hf_due(p_delay_ms), NULL, NULL, NULL, NULL,
			 s.concurrency_key, NULL,
			 jsonb_build_object('id', s.id, 'fire_time', p_fire)) = 'created'
$$;

-- One fire of schedule s (locked by the caller): run p_run_id for fire
-- time p_fire (NULL for a trigger), under overlap policy p_overlap when
-- the schedule's previous run is still active. Returns 'started',
-- 'existed' (its run exists already, or was refused), 'skipped' or
-- 'buffered'; the schedule's counts are the caller's.
CREATE FUNCTION hf_schedule_fire_one(s schedule, p_run_id text, p_fire timestamptz,
				     p_delay_ms bigint, p_overlap text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	active text := hf_schedule_active(s.id);
BEGIN
	IF active IS NOT NULL AND p_overlap = 'cancel_other' THEN
		PERFORM hf_cancel(active, format('cancelled by schedule %s firing again', s.id));
		active := hf_schedule_active(s.id);
	END IF;
	IF active IS NULL OR p_overlap = 'allow_all' THEN
		-- a fire time that ran already (a repeated backfill), or a run
		-- its workflow's key_mode refused, starts nothing
		RETURN CASE WHEN hf_schedule_start(s, p_run_id, p_fire, p_delay_ms) THEN 'started'
			    ELSE 'existed' END;
	END IF;
	IF p_overlap = 'skip' OR (p_overlap = 'buffer_one'
				  AND jsonb_array_length(s.buffered) > 0) THEN
		RETURN 'skipped';
	END IF;
	-- buffer_one, buffer_all, and cancel_other while the cancelled run ends
	UPDATE schedule SET buffered = buffered || jsonb_build_array(jsonb_build_object(
		'run_id', p_run_id, 'fire_time', p_fire))
	WHERE id = s.id;
	RETURN 'buffered';
END
$$;

-- The due schedules at p_now (the schedules' clock: the database's plus a
-- test offset), at most p_limit, locked for this transaction; another
-- instance passes them over.
CREATE FUNCTION hf_schedule_due(p_now timestamptz, p_limit integer) RETURNS SETOF schedule
LANGUAGE sql SET jit = off AS $$
	SELECT * FROM schedule WHERE NOT paused AND next_fire_at <= p_now
	ORDER BY next_fire_at LIMIT p_limit FOR UPDATE SKIP LOCKED
$$;

-- Handles the fire times p_fires of schedule p_id (locked by
-- hf_schedule_due in this transaction): [{"fire_time", "missed", "count",
-- "delay_ms"}] in order, then sets its next fire time to p_next (NULL: none
-- left). A missed entry is only counted ("count" fire times from
-- "fire_time" on); the others start a run each under the schedule's
-- overlap policy. Returns {"fired", "skipped", "missed"}.
CREATE FUNCTION hf_schedule_fire(p_id text, p_fires jsonb, p_next timestamptz)
RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	s schedule;
	f record;
	res text;
	n_fired integer := 0;
	n_skipped integer := 0;
	n_missed integer := 0;
BEGIN
	FOR f IN SELECT (e->>'fire_time')::timestamptz AS t, coalesce((e->>'missed')::boolean, false) AS missed,
			(e->>'delay_ms')::bigint AS delay_ms, coalesce((e->>'count')::integer, 1) AS n
		 FROM jsonb_array_elements(p_fires) e LOOP
		IF f.missed THEN
			n_missed := n_missed + f.n;
			CONTINUE;
		END IF;
		SELECT * INTO s FROM schedule WHERE id = p_id;
		res := hf_schedule_fire_one(s, hf_fire_run_id(p_id, f.t), f.t, f.delay_ms, s.overlap);
		IF res = 'started' THEN
			n_fired := n_fired + 1;
		ELSIF res = 'skipped' THEN
			n_skipped := n_skipped + 1;
		END IF;
	END LOOP;
	UPDATE schedule SET next_fire_at = p_next, fired = fired + n_fired,
		skipped = skipped + n_skipped, missed = missed + n_missed, updated_at = now()
	WHERE id = p_id;
	IF p_next IS NOT NULL THEN
		PERFORM pg_notify('hookflow_sched', hf_ms(p_next)::text);
	END IF;
	RETURN jsonb_build_object('fired', n_fired, 'skipped', n_skipped, 'missed', n_missed);
END
$$;

-- The schedules whose runs p_runs just ended: each starts its first
-- buffered fire once it has no active run left.
CREATE FUNCTION hf_schedule_runs_ended(p_schedules text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	s schedule;
	b jsonb;
BEGIN
	FOR s IN SELECT * FROM schedule WHERE id = ANY (p_schedules)
		 AND jsonb_array_length(buffered) > 0 ORDER BY id FOR UPDATE LOOP
		CONTINUE WHEN hf_schedule_active(s.id) IS NOT NULL;
		b := s.buffered->0;
		UPDATE schedule SET buffered = buffered - 0, fired = fired + 1, updated_at = now()
		WHERE id = s.id;
		PERFORM hf_schedule_start(s, b->>'run_id', (b->>'fire_time')::timestamptz, 0);
	END LOOP;
END
$$;

-- POST /v1/schedules/{id}/trigger: one run p_run_id now under the
-- schedule's overlap policy, paused or not. Returns 'not_found', 'started',
-- 'skipped' or 'buffered'.
CREATE FUNCTION hf_schedule_trigger(p_id text, p_run_id text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	s schedule;
	res text;
BEGIN
	SELECT * INTO s FROM schedule WHERE id = p_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	res := hf_schedule_fire_one(s, p_run_id, NULL, 0, s.overlap);
	IF res = 'existed' THEN  -- refused by its workflow's key_mode
		res := 'skipped';
	END IF;
	UPDATE schedule SET fired = fired + (res = 'started')::integer,
		skipped = skipped + (res = 'skipped')::integer, updated_at = now()
	WHERE id = p_id;
	RETURN res;
END
$$;

-- POST /v1/schedules/{id}/backfill: a run per fire time of p_fires (a JSON
-- array of times, computed in C) under overlap policy p_overlap. Returns
-- {"fire_times", "started", "skipped", "buffered"}, or NULL when the
-- schedule does not exist.
CREATE FUNCTION hf_schedule_backfill(p_id text, p_fires jsonb, p_overlap text) RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	s schedule;
	t timestamptz;
	res text;
	n_started integer := 0;
	n_skipped integer := 0;
	n_buffered integer := 0;
BEGIN
	PERFORM 1 FROM schedule WHERE id = p_id FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	FOR t IN SELECT (jsonb_array_elements_text(p_fires))::timestamptz LOOP
		SELECT * INTO s FROM schedule WHERE id = p_id;
		res := hf_schedule_fire_one(s, hf_fire_run_id(p_id, t), t, 0, p_overlap);
		n_started := n_started + (res = 'started')::integer;
		n_skipped := n_skipped + (res = 'skipped')::integer;
		n_buffered := n_buffered + (res = 'buffered')::integer;
	END LOOP;
	UPDATE schedule SET fired = fired + n_started, skipped = skipped + n_skipped,
		updated_at = now()
	WHERE id = p_id;
	RETURN jsonb_build_object('fire_times', jsonb_array_length(p_fires), 'started', n_started,
				  'skipped', n_skipped, 'buffered', n_buffered);
END
$$;

-- POST /v1/schedules/{id}/pause and /resume: sets paused (and the note when
-- p_note is not NULL); resuming also sets the next fire time p_next
-- (computed in C from now: fire times passed while paused are not run).
-- Returns the schedule, or NULL when there is none.
CREATE FUNCTION hf_schedule_pause(p_id text, p_paused boolean, p_note text, p_next timestamptz)
RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	s schedule;
BEGIN
	UPDATE schedule SET paused = p_paused, note = coalesce(p_note, note),
		next_fire_at = CASE WHEN p_paused THEN next_fire_at ELSE p_next END,
		updated_at = now()
	WHERE id = p_id RETURNING * INTO s;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	IF NOT p_paused AND p_next IS NOT NULL THEN
		PERFORM pg_notify('hookflow_sched', hf_ms(p_next)::text);
	END IF;
	RETURN hf_schedule_json(s);
END
$$;
