"""The dispatcher keeps webhook I/O off the database thread: an answer that
arrives in time is never turned into a timeout because the worker is waiting
on PostgreSQL; and what piles up behind a slow database is settled a bounded
batch at a time."""
import os
import secrets
import subprocess

import pytest

import harness
from harness import Reply, StepScript, succeed


def lock_run_table(db, seconds):
    """Holds the run table locked for `seconds` from another session, so
    that the worker's settlements (and everything else that writes runs)
    wait meanwhile."""
    pg = db.pg
    lock = subprocess.run(
        [os.path.join(harness.PG_BIN, "psql"), "-X", "-q", "-h", pg.host, "-p", str(pg.port),
         "-U", pg.user, "-d", db.name, "-c",
         "BEGIN; LOCK TABLE run IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(%s); COMMIT;"
         % seconds],
        capture_output=True, text=True, timeout=60)
    assert lock.returncode == 0, lock.stderr


@pytest.mark.service_env(HOOKFLOW_WORKERS="1")
def test_answers_arriving_while_the_database_is_blocked_are_not_timeouts(service, api, webhook, db):
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "succeed", "result": 1}, delay=0.3)}))
    api.put_workflow("io", webhook.url(), timeout_ms=1000, max_attempts=1,
                     retry_backoff={"base_ms": 10, "max_ms": 10})
    rids = [api.submit("io", run_id="io%02d" % i)["run_id"] for i in range(10)]
    webhook.wait_requests(10, timeout=20)
    # While those calls are answered (0.3 s after they arrived), the run table
    # is locked for 2.5 s: the worker's settlements wait, its calls must not.
    lock_run_table(db, 2.5)
    for rid in rids:
        run = api.wait_terminal(rid, timeout=30)
        steps = api.steps(rid)
        assert run["status"] == "succeeded", (rid, run, steps)
        assert [(s["attempt"], s["result"]) for s in steps] == [(1, "succeed")], (rid, steps)


# service/dispatcher.c's SETTLE_BATCH_BYTES: the most answer bytes one cycle
# settles, beyond one answer.
SETTLE_BATCH_BYTES = 8 << 20


@pytest.mark.service_env(HOOKFLOW_WORKERS="1")
def test_answers_piled_up_behind_a_blocked_database_are_settled_a_bounded_batch_at_a_time(
        service, api, webhook, db):
    # 24 answers of about 500 KB (12 MB) arrive while the run table is
    # locked, so they wait for the worker's database thread together. They
    # are settled in cycles of at most SETTLE_BATCH_BYTES of answers (one
    # statement each, whose copies of the payloads made hookflow's peak of
    # memory), every one once, with its payload handed to the next step.
    n = 24
    sent = {"big%02d" % i: {"m": "big%02d" % i, "noise": secrets.token_hex(250_000)}
            for i in range(n)}
    got = {}

    def handler(req):
        if req.step == 0:
            return Reply(200, {"outcome": "continue", "payload": sent[req.run_id]}, delay=0.5)
        got[req.run_id] = req.field("payload")
        return succeed(None)

    webhook.route("/steps", handler)
    api.put_workflow("big", webhook.url(), timeout_ms=30000, max_attempts=1)
    for rid in sent:
        api.submit("big", run_id=rid)
    webhook.wait_requests(n, step=0, timeout=30)
    lock_run_table(db, 3)
    for rid in sent:
        run = api.wait_terminal(rid, timeout=60)
        steps = [(s["step"], s["attempt"], s["result"]) for s in api.steps(rid)]
        assert run["status"] == "succeeded", (rid, run, steps)
        assert steps == [(0, 1, "continue"), (1, 1, "succeed")], (rid, steps)
    assert got == sent
    # Each settling transaction (its start is the attempts' finished_at)
    # carried at most SETTLE_BATCH_BYTES of answers beyond one answer.
    rows = db.sql("SELECT finished_at, count(*), sum(octet_length(output::text)),"
                  " max(octet_length(output::text)) FROM step_attempt WHERE step = 0"
                  " GROUP BY finished_at ORDER BY finished_at")
    assert sum(int(r[1]) for r in rows) == n, rows
    biggest = max(int(r[3]) for r in rows)
    for r in rows:
        assert int(r[2]) <= SETTLE_BATCH_BYTES + biggest, rows
    assert len(rows) >= 2, rows


@pytest.mark.service_env(HOOKFLOW_WORKERS="1", HOOKFLOW_LEASE_MS="600", HOOKFLOW_POLL_MS="100",
                         HOOKFLOW_TEST_FAULT="settle_late")
def test_claims_are_renewed_while_their_settlements_wait(service, api, webhook):
    # HOOKFLOW_TEST_FAULT=settle_late holds every settlement 2 s after its
    # call ended, more than three leases of 600 ms, as a backlog of bounded
    # cycles can; the reaper looks every 100 ms. The worker keeps renewing
    # the claims meanwhile; were it to stop with the calls, the leases would
    # run out and the steps be delivered again.
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "succeed", "result": 1})}))
    api.put_workflow("late", webhook.url(), max_attempts=3,
                     retry_backoff={"base_ms": 10, "max_ms": 10})
    rids = [api.submit("late", run_id="late%d" % i)["run_id"] for i in range(3)]
    for rid in rids:
        run = api.wait_terminal(rid, timeout=30)
        steps = api.steps(rid)
        assert run["status"] == "succeeded", (rid, run, steps)
        assert [(s["attempt"], s["result"]) for s in steps] == [(1, "succeed")], (rid, steps)
        assert len(webhook.requests(run_id=rid)) == 1, rid


# service/dispatcher.c's CLAIM_BATCH_BYTES and CLAIM_JOB_OVERHEAD: a claim
# takes at most as many jobs as CLAIM_BATCH_BYTES holds at the average size
# of the jobs of the worker's last claim (a job: its payload and
# CLAIM_JOB_OVERHEAD); a worker's first claim takes at most 32.
CLAIM_BATCH_BYTES = 8 << 20
CLAIM_JOB_OVERHEAD = 1024


@pytest.mark.service_env(HOOKFLOW_WORKERS="1")
def test_a_claim_of_large_jobs_takes_a_bounded_batch(service, api, webhook, db):
    # 100 runs with inputs of about 200 KB wait behind a paused workflow and
    # are let go at once. One claim could take them all (20 MB, held twice
    # until the calls start: the claim's result and the jobs copied from
    # it); the worker claims 32 of them first, then as many as 8 MiB holds.
    n = 100
    sent = {"lg%03d" % i: {"m": "lg%03d" % i, "noise": secrets.token_hex(100_000)}
            for i in range(n)}
    got = {}

    def handler(req):
        got[req.run_id] = req.field("payload")
        return succeed(None)

    webhook.route("/steps", handler)
    api.put_workflow("large", webhook.url(), timeout_ms=30000, max_attempts=1)
    assert api.post("/v1/workflows/large/pause", {}).status == 200
    for rid, payload in sent.items():
        api.submit("large", run_id=rid, input=payload)
    assert api.post("/v1/workflows/large/resume", {}).status == 200
    for rid in sent:
        run = api.wait_terminal(rid, timeout=60)
        assert run["status"] == "succeeded", (rid, run, api.steps(rid))
    assert got == sent
    # The attempts of one claim share its lease's start (started_at).
    # Every job is at least `job` bytes, so no claim after the first took
    # more than CLAIM_BATCH_BYTES holds of those.
    rows = db.sql("SELECT started_at, count(*), min(octet_length(r.input::text))"
                  " FROM step_attempt a JOIN run r USING (run_id)"
                  " GROUP BY started_at ORDER BY started_at")
    assert sum(int(r[1]) for r in rows) == n, rows
    job = min(int(r[2]) for r in rows) + CLAIM_JOB_OVERHEAD
    assert int(rows[0][1]) <= 32, rows
    for r in rows:
        assert int(r[1]) <= CLAIM_BATCH_BYTES // job, rows
    # The bound, not the number waiting, ended the later claims.
    assert any(int(r[1]) > 32 for r in rows), rows


@pytest.mark.service_env(HOOKFLOW_WORKERS="1", HOOKFLOW_MAX_INFLIGHT="4",
                         HOOKFLOW_TEST_FAULT="settle_late")
def test_jobs_whose_settlements_wait_hold_their_room(service, api, webhook, db):
    # HOOKFLOW_TEST_FAULT=settle_late holds every settlement 2 s after its
    # call ended, as a backlog of bounded cycles can. A job holds its room
    # among HOOKFLOW_MAX_INFLIGHT until it is settled, not only while its
    # call is in flight (each waiting settlement holds its answer's payload):
    # counted as calls only, the worker claimed and called all 12 runs while
    # the first 4 settlements waited.
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "succeed", "result": 1})}))
    api.put_workflow("held", webhook.url(), max_attempts=1)
    rids = [api.submit("held", run_id="held%02d" % i)["run_id"] for i in range(12)]
    for rid in rids:
        run = api.wait_terminal(rid, timeout=60)
        assert run["status"] == "succeeded", (rid, run, api.steps(rid))
    # An attempt holds its room from its lease (started_at) to its settling
    # transaction (finished_at): at no lease were more than 4 held.
    rows = db.sql("SELECT a.run_id, (SELECT count(*) FROM step_attempt b"
                  " WHERE b.started_at <= a.started_at AND b.finished_at > a.started_at)"
                  " FROM step_attempt a ORDER BY a.started_at")
    assert len(rows) == 12, rows
    assert max(int(r[1]) for r in rows) <= 4, rows
