-- 0009_schedules: runs started on a schedule (issue 16; README "Schedules").
--
-- A schedule fires at the times of its cron expression (read in its time
-- zone) or every every_ms. The instance that finds a schedule due (its
-- next_fire_at passed; schedule_due, one index probe per pass, woken by the
-- same timer as due runs) locks its row, computes in C the fire times up to
-- now and the next one after, and hands them to hf_schedule_fire, which
-- starts a run per fire time (its run id derived from the schedule and the
-- fire time, submitted idempotently) and advances next_fire_at in the same
-- transaction: one run per fire time whatever the instances, restarts or
-- SIGKILLs. Fire times older than catchup_window_ms are counted missed.
-- When the schedule's previous run is still active, overlap decides: skip
-- (counted skipped), buffer_one / buffer_all (kept in `buffered`, started as
-- the active run ends), cancel_other, allow_all.
--
-- run.schedule_id and run.fire_time name the schedule and fire time a run
-- was started for; run_schedule finds a schedule's runs (its active one,
-- its recent ones).

CREATE TABLE schedule (
	id                text PRIMARY KEY,
	workflow          text NOT NULL,
	cron              text,             -- or every_ms
	every_ms          bigint CHECK (every_ms > 0),
	timezone          text NOT NULL DEFAULT 'UTC',
	input             jsonb,
	headers           jsonb NOT NULL DEFAULT '{}',
	priority          integer,          -- NULL: the workflow's
	max_attempts      integer,          -- NULL: the workflow's
	concurrency_key   text,
	overlap           text NOT NULL DEFAULT 'skip' CHECK (overlap IN
				('skip', 'buffer_one', 'buffer_all', 'cancel_other', 'allow_all')),
	catchup_window_ms bigint NOT NULL DEFAULT 60000 CHECK (catchup_window_ms >= 0),
	jitter_ms         bigint NOT NULL DEFAULT 0 CHECK (jitter_ms >= 0),
	start_at          timestamptz,
	end_at            timestamptz,
	paused            boolean NOT NULL DEFAULT false,
	note              text,
	next_fire_at      timestamptz,      -- the first fire time not handled yet; NULL: none left
	buffered          jsonb NOT NULL DEFAULT '[]',  -- [{"run_id", "fire_time"}] waiting their turn
	fired             bigint NOT NULL DEFAULT 0,
	skipped           bigint NOT NULL DEFAULT 0,
	missed            bigint NOT NULL DEFAULT 0,
	created_at        timestamptz NOT NULL DEFAULT now(),
	updated_at        timestamptz NOT NULL DEFAULT now(),
	CHECK ((cron IS NULL) <> (every_ms IS NULL))
);
CREATE INDEX schedule_due ON schedule (next_fire_at) WHERE NOT paused;

ALTER TABLE run
	ADD COLUMN schedule_id text,
	ADD COLUMN fire_time   timestamptz;
CREATE INDEX run_schedule ON run (schedule_id, created_at DESC) WHERE schedule_id IS NOT NULL;
