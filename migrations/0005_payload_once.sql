-- 0005_payload_once: each step's payload is stored once, and large values are
-- compressed with lz4.
--
-- Until now a step's payload was written twice: into run.payload when the
-- step was queued, and again into the step_attempt row of every attempt. Now
-- the answer that continues a run is kept once, as the continuing attempt's
-- `output`, and is the next step's payload: the engine reads it from there
-- (hf_step_payload in db/engine/01_helpers.sql). Step 0's payload is the
-- run's input. run.payload holds a payload only when it came from neither
-- (a rerun's or a redrive's chosen payload, or a run queued by an earlier
-- release), and step_attempt.payload only for such a step's attempts.
-- Existing rows keep what they hold and are read as before, so runs in
-- flight across the upgrade go on with their payloads.
ALTER TABLE step_attempt ADD COLUMN output jsonb;

-- lz4 compresses JSON about as well as PostgreSQL's own pglz at a fraction of
-- the CPU, and decompresses faster. A server built without lz4 keeps pglz.
DO $$
DECLARE
	col text;
BEGIN
	FOREACH col IN ARRAY ARRAY['run.input', 'run.payload', 'run.signal', 'run.result',
				   'step_attempt.payload', 'step_attempt.output',
				   'step_attempt.signal', 'callback.body', 'dead_letter.payload',
				   'step_output.outcome', 'signal_buffer.payload', 'kv.value',
				   'memo.value']
	LOOP
		EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4',
			       split_part(col, '.', 1), split_part(col, '.', 2));
	END LOOP;
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'this PostgreSQL has no lz4: large values stay compressed with pglz';
END
$$;
