-- 0003_secret_rotation: a workflow's signing secret rotates without downtime
-- (POST /v1/workflows/{name}/secret). For a grace period the secret it
-- replaced keeps signing next to it: every request then carries both
-- signatures. The claim (hf_claim, db/engine/04_claim.sql) hands the
-- previous secret to the dispatcher only while secret_previous_until is in
-- the future; the API never shows either secret.

ALTER TABLE workflow
	ADD COLUMN secret_previous       text,        -- the replaced secret, NULL: none
	ADD COLUMN secret_previous_until timestamptz; -- it signs until then

-- The claimed job carries it (db/jobs.h JOB_COLUMNS, last column).
ALTER TYPE hf_job ADD ATTRIBUTE secret_previous text;
