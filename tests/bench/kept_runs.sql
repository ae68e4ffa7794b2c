-- Kept runs: fills a migrated hookflow database with :runs finished runs of
-- :steps steps each, and their history (:runs x :steps step_attempt rows),
-- written straight into the tables as hookflow leaves them when a run ends
-- (db/engine/05_settle.sql, hf_terminate), in a few statements. Used by the
-- size benchmark (tests/bench/scenario_size.sh) and by the plan test
-- (tests/integration/test_size_plans.py):
--
--   psql -v runs=200000 -v steps=10 -v prefix=kept -f tests/bench/kept_runs.sql
--
-- What it writes, so that lists and filters meet a realistic mix:
--   - runs :prefix-0000001 ..., created one after another over the 30 days
--     before now (oldest first), each finished a few seconds after it started;
--   - 4 workflows :prefix0 .. :prefix3 (registered, URL on port 9), in turn
--     (a group's runs all of one);
--     :prefix0 has a callback URL, and each of its runs a delivered callback;
--   - 97% succeeded, 2% failed at their last step (a permanent error after a
--     transient one: one more attempt), 1% cancelled at their last step;
--   - 10% in groups of (up to) 100 runs (:prefix-g<n>, with their group rows);
--   - inputs, payloads and results of about 100 bytes of JSON.
-- No run of another workflow is touched, so measured runs submitted next to
-- these stay countable apart (WHERE workflow NOT LIKE :prefix || '%').

\set ON_ERROR_STOP 1

BEGIN;

INSERT INTO workflow (name, url, callback_url, timeout_ms, max_attempts, priority,
		      backoff_base_ms, backoff_max_ms)
SELECT :'prefix' || w, 'http://127.0.0.1:9/steps',
       CASE WHEN w = 0 THEN 'http://127.0.0.1:9/done' END, 30000, 3, 0, 1000, 300000
FROM generate_series(0, 3) w
ON CONFLICT (name) DO NOTHING;

CREATE TEMP TABLE kept ON COMMIT DROP AS
SELECT i,
       :'prefix' || '-' || lpad(i::text, 7, '0') AS run_id,
       :'prefix' || CASE WHEN (i / 100) % 10 = 0 THEN (i / 1000) % 4 ELSE i % 4 END AS workflow,
       CASE WHEN i % 100 < 97 THEN 'succeeded' WHEN i % 100 < 99 THEN 'failed'
	    ELSE 'cancelled' END AS status,
       CASE WHEN (i / 100) % 10 = 0 THEN :'prefix' || '-g' || (i / 100) END AS group_id,
       now() - interval '30 days' + (interval '30 days' * i / (:runs + 1)) AS created_at,
       jsonb_build_object('order', i, 'customer', 'c-' || (i % 997),
			  'note', repeat('x', 40)) AS input
FROM generate_series(1, :runs) i;

INSERT INTO run (run_id, workflow, status, step, attempt, generation, job_id, input,
		 input_hash, payload, headers, priority, max_attempts, result, error,
		 error_kind, final_step, finished_at, group_id, group_key, created_at,
		 updated_at)
SELECT k.run_id, k.workflow, k.status, :steps - 1, CASE WHEN k.status = 'failed' THEN 2 ELSE 1 END,
       1, md5(k.run_id), k.input, sha256(convert_to(k.input::text, 'UTF8')),
       jsonb_build_object('step', :steps - 1, 'order', k.i, 'state', repeat('y', 40)),
       '{}', 0, 3,
       CASE WHEN k.status = 'succeeded' THEN jsonb_build_object('ok', true, 'order', k.i,
								 'receipt', md5(k.input::text)) END,
       CASE k.status WHEN 'failed' THEN 'HTTP 422: order rejected'
		     WHEN 'cancelled' THEN 'cancelled by the webhook' END,
       CASE WHEN k.status = 'failed' THEN 'permanent' END,
       :steps - 1, k.created_at + interval '2 seconds', k.group_id,
       CASE WHEN k.group_id IS NOT NULL THEN 'item-' || (k.i % 100) END,
       k.created_at, k.created_at + interval '2 seconds'
FROM kept k;

-- Their place in the lists, as hf_submit writes it (migrations/0015).
INSERT INTO run_listing (run_id, workflow, created_at)
SELECT k.run_id, k.workflow, k.created_at FROM kept k;

-- History: one attempt per step, started 200 ms apart; a failed run's last
-- step has a transient error first.
INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload, signal,
			  started_at, finished_at, result, http_status, error)
SELECT k.run_id, 1, s.step, a.attempt, md5(k.run_id || s.step || a.attempt),
       jsonb_build_object('step', s.step, 'order', k.i, 'state', repeat('y', 40)), NULL,
       k.created_at + interval '200 ms' * s.step,
       k.created_at + interval '200 ms' * s.step + interval '50 ms',
       CASE WHEN s.step < :steps - 1 THEN 'continue'
	    WHEN k.status = 'succeeded' THEN 'succeed'
	    WHEN k.status = 'cancelled' THEN 'cancel'
	    WHEN a.attempt = 1 THEN 'transient_error' ELSE 'permanent_error' END,
       CASE WHEN s.step < :steps - 1 OR k.status IN ('succeeded', 'cancelled') THEN 200
	    WHEN a.attempt = 1 THEN 503 ELSE 422 END,
       CASE WHEN s.step = :steps - 1 AND k.status = 'failed' THEN
	    CASE WHEN a.attempt = 1 THEN 'HTTP 503' ELSE 'HTTP 422: order rejected' END END
FROM kept k
CROSS JOIN generate_series(0, :steps - 1) s(step)
CROSS JOIN LATERAL generate_series(1, CASE WHEN s.step = :steps - 1 AND k.status = 'failed'
					   THEN 2 ELSE 1 END) a(attempt)
ORDER BY k.i, s.step, a.attempt;

INSERT INTO callback (id, run_id, generation, workflow, url, body, status, attempt,
		      max_attempts, priority, last_http_status, created_at, updated_at,
		      finished_at)
SELECT md5('cb' || k.run_id), k.run_id, 1, k.workflow, 'http://127.0.0.1:9/done',
       jsonb_build_object('run_id', k.run_id, 'workflow', k.workflow, 'status', k.status,
			  'final_step', :steps - 1, 'generation', 1),
       'done', 1, 3, 0, 200, k.created_at + interval '2 seconds',
       k.created_at + interval '2100 ms', k.created_at + interval '2100 ms'
FROM kept k WHERE k.workflow = :'prefix' || '0';

INSERT INTO run_group (group_id, workflow, manifest_hash, total, created_at, updated_at)
SELECT k.group_id, min(k.workflow), sha256(convert_to(k.group_id, 'UTF8')), count(*),
       min(k.created_at), max(k.created_at)
FROM kept k WHERE k.group_id IS NOT NULL GROUP BY k.group_id;

INSERT INTO group_member (group_id, ord, key, run_id)
SELECT k.group_id, row_number() OVER (PARTITION BY k.group_id ORDER BY k.i) - 1,
       'item-' || (k.i % 100), k.run_id
FROM kept k WHERE k.group_id IS NOT NULL;

COMMIT;
