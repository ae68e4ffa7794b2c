"""Groups (issue 4; openapi/openapi.yaml, tag groups): PUT /v1/groups/{id}
records the ordered member set once (201), the same set again (200) submits the
members whose last termination is not `succeeded`, another set is 409
group_mismatch, duplicate keys are 400; member run ids are hex SHA-256 of
"<group_id>/<key>"; GET gives counts and paged members and long-polls with
?wait_ms; cancel and forget."""

import pytest
import threading
import time

from harness import Hang, Reply, assert_error, fail, succeed
from helpers_issue4 import (counts, get_group, group_members, member_run_id, put_group, q,
                            wait_group_terminal)


def _key(req):
    g = req.field("group") or {}
    return g.get("key")


def _members(n, prefix="k"):
    return [{"key": "%s%d" % (prefix, i), "input": {"i": i}} for i in range(n)]


def _zero_counts(**kw):
    c = {"total": 0, "pending": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
    c.update(kw)
    return c


# --------------------------------------------------------------------------
# Recording and member run ids
# --------------------------------------------------------------------------

def test_first_put_records_members_201_with_derived_run_ids(api, webhook):
    webhook.route("/steps", lambda req: succeed({"key": _key(req), "got": req.field("payload")}))
    api.put_workflow("wf", webhook.url())
    members = [{"key": "alpha", "input": {"n": 1}, "headers": {"shard": "a"}},
               {"key": "beta", "input": [1, 2, 3]},
               {"key": "gamma-3_x", "input": None, "headers": {"tenant": "override"}}]
    r = put_group(api, "g1", "wf", members, priority=5, max_attempts=2, headers={"tenant": "acme"})
    assert r.status == 201, r

    g = wait_group_terminal(api, "g1")
    assert counts(g) == _zero_counts(total=3, succeeded=3)
    got = group_members(api, "g1")
    assert [m["key"] for m in got] == ["alpha", "beta", "gamma-3_x"], "members keep submission order"
    for m, spec in zip(got, members):
        rid = member_run_id("g1", spec["key"])
        assert m["run_id"] == rid and len(rid) == 64 and rid == rid.lower()
        assert m["status"] == "succeeded"
        assert m["result"] == {"key": spec["key"], "got": spec["input"]}
        assert m["error"] is None
        run = api.run(rid)
        assert run["group"] == {"id": "g1", "key": spec["key"]}
        assert run["input"] == spec["input"]
        assert run["priority"] == 5 and run["max_attempts"] == 2
        assert run["generation"] == 1
        (req,) = webhook.requests(run_id=rid)
        assert req.field("group") == {"id": "g1", "key": spec["key"]}
        assert req.field("payload") == spec["input"]
    # group headers apply to every member; a member's own headers win
    assert api.run(member_run_id("g1", "alpha"))["headers"] == {"tenant": "acme", "shard": "a"}
    assert api.run(member_run_id("g1", "beta"))["headers"] == {"tenant": "acme"}
    assert api.run(member_run_id("g1", "gamma-3_x"))["headers"] == {"tenant": "override"}


def test_same_set_again_is_200_and_does_not_call_succeeded_members(api, webhook):
    webhook.route("/steps", lambda req: succeed(_key(req)))
    api.put_workflow("wf", webhook.url())
    members = _members(4)
    assert put_group(api, "g", "wf", members).status == 201
    wait_group_terminal(api, "g")
    assert len(webhook.requests(path="/steps")) == 4

    r = put_group(api, "g", "wf", members)
    assert r.status == 200, r
    # a re-submission restarts members in its own transaction: none restarted
    for m in members:
        run = api.run(member_run_id("g", m["key"]))
        assert run["status"] == "succeeded" and run["generation"] == 1, run
    # a probe run submitted afterwards finishes; still no member was called again
    probe = api.submit("wf", run_id="probe")["run_id"]
    api.wait_terminal(probe)
    assert len(webhook.requests(path="/steps")) == 5
    assert counts(get_group(api, "g").body) == _zero_counts(total=4, succeeded=4)


def test_resubmit_runs_failed_members_again_and_leaves_active_ones_alone(api, webhook):
    release = threading.Event()
    calls = {}
    lock = threading.Lock()

    def steps(req):
        key = _key(req)
        with lock:
            calls.setdefault(key, []).append(req.field("generation"))
        if key == "ok":
            return succeed("ok")
        if key == "flaky":
            return fail("first try") if req.field("generation") == 1 else succeed("second try")
        if key == "slow":
            return Hang(release=release, then=succeed("slow"), max_s=30)
        return Reply(500, body=b"unexpected")
    webhook.route("/steps", steps)
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    members = [{"key": "ok", "input": 1}, {"key": "flaky", "input": 2}, {"key": "slow", "input": 3}]
    ids = {m["key"]: member_run_id("gr", m["key"]) for m in members}
    assert put_group(api, "gr", "wf", members).status == 201

    api.wait_terminal(ids["ok"])
    flaky = api.wait_terminal(ids["flaky"])
    assert flaky["status"] == "failed" and flaky["error"] == "first try"
    webhook.wait_requests(1, run_id=ids["slow"])
    g = get_group(api, "gr").body
    assert counts(g) == _zero_counts(total=3, running=1, succeeded=1, failed=1)

    r = put_group(api, "gr", "wf", members)
    assert r.status == 200, r
    again = api.run(ids["flaky"])
    assert again["generation"] == 2, "a failed member runs again as a new generation: %r" % again
    assert api.run(ids["ok"])["generation"] == 1
    slow = api.run(ids["slow"])
    assert slow["generation"] == 1 and slow["status"] == "running", "an active member is untouched"

    flaky = api.wait_terminal(ids["flaky"])
    assert flaky["status"] == "succeeded" and flaky["result"] == "second try"
    assert flaky["generation"] == 2
    release.set()
    g = wait_group_terminal(api, "gr")
    assert counts(g) == _zero_counts(total=3, succeeded=3)
    assert calls == {"ok": [1], "flaky": [1, 2], "slow": [1]}
    # the history of the re-run member shows both generations
    assert [(s["generation"], s["result"]) for s in api.steps(ids["flaky"])] == [(1, "fail"), (2, "succeed")]


def test_cancelled_member_runs_again_on_resubmission(api, webhook):
    webhook.route("/steps", lambda req: Hang(max_s=30) if req.field("generation") == 1 else succeed("done"))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    members = [{"key": "only", "input": {}}]
    rid = member_run_id("gc", "only")
    assert put_group(api, "gc", "wf", members).status == 201
    (req,) = webhook.wait_requests(1, run_id=rid)
    r = api.post("/v1/groups/gc/cancel")
    assert r.status == 200 and r.body == {"cancelled": 1}, r
    assert api.wait_terminal(rid)["status"] == "cancelled"
    assert put_group(api, "gc", "wf", members).status == 200
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["generation"] == 2


def test_another_member_set_is_409_group_mismatch(api):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    members = [{"key": "a", "input": {"x": 1}}, {"key": "b", "input": {"x": 2}}]
    # the members cannot reach their webhook: cancel them and let them settle
    assert put_group(api, "gm", "wf", members).status == 201
    api.post("/v1/groups/gm/cancel")
    wait_group_terminal(api, "gm")
    before = {m["key"]: api.run(member_run_id("gm", m["key"])) for m in members}
    others = {
        "order": [members[1], members[0]],
        "input": [members[0], {"key": "b", "input": {"x": 3}}],
        "key": [members[0], {"key": "c", "input": {"x": 2}}],
        "fewer": [members[0]],
        "more": members + [{"key": "c", "input": None}],
        "headers": [members[0], {"key": "b", "input": {"x": 2}, "headers": {"h": "v"}}],
    }
    for change, other in others.items():
        r = put_group(api, "gm", "wf", other)
        assert r.status == 409, (change, r)
        assert_error(r, 409, "group_mismatch")
    g = get_group(api, "gm").body
    assert g["total"] == 2
    assert [m["key"] for m in group_members(api, "gm")] == ["a", "b"]
    for k, run in before.items():
        now = api.run(member_run_id("gm", k))
        assert (now["status"], now["generation"]) == (run["status"], run["generation"]), \
            "a refused re-submission must not restart members"
    assert api.get("/v1/runs/" + member_run_id("gm", "c")).status == 404
    # the recorded set is still accepted
    assert put_group(api, "gm", "wf", members).status == 200


def test_duplicate_member_keys_are_400_and_record_nothing(api, sql):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    members = [{"key": "a", "input": 1}, {"key": "b", "input": 2}, {"key": "a", "input": 3}]
    r = put_group(api, "gd", "wf", members)
    assert_error(r, 400, "invalid_argument", field="key")
    assert get_group(api, "gd").status == 404
    assert sql("SELECT count(*) FROM run")[0][0] == "0"


def test_group_with_unknown_workflow_is_404(api):
    assert_error(put_group(api, "gx", "nope", _members(2)), 404, "not_found", field="workflow")
    assert get_group(api, "gx").status == 404


def test_get_unknown_group_is_404(api):
    assert_error(get_group(api, "no-such-group"), 404, "not_found")
    assert_error(api.post("/v1/groups/no-such-group/cancel"), 404, "not_found")
    assert_error(api.delete("/v1/groups/no-such-group"), 404, "not_found")


# --------------------------------------------------------------------------
# Reading: counts, paging, long-poll
# --------------------------------------------------------------------------

def test_members_are_paged_with_limit_and_cursor(api, webhook):
    webhook.route("/steps", lambda req: succeed(_key(req)))
    api.put_workflow("wf", webhook.url())
    members = _members(7)
    assert put_group(api, "gp", "wf", members).status == 201
    wait_group_terminal(api, "gp")
    seen = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        r = get_group(api, "gp", **params)
        assert r.status == 200, r
        assert counts(r.body) == _zero_counts(total=7, succeeded=7), "every page carries the counts"
        assert len(r.body["members"]) <= 3
        seen.extend(r.body["members"])
        pages += 1
        cursor = r.body["next_cursor"]
        if cursor is None:
            break
        assert pages < 10
    assert pages == 3
    assert [m["key"] for m in seen] == [m["key"] for m in members]
    for m in seen:
        assert set(m) >= {"key", "run_id", "status", "result", "error"}
        assert m["run_id"] == member_run_id("gp", m["key"])
        assert m["result"] == m["key"]
    assert_error(get_group(api, "gp", limit=0), 400, "invalid_argument", field="limit")
    assert_error(get_group(api, "gp", limit=1001), 400, "invalid_argument", field="limit")


def test_wait_ms_returns_as_soon_as_every_member_is_terminal(api, webhook):
    release = threading.Event()
    webhook.route("/steps", lambda req: Hang(release=release, then=succeed(_key(req)), max_s=30))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    assert put_group(api, "gw", "wf", _members(3)).status == 201
    webhook.wait_requests(3, path="/steps")

    # not terminal: answers after wait_ms with the group as it stands
    t0 = time.monotonic()
    r = get_group(api, "gw", wait_ms=700)
    took = time.monotonic() - t0
    assert r.status == 200, r
    assert 0.6 <= took < 5, "wait_ms=700 answered after %.3fs" % took
    assert counts(r.body) == _zero_counts(total=3, running=3)

    # a long-poll made now answers once the members end (released 0.5 s later),
    # not at its 20 s deadline
    released = {}

    def release_later():
        released["at"] = time.monotonic()
        release.set()
    timer = threading.Timer(0.5, release_later)
    t0 = time.monotonic()
    timer.start()
    try:
        r = get_group(api, "gw", wait_ms=20000)
    finally:
        timer.cancel()
    answered = time.monotonic()
    assert r.status == 200, r
    assert counts(r.body) == _zero_counts(total=3, succeeded=3), \
        "wait_ms answered before every member was terminal: %r" % r.body
    assert "at" in released
    assert answered - released["at"] < 5.0, \
        "answered %.3fs after the members were released" % (answered - released["at"])
    assert answered - t0 < 15


def test_wait_ms_on_a_terminal_group_answers_at_once(api, webhook):
    webhook.route("/steps", lambda req: succeed(1))
    api.put_workflow("wf", webhook.url())
    assert put_group(api, "gt", "wf", _members(2)).status == 201
    wait_group_terminal(api, "gt")
    t0 = time.monotonic()
    r = get_group(api, "gt", wait_ms=10000)
    assert r.status == 200 and time.monotonic() - t0 < 2.0
    assert_error(get_group(api, "gt", wait_ms=-1), 400, "invalid_argument", field="wait_ms")
    assert_error(get_group(api, "gt", wait_ms=300001), 400, "invalid_argument", field="wait_ms")


# --------------------------------------------------------------------------
# Cancel and forget
# --------------------------------------------------------------------------

def test_cancel_group_cancels_active_members(api, webhook):
    # max_concurrency 1: the first call succeeds, the second is held in
    # flight, the other members wait pending for the slot
    lock = threading.Lock()
    seen = []

    def steps(req):
        with lock:
            seen.append(req.run_id)
            first = len(seen) == 1
        return succeed("fast") if first else Hang(max_s=30)
    webhook.route("/steps", steps)
    api.put_workflow("wf", webhook.url(), timeout_ms=30000, max_concurrency=1)
    members = _members(4)
    ids = [member_run_id("gk", m["key"]) for m in members]
    assert put_group(api, "gk", "wf", members).status == 201
    reqs = webhook.wait_requests(2, path="/steps")
    done_id, inflight = reqs[0].run_id, reqs[1]
    assert api.wait_terminal(done_id)["status"] == "succeeded"
    g = get_group(api, "gk").body
    assert counts(g) == _zero_counts(total=4, succeeded=1, running=1, pending=2)

    r = api.post("/v1/groups/gk/cancel")
    assert r.status == 200, r
    assert r.body == {"cancelled": 3}
    assert inflight.disconnected.wait(5), "the in-flight member call was not aborted"
    g = wait_group_terminal(api, "gk")
    assert counts(g) == _zero_counts(total=4, succeeded=1, cancelled=3)
    assert api.run(done_id)["status"] == "succeeded"
    for rid in ids:
        if rid == done_id:
            continue
        run = api.run(rid)
        assert run["status"] == "cancelled" and run["error"] is None
    assert len(webhook.requests(path="/steps")) == 2, "pending members are never called"
    # nothing left to cancel
    r = api.post("/v1/groups/gk/cancel")
    assert r.status == 200 and r.body == {"cancelled": 0}, r


def test_delete_is_409_while_active_then_204_and_the_id_starts_afresh(api, webhook):
    gate = {"hang": True}
    webhook.route("/steps", lambda req: Hang(max_s=30) if gate["hang"] else succeed("fresh"))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    members = _members(2)
    ids = [member_run_id("gf", m["key"]) for m in members]
    assert put_group(api, "gf", "wf", members).status == 201
    webhook.wait_requests(2, path="/steps")

    assert_error(api.delete("/v1/groups/gf"), 409, "group_active")
    assert get_group(api, "gf").status == 200
    assert api.post("/v1/groups/gf/cancel").body == {"cancelled": 2}
    wait_group_terminal(api, "gf")

    r = api.delete("/v1/groups/gf")
    assert r.status == 204, r
    assert r.raw == b""
    assert_error(get_group(api, "gf"), 404, "not_found")
    for rid in ids:
        assert api.get("/v1/runs/" + rid).status == 404, "forget deletes the members' runs"
    assert_error(api.delete("/v1/groups/gf"), 404, "not_found")

    # the same id is submitted afresh, even with another member set
    gate["hang"] = False
    fresh = [{"key": "new", "input": "x"}]
    r = put_group(api, "gf", "wf", fresh)
    assert r.status == 201, r
    g = wait_group_terminal(api, "gf")
    assert counts(g) == _zero_counts(total=1, succeeded=1)
    run = api.run(member_run_id("gf", "new"))
    assert run["generation"] == 1 and run["result"] == "fresh"
    # and the original set too
    r = api.delete("/v1/groups/gf")
    assert r.status == 204
    assert put_group(api, "gf", "wf", members).status == 201
    wait_group_terminal(api, "gf")
    for rid in ids:
        assert api.run(rid)["generation"] == 1


# --------------------------------------------------------------------------
# Scale
# --------------------------------------------------------------------------

@pytest.mark.serial
def test_group_of_1000_members_is_submitted_in_one_request_under_a_second(api, webhook):
    """Issue 4 states the requirement: a group of 1,000 members is submitted in
    one request and answers in well under a second on this machine. The PUT's
    wall time is measured and must stay under 1 s. The members then run to the
    end (the webhook succeeds at once); max_concurrency keeps the test's
    Python webhook from being swamped by 1,000 simultaneous calls (it cannot
    answer them all within a step timeout, which would only cause retries)."""
    webhook.route("/steps", lambda req: succeed(req.field("payload")))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000, max_concurrency=50)
    members = [{"key": "member-%04d" % i, "input": {"i": i}} for i in range(1000)]
    t0 = time.monotonic()
    r = put_group(api, "big", "wf", members)
    took = time.monotonic() - t0
    assert r.status == 201, r
    assert took < 1.0, "PUT of a 1,000-member group took %.3fs (issue 4: well under a second)" % took

    g = wait_group_terminal(api, "big", timeout=120)
    assert counts(g) == _zero_counts(total=1000, succeeded=1000)
    got = group_members(api, "big")
    assert [m["key"] for m in got] == [m["key"] for m in members]
    assert all(m["result"] == {"i": i} for i, m in enumerate(got))
    assert len({m["run_id"] for m in got}) == 1000
    # the same set again is a cheap no-op
    t0 = time.monotonic()
    r = put_group(api, "big", "wf", members)
    took = time.monotonic() - t0
    assert r.status == 200, r
    assert took < 1.0, "re-PUT of a terminal 1,000-member group took %.3fs" % took
    assert {r.run_id for r in webhook.requests(path="/steps")} == {m["run_id"] for m in got}
    calls = len(webhook.requests(path="/steps"))
    for m in got[:20]:
        run = api.run(m["run_id"])
        assert run["status"] == "succeeded" and run["generation"] == 1
    probe = api.submit("wf", run_id="probe")["run_id"]
    api.wait_terminal(probe)
    assert len(webhook.requests(path="/steps")) == calls + 1, "no member was called again"


def test_100_member_group_with_mixed_outcomes_resubmitted_until_all_succeed(api, webhook):
    """Member i fails its first (i % 3) generations: with a `fail` outcome, or
    with a permanent 422 error. Each re-submission runs only the members not
    yet succeeded; a succeeded member is never called again."""
    lock = threading.Lock()
    calls = {}

    def steps(req):
        key = _key(req)
        i = int(key[1:])
        with lock:
            calls.setdefault(key, []).append(req.field("generation"))
            n = len(calls[key])
        if n <= i % 3:
            if (i + n) % 2:
                return fail("%s failed generation %d" % (key, n))
            return Reply(422, json_body={"error": {"message": "unprocessable %s" % key}})
        return succeed({"key": key, "generation": req.field("generation")})
    webhook.route("/steps", steps)
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    members = _members(100)
    fails_of = {m["key"]: int(m["key"][1:]) % 3 for m in members}
    expected_succeeded = 0

    for rnd in range(1, 5):
        r = put_group(api, "mix", "wf", members)
        assert r.status == (201 if rnd == 1 else 200), r
        g = wait_group_terminal(api, "mix", timeout=60)
        expected_succeeded = sum(1 for k, f in fails_of.items() if f < rnd)
        assert counts(g) == _zero_counts(total=100, succeeded=expected_succeeded,
                                         failed=100 - expected_succeeded), "round %d" % rnd
        got = group_members(api, "mix")
        assert [m["key"] for m in got] == [m["key"] for m in members]
        for m in got:
            f = fails_of[m["key"]]
            if f < rnd:
                assert m["status"] == "succeeded", (rnd, m)
                assert m["result"] == {"key": m["key"], "generation": f + 1}, (rnd, m)
                assert m["error"] is None
            else:
                assert m["status"] == "failed", (rnd, m)
                assert m["result"] is None
                assert m["key"] in m["error"], (rnd, m)
        # every member was called once per generation it ran, never after success
        with lock:
            snapshot = {k: list(v) for k, v in calls.items()}
        for k, f in fails_of.items():
            ran = min(rnd, f + 1)
            assert snapshot.get(k) == list(range(1, ran + 1)), \
                "round %d member %s calls %r" % (rnd, k, snapshot.get(k))
    assert expected_succeeded == 100
    assert sum(len(v) for v in calls.values()) == sum(f + 1 for f in fails_of.values())
    for m in members:
        run = api.run(member_run_id("mix", m["key"]))
        assert run["generation"] == fails_of[m["key"]] + 1


def test_member_run_id_is_sha256_of_group_and_key_with_unusual_keys(api):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    keys = ["a/b", "ключ", "with space", "x" * 300]
    members = [{"key": k, "input": None} for k in keys]
    r = put_group(api, "g-u_1", "wf", members)
    assert r.status == 201, r
    api.post("/v1/groups/g-u_1/cancel")
    wait_group_terminal(api, "g-u_1")
    got = group_members(api, "g-u_1")
    assert [m["key"] for m in got] == keys
    for m in got:
        assert m["run_id"] == member_run_id("g-u_1", m["key"])
        assert api.get("/v1/runs/" + q(m["run_id"])).status == 200
