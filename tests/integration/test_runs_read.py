"""Reading runs (openapi/openapi.yaml, tag runs): GET /v1/runs/{id} (and
?wait_ms long-poll), GET /v1/runs/{id}/steps, GET /v1/runs with filters and
cursor paging."""

import base64
import threading
import time

from harness import TS_RE, Hang, Reply, StepScript, assert_error, cont, fail, succeed
from helpers_issue3 import wait_signal
from helpers_issue4 import member_run_id, put_group, wait_group_terminal

PARKED = 600000


def test_wait_ms_returns_as_soon_as_the_run_terminates(api, webhook):
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed("late"))}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    assert api.run(rid)["status"] == "running"

    out = {}
    started = threading.Event()

    def poll():
        started.set()
        t0 = time.monotonic()
        out["resp"] = api.get("/v1/runs/" + rid, params={"wait_ms": 20000}, timeout=40)
        out["elapsed"] = time.monotonic() - t0
        out["done"] = time.monotonic()

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    started.wait(5)
    release.set()
    released_at = time.monotonic()
    t.join(30)
    assert "resp" in out, "long-poll did not answer within 30 s"
    r = out["resp"]
    assert r.status == 200, r
    assert r.body["status"] == "succeeded", r
    assert r.body["result"] == "late"
    assert out["done"] - released_at < 5.0, "long-poll answered %.2fs after the run ended" % (out["done"] - released_at)
    assert out["elapsed"] < 15.0


def test_wait_ms_returns_the_run_as_it_stands_after_the_wait(api, webhook):
    webhook.route("/steps", StepScript({0: Hang()}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    t0 = time.monotonic()
    r = api.get("/v1/runs/" + rid, params={"wait_ms": 800}, timeout=20)
    elapsed = time.monotonic() - t0
    assert r.status == 200, r
    assert r.body["status"] == "running"
    assert elapsed >= 0.7, "answered after %.3fs, before wait_ms elapsed" % elapsed
    assert elapsed < 10.0


def test_wait_ms_on_a_terminal_run_answers_at_once(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_terminal(rid)
    t0 = time.monotonic()
    r = api.get("/v1/runs/" + rid, params={"wait_ms": 30000}, timeout=40)
    assert r.status == 200 and r.body["status"] == "succeeded"
    assert time.monotonic() - t0 < 5.0


def test_wait_ms_over_300000_is_400(api):
    api.put_workflow("wf", "http://127.0.0.1:9/x")
    rid = api.submit("wf", delay_ms=PARKED)["run_id"]
    assert_error(api.get("/v1/runs/" + rid, params={"wait_ms": 300001}), 400, "invalid_argument", "wait_ms")
    assert_error(api.get("/v1/runs/" + rid, params={"wait_ms": "soon"}), 400, "invalid_argument", "wait_ms")


def test_terminal_run_has_result_final_step_and_finished_at(api, webhook):
    webhook.route("/steps", StepScript({0: cont({"n": 1}), 1: succeed({"total": 2})}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", input={"n": 0})["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded"
    assert run["result"] == {"total": 2}
    assert run["final_step"] == 1
    assert run["step"] == 1
    assert TS_RE.match(run["finished_at"])
    assert run["error"] is None and run["error_kind"] is None
    assert run.get("next_attempt_at") is None
    assert run["cancel_requested"] is False


def test_steps_lists_every_attempt_oldest_first(api, webhook):
    def step0(req):
        if req.attempt == 1:
            return Reply(503, body=b"busy")
        return cont({"from": 0})

    webhook.route("/steps", StepScript({0: step0, 1: succeed("ok")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf", input={"start": True})["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    steps = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [
        (0, 1, "transient_error"), (0, 2, "continue"), (1, 1, "succeed")]
    assert steps[0]["http_status"] == 503
    assert "HTTP 503" in steps[0]["error"]
    assert steps[1]["http_status"] == 200 and steps[1]["error"] is None
    assert steps[0]["payload"] == {"start": True} and steps[1]["payload"] == {"start": True}
    assert steps[2]["payload"] == {"from": 0}
    for s in steps:
        assert s["generation"] == 1
        assert TS_RE.match(s["started_at"]) and TS_RE.match(s["finished_at"])
        assert isinstance(s["duration_ms"], int) and s["duration_ms"] >= 0
        assert "signal" in s and s["signal"] is None


def test_list_runs_filters_by_workflow_and_status_and_pages_with_cursor(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("b")}))
    api.put_workflow("a", "http://127.0.0.1:9/never")
    api.put_workflow("b", webhook.url())
    a_ids = ["list-a-%d" % i for i in range(5)]
    for rid in a_ids:
        api.submit("a", run_id=rid, delay_ms=PARKED)
    for i in range(2):
        api.wait_terminal(api.submit("b", run_id="list-b-%d" % i)["run_id"])

    pages, cursor = [], None
    for _ in range(5):
        params = {"workflow": "a", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        r = api.get("/v1/runs", params=params)
        assert r.status == 200, r
        pages.append([x["run_id"] for x in r.body["runs"]])
        cursor = r.body["next_cursor"]
        if cursor is None:
            break
    assert pages == [a_ids[4:2:-1], a_ids[2:0:-1], a_ids[0:1]], "newest first, 2 per page: %r" % pages

    r = api.get("/v1/runs", params={"status": "scheduled"})
    assert sorted(x["run_id"] for x in r.body["runs"]) == sorted(a_ids)
    r = api.get("/v1/runs", params={"status": "succeeded"})
    assert sorted(x["run_id"] for x in r.body["runs"]) == ["list-b-0", "list-b-1"]
    assert r.body["next_cursor"] is None
    r = api.get("/v1/runs", params={"workflow": "b", "status": "scheduled"})
    assert r.status == 200 and r.body["runs"] == []
    r = api.get("/v1/runs")
    assert [x["run_id"] for x in r.body["runs"]] == ["list-b-1", "list-b-0"] + a_ids[::-1]
    assert all(x["status"] for x in r.body["runs"])


def test_list_runs_rejects_bad_limit_and_status(api):
    assert_error(api.get("/v1/runs", params={"limit": 0}), 400, "invalid_argument", "limit")
    assert_error(api.get("/v1/runs", params={"limit": 1001}), 400, "invalid_argument", "limit")
    assert_error(api.get("/v1/runs", params={"status": "sleeping"}), 400, "invalid_argument", "status")
    assert_error(api.get("/v1/runs", params={"cursor": "garbage!!"}), 400, "invalid_argument", "cursor")
    # An empty ?status= is no filter (what a form sends); an empty value in a list is an error.
    for status in ("pending,", ",pending", "pending,,failed"):
        assert_error(api.get("/v1/runs", params={"status": status}), 400, "invalid_argument", "status")
    # A well-formed cursor whose id part is not UTF-8 (or holds a NUL) is malformed too.
    for raw in (b"123|\xff\xfe", b"123|a\x00b"):
        cur = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        assert_error(api.get("/v1/runs", params={"cursor": cur}), 400, "invalid_argument", "cursor")


def test_listed_runs_are_the_text_of_their_jsonb_in_every_state(api, webhook, sql):
    """GET /v1/runs passes hf_run_text through (db/engine/02_json.sql): it must
    be, byte for byte, hf_run_json's rendering as jsonb (what the byte cap
    counted before), for runs in each state a run rests in (cancelling only
    lasts while a call is aborted), with and without a concurrency key, and
    with strings to escape; and
    each listed run must equal what GET /v1/runs/{id} shows."""
    odd = 'quote " backslash \\ newline \n tab \t control \x01 unicode \u00e9\u2028\U0001f600'
    release = threading.Event()

    def answer(req):
        rid = req.run_id
        if rid.startswith("hold"):
            return Hang(release=release, then=succeed(odd))
        if rid == "waits":
            return wait_signal("wait:" + odd, 600000)
        if rid == "fails":
            return fail(odd)
        if rid == "cancels":
            return Reply(200, {"outcome": "cancel", "reason": odd})
        return succeed({"echo": req.field("payload"), "n": [1, 2.5, -0.0, 1.25e-7, None, True]})
    webhook.route("/steps", answer)
    api.put_workflow("wf", webhook.url(), max_concurrency=1)
    api.put_workflow("free", webhook.url())
    api.submit("wf", run_id="hold-1", input={"k": odd})
    webhook.wait_requests(1, run_id="hold-1")
    api.submit("wf", run_id="hold-pending", input=None, headers={"x-odd": 'q " b \\ \u00e9'},
               concurrency_key='key " \\ \u00e9\u2028\U0001f600')
    api.submit("free", run_id="parked", input=odd, delay_ms=PARKED, priority=7,
               concurrency_key="k")
    api.submit("free", run_id="waits", input=[])
    api.submit("free", run_id="stopped", delay_ms=PARKED)
    assert api.post("/v1/runs/stopped/cancel").status == 200
    for rid in ("fails", "cancels", "done"):
        api.submit("free", run_id=rid, input=-2.5)
    assert put_group(api, "g-1", "free", [{"key": "m" + odd, "input": {"a": None},
                                           "concurrency_key": "g"}]).status == 201
    wait_group_terminal(api, "g-1")
    api.wait_status("waits", "waiting")
    for rid in ("fails", "cancels", "done"):
        api.wait_terminal(rid)
    assert api.run("hold-1")["status"] == "running"
    assert api.run("hold-pending")["status"] == "pending"
    statuses = {r["run_id"]: r["status"] for r in api.get("/v1/runs").body["runs"]}
    assert set(statuses.values()) >= {"running", "pending", "scheduled", "waiting", "succeeded",
                                      "failed", "cancelled"}, statuses

    differ = sql("SELECT r.run_id, hf_run_text(r), hf_run_json(r)::text FROM run r"
                 " WHERE hf_run_text(r) IS DISTINCT FROM hf_run_json(r)::text")
    assert differ == [], "hf_run_text differs from hf_run_json's text: %r" % (differ,)
    assert int(sql("SELECT count(*) FROM run")[0][0]) == len(statuses) == 9

    r = api.get("/v1/runs")
    assert r.status == 200 and r.body["next_cursor"] is None, r
    for item in r.body["runs"]:
        assert item == api.run(item["run_id"]), item["run_id"]
    assert [x["group"] for x in r.body["runs"] if x["group"]] == [{"id": "g-1", "key": "m" + odd}]
    assert {x["run_id"]: x["concurrency_key"] for x in r.body["runs"] if x["concurrency_key"]} == {
        "hold-pending": 'key " \\ \u00e9\u2028\U0001f600', "parked": "k",
        member_run_id("g-1", "m" + odd): "g"}

    release.set()
    assert api.wait_terminal("hold-1")["result"] == odd
