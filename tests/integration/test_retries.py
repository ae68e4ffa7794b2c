"""docs/webhook-protocol.md, sections 2 and 4: transient errors retry up to
max_attempts, and the last attempt dead-letters the step and fails the run."""

from harness import Reply, StepScript, cont
from kvcheck import step_dead_letters


def test_transient_errors_retry_then_dead_letter_on_last_attempt(api, db, webhook):
    webhook.route("/steps", StepScript({0: cont("x"), 1: Reply(500, body=b"database on fire")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, retry_backoff={"base_ms": 100, "max_ms": 1000})
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    assert run["error_kind"] == "transient"
    assert "HTTP 500" in run["error"] and "database on fire" in run["error"], run["error"]
    assert run["final_step"] == 1

    reqs = webhook.requests(run_id=rid, step=1)
    assert [r.attempt for r in reqs] == [1, 2, 3]
    assert len({r.headers["webhook-id"] for r in reqs}) == 1
    assert reqs[1].time - reqs[0].time >= 0.09
    assert reqs[2].time - reqs[1].time >= 0.19

    steps = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [
        (0, 1, "continue"), (1, 1, "transient_error"), (1, 2, "transient_error"), (1, 3, "transient_error")]

    (dl,) = step_dead_letters(api, db, rid)
    assert dl["step"] == 1
    assert dl["attempts"] == 3
    assert dl["last_http_status"] == 500
    assert "HTTP 500" in dl["last_error"]


def test_single_attempt_workflow_dead_letters_on_first_transient_error(api, db, webhook):
    webhook.route("/steps", StepScript({0: Reply(503, body=b"nope")}))
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "transient"
    assert len(webhook.requests(run_id=rid)) == 1
    assert len(step_dead_letters(api, db, rid)) == 1


def test_run_max_attempts_overrides_workflow(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(500, body=b"")}))
    api.put_workflow("wf", webhook.url(), max_attempts=2)
    rid = api.submit("wf", max_attempts=4)["run_id"]
    assert api.wait_terminal(rid)["status"] == "failed"
    assert [r.attempt for r in webhook.requests(run_id=rid)] == [1, 2, 3, 4]
