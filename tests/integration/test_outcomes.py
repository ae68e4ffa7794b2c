"""Outcome bodies (docs/webhook-protocol.md, sections 3 and 4): continue (now
and with a delay), succeed, fail and cancel, and the kv effects of outcomes."""

import pytest

from harness import Reply, StepScript, cancel, cont, fail, succeed
from kvcheck import kv_get, step_dead_letters


def test_three_step_run_with_delay_succeeds_with_result(api, webhook):
    webhook.route("/steps", StepScript({
        0: lambda r: cont({"n": r.json["payload"]["n"] + 1}),
        1: lambda r: cont({"n": r.json["payload"]["n"] + 1}, delay_ms=400),
        2: lambda r: succeed({"total": r.json["payload"]["n"] * 10}),
    }))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", input={"n": 0})["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"total": 20}
    assert run["final_step"] == 2
    assert run["error"] is None

    reqs = webhook.requests(run_id=rid)
    assert [r.step for r in reqs] == [0, 1, 2]
    assert [r.json["payload"] for r in reqs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    gap = reqs[2].time - reqs[1].time
    assert gap >= 0.35, "step 2 ran %.3fs after step 1 asked for a 400 ms delay" % gap

    steps = api.steps(rid)
    assert len(steps) == 3
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [
        (0, 1, "continue"), (1, 1, "continue"), (2, 1, "succeed")]
    assert [s["payload"] for s in steps] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert all(s["http_status"] == 200 for s in steps)


def test_delayed_step_shows_scheduled_with_next_attempt_at(api, webhook):
    webhook.route("/steps", StepScript({0: cont("later", delay_ms=600000)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_status(rid, "scheduled")
    assert run["step"] == 1
    assert run["next_attempt_at"]
    assert api.post("/v1/runs/%s/cancel" % rid).status == 200


def test_succeed_with_null_result(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(None)}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "succeeded" and run["result"] is None and run["final_step"] == 0


def test_fail_outcome_fails_run_without_dead_letter(api, db, webhook):
    webhook.route("/steps", StepScript({0: cont(1), 1: fail("card declined")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    assert run["error"] == "card declined"
    assert run["error_kind"] == "permanent"
    assert run["final_step"] == 1
    assert run["result"] is None
    assert len(webhook.requests(run_id=rid)) == 2, "a fail outcome is not retried"
    assert api.steps(rid)[-1]["result"] == "fail"
    assert step_dead_letters(api, db, rid) == []


def test_cancel_outcome_cancels_run_with_reason(api, db, webhook):
    webhook.route("/steps", StepScript({0: cancel("user left")}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled"
    assert run["error"] == "user left"
    assert run["final_step"] == 0
    assert api.steps(rid)[-1]["result"] == "cancel"
    assert step_dead_letters(api, db, rid) == []


@pytest.mark.parametrize("outcome", ["continue", "succeed", "fail", "cancel"])
def test_outcome_kv_effects_are_applied_with_the_settlement(api, db, webhook, outcome):
    kv = {"put": {"app/%s" % outcome: {"v": 1}}, "delete": ["app/old"]}
    replies = {
        "continue": {0: cont(1, kv=kv), 1: succeed(None)},
        "succeed": {0: succeed(1, kv=kv)},
        "fail": {0: {"outcome": "fail", "reason": "r", "kv": kv}},
        "cancel": {0: {"outcome": "cancel", "reason": "r", "kv": kv}},
    }[outcome]
    script = {k: (Reply(200, v) if isinstance(v, dict) else v) for k, v in replies.items()}
    webhook.route("/steps", StepScript(script))
    api.put_workflow("wf", webhook.url())
    api.submit("wf", run_id="seed", delay_ms=600000, kv={"put": {"app/old": 0}})
    assert kv_get(api, db, "app/old") == 0
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] in ("succeeded", "failed", "cancelled")
    assert kv_get(api, db, "app/%s" % outcome) == {"v": 1}
    assert kv_get(api, db, "app/old") is None


def test_kv_effects_of_an_invalid_outcome_are_not_applied(api, db, webhook):
    bad = {"outcome": "succeed", "result": 1, "kv": {"put": {"workflow/x": 1, "app/bad": 1}}}
    webhook.route("/steps", StepScript({0: Reply(200, bad)}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "failed" and run["error_kind"] == "permanent"
    assert run["error"].startswith("invalid step response"), run["error"]
    assert kv_get(api, db, "app/bad") is None
