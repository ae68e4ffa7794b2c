-- 0004_token_keys: the keys that sign delivery tokens (base/token.h), so that
-- they can rotate: `hookflow rotate-keys` adds a current key and keeps the
-- others accepted for a grace period. The current key has no accepted_until.
-- A key is stored as the base64 of its bytes, or sealed ("enc:v1:...") when
-- hookflow runs with HOOKFLOW_ENCRYPTION_KEY (it seals what it finds plain at
-- start-up).

CREATE TABLE hf_token_key (
	kid            text PRIMARY KEY CHECK (kid ~ '^[A-Za-z0-9_-]{1,16}$'),
	secret         text NOT NULL,
	created_at     timestamptz NOT NULL DEFAULT now(),
	accepted_until timestamptz
);

-- Release 0.1.0's memo key signed tokens that bind only the run and never
-- expire. When calls may be in flight across the upgrade, it stays, as "m0",
-- accepted for two hours: longer than a step call can last (timeout_ms is at
-- most one hour, plus its lease), so those calls keep their memo; then 0.1.0
-- tokens stop working. A database without calls in flight does not keep it.
INSERT INTO hf_token_key (kid, secret, accepted_until)
SELECT 'm0', encode(value, 'base64'), now() + interval '2 hours'
FROM hf_meta WHERE key = 'memo_key'
  AND EXISTS (SELECT 1 FROM run WHERE status IN ('running', 'cancelling'));
DELETE FROM hf_meta WHERE key = 'memo_key';

-- The first current key: 32 random bytes.
INSERT INTO hf_token_key (kid, secret)
VALUES ('k' || to_hex(extract(epoch FROM now())::bigint),
	encode(decode(replace(gen_random_uuid()::text, '-', '') ||
		      replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64'));
