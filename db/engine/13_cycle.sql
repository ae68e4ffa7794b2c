-- One cycle of a dispatcher worker (service/dispatcher.c), in one transaction
-- (one commit): settle the step and callback calls that ended, then claim up
-- to p_limit jobs (0: none), which takes the steps this settlement just
-- queued too. The claimers are woken only when this claim left queued steps
-- behind.
--
-- Returns the claimed jobs (`job`, the columns db/jobs.c's JOB_COLUMNS reads),
-- then one row per settlement refused because its claim was lost (`lost_kind`
-- 'step' with the run id, or 'callback' with the callback id, in `lost_id`;
-- `job` NULL).
CREATE FUNCTION hf_cycle(p_steps jsonb, p_callbacks jsonb, p_owner text, p_limit integer,
			 p_lease_ms integer)
RETURNS TABLE (lost_kind text, lost_id text, job hf_job)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
	lost text[] := '{}';
	kinds text[] := '{}';
	queued boolean := false;
	n integer := 0;
BEGIN
	IF jsonb_array_length(p_steps) > 0 THEN
		SELECT coalesce(array_agg(s.run_id) FILTER (WHERE s.outcome = 'claim_lost'), '{}'),
		       coalesce(bool_or(s.outcome = 'pending'), false)
		INTO lost, queued FROM hf_settle_steps(p_steps, false) s;
		kinds := array_fill('step'::text, ARRAY[cardinality(lost)]);
	END IF;
	IF jsonb_array_length(p_callbacks) > 0 THEN
		SELECT lost || coalesce(array_agg(s.id), '{}'),
		       kinds || array_fill('callback'::text, ARRAY[count(*)::integer])
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
		RETURN QUERY SELECT NULL::text, NULL::text, j FROM hf_claim(p_owner, p_limit, p_lease_ms) j;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF queued AND n >= p_limit THEN
		PERFORM pg_notify('hookflow_wake', '');
	END IF;
	RETURN QUERY SELECT l.k, l.i, NULL::hf_job FROM unnest(kinds, lost) AS l(k, i);
END
$$;
