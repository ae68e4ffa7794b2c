"""Retention (README, "Configuration" and "Operations"): HOOKFLOW_RETENTION_MS
deletes terminated runs that long after they ended, with their step history,
memos and replay records, in bounded batches; active runs (including long
signal waits) are never touched. Dead letters expire after
HOOKFLOW_DEAD_RETENTION_MS."""

import re
import time

import pytest

from harness import Reply, StepScript, cont, sql_quote, succeed, wait_until
from helpers_issue3 import memo_path, signal_outcome, wait_signal

WINDOW_MS = 2000
TABLES = ("run", "step_attempt", "memo", "step_output", "run_listing")


def _counts(db, rid):
    q = sql_quote(rid)
    return {t: int(db.scalar("SELECT count(*) FROM %s WHERE run_id = %s" % (t, q))) for t in TABLES}


def _age_s(db, rid):
    """Seconds since the run finished, by the database clock ('' if gone)."""
    v = db.scalar("SELECT extract(epoch FROM now() - finished_at) FROM run WHERE run_id = %s" % sql_quote(rid))
    return float(v) if v not in (None, "") else None


@pytest.mark.service_env(HOOKFLOW_RETENTION_MS=str(WINDOW_MS))
def test_retention_deletes_terminated_runs_with_history_memos_and_replay_records(api, db, webhook):
    def step0(req):
        if req.attempt == 1:
            return Reply(503, body=b"once more")
        return cont("s1")

    webhook.route("/steps", StepScript({0: step0, 1: succeed("done")}))
    api.put_workflow("wf", webhook.url(), step_output_replay=True, max_attempts=3)
    rid = api.submit("wf", run_id="old-run")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert api.put(memo_path(rid, "k"), {"value": 1}).status == 200
    assert api.put(memo_path(rid, "k", 0), {"value": 2}).status == 200

    counts = _counts(db, rid)
    assert counts == {"run": 1, "step_attempt": 3, "memo": 2, "step_output": 2,
                      "run_listing": 1}, counts
    # the last age seen while the run was still there
    seen = {"age": 0.0}

    def gone():
        age = _age_s(db, rid)
        if age is not None:
            seen["age"] = age
            return False
        return True
    wait_until(gone, timeout=20, interval=0.05, message="run %s swept" % rid)
    # a lower bound: the run was still there this long after it ended (the
    # last look before it went, so up to one poll short of the deletion)
    assert seen["age"] >= WINDOW_MS / 1000 - 0.3, "swept %.2fs after it ended" % seen["age"]
    assert _counts(db, rid) == {t: 0 for t in TABLES}
    r = api.get("/v1/runs/" + rid)
    assert r.status == 404, r
    assert api.get("/v1/runs/%s/steps" % rid).status == 404
    assert api.get(memo_path(rid, "k")).status == 404


@pytest.mark.service_env(HOOKFLOW_RETENTION_MS=str(WINDOW_MS))
def test_retention_sweeps_in_bounded_batches(service, api, db):
    n = 2500
    api.put_workflow("wf", "http://127.0.0.1:9/steps")
    start = len(service.log_text())
    # one statement list, so one transaction: the sweeper sees every row at once
    db.sql(
        "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
        "finished_at, final_step) SELECT 'bulk-' || i, 'wf', 'succeeded', 'job-' || i, '\\x00', 1000, 3, "
        "now() - interval '1 hour', 0 FROM generate_series(1, %d) i; "
        "INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, result) "
        "SELECT 'bulk-' || i, 1, 0, 1, 'job-' || i, 'succeed' FROM generate_series(1, %d) i; "
        "INSERT INTO memo (run_id, scope, key, value) "
        "SELECT 'bulk-' || i, -1, 'k', '1' FROM generate_series(1, %d) i; "
        # the runs' list rows, as hf_submit writes them (migrations/0015)
        "INSERT INTO run_listing (run_id, workflow, created_at) "
        "SELECT run_id, workflow, created_at FROM run WHERE run_id LIKE 'bulk-%%'" % (n, n, n))
    wait_until(lambda: db.scalar("SELECT count(*) FROM run") == "0", timeout=30, interval=0.1,
               message="bulk runs swept")
    assert db.scalar("SELECT count(*) FROM step_attempt") == "0"
    assert db.scalar("SELECT count(*) FROM memo") == "0"
    assert db.scalar("SELECT count(*) FROM run_listing") == "0"
    removed = [int(x) for x in re.findall(r"retention sweep removed=(\d+)", service.log_text()[start:])]
    assert sum(removed) >= n, removed
    assert len(removed) >= 3 and max(removed) <= 1000, "batches of at most 1000 expected: %r" % removed
    assert api.get("/readyz").status == 200


@pytest.mark.service_env(HOOKFLOW_RETENTION_MS=str(WINDOW_MS))
def test_retention_never_touches_active_runs_even_a_long_signal_wait(api, db, webhook):
    webhook.route("/steps", StepScript({
        0: lambda req: wait_signal("long-wait", 60000) if req.run_id == "waiter" else
        (cont("later", delay_ms=600000) if req.run_id == "scheduled" else succeed("canary")),
        1: lambda req: succeed({"signal": req.json.get("signal")}),
    }))
    api.put_workflow("wf", webhook.url())
    waiter = api.submit("wf", run_id="waiter")["run_id"]
    api.wait_status(waiter, "waiting")
    scheduled = api.submit("wf", run_id="scheduled")["run_id"]
    api.wait_status(scheduled, "scheduled")
    pending = api.submit("wf", run_id="delayed", delay_ms=600000)["run_id"]
    assert api.wait_terminal(api.submit("wf", run_id="canary")["run_id"])["status"] == "succeeded"
    # the canary ended after the others started: once it is swept, the window
    # has passed for every one of them
    wait_until(lambda: _age_s(db, "canary") is None, timeout=20, interval=0.1, message="canary swept")
    waited = float(db.scalar("SELECT extract(epoch FROM now() - updated_at) FROM run WHERE run_id = 'waiter'"))
    assert waited >= WINDOW_MS / 1000, waited

    run = api.run(waiter)
    assert run["status"] == "waiting" and run["waiting"]["correlation_key"] == "long-wait", run
    assert api.run(scheduled)["status"] == "scheduled"
    assert api.run(pending)["status"] == "scheduled"
    assert _counts(db, waiter)["step_attempt"] == 1

    assert signal_outcome(api, "long-wait", "still here") == "delivered"
    run = api.wait_terminal(waiter, timeout=10)
    assert run["status"] == "succeeded"
    assert run["result"] == {"signal": {"status": "delivered", "payload": "still here"}}
    for rid in (scheduled, pending):
        assert api.post("/v1/runs/%s/cancel" % rid).status == 200


def test_without_retention_terminated_runs_are_kept(services, db, webhook):
    svc = services.start(HOOKFLOW_DEAD_RETENTION_MS="500")  # sweeping on, run retention off
    webhook.route("/steps", StepScript({0: succeed(1)}))
    svc.api.put_workflow("wf", webhook.url())
    rid = svc.api.submit("wf")["run_id"]
    svc.api.wait_terminal(rid)
    wait_until(lambda: (_age_s(db, rid) or 0) >= 3.0, timeout=20, interval=0.1, message="run 3 s old")
    assert svc.api.run(rid)["status"] == "succeeded"
    assert _counts(db, rid)["step_attempt"] == 1


def _dead_letters(api, run_id):
    r = api.get("/v1/dead-letters", params={"limit": 1000})
    assert r.status == 200, r
    return [d for d in r.body["dead_letters"] if d["run_id"] == run_id]


@pytest.mark.service_env(HOOKFLOW_DEAD_RETENTION_MS=str(WINDOW_MS))
def test_dead_letters_expire_after_the_dead_retention(api, db, webhook):
    webhook.route("/steps", StepScript({0: Reply(404, body=b"gone")}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    (dl,) = _dead_letters(api, rid)
    t_seen = time.monotonic()
    ages = []

    def gone():
        age = db.scalar("SELECT extract(epoch FROM now() - created_at) FROM dead_letter WHERE id = %s"
                        % sql_quote(dl["id"]))
        if age in (None, ""):
            return True
        ages.append(float(age))
        return False
    wait_until(gone, timeout=20, interval=0.05, message="dead letter expired")
    assert max(ages) >= WINDOW_MS / 1000 - 0.3, "expired %.2fs after it was created" % max(ages)
    assert _dead_letters(api, rid) == []
    assert api.post("/v1/dead-letters/%s/redrive" % dl["id"]).status == 404
    # run retention is off: the failed run itself is kept
    assert api.run(rid)["status"] == "failed"
    assert time.monotonic() - t_seen < 20
