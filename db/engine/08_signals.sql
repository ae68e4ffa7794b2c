-- Signals (openapi.yaml, POST /v1/signals/{key}): one waiter per key; a signal
-- nobody waits for is buffered (the latest per key) for the next wait. The
-- wait itself is registered by hf_settle_steps and timed out by hf_promote.

-- The keys of a wait: "wait_keys" (a JSON array) or else "wait_key", in
-- key order (bytes, whatever the database's collation) without duplicates
-- (the order their locks are taken in).
CREATE FUNCTION hf_wait_keys(p_keys jsonb, p_key text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN p_keys IS NULL OR jsonb_typeof(p_keys) <> 'array' THEN ARRAY[p_key]
		    ELSE ARRAY(SELECT DISTINCT k COLLATE "C" FROM jsonb_array_elements_text(p_keys) k
				ORDER BY k COLLATE "C")
	       END
$$;

-- The signal a woken run's next step receives: the payload, and which key
-- it came on when the run waited on several (n keys).
CREATE FUNCTION hf_delivered(p_key text, n integer, p_payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN n > 1
		    THEN jsonb_build_object('status', 'delivered', 'correlation_key', p_key,
					    'payload', p_payload)
		    ELSE jsonb_build_object('status', 'delivered', 'payload', p_payload) END
$$;

-- Takes the oldest signal buffered on any of p_keys (whose locks the caller
-- holds): its key and payload, or no row.
CREATE FUNCTION hf_take_buffered(p_keys text[]) RETURNS TABLE (key text, payload jsonb)
LANGUAGE sql AS $$
	DELETE FROM signal_buffer b WHERE b.correlation_key = (
		SELECT o.correlation_key FROM signal_buffer o WHERE o.correlation_key = ANY (p_keys)
		ORDER BY o.created_at, o.correlation_key LIMIT 1)
	RETURNING b.correlation_key, b.payload
$$;

-- Returns 'delivered' when a run waited on the key (its next step becomes
-- claimable now with the payload and the key; its waits on other keys end),
-- else 'buffered'.
CREATE FUNCTION hf_signal(p_key text, p_payload jsonb) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	rid text;
	n integer;
BEGIN
	PERFORM hf_lock_key(p_key);
	SELECT w.run_id INTO rid FROM signal_wait w WHERE w.correlation_key = p_key;
	IF FOUND THEN
		-- A signal on another of its keys may have woken it meanwhile:
		-- once its row is ours, the wait on p_key must still be there.
		SELECT cardinality(wait_keys) INTO n FROM run
		WHERE run_id = rid AND status = 'waiting' FOR UPDATE;
		DELETE FROM signal_wait w WHERE w.run_id = rid
			AND EXISTS (SELECT 1 FROM signal_wait v WHERE v.correlation_key = p_key
				    AND v.run_id = rid);
		IF FOUND THEN
			UPDATE run SET status = 'pending', seq = nextval('hf_seq'), next_at = now(),
				signal = hf_delivered(p_key, n, p_payload),
				wait_key = NULL, wait_keys = NULL, updated_at = now()
			WHERE run_id = rid;
			PERFORM pg_notify('hookflow_wake', '');
			RETURN 'delivered';
		END IF;
	END IF;
	INSERT INTO signal_buffer (correlation_key, payload) VALUES (p_key, p_payload)
	ON CONFLICT (correlation_key) DO UPDATE SET payload = EXCLUDED.payload, created_at = now();
	RETURN 'buffered';
END
$$;
