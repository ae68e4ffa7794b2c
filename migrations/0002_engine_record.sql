-- 0002_engine_record: what engine the database holds. The engine is the set
-- of functions and triggers of db/engine/*.sql (every hf_* function and the
-- triggers that call one); db/migrate.c loads it after the migrations
-- whenever what the database holds differs from the binary's, and records
-- here the source it loaded and a hash of every object as PostgreSQL shows
-- it (pg_get_functiondef, pg_get_triggerdef), so that a function replaced by
-- hand is noticed too.

CREATE TABLE hf_engine (
	singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	source_sha256    text NOT NULL,        -- SHA-256 of the binary's engine files
	hookflow_version text NOT NULL,        -- the version of the binary that loaded it
	loaded_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE hf_engine_object (
	object text PRIMARY KEY,               -- 'function hf_claim(text,integer,integer)'
	md5    text NOT NULL                   -- md5 of its definition as loaded
);
