-- Signals (openapi.yaml, POST /v1/signals/{key}): one waiter per key; a signal
-- nobody waits for is buffered (the latest per key) for the next wait. The
-- wait itself is registered by hf_settle_steps and timed out by hf_promote.

-- Returns 'delivered' when a run waited on the key (its next step becomes
-- claimable now with the payload), else 'buffered'.
CREATE FUNCTION hf_signal(p_key text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	rid text;
BEGIN
	PERFORM hf_lock_key(p_key);
	SELECT run_id INTO rid FROM run WHERE wait_key = p_key AND status = 'waiting' FOR UPDATE;
	IF FOUND THEN
		UPDATE run SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
			signal = jsonb_build_object('status', 'delivered', 'payload', p_payload),
			wait_key = NULL, updated_at = now()
		WHERE run_id = rid;
		PERFORM pg_notify('hookflow_wake', '');
		RETURN 'delivered';
	END IF;
	INSERT INTO signal_buffer (correlation_key, payload) VALUES (p_key, p_payload)
	ON CONFLICT (correlation_key) DO UPDATE SET payload = EXCLUDED.payload, created_at = now();
	RETURN 'buffered';
END
$$;
