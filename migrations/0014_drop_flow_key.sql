-- 0014_drop_flow_key: drops flow_key, the per-key slot counter of
-- migrations/0007_flow_control.sql that nothing has written or read since
-- migrations/0012_run_key.sql (a key's slots are counted through
-- run.holds_key_slot and the run_key_slot index, under the key's advisory
-- lock). Runs in flight hold their slots through holds_key_slot, untouched.
DROP TABLE flow_key;
