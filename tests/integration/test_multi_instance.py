"""Several instances share one database (README, "Operating it"); every run
finishes and no step is settled twice."""

import pytest
import collections
import concurrent.futures
import threading

from harness import StepScript, cont, succeed, wait_until

RUNS = 500
STEPS = 3


@pytest.mark.serial
def test_two_instances_finish_500_runs_without_double_settlement(services, db, webhook):
    a = services.start()
    b = services.start()
    webhook.route("/steps", StepScript({
        0: lambda r: cont({"i": r.json["payload"]["i"], "s": 1}),
        1: lambda r: cont({"i": r.json["payload"]["i"], "s": 2}),
        2: lambda r: succeed({"i": r.json["payload"]["i"], "done": True}),
    }))
    a.api.put_workflow("wf", webhook.url(), max_attempts=3, timeout_ms=20000)

    rids = ["multi-%04d" % i for i in range(RUNS)]
    lock = threading.Lock()
    errors = []

    def submit(i):
        api = (a if i % 2 == 0 else b).api
        r = api.post("/v1/runs", {"workflow": "wf", "run_id": rids[i], "input": {"i": i}})
        if r.status != 201:
            with lock:
                errors.append((rids[i], r))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(submit, range(RUNS)))
    assert not errors, errors[:5]

    def all_terminal():
        rows = db.sql("SELECT status, count(*) FROM run GROUP BY status")
        counts = {s: int(n) for s, n in rows}
        assert counts.get("failed", 0) == 0 and counts.get("cancelled", 0) == 0, counts
        return counts.get("succeeded", 0) == RUNS
    wait_until(all_terminal, timeout=240, interval=0.25,
               message=lambda: "all %d runs succeeded: %s" % (RUNS, db.sql("SELECT status, count(*) FROM run GROUP BY status")))

    calls = collections.Counter((r.run_id, r.step, r.attempt) for r in webhook.requests(path="/steps"))
    dup = {k: n for k, n in calls.items() if n > 1}
    assert not dup, "attempts delivered more than once: %r" % list(dup.items())[:10]
    for rid in rids:
        for step in range(STEPS):
            assert any(calls.get((rid, step, att)) for att in (1, 2, 3)), "no call for %s step %d" % (rid, step)

    def check(rid):
        i = int(rid.split("-")[1])
        run = a.api.run(rid) if i % 2 else b.api.run(rid)
        assert run["status"] == "succeeded" and run["result"] == {"i": i, "done": True}, run
        assert run["final_step"] == STEPS - 1
        steps = (a if i % 2 else b).api.steps(rid)
        settled = collections.Counter(s["step"] for s in steps if s["result"] in ("continue", "succeed"))
        assert settled == {n: 1 for n in range(STEPS)}, "%s: %r" % (rid, steps)
        assert all(s["step"] < STEPS for s in steps)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(check, rids))

    assert a.running() and b.running()
