-- One cycle of a dispatcher worker (service/dispatcher.c), in one transaction
-- (one commit): settle the step and callback calls that ended, then claim up
-- to p_limit jobs (0: none), which takes the steps this settlement just
-- queued too. The claimers are woken only when this claim left queued steps
-- behind.
--
-- p_lane is the lane the caller's previous claim stopped at, p_room the room
-- of its constrained endpoints (hf_claim), p_texts the payloads p_steps point
-- into (hf_settle_steps).
-- work_mem: the claimed jobs, payloads and all, are gathered in memory (the
-- rows a set-returning function returns); with large payloads PostgreSQL's
-- default 4MB sent them to a temporary file at every claim. hf_claim has the
-- same setting.
-- Returns the claimed jobs (hf_job rows, the columns db/jobs.c's JOB_COLUMNS
-- reads), the lane this claim stopped at (kind 'lane', when it took a step),
-- then one row per settlement refused because its claim was lost: kind
-- 'lost_step' with the run id, or 'lost_callback' with the callback id, in `id`
-- (every other column NULL), and one per run this settlement ended: kind
-- 'ended' with the run id (the caller wakes its own long-polls on it at once;
-- NOTIFY hookflow_done wakes every instance's).
CREATE FUNCTION hf_cycle(p_steps jsonb, p_callbacks jsonb, p_owner text, p_limit integer,
			 p_lease_ms integer, p_lane jsonb, p_room jsonb, p_texts bytea DEFAULT NULL)
RETURNS SETOF hf_job
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
	SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
	SET work_mem = '64MB' AS $$
DECLARE
	lost text[] := '{}';
	kinds text[] := '{}';
	ended text[] := '{}';
	queued boolean := false;
	n integer := 0;
BEGIN
	IF jsonb_array_length(p_steps) > 0 THEN
		SELECT coalesce(array_agg(s.run_id) FILTER (WHERE s.outcome = 'claim_lost'), '{}'),
		       coalesce(bool_or(s.outcome = 'pending'), false),
		       coalesce(array_agg(s.run_id) FILTER (WHERE s.outcome IN
				('succeeded', 'failed', 'cancelled')), '{}')
		INTO lost, queued, ended
		FROM hf_settle_steps(p_steps, false, p_texts => p_texts) s;
		kinds := array_fill('lost_step'::text, ARRAY[cardinality(lost)]);
	END IF;
	IF jsonb_array_length(p_callbacks) > 0 THEN
		SELECT lost || coalesce(array_agg(s.id), '{}'),
		       kinds || array_fill('lost_callback'::text, ARRAY[count(*)::integer])
		INTO lost, kinds
		FROM hf_settle_callbacks(p_callbacks) s WHERE s.outcome = 'claim_lost';
	END IF;
	IF jsonb_array_length(p_steps) = 0 AND jsonb_array_length(p_callbacks) = 0 THEN
		-- A claim alone records only a lease: if a crash loses it, the job is
		-- pending again and delivered again (same webhook-id and attempt), as
		-- after an expired lease. It need not wait for the disk; the next
		-- settlement's commit flushes it.
		PERFORM set_config('synchronous_commit', 'off', true);
	END IF;
	IF p_limit > 0 THEN
		RETURN QUERY SELECT * FROM hf_claim(p_owner, p_limit, p_lease_ms, p_lane, p_room);
		GET DIAGNOSTICS n = ROW_COUNT;  -- the lane row too: a wake too many at worst
	END IF;
	IF queued AND n >= p_limit THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	RETURN QUERY SELECT j.* FROM unnest(kinds || array_fill('ended'::text,
						ARRAY[cardinality(ended)]), lost || ended) AS l(k, i),
		jsonb_populate_record(NULL::hf_job, jsonb_build_object('kind', l.k, 'id', l.i)) j;
END
$$;
