"""Rerun (issue 4; docs/run-states.md, openapi/openapi.yaml): POST
/v1/runs/{id}/rerun starts a new generation of a terminated run from step 0 or
from any step it reached, with the payload recorded for that step, keeping its
memos; 409 run_active for an active run; 400 for a step never reached and for
`input` with a step other than 0; the history shows both generations, the
terminal callback fires again and webhook-id values differ between
generations."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from harness import Hang, Reply, StepScript, assert_error, cont, fail, succeed
from helpers_issue4 import q

TOKEN = "rerun-test-token-0123456789"


def _rerun(api, rid, body=None):
    return api.post("/v1/runs/%s/rerun" % q(rid), body)


def _memo_call(req, method, key, value=None):
    """Calls the memo endpoint of the step request `req` with its delivery
    token (memo.url and memo.token); returns (status, parsed body)."""
    memo = req.field("memo")
    url = memo["url"] + "/memo/" + key
    data = None if value is None else json.dumps({"value": value}).encode()
    r = urllib.request.Request(url, data=data, method=method,
                               headers={"Authorization": "Bearer " + memo["token"],
                                        "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(r, timeout=10) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)


@pytest.fixture
def three_steps(api, webhook):
    """Workflow "wf": step 0 continues with {"n": 1}, step 1 memoizes expensive
    work (computing it only when the memo is missing) and continues with
    {"n": 2, "work": ...}, step 2 succeeds. Callbacks go to /cb. Returns a dict
    recording what step 1 saw in the memo on every call."""
    seen = {"memo_before": [], "computed": 0}
    lock = threading.Lock()

    def step1(req):
        status, body = _memo_call(req, "GET", "expensive")
        with lock:
            seen["memo_before"].append((req.field("generation"), status, body))
        if status == 404:
            with lock:
                seen["computed"] += 1
            work = {"v": 42}
            st, _ = _memo_call(req, "PUT", "expensive", work)
            assert st in (200, 201, 204), "memo PUT answered %d" % st
        else:
            work = body["value"]
        return cont({"n": 2, "work": work})

    webhook.route("/steps", StepScript({
        0: lambda req: cont({"n": 1, "from": req.field("payload")}),
        1: step1,
        2: lambda req: succeed({"final": req.field("payload"), "generation": req.field("generation")}),
    }))
    webhook.route("/cb", lambda req: Reply(200, body=b""))
    api.put_workflow("wf", webhook.url(), callback_url=webhook.url("/cb"))
    return seen


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_rerun_from_a_reached_step_uses_its_recorded_payload_and_keeps_memos(api, webhook, three_steps):
    rid = api.submit("wf", run_id="r1", input={"order": 7})["run_id"]
    first = api.wait_terminal(rid)
    assert first["status"] == "succeeded" and first["generation"] == 1
    webhook.wait_requests(1, path="/cb", run_id=rid)
    gen1 = {r.step: r for r in webhook.requests(path="/steps", run_id=rid)}
    assert sorted(gen1) == [0, 1, 2]
    assert three_steps["computed"] == 1

    r = _rerun(api, rid, {"from_step": 1})
    assert r.status == 201, r
    assert r.body["run_id"] == rid
    assert r.body["generation"] == 2
    assert r.body["status"] not in ("succeeded", "failed", "cancelled")
    assert r.body["step"] == 1
    second = api.wait_terminal(rid)
    assert second["status"] == "succeeded" and second["generation"] == 2
    assert second["result"] == {"final": {"n": 2, "work": {"v": 42}}, "generation": 2}

    gen2 = [x for x in webhook.requests(path="/steps", run_id=rid) if x.field("generation") == 2]
    assert [x.step for x in gen2] == [1, 2], "generation 2 starts at step 1; step 0 is not called again"
    # the webhook sees the payload recorded for step 1 in generation 1
    assert gen2[0].field("payload") == gen1[1].field("payload") == {"n": 1, "from": {"order": 7}}
    # the memo written in generation 1 is read in generation 2: no recomputation
    assert three_steps["computed"] == 1
    assert three_steps["memo_before"][-1] == (2, 200, {"value": {"v": 42}})
    # webhook-id differs between generations for the same step
    assert gen2[0].headers["webhook-id"] != gen1[1].headers["webhook-id"]
    assert gen2[1].headers["webhook-id"] != gen1[2].headers["webhook-id"]

    # history shows both generations
    hist = [(s["generation"], s["step"], s["result"]) for s in api.steps(rid)]
    assert hist == [(1, 0, "continue"), (1, 1, "continue"), (1, 2, "succeed"),
                    (2, 1, "continue"), (2, 2, "succeed")]
    step1_g2 = [s for s in api.steps(rid) if s["generation"] == 2 and s["step"] == 1][0]
    assert step1_g2["payload"] == {"n": 1, "from": {"order": 7}}

    # the terminal callback fires again, for generation 2
    cbs = webhook.wait_requests(2, path="/cb", run_id=rid)
    assert [c.json["generation"] for c in cbs] == [1, 2]
    assert cbs[1].json["status"] == "succeeded"
    assert cbs[1].json["result"] == second["result"]
    assert cbs[1].json["finished_at"] == second["finished_at"]
    assert cbs[0].headers["webhook-id"] != cbs[1].headers["webhook-id"]


def test_rerun_from_step_0_without_input_replays_the_original_input(api, webhook, three_steps):
    rid = api.submit("wf", run_id="r0", input={"order": 1})["run_id"]
    api.wait_terminal(rid)
    r = _rerun(api, rid, {"from_step": 0})
    assert r.status == 201, r
    run = api.wait_terminal(rid)
    assert run["generation"] == 2 and run["status"] == "succeeded"
    assert run["input"] == {"order": 1}
    s0 = webhook.requests(path="/steps", run_id=rid, step=0)
    assert [x.field("generation") for x in s0] == [1, 2]
    assert s0[0].field("payload") == s0[1].field("payload") == {"order": 1}
    assert s0[0].headers["webhook-id"] != s0[1].headers["webhook-id"]
    # an empty body is from_step 0 too
    r = api.request("POST", "/v1/runs/%s/rerun" % rid)
    assert r.status == 201, r
    assert api.wait_terminal(rid)["generation"] == 3


def test_rerun_from_step_0_with_input_replaces_the_input(api, webhook):
    webhook.route("/steps", StepScript({0: lambda req: fail("bad input")
                                        if req.field("payload") == {"card": "bad"}
                                        else succeed(req.field("payload"))}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_id="ri", input={"card": "bad"})["run_id"]
    assert api.wait_terminal(rid)["status"] == "failed"
    r = _rerun(api, rid, {"from_step": 0, "input": {"card": "good"}})
    assert r.status == 201, r
    assert r.body["input"] == {"card": "good"}
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"card": "good"}
    assert run["input"] == {"card": "good"} and run["generation"] == 2
    assert run["error"] is None and run["error_kind"] is None
    # input may also be given without from_step (it defaults to 0), and null is an input
    r = _rerun(api, rid, {"input": None})
    assert r.status == 201, r
    run = api.wait_terminal(rid)
    assert run["input"] is None and run["result"] is None and run["generation"] == 3


def test_rerun_after_cancel_and_after_failure(api, webhook):
    webhook.route("/steps", StepScript({
        0: cont("p0"),
        1: lambda req: Reply(500, body=b"boom") if req.field("generation") == 1 else succeed("ok"),
    }))
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    rid = api.submit("wf", run_id="rf")["run_id"]
    failed = api.wait_terminal(rid)
    assert failed["status"] == "failed" and failed["final_step"] == 1
    r = _rerun(api, rid, {"from_step": 1})
    assert r.status == 201, r
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["generation"] == 2
    assert [x.field("payload") for x in webhook.requests(run_id=rid, step=1)] == ["p0", "p0"]

    # a cancelled run (cancelled while scheduled between steps) can be rerun too
    webhook.route("/steps", StepScript({0: cont("later", delay_ms=600000), 1: succeed("after")}))
    cid = api.submit("wf", run_id="rc")["run_id"]
    api.wait_status(cid, "scheduled")
    assert api.post("/v1/runs/rc/cancel").status == 200
    r = _rerun(api, cid, {"from_step": 1})
    assert r.status == 201, r
    run = api.wait_terminal(cid)
    assert run["status"] == "succeeded" and run["result"] == "after" and run["generation"] == 2
    (s1,) = webhook.requests(run_id=cid, step=1)
    assert s1.field("payload") == "later"


def test_rerun_of_an_active_run_is_409_run_active(api, webhook):
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed(1), max_s=30)}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rid = api.submit("wf", run_id="ra")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    assert_error(_rerun(api, rid, {"from_step": 0}), 409, "run_active")
    parked = api.submit("wf", run_id="rp", delay_ms=600000)["run_id"]
    assert_error(_rerun(api, parked), 409, "run_active")
    assert api.run(parked)["generation"] == 1 and api.run(parked)["status"] == "scheduled"
    release.set()
    run = api.wait_terminal(rid)
    assert run["generation"] == 1 and len(webhook.requests(run_id=rid)) == 1


def test_rerun_from_a_step_never_reached_is_400(api, webhook):
    webhook.route("/steps", StepScript({0: cont(1), 1: fail("stop")}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_id="rn")["run_id"]
    run = api.wait_terminal(rid)
    assert run["final_step"] == 1
    for step in (2, 3, 1000):
        assert_error(_rerun(api, rid, {"from_step": step}), 400, "invalid_argument", field="from_step")
    after = api.run(rid)
    assert after["generation"] == 1 and after["status"] == "failed"
    assert len(api.steps(rid)) == 2


def test_rerun_input_with_a_step_other_than_0_is_400(api, webhook):
    webhook.route("/steps", StepScript({0: cont(1), 1: succeed(2)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_id="rx", input="orig")["run_id"]
    api.wait_terminal(rid)
    assert_error(_rerun(api, rid, {"from_step": 1, "input": "new"}), 400, "invalid_argument", field="input")
    run = api.run(rid)
    assert run["generation"] == 1 and run["input"] == "orig"


def test_rerun_with_a_bad_body_is_400_naming_the_field(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_id="rb")["run_id"]
    api.wait_terminal(rid)
    cases = [
        ({"from_step": "1"}, "from_step"),
        ({"from_step": -1}, "from_step"),
        ({"from_step": 1.5}, "from_step"),
        ({"from_step": True}, "from_step"),
        ({"from_step": 0, "inptu": 1}, "inptu"),
    ]
    for body, field in cases:
        r = _rerun(api, rid, body)
        assert r.status == 400, (body, r)
        assert_error(r, 400, "invalid_argument", field=field)
    assert_error(api.post("/v1/runs/rb/rerun", [0]), 400, "invalid_argument", field="body")
    assert api.run(rid)["generation"] == 1
    assert len(webhook.requests(run_id=rid)) == 1


def test_rerun_of_an_unknown_run_is_404(api):
    assert_error(_rerun(api, "no-such-run", {"from_step": 0}), 404, "not_found")
