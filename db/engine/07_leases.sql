-- Leases: a claimed job's lease is renewed while its call runs; an expired
-- one (its instance died) or one a draining instance releases is settled
-- through hf_settle_steps / hf_settle_callbacks like any other end of a call.
-- A workflow's concurrency slot is released when the step that held it
-- settles, whatever ends it (the trigger below).

-- Extends the leases of every claim p_owner holds. Returns the run ids (and
-- callback ids) still held, with whether a cancel was requested, so the owner
-- can abort calls whose claim it lost or whose run is being cancelled.
CREATE FUNCTION hf_renew(p_owner text, p_lease_ms integer)
RETURNS TABLE (kind text, id text, cancel_requested boolean)
LANGUAGE sql SET jit = off AS $$
	WITH a AS (
		UPDATE run SET lease_expires_at = hf_due(p_lease_ms)
		WHERE lease_owner = p_owner AND status IN ('running', 'cancelling')
		RETURNING 'step'::text, run_id, cancel_requested),
	b AS (
		UPDATE callback SET lease_expires_at = hf_due(p_lease_ms)
		WHERE lease_owner = p_owner AND status = 'running'
		RETURNING 'callback'::text, id, false)
	SELECT * FROM a UNION ALL SELECT * FROM b
$$;

-- Reaps claims: those whose lease expired (p_owner NULL: result
-- lease_expired, which uses up the attempt; for a pending step, the
-- transient error 'pending timeout' or 'heartbeat timeout'), or every claim
-- of p_owner (a
-- draining instance releasing what it could not finish: result interrupted,
-- which refunds the attempt). Returns how many claims were reaped.
CREATE FUNCTION hf_reap(p_owner text, p_limit integer) RETURNS integer
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	res text := CASE WHEN p_owner IS NULL THEN 'lease_expired' ELSE 'interrupted' END;
	steps jsonb;
	cbs jsonb;
	n integer := 0;
	m integer := 0;
BEGIN
	-- A pending step (no owner) whose time ran out is a transient error of
	-- its attempt, retried after the workflow's backoff.
	SELECT jsonb_agg(CASE WHEN x.pending_since IS NULL THEN jsonb_build_object(
				'run_id', x.run_id, 'claim_token', x.claim_token, 'result', res)
			      ELSE jsonb_build_object('run_id', x.run_id, 'claim_token', x.claim_token,
				'result', 'transient_error',
				'reason', CASE WHEN x.heartbeat_timeout_at < x.pending_timeout_at
					       THEN 'heartbeat timeout' ELSE 'pending timeout' END,
				'retry_delay_ms', hf_backoff_ms(x.backoff_base_ms, x.backoff_max_ms,
							       x.attempt)) END
			 ORDER BY x.lease_expires_at)
	INTO steps FROM (
		SELECT r.run_id, r.claim_token, r.lease_expires_at, r.pending_since,
		       r.pending_timeout_at, r.heartbeat_timeout_at, r.attempt, w.backoff_base_ms,
		       w.backoff_max_ms
		FROM run r JOIN workflow w ON w.name = r.workflow
		WHERE r.status IN ('running', 'cancelling')
		  AND (CASE WHEN p_owner IS NULL THEN r.lease_expires_at < now()
			    ELSE r.lease_owner = p_owner END)
		ORDER BY r.lease_expires_at LIMIT p_limit FOR UPDATE OF r SKIP LOCKED) x;
	IF steps IS NOT NULL THEN
		SELECT count(*) INTO n FROM hf_settle_steps(steps) s WHERE s.outcome <> 'claim_lost';
	END IF;

	SELECT jsonb_agg(jsonb_build_object('id', x.id, 'claim_token', x.claim_token,
					    'result', res) ORDER BY x.lease_expires_at)
	INTO cbs FROM (
		SELECT c.id, c.claim_token, c.lease_expires_at FROM callback c
		WHERE c.status = 'running'
		  AND (CASE WHEN p_owner IS NULL THEN c.lease_expires_at < now()
			    ELSE c.lease_owner = p_owner END)
		ORDER BY c.lease_expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED) x;
	IF cbs IS NOT NULL THEN
		SELECT count(*) INTO m FROM hf_settle_callbacks(cbs) s WHERE s.outcome <> 'claim_lost';
	END IF;
	RETURN n + m;
END
$$;

-- Releases the concurrency slot a step call held.
CREATE FUNCTION hf_release_slot() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE workflow SET inflight = greatest(inflight - 1, 0) WHERE name = OLD.workflow;
	RETURN NULL;
END
$$;

CREATE TRIGGER run_release_slot AFTER UPDATE OF holds_slot ON run
	FOR EACH ROW WHEN (OLD.holds_slot AND NOT NEW.holds_slot)
	EXECUTE FUNCTION hf_release_slot();
CREATE TRIGGER run_release_slot_delete AFTER DELETE ON run
	FOR EACH ROW WHEN (OLD.holds_slot)
	EXECUTE FUNCTION hf_release_slot();
