"""What waits for the disk (README, "Durability and batching"): a settlement
and a submission commit with synchronous_commit as configured (on, by
default); a dispatcher cycle that only claims records nothing but leases and
commits without waiting for the disk. Each psql -c below is one transaction
that first sets synchronous_commit on (the test cluster runs with it off for
speed), so SHOW at its end sees what the function left for the commit."""

LOST_ITEM = '[{"run_id": "no-such-run", "claim_token": 1, "result": "continue"}]'


def _commit_mode(sql, call):
    rows = sql("SET synchronous_commit = on; SELECT count(*) FROM %s; SHOW synchronous_commit" % call)
    return rows[-1][0]


def test_a_cycle_that_only_claims_does_not_wait_for_the_disk(service, sql):
    assert _commit_mode(sql, "hf_cycle('[]', '[]', 'test-owner', 1, 1000, NULL, NULL)") == "off"
    assert _commit_mode(sql, "hf_cycle('[]', '[]', 'test-owner', 0, 1000, NULL, NULL)") == "off"


def test_a_cycle_that_settles_waits_for_the_disk(service, sql):
    assert _commit_mode(sql, "hf_cycle('%s', '[]', 'test-owner', 1, 1000, NULL, NULL)" % LOST_ITEM) == "on"
    callback = LOST_ITEM.replace('"run_id"', '"id"')
    assert _commit_mode(sql, "hf_cycle('[]', '%s', 'test-owner', 0, 1000, NULL, NULL)" % callback) == "on"


def test_submissions_wait_for_the_disk(service, sql):
    assert _commit_mode(sql, "hf_submit_many('[]')") == "on"
