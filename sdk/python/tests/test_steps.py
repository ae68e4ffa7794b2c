"""The webhook helper with the running service: real signed step requests and callbacks
from hookflow, answered through the SDK's http.server adapter with every outcome the
protocol defines, the memo through the delivery token, pending steps completed later,
errors retried or dead-lettered, and signatures refused or rotated."""
from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Tuple

import pytest
from conftest import Hooks, eventually, new_secret, unique

from hookflow import Client, HookflowError
from hookflow.types import StepRequest
from hookflow.webhook import (StepContext, StepHandler, StepResult, cancel, continue_with, fail,
                              pending, permanent_error, start_children, succeed, transient_error,
                              wait_for_signal)


def register(api: Client, hooks: Hooks, prefix: str, fn: StepHandler, **extra: Any) -> str:
    name = unique(prefix)
    hooks.route(name, fn)
    api.put_workflow(name, {"url": f"{hooks.base}/steps", "callback_url": f"{hooks.base}/done",
                            "secret": str(hooks.secret),
                            "retry_backoff": {"base_ms": 10, "max_ms": 50}, **extra})
    return name


def history(api: Client, run_id: str) -> List[Tuple[int, int, str]]:
    return [(s["step"], s["attempt"], s["result"]) for s in api.get_run_steps(run_id)["steps"]]


def test_every_continue_then_succeed_with_kv_and_the_callback(api: Client, hooks: Hooks) -> None:
    def flow(req: StepRequest, ctx: StepContext) -> StepResult:
        p: Dict[str, Any] = req["payload"]
        run = req["run_id"]
        if req["step"] == 0:
            return continue_with({**p, "s0": True}, delay_ms=50)
        if req["step"] == 1:
            return continue_with(p, run_at="2020-01-01T00:00:00Z")
        if req["step"] == 2:
            return wait_for_signal(f"one:{run}", timeout_ms=60000, payload=p)
        if req["step"] == 3:
            return wait_for_signal([f"x:{run}", f"y:{run}"], timeout_ms=60000,
                                   payload={**p, "first": req.get("signal")})
        return succeed({**p, "second": req.get("signal")},
                       kv={"put": {f"app/{run}": {"done": True}}})

    wf = register(api, hooks, "flow", flow)
    run = unique("flow-run")
    api.submit_run({"workflow": wf, "run_id": run, "input": {"order": 42},
                    "headers": {"tenant": "acme"}})
    s2 = hooks.step_of(run, 2)
    assert s2.request["headers"] == {"tenant": "acme"}
    assert s2.request["memo"]["token"].startswith("hf1.")
    api.send_signal(f"one:{run}", {"payload": {"approved": True}})
    hooks.step_of(run, 3)
    api.send_signal(f"y:{run}", {"payload": {"via": "y"}})
    done = api.wait_for_run(run, timeout_s=20)
    assert done["status"] == "succeeded", done
    assert done["result"] == {
        "order": 42, "s0": True,
        "first": {"status": "delivered", "payload": {"approved": True}},
        "second": {"status": "delivered", "correlation_key": f"y:{run}", "payload": {"via": "y"}},
    }
    assert history(api, run) == [(0, 1, "continue"), (1, 1, "continue"), (2, 1, "continue"),
                                 (3, 1, "continue"), (4, 1, "succeed")]
    assert api.get_kv(f"app/{run}")["value"] == {"done": True}
    cb = hooks.callback_of(run)
    assert (cb["status"], cb["result"]) == ("succeeded", done["result"])


def test_fail_and_cancel_end_the_run_with_their_reason(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "end", lambda req, ctx: fail("card declined")
                  if req["payload"] == "fail" else cancel("user left"))
    f, c = unique("fail"), unique("cancel")
    api.submit_run({"workflow": wf, "run_id": f, "input": "fail"})
    api.submit_run({"workflow": wf, "run_id": c, "input": "cancel"})
    failed = api.wait_for_run(f, timeout_s=20)
    assert (failed["status"], failed["error"], failed["error_kind"]) == (
        "failed", "card declined", "permanent")
    cancelled = api.wait_for_run(c, timeout_s=20)
    assert (cancelled["status"], cancelled["error"]) == ("cancelled", "user left")
    assert hooks.callback_of(f)["status"] == "failed"
    assert hooks.callback_of(c)["status"] == "cancelled"


def test_children_started_waited_for_handed_over_listed(api: Client, hooks: Hooks) -> None:
    child = register(api, hooks, "child", lambda req, ctx: succeed(req["payload"] * 10))

    def parent(req: StepRequest, ctx: StepContext) -> StepResult:
        if req["step"] == 0:
            return start_children([{"key": "c1", "workflow": child, "input": 1},
                                   {"key": "c2", "workflow": child, "input": 2}],
                                  payload="p", wait={"mode": "all", "timeout_ms": 60000})
        return succeed({"payload": req["payload"],
                        "children": [[c["key"], c["status"], c["result"]]
                                     for c in req.get("children", [])]})

    wf = register(api, hooks, "parent", parent)
    run = unique("parent-run")
    api.submit_run({"workflow": wf, "run_id": run})
    assert api.wait_for_run(run, timeout_s=20)["result"] == {
        "payload": "p", "children": [["c1", "succeeded", 10], ["c2", "succeeded", 20]]}
    kids = api.get_run_children(run)["children"]
    assert [((k["parent"] or {}).get("key"), k["status"]) for k in kids] == [
        ("c1", "succeeded"), ("c2", "succeeded")]


def test_an_exception_and_a_transient_error_are_retried(api: Client, hooks: Hooks) -> None:
    def retry(req: StepRequest, ctx: StepContext) -> StepResult:
        if req["attempt"] == 1:
            raise RuntimeError("boom")
        if req["attempt"] == 2:
            return transient_error("busy", retry_after_ms=0)
        return succeed(req["attempt"])

    wf = register(api, hooks, "retry", retry)
    run = unique("retry-run")
    api.submit_run({"workflow": wf, "run_id": run})
    assert api.wait_for_run(run, timeout_s=20)["result"] == 3
    steps = api.get_run_steps(run)["steps"]
    assert [(s["attempt"], s["result"], s["http_status"]) for s in steps] == [
        (1, "transient_error", 500), (2, "transient_error", 503), (3, "succeed", 200)]
    assert "boom" in (steps[0]["error"] or "")


def test_permanent_error_dead_letter_redrive_delete(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "perm", lambda req, ctx: permanent_error("no such order")
                  if req["generation"] == 1 else succeed({"generation": req["generation"]}))
    a, b = unique("perm-a"), unique("perm-b")
    for run in (a, b):
        api.submit_run({"workflow": wf, "run_id": run})
    for run in (a, b):
        r = api.wait_for_run(run, timeout_s=20)
        assert r["status"] == "failed" and re.search(r"422.*no such order", r["error"] or "")
    dead = api.list_dead_letters(workflow=wf, kind="step")["dead_letters"]
    assert sorted(d["run_id"] for d in dead) == sorted([a, b])
    da = next(d for d in dead if d["run_id"] == a)
    assert api.redrive_dead_letter(da["id"]) == {"id": da["id"], "kind": "step", "redriven": True}
    again = api.wait_for_run(a, timeout_s=20)
    assert (again["status"], again["result"]) == ("succeeded", {"generation": 2})
    api.delete_dead_letter(next(d for d in dead if d["run_id"] == b)["id"])
    assert api.list_dead_letters(workflow=wf)["dead_letters"] == []


def test_the_memo_through_the_delivery_token_survives_a_retry(api: Client, hooks: Hooks) -> None:
    def memo(req: StepRequest, ctx: StepContext) -> StepResult:
        if req["attempt"] == 1:
            if ctx.memo.get("quote").found:
                return fail("a memo before any was written")
            ctx.memo.put("quote", {"total": 2500})
            ctx.step_memo.put("seen", [1])
            ctx.memo.put("scratch", 1)
            return transient_error("retry me", retry_after_ms=0)
        quote = ctx.memo.get("quote")
        seen = ctx.step_memo.get("seen")
        ctx.memo.delete("scratch")
        return succeed({"quote": list(quote), "seen": list(seen),
                        "scratch": ctx.memo.get("scratch").found, "webhook_id": ctx.webhook_id})

    wf = register(api, hooks, "memo", memo)
    run = unique("memo-run")
    api.submit_run({"workflow": wf, "run_id": run})
    done = api.wait_for_run(run, timeout_s=20)
    first = hooks.steps_of(run)[0]
    assert done["result"] == {"quote": [True, {"total": 2500}], "seen": [True, [1]],
                              "scratch": False, "webhook_id": first.ctx.webhook_id}
    assert first.ctx.webhook_id


def wait_pending(api: Client, run: str) -> Any:
    return eventually("the step settled pending", lambda: (
        lambda r: r if r["pending_since"] is not None else None)(api.get_run(run)))


def test_pending_heartbeat_complete_and_completing_twice(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "pending", lambda req, ctx: pending(timeout_ms=60000,
                                                                   heartbeat_timeout_ms=30000))
    run = unique("pending-run")
    api.submit_run({"workflow": wf, "run_id": run})
    seen = hooks.step_of(run, 0)
    assert wait_pending(api, run)["status"] == "running"
    assert seen.ctx.heartbeat({"progress": 50}) == {"cancel_requested": False}
    last = api.get_run_steps(run)["steps"][-1]
    assert last["heartbeat"] is not None and last["heartbeat"]["details"] == {"progress": 50}
    assert seen.ctx.complete(succeed("done later"))["run_id"] == run
    done = api.wait_for_run(run, timeout_s=20)
    assert (done["status"], done["result"]) == ("succeeded", "done later")
    with pytest.raises(HookflowError) as e:
        seen.ctx.complete(succeed("again"))
    assert (e.value.status, e.value.code) == (409, "already_completed")


def test_pending_completed_with_a_permanent_error(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "pending-err", lambda req, ctx: pending())
    run = unique("pending-err-run")
    api.submit_run({"workflow": wf, "run_id": run})
    seen = hooks.step_of(run, 0)
    wait_pending(api, run)
    seen.ctx.complete(permanent_error("gave up"))
    done = api.wait_for_run(run, timeout_s=20)
    assert (done["status"], done["error"]) == ("failed", "gave up")


def test_another_secret_is_refused_with_401(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "wrong-secret", lambda req, ctx: succeed(), secret=new_secret())
    run = unique("wrong-run")
    api.submit_run({"workflow": wf, "run_id": run})
    done = api.wait_for_run(run, timeout_s=20)
    assert done["status"] == "failed"
    assert re.search(r"401.*no matching signature", done["error"] or "")
    assert hooks.steps_of(run) == []


def test_a_rotation_verifies_with_the_old_and_the_new_secret(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "rotate", lambda req, ctx: succeed(req["payload"]))
    rotated = api.rotate_workflow_secret(wf, {"grace_ms": 600000})
    first = unique("rot-old")
    api.submit_run({"workflow": wf, "run_id": first, "input": "old"})
    assert api.wait_for_run(first, timeout_s=20)["result"] == "old"
    fresh = Hooks([rotated["secret"]])
    try:
        fresh.route(wf, lambda req, ctx: succeed(req["payload"]))
        api.put_workflow(wf, {"url": f"{fresh.base}/steps",
                              "retry_backoff": {"base_ms": 10, "max_ms": 50}})
        second = unique("rot-new")
        api.submit_run({"workflow": wf, "run_id": second, "input": "new"})
        assert api.wait_for_run(second, timeout_s=20)["result"] == "new"
        assert len(fresh.steps_of(second)) == 1
    finally:
        fresh.stop()


def test_wait_for_run_gives_up_at_its_timeout(api: Client, hooks: Hooks) -> None:
    wf = register(api, hooks, "slow", lambda req, ctx: pending())
    run = unique("slow-run")
    api.submit_run({"workflow": wf, "run_id": run})
    t = time.monotonic()
    assert api.wait_for_run(run, timeout_s=0.5)["status"] in ("pending", "running")
    assert 0.4 <= time.monotonic() - t < 5
    api.cancel_run(run)
