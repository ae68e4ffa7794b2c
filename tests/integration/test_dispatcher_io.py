"""The dispatcher keeps webhook I/O off the database thread: an answer that
arrives in time is never turned into a timeout because the worker is waiting
on PostgreSQL."""
import os
import subprocess

import pytest

import harness
from harness import Reply, StepScript


@pytest.mark.service_env(HOOKFLOW_WORKERS="1")
def test_answers_arriving_while_the_database_is_blocked_are_not_timeouts(service, api, webhook, db):
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "succeed", "result": 1}, delay=0.3)}))
    api.put_workflow("io", webhook.url(), timeout_ms=1000, max_attempts=1,
                     retry_backoff={"base_ms": 10, "max_ms": 10})
    rids = [api.submit("io", run_id="io%02d" % i)["run_id"] for i in range(10)]
    webhook.wait_requests(10, timeout=20)
    # While those calls are answered (0.3 s after they arrived), the run table
    # is locked for 2.5 s: the worker's settlements wait, its calls must not.
    pg = db.pg
    lock = subprocess.run(
        [os.path.join(harness.PG_BIN, "psql"), "-X", "-q", "-h", pg.host, "-p", str(pg.port),
         "-U", pg.user, "-d", db.name, "-c",
         "BEGIN; LOCK TABLE run IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2.5); COMMIT;"],
        capture_output=True, text=True, timeout=60)
    assert lock.returncode == 0, lock.stderr
    for rid in rids:
        run = api.wait_terminal(rid, timeout=30)
        steps = api.steps(rid)
        assert run["status"] == "succeeded", (rid, run, steps)
        assert [(s["attempt"], s["result"]) for s in steps] == [(1, "succeed")], (rid, steps)
