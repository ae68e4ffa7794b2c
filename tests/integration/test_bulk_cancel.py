"""Bulk cancel (issue 4; openapi/openapi.yaml, /v1/runs:cancel): POST
/v1/runs:cancel {"workflow", "status": [...], "group_id", "created_before"}
cancels exactly the matching active runs and answers {"cancelled": n};
in-flight calls among them are aborted; runs outside the filters are untouched;
an empty filter set is 400."""

import pytest

from harness import Hang, StepScript, assert_error, succeed
from helpers_issue4 import member_run_id, put_group, table_counts, wait_group_terminal

PARKED = 600000


def _cancel_many(api, body):
    return api.post("/v1/runs:cancel", body)


def _status(api, rid):
    return api.run(rid)["status"]


@pytest.fixture
def two_workflows(api, webhook):
    """Workflows "a" and "b" on /a and /b: step 0 hangs (the call stays in
    flight) unless the input is "quick", which succeeds."""
    hang = StepScript({0: lambda req: succeed("quick") if req.field("payload") == "quick" else Hang(max_s=30)})
    webhook.route("/a", hang)
    webhook.route("/b", hang)
    api.put_workflow("a", webhook.url("/a"), timeout_ms=30000)
    api.put_workflow("b", webhook.url("/b"), timeout_ms=30000)


def test_cancel_by_workflow_cancels_exactly_its_active_runs_and_aborts_calls(api, webhook, two_workflows):
    done = api.submit("a", run_id="a-done", input="quick")["run_id"]
    assert api.wait_terminal(done)["status"] == "succeeded"
    scheduled = [api.submit("a", run_id="a-s%d" % i, delay_ms=PARKED)["run_id"] for i in range(3)]
    running = [api.submit("a", run_id="a-r%d" % i)["run_id"] for i in range(2)]
    calls = [webhook.wait_requests(1, run_id=rid)[0] for rid in running]
    other_s = api.submit("b", run_id="b-s", delay_ms=PARKED)["run_id"]
    other_r = api.submit("b", run_id="b-r")["run_id"]
    (other_call,) = webhook.wait_requests(1, run_id=other_r)

    r = _cancel_many(api, {"workflow": "a"})
    assert r.status == 200, r
    assert r.body == {"cancelled": 5}
    for c in calls:
        assert c.disconnected.wait(5), "the in-flight call of %s was not aborted" % c.run_id
    for rid in scheduled + running:
        run = api.wait_terminal(rid)
        assert run["status"] == "cancelled" and run["error"] is None, run
        assert run["cancel_requested"] is True
    assert _status(api, done) == "succeeded"
    assert _status(api, other_s) == "scheduled"
    assert _status(api, other_r) == "running"
    assert not other_call.disconnected.is_set(), "a run of another workflow was aborted"
    # nothing of workflow a is left to cancel
    r = _cancel_many(api, {"workflow": "a"})
    assert r.status == 200 and r.body == {"cancelled": 0}, r
    assert _status(api, other_s) == "scheduled"


def test_cancel_by_status(api, webhook, two_workflows):
    scheduled = [api.submit("a", run_id="s%d" % i, delay_ms=PARKED)["run_id"] for i in range(2)]
    running = api.submit("a", run_id="r0")["run_id"]
    (call,) = webhook.wait_requests(1, run_id=running)
    other = api.submit("b", run_id="bs", delay_ms=PARKED)["run_id"]

    r = _cancel_many(api, {"workflow": "a", "status": ["scheduled"]})
    assert r.status == 200 and r.body == {"cancelled": 2}, r
    for rid in scheduled:
        assert _status(api, rid) == "cancelled"
    assert _status(api, running) == "running" and not call.disconnected.is_set()
    assert _status(api, other) == "scheduled"

    # status alone is a filter: every running run, in any workflow
    other_r = api.submit("b", run_id="br")["run_id"]
    (other_call,) = webhook.wait_requests(1, run_id=other_r)
    r = _cancel_many(api, {"status": ["running"]})
    assert r.status == 200 and r.body == {"cancelled": 2}, r
    assert call.disconnected.wait(5) and other_call.disconnected.wait(5)
    assert api.wait_terminal(running)["status"] == "cancelled"
    assert api.wait_terminal(other_r)["status"] == "cancelled"
    assert _status(api, other) == "scheduled"

    # a terminal status matches nothing: only active runs are cancelled
    r = _cancel_many(api, {"status": ["succeeded", "cancelled"]})
    assert r.status == 200 and r.body == {"cancelled": 0}, r
    assert _status(api, other) == "scheduled"


def test_cancel_by_group(api, webhook, two_workflows):
    members = [{"key": "m%d" % i, "input": i} for i in range(3)]
    assert put_group(api, "g1", "a", members).status == 201
    assert put_group(api, "g2", "a", [{"key": "x", "input": 0}]).status == 201
    ids = [member_run_id("g1", m["key"]) for m in members]
    outsider = member_run_id("g2", "x")
    loose = api.submit("a", run_id="loose", delay_ms=PARKED)["run_id"]
    webhook.wait_requests(4, path="/a")

    r = _cancel_many(api, {"group_id": "g1"})
    assert r.status == 200 and r.body == {"cancelled": 3}, r
    g = wait_group_terminal(api, "g1")
    assert g["cancelled"] == 3
    assert _status(api, outsider) == "running"
    assert _status(api, loose) == "scheduled"
    for rid in ids:
        assert webhook.requests(run_id=rid)[0].disconnected.wait(5)

    # group and workflow together: intersection
    r = _cancel_many(api, {"group_id": "g2", "workflow": "b"})
    assert r.status == 200 and r.body == {"cancelled": 0}, r
    assert _status(api, outsider) == "running"


def test_cancel_by_created_before(api, webhook, two_workflows):
    old = [api.submit("a", run_id="old%d" % i, delay_ms=PARKED) for i in range(2)]
    new = api.submit("a", run_id="new", delay_ms=PARKED)
    # created_at has millisecond precision: runs strictly older than `new`
    assert new["created_at"] > old[-1]["created_at"], (old, new)
    r = _cancel_many(api, {"created_before": new["created_at"]})
    assert r.status == 200 and r.body == {"cancelled": 2}, r
    for run in old:
        assert _status(api, run["run_id"]) == "cancelled"
    assert _status(api, "new") == "scheduled"

    # all filters at once
    r = _cancel_many(api, {"workflow": "a", "status": ["scheduled", "pending"], "group_id": "nope",
                           "created_before": "2999-01-01T00:00:00.000Z"})
    assert r.status == 200 and r.body == {"cancelled": 0}, r
    r = _cancel_many(api, {"workflow": "a", "status": ["scheduled", "pending"],
                           "created_before": "2999-01-01T00:00:00.000Z"})
    assert r.status == 200 and r.body == {"cancelled": 1}, r
    assert _status(api, "new") == "cancelled"


def test_cancel_many_counts_hundreds_of_runs(api, webhook, two_workflows):
    ids = [api.submit("a", run_id="n%03d" % i, delay_ms=PARKED)["run_id"] for i in range(1, 601)]
    keep = api.submit("b", run_id="keep", delay_ms=PARKED)["run_id"]
    r = _cancel_many(api, {"workflow": "a", "status": ["scheduled"]})
    assert r.status == 200 and r.body == {"cancelled": 600}, r
    listed = api.get("/v1/runs", params={"workflow": "a", "status": "scheduled"}).body["runs"]
    assert listed == []
    assert _status(api, ids[0]) == "cancelled" and _status(api, ids[-1]) == "cancelled"
    assert _status(api, keep) == "scheduled"


def test_empty_or_bad_filter_set_is_400_and_cancels_nothing(api, sql, two_workflows):
    rid = api.submit("a", run_id="survivor", delay_ms=PARKED)["run_id"]
    before = table_counts(sql)
    assert_error(_cancel_many(api, {}), 400, "invalid_argument")
    assert_error(_cancel_many(api, {"workflow": None, "status": None}), 400, "invalid_argument")
    for body, field in [
        ({"status": []}, "status"),
        ({"status": "scheduled"}, "status"),
        ({"status": ["sleeping"]}, "status"),
        ({"status": [""]}, "status"),
        ({"status": ["pending", ""]}, "status"),
        ({"status": ["pending,failed"]}, "status"),
        ({"status": [1]}, "status"),
        ({"workflow": 7}, "workflow"),
        ({"workflow": "bad name!"}, "workflow"),
        ({"group_id": ["g"]}, "group_id"),
        ({"created_before": "yesterday"}, "created_before"),
        ({"created_before": 123}, "created_before"),
        ({"workflow": "a", "run_id": "survivor"}, "run_id"),
    ]:
        r = _cancel_many(api, body)
        assert r.status == 400, (body, r)
        assert_error(r, 400, "invalid_argument", field=field)
    assert_error(api.post("/v1/runs:cancel", raw=b"", content_type="application/json"), 400, "invalid_argument")
    assert_error(api.post("/v1/runs:cancel", raw=b"[]", content_type="application/json"), 400,
                 "invalid_argument")
    assert _status(api, rid) == "scheduled"
    assert table_counts(sql) == before
