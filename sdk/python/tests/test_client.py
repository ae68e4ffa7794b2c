"""The client against the running service: every group of operations, paging, waits,
and how errors come out (HookflowError with status, code, field, request id)."""
from __future__ import annotations

import inspect
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import Hooks, client, env, new_secret, unique

from hookflow import OPERATIONS, Client, HookflowError
from hookflow.webhook import succeed


@pytest.fixture(scope="module")
def wf(api: Client, hooks: Hooks) -> str:
    name = unique("client")
    hooks.route(name, lambda req, ctx: succeed({"echo": req["payload"]}))
    api.put_workflow(name, {"url": f"{hooks.base}/steps", "secret": str(hooks.secret),
                            "retry_backoff": {"base_ms": 10, "max_ms": 100}})
    return name


def raises(fn: Any, **want: Any) -> HookflowError:
    with pytest.raises(HookflowError) as info:
        fn()
    for k, v in want.items():
        assert getattr(info.value, k) == v, f"{k} of {info.value!r}"
    return info.value


def test_every_operation_of_the_spec_is_a_method() -> None:
    spec = (Path(__file__).resolve().parents[3] / "openapi" / "openapi.yaml").read_text()
    ids = [i for i in re.findall(r"^\s+operationId: (\w+)$", spec, re.M)
           if i not in ("stepWebhook", "callbackWebhook")]
    assert len(ids) > 40
    snake = [re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", i).lower() for i in ids]
    assert sorted(OPERATIONS) == sorted(snake)
    for name in snake:
        assert callable(getattr(Client, name, None)), name
    # Path parameters come first, in path order, then the body, then keyword-only query.
    params = list(inspect.signature(Client.complete_step).parameters)
    assert params == ["self", "run_id", "step", "body", "token"]


def test_health_readiness_metrics_spec_dashboard_whoami_endpoints(api: Client) -> None:
    assert api.get_healthz() == {"status": "ok"}
    assert api.get_readyz()["status"] == "ready"
    assert "hookflow_" in api.get_metrics()
    assert api.get_openapi().startswith("openapi: 3.1.0")
    assert "<html" in api.get_dashboard().lower()
    assert api.get_whoami() == {"scope": "admin", "token_required": True}
    assert client(env("HF_READ_TOKEN")).get_whoami() == {"scope": "read", "token_required": True}
    ep = api.list_endpoints()
    assert isinstance(ep["instance"], str) and isinstance(ep["endpoints"], list)


def test_workflows_put_get_list_pause_resume_rotate_delete(api: Client, hooks: Hooks,
                                                            wf: str) -> None:
    a, b = unique("wf-a"), unique("wf-b")
    created = api.put_workflow(a, {"url": f"{hooks.base}/steps", "secret": new_secret(),
                                   "timeout_ms": 5000})
    assert (created["name"], created["signed"], created["timeout_ms"], created["max_attempts"]) == (
        a, True, 5000, 3)
    api.put_workflow(b, {"url": f"{hooks.base}/steps"})
    assert api.get_workflow(b)["signed"] is False
    names = [w["name"] for w in api.paginate(api.list_workflows, "workflows", limit=1)]
    assert {a, b, wf} <= set(names)
    assert len(set(names)) == len(names)
    assert api.pause_workflow(a)["paused"] is True
    assert api.resume_workflow(a, {})["paused"] is False
    rotated = api.rotate_workflow_secret(a, {"grace_ms": 60000})
    assert rotated["secret"].startswith("whsec_") and rotated["previous_valid_until"]
    api.delete_workflow(a)
    api.delete_workflow(b)
    raises(lambda: api.get_workflow(a), status=404, code="not_found")


def test_runs_submit_again_wait_steps_list_rerun(api: Client, wf: str) -> None:
    run_id = unique("run")
    first = api.submit_run({"workflow": wf, "run_id": run_id, "input": {"n": 1},
                            "headers": {"tenant": "acme"}})
    assert first["newly_submitted"] is True
    assert api.submit_run({"workflow": wf, "run_id": run_id, "input": {"n": 1}})[
        "newly_submitted"] is False
    err = raises(lambda: api.submit_run({"workflow": wf, "run_id": run_id, "input": {"n": 2}}),
                 status=409, code="input_mismatch")
    assert err.request_id
    done = api.wait_for_run(run_id, timeout_s=20)
    assert (done["status"], done["result"], done["headers"]) == (
        "succeeded", {"echo": {"n": 1}}, {"tenant": "acme"})
    assert [(s["step"], s["attempt"], s["result"]) for s in api.get_run_steps(run_id)["steps"]] == [
        (0, 1, "succeed")]

    second = unique("run")
    api.submit_run({"workflow": wf, "run_id": second, "input": {"n": 2}})
    api.wait_for_run(second, timeout_s=20)
    seen = [r["run_id"] for r in api.paginate(api.list_runs, "runs", workflow=wf,
                                              status="succeeded", limit=1)]
    assert run_id in seen and second in seen
    assert api.get_run_children(run_id)["children"] == []

    assert api.rerun_run(run_id, {"from_step": 0, "input": {"n": 3}})["generation"] == 2
    assert api.wait_for_run(run_id, timeout_s=20)["result"] == {"echo": {"n": 3}}


def test_cancel_one_cancel_in_bulk_already_terminal(api: Client, wf: str) -> None:
    one = unique("sched")
    assert api.submit_run({"workflow": wf, "run_id": one, "delay_ms": 3600000})[
        "status"] == "scheduled"
    assert api.cancel_run(one)["status"] == "cancelled"
    raises(lambda: api.cancel_run(one), status=409, code="already_terminal")
    ids = [unique("bulk"), unique("bulk")]
    for i in ids:
        api.submit_run({"workflow": wf, "run_id": i, "delay_ms": 3600000})
    assert api.cancel_runs({"workflow": wf, "status": ["scheduled"]}) == {"cancelled": 2}
    assert [api.get_run(i)["status"] for i in ids] == ["cancelled", "cancelled"]


def test_wait_ms_answers_a_run_not_done_after_the_wait(api: Client, wf: str) -> None:
    run_id = unique("wait")
    api.submit_run({"workflow": wf, "run_id": run_id, "delay_ms": 3600000})
    t = time.monotonic()
    assert api.get_run(run_id, wait_ms=300)["status"] == "scheduled"
    assert time.monotonic() - t >= 0.25
    assert api.wait_for_run(run_id, timeout_s=0.2)["status"] == "scheduled"
    api.cancel_run(run_id)


def test_group_put_wait_read_cancel_delete(api: Client, wf: str) -> None:
    g = unique("group")
    put = api.put_group(g, {"workflow": wf, "members": [{"key": "a", "input": 1},
                                                        {"key": "b", "input": 2}]})
    assert (put["total"], put["submitted"]) == (2, 2)
    done = api.wait_for_group(g, timeout_s=20)
    assert done["succeeded"] == 2
    assert [(m["key"], m["result"]) for m in done["members"]] == [("a", {"echo": 1}),
                                                                  ("b", {"echo": 2})]
    page = api.get_group(g, limit=1)
    assert len(page["members"]) == 1 and page["next_cursor"] is not None
    assert [m["key"] for m in api.paginate(api.get_group, "members", g, limit=1)] == ["a", "b"]
    assert api.cancel_group(g) == {"cancelled": 0}
    api.delete_group(g)
    raises(lambda: api.get_group(g), status=404)


def test_signal_buffered_then_cleared(api: Client) -> None:
    key = unique("sig") + ":a/b c"
    assert api.send_signal(key, {"payload": {"x": 1}}) == {"outcome": "buffered"}
    assert api.clear_signal(key) == {"removed": True}
    assert api.clear_signal(key) == {"removed": False}


def test_kv_put_get_list_delete(api: Client) -> None:
    prefix = f"app/{unique('kv')}/"
    api.put_kv(prefix + "a", {"value": {"n": 1}})
    assert api.put_kv(prefix + "b c", {"value": [2]})["key"] == prefix + "b c"
    assert api.get_kv(prefix + "a")["value"] == {"n": 1}
    assert [i["key"] for i in api.paginate(api.list_kv, "items", prefix=prefix, limit=1)] == [
        prefix + "a", prefix + "b c"]
    api.delete_kv(prefix + "a")
    raises(lambda: api.get_kv(prefix + "a"), status=404, code="not_found")


def test_memo_with_an_api_token(api: Client, wf: str) -> None:
    run_id = unique("memo")
    api.submit_run({"workflow": wf, "run_id": run_id, "delay_ms": 3600000})
    api.put_run_memo(run_id, "quote/1", {"value": {"total": 5}})
    assert api.get_run_memo(run_id, "quote/1") == {"value": {"total": 5}}
    api.put_step_memo(run_id, 0, "k", {"value": "s"})
    assert api.get_step_memo(run_id, 0, "k") == {"value": "s"}
    api.delete_step_memo(run_id, 0, "k")
    raises(lambda: api.get_step_memo(run_id, 0, "k"), status=404)
    api.delete_run_memo(run_id, "quote/1")
    raises(lambda: api.get_run_memo(run_id, "quote/1"), status=404)
    api.cancel_run(run_id)


def test_schedules(api: Client, wf: str) -> None:
    sid = unique("sched")
    s = api.put_schedule(sid, {"workflow": wf, "every_ms": 3600000, "paused": True,
                               "input": {"from": "schedule"}})
    assert (s["id"], s["paused"]) == (sid, True)
    assert len(api.get_schedule(sid)["next_fire_times"]) == 10
    assert sid in [i["id"] for i in api.paginate(api.list_schedules, "schedules", limit=1)]
    assert api.resume_schedule(sid, {"note": "on"})["paused"] is False
    assert api.pause_schedule(sid)["paused"] is True
    trig = api.trigger_schedule(sid)
    assert trig["outcome"] == "started" and trig["run_id"]
    assert api.wait_for_run(trig["run_id"], timeout_s=20)["status"] == "succeeded"
    assert api.backfill_schedule(sid, {"from": "2026-01-01T00:00:00Z",
                                       "to": "2026-01-01T02:00:00Z"}) == {
        "fire_times": 2, "started": 2, "skipped": 0, "buffered": 0}
    api.delete_schedule(sid)
    raises(lambda: api.get_schedule(sid), status=404)


def test_invalid_argument_names_its_field(api: Client) -> None:
    e = raises(lambda: api.put_workflow(unique("bad"), {"url": "ftp://x"}),
               status=400, code="invalid_argument")
    assert e.field == "url"
    assert e.body["error"]["code"] == "invalid_argument"


def test_401_403_404(api: Client, wf: str) -> None:
    raises(lambda: client("").get_whoami(), status=401, code="unauthenticated")
    raises(lambda: client(env("HF_READ_TOKEN")).submit_run({"workflow": wf}), status=403,
           code="forbidden")
    raises(lambda: api.get_run(unique("nope")), status=404, code="not_found", field=None)


def test_a_path_parameter_is_required(api: Client) -> None:
    with pytest.raises(ValueError, match="run_id: required"):
        api.get_run("")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    conns = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conns.append(sock.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield sock.getsockname()[1]
    stop.set()
    t.join()
    for c in conns:
        c.close()
    sock.close()


def test_no_answer_timeout_and_network_error(silent_server: int) -> None:
    raises(lambda: Client(f"http://127.0.0.1:{silent_server}", timeout=0.3).get_healthz(),
           status=0, code="timeout")
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    raises(lambda: Client(f"http://127.0.0.1:{port}", timeout=2).get_healthz(),
           status=0, code="network_error")
