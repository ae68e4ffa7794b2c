-- 0013_payload_json: a step's output (the payload of the step it continues
-- into, migrations/0005_payload_once.sql) is stored as json, the text the
-- webhook wrote, instead of jsonb.
--
-- Every step wrote its output through jsonb_in (which builds the value one
-- character at a time) and every claim read it back through jsonb_out (which
-- escapes it again): with 10 KB payloads a quarter of PostgreSQL's CPU per
-- step. hookflow has already checked the text (base/jsonscan.c, or jansson);
-- json_in only checks it once more, and the claim hands it on as it is.
-- Readers that need a jsonb value (the history, reruns, dead letters, the
-- replay hash) convert it; they are not on the path of every step.
--
-- The column is replaced rather than altered: ALTER COLUMN ... TYPE would
-- rewrite all of step_attempt under an exclusive lock, while adding a
-- column, copying the rows that hold an output and dropping the old one
-- writes only those rows (none when upgrading from 0.1.0, which had no
-- output column). Runs in flight keep their payloads.
ALTER TABLE step_attempt ADD COLUMN output_json json;
UPDATE step_attempt SET output_json = output::json WHERE output IS NOT NULL;
ALTER TABLE step_attempt DROP COLUMN output;
ALTER TABLE step_attempt RENAME COLUMN output_json TO output;

DO $$
BEGIN
	ALTER TABLE step_attempt ALTER COLUMN output SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'this PostgreSQL has no lz4: large outputs stay compressed with pglz';
END
$$;

-- A claimed job's payload is the stored text too.
ALTER TYPE hf_job ALTER ATTRIBUTE payload TYPE json;
