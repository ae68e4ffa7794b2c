"""Child runs a step starts and waits for (issue 15 item 2: continue's
"children" and "wait_for_children", the run's "parent" and
"waiting.children", GET /v1/runs/{id}/children, the workflow's
on_parent_cancel).

What these tests prove, against the real binary, PostgreSQL and webhook servers:

- A step answering continue with children starts them as ordinary runs of
  their own workflows (input, headers, concurrency_key), with run ids the
  lowercase hex SHA-256 of "<parent run id>/<generation>/<step>/<key>" and a
  "parent" object {run_id, generation, step, key} (null for a root run).
- The parent is "waiting" with waiting.children {mode, count, step} until the
  wait ends: mode all when every child is terminal, any at the first, count
  at the N-th, or at timeout_ms. Its next step then carries "children"
  ordered by key with each child's status, result and error ("timeout" for a
  child still active when the wait timed out; the current status of a child
  still active when an any/count wait ended). Children still active keep
  running after the parent moved on.
- An instance SIGKILLed after settling the parent's step (children created,
  their calls held) loses nothing and duplicates nothing: the surviving
  instance redelivers the children's steps, each child succeeds once, there
  are exactly three children and the parent's next step is delivered once.
- Cancelling a parent cancels its active children (in-flight calls aborted,
  callbacks with error "parent <id> cancelled") unless the parent's
  workflow says on_parent_cancel "abandon", which leaves them running.
- GET /v1/runs/{id}/children pages every child by generation, step and key;
  404 for an unknown run; an empty list for a run without children.
- A bad children answer fails the parent's step permanently and creates no
  child: an unknown workflow ("children[i].workflow: workflow <w> not
  found"), an invalid field ("invalid step response" naming it), more than
  HOOKFLOW_MAX_CHILDREN ("at most N"), deeper than HOOKFLOW_MAX_CHILD_DEPTH
  ("depth").
- The workflow setting on_parent_cancel: "cancel" (default) or "abandon",
  anything else 400 naming it.
"""

import hashlib
import threading
import time
import urllib.parse

import pytest

from harness import Hang, Reply, StepScript, assert_error, fail, iso_to_epoch, succeed, wait_until
from helpers_issue3 import wait_signal

PARENT = "parent"
CHILD = "child"
LONG_MS = 30000                       # a step timeout no held call reaches
DEFAULT_WAIT_MS = 366 * 86400000      # wait_for_children.timeout_ms when not given (366 days)
MAX_WAIT_MS = 31622400000             # its largest value (also 366 days)
LEASE = "1500"
ACTIVE = ("pending", "running")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def q(s):
    return urllib.parse.quote(s, safe="")


def child_run_id(parent_id, key, generation=1, step=0):
    """A child's run id: lowercase hex SHA-256 of
    "<parent run id>/<parent generation>/<parent step>/<key>"."""
    return hashlib.sha256(("%s/%d/%d/%s" % (parent_id, generation, step, key)).encode()).hexdigest()


def kid(key, workflow=CHILD, **fields):
    """One element of "children": its input (when not given) carries its key,
    so that the child's webhook can tell which child it serves."""
    spec = {"key": key, "workflow": workflow}
    spec.setdefault("input", {"key": key})
    spec.update(fields)
    return spec


def spawn(children, wait=None, payload=None, **extra):
    """A continue outcome that starts `children` and waits for them as `wait`
    says (no wait_for_children when None: the default, mode all)."""
    body = {"outcome": "continue", "payload": payload, "children": children}
    if wait is not None:
        body["wait_for_children"] = wait
    body.update(extra)
    return Reply(200, body)


def by_key(replies):
    """A child webhook answering replies[key] (a reply, or a callable request
    -> reply) for the child whose input carries that key."""
    def serve(req):
        r = replies[req.json["payload"]["key"]]
        return r(req) if callable(r) else r
    return serve


def family(api, webhook, parent_steps, child_serve, parent_settings=None, child_settings=None):
    """Registers workflow "parent" (steps at /parent, a StepScript of
    `parent_steps`) and workflow "child" (steps at /child, served by
    `child_serve`), each with a 30 s step timeout unless the settings say
    otherwise."""
    webhook.route("/parent", StepScript(parent_steps))
    webhook.route("/child", child_serve)
    api.put_workflow(CHILD, webhook.url("/child"), **dict({"timeout_ms": LONG_MS}, **(child_settings or {})))
    api.put_workflow(PARENT, webhook.url("/parent"), **dict({"timeout_ms": LONG_MS}, **(parent_settings or {})))


def entry(parent_id, key, status, result=None, error=None, step=0):
    """The element of a step request's "children" for one child."""
    return {"key": key, "run_id": child_run_id(parent_id, key, step=step), "status": status,
            "result": result, "error": error}


def assert_active_entry(got, parent_id, key):
    """A child still active when the wait ended: listed with its current status."""
    assert got["status"] in ACTIVE, got
    assert got == entry(parent_id, key, got["status"]), got


def children_page(api, run_id, **params):
    return api.get("/v1/runs/%s/children" % q(run_id), params=params or None)


def all_children(api, run_id, limit=None):
    """Every child of GET /v1/runs/{id}/children, following next_cursor."""
    out, params = [], ({"limit": limit} if limit else {})
    while True:
        r = children_page(api, run_id, **params)
        assert r.status == 200, "GET children of %s: %r" % (run_id, r)
        assert isinstance(r.body, dict) and set(r.body) == {"children", "next_cursor"}, r
        out.extend(r.body["children"])
        if not r.body["next_cursor"]:
            return out
        params = dict(params, cursor=r.body["next_cursor"])


def wait_waiting_on_children(api, run_id, timeout=10.0):
    """Waits until the run is waiting for its children; returns it."""
    def seen():
        run = api.run(run_id)
        w = run.get("waiting")
        return run if run["status"] == "waiting" and isinstance(w, dict) and w.get("children") else None
    return wait_until(seen, timeout=timeout, message="run %s waiting for its children" % run_id)


def workflow(api, name):
    r = api.get("/v1/workflows/" + name)
    assert r.status == 200, r
    return r.body


def history(api, run_id):
    return [(s["step"], s["attempt"], s["result"]) for s in api.steps(run_id)]


# --------------------------------------------------------------------------
# Waiting: all, any, count, timeout
# --------------------------------------------------------------------------

def test_mode_all_waits_for_every_child_and_the_next_step_gets_them_ordered_by_key(api, webhook):
    release_c = threading.Event()

    def derived(req):
        inp = req.json["payload"]
        return succeed({"key": inp["key"], "double": inp["n"] * 2})

    inputs = {"a": {"key": "a", "n": 1}, "b": {"key": "b", "n": 2}, "c": {"key": "c", "n": 3}}
    family(api, webhook, {
        0: spawn([kid("c", input=inputs["c"]),
                  kid("a", input=inputs["a"], headers={"tenant": "acme"}, concurrency_key="ck-a"),
                  kid("b", input=inputs["b"])],
                 {"mode": "all"}, payload={"p": 1}),
        1: lambda req: succeed({"payload": req.json["payload"],
                                "seen": [[c["key"], c["status"]] for c in req.json["children"]]}),
    }, by_key({
        "a": derived,
        "b": lambda req: fail("b cannot take %d" % req.json["payload"]["n"]),
        "c": lambda req: Hang(release=release_c, then=derived(req)),
    }))
    rid = api.submit(PARENT, input={"order": 9})["run_id"]
    ids = {k: child_run_id(rid, k) for k in "abc"}
    for cid in ids.values():
        assert len(cid) == 64 and cid == cid.lower()

    # c is held: a and b end, the parent keeps waiting for c.
    (s0,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=0)
    webhook.wait_requests(1, path="/child", run_id=ids["c"])
    assert api.wait_terminal(ids["a"])["status"] == "succeeded"
    assert api.wait_terminal(ids["b"])["status"] == "failed"
    run = wait_waiting_on_children(api, rid)
    assert run["waiting"]["children"] == {"mode": "all", "count": 3, "step": 0}, run["waiting"]
    assert run["waiting"]["correlation_key"] is None and run["waiting"]["correlation_keys"] is None, run
    timeout_at = iso_to_epoch(run["waiting"]["timeout_at"])
    assert s0.wall - 1 + DEFAULT_WAIT_MS / 1000 <= timeout_at <= time.time() + 1 + DEFAULT_WAIT_MS / 1000, \
        "default wait of 366 days: timeout_at %s" % run["waiting"]["timeout_at"]
    assert run["parent"] is None, "a root run has no parent: %r" % run
    assert webhook.requests(path="/parent", run_id=rid, step=1) == []

    # Each child is an ordinary run of its own workflow, pointing at its parent.
    for key, cid in ids.items():
        child = api.run(cid)
        assert child["run_id"] == cid and child["workflow"] == CHILD, child
        assert child["parent"] == {"run_id": rid, "generation": 1, "step": 0, "key": key}, child
        assert child["input"] == inputs[key], child
        assert child["generation"] == 1, child
        (call,) = webhook.requests(path="/child", run_id=cid, step=0)
        assert call.json["payload"] == inputs[key], call.json
    child_a = api.run(ids["a"])
    assert child_a["headers"] == {"tenant": "acme"} and child_a["concurrency_key"] == "ck-a", child_a
    assert api.run(ids["c"])["status"] == "running"

    release_c.set()
    (s1,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=1, timeout=15)
    assert s1.json["children"] == [
        entry(rid, "a", "succeeded", result={"key": "a", "double": 2}),
        entry(rid, "b", "failed", error="b cannot take 2"),
        entry(rid, "c", "succeeded", result={"key": "c", "double": 6}),
    ], s1.json["children"]
    assert s1.json["payload"] == {"p": 1}

    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"payload": {"p": 1},
                             "seen": [["a", "succeeded"], ["b", "failed"], ["c", "succeeded"]]}, run
    assert run["waiting"] is None, run
    assert history(api, rid) == [(0, 1, "continue"), (1, 1, "succeed")]
    assert sorted(r.run_id for r in webhook.requests(path="/child")) == sorted(ids.values()), \
        "each child was called once"


def test_mode_any_moves_on_at_the_first_terminal_child_and_the_others_keep_running(api, webhook):
    release = threading.Event()
    family(api, webhook, {
        0: spawn([kid("slow"), kid("fast")], {"mode": "any"}),
        1: lambda req: succeed([c["status"] for c in req.json["children"]]),
    }, by_key({
        "fast": succeed("fast done"),
        "slow": Hang(release=release, then=succeed("slow done")),
    }))
    rid = api.submit(PARENT)["run_id"]
    fast, slow = child_run_id(rid, "fast"), child_run_id(rid, "slow")

    (s1,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=1, timeout=15)
    got = s1.json["children"]
    assert [c["key"] for c in got] == ["fast", "slow"], got
    assert got[0] == entry(rid, "fast", "succeeded", result="fast done"), got
    assert_active_entry(got[1], rid, "slow")

    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    # The parent ended; its held child did not.
    assert api.run(slow)["status"] in ACTIVE
    (held,) = webhook.requests(path="/child", run_id=slow)
    assert not held.disconnected.is_set(), "the moving-on parent aborted its active child's call"

    release.set()
    done = api.wait_terminal(slow)
    assert done["status"] == "succeeded" and done["result"] == "slow done", done
    assert api.run(fast)["result"] == "fast done"
    assert len(webhook.requests(path="/parent", run_id=rid, step=1)) == 1


def test_mode_count_moves_on_at_the_nth_terminal_child_not_the_first(api, webhook):
    release = {"k2": threading.Event(), "k3": threading.Event()}
    family(api, webhook, {
        0: spawn([kid("k1"), kid("k2"), kid("k3")], {"mode": "count", "count": 2}),
        1: lambda req: succeed("moved on"),
    }, by_key({
        "k1": succeed("one"),
        "k2": Hang(release=release["k2"], then=succeed("two")),
        "k3": Hang(release=release["k3"], then=succeed("three")),
    }))
    rid = api.submit(PARENT)["run_id"]
    ids = {k: child_run_id(rid, k) for k in ("k1", "k2", "k3")}

    # One child terminal, two held: the parent still waits. (The children
    # exist once the parent waits: they are started by its settlement.)
    wait_waiting_on_children(api, rid)
    assert api.wait_terminal(ids["k1"])["status"] == "succeeded"
    webhook.wait_requests(1, path="/child", run_id=ids["k2"])
    webhook.wait_requests(1, path="/child", run_id=ids["k3"])
    run = wait_waiting_on_children(api, rid)
    assert run["waiting"]["children"] == {"mode": "count", "count": 2, "step": 0}, run["waiting"]
    assert webhook.requests(path="/parent", run_id=rid, step=1) == [], "moved on at the first child"

    released_at = time.monotonic()
    release["k2"].set()
    (s1,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=1, timeout=15)
    assert s1.time > released_at
    got = s1.json["children"]
    assert got[:2] == [entry(rid, "k1", "succeeded", result="one"),
                       entry(rid, "k2", "succeeded", result="two")], got
    assert len(got) == 3, got
    assert_active_entry(got[2], rid, "k3")
    assert api.wait_terminal(rid)["status"] == "succeeded"

    release["k3"].set()
    done = api.wait_terminal(ids["k3"])
    assert done["status"] == "succeeded" and done["result"] == "three", done
    assert len(webhook.requests(path="/parent", run_id=rid, step=1)) == 1


def test_a_wait_that_times_out_lists_the_active_children_as_timeout_after_timeout_ms(api, webhook):
    release = threading.Event()
    family(api, webhook, {
        0: spawn([kid("x"), kid("y")], {"mode": "all", "timeout_ms": 1500}),
        1: lambda req: succeed([c["status"] for c in req.json["children"]]),
    }, by_key({
        "x": Hang(release=release, then=succeed("x late")),
        "y": Hang(release=release, then=succeed("y late")),
    }))
    rid = api.submit(PARENT)["run_id"]
    (s0,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=0)
    run = wait_waiting_on_children(api, rid)
    # timeout_at is 1.5 s after the settlement of step 0 (between its request
    # and now, on the wall clock the database shares).
    timeout_at = iso_to_epoch(run["waiting"]["timeout_at"])
    assert s0.wall + 1.5 - 0.05 <= timeout_at <= time.time() + 1.5 + 0.05, run["waiting"]

    (s1,) = webhook.wait_requests(1, path="/parent", run_id=rid, step=1, timeout=15)
    # Elapsed time since step 0 was answered (monotonic: wall time, immune to
    # clock steps); 50 ms tolerance for the answer's own transit.
    waited = s1.time - s0.answered_at
    assert waited >= 1.5 - 0.05, "step 1 came %.3f s after step 0 was answered (timeout_ms 1500)" % waited
    assert s1.json["children"] == [entry(rid, "x", "timeout"), entry(rid, "y", "timeout")], s1.json
    assert api.wait_terminal(rid)["result"] == ["timeout", "timeout"]

    # The timed-out children were not cancelled: they finish once released.
    for key in ("x", "y"):
        assert api.run(child_run_id(rid, key))["status"] in ACTIVE
    release.set()
    for key in ("x", "y"):
        done = api.wait_terminal(child_run_id(rid, key))
        assert done["status"] == "succeeded" and done["result"] == "%s late" % key, done
    assert len(webhook.requests(path="/parent", run_id=rid, step=1)) == 1


def test_a_signal_wait_shows_waiting_children_null(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("child-runs:signal", 60000)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_status(rid, "waiting")
    assert run["waiting"]["correlation_key"] == "child-runs:signal", run
    assert "children" in run["waiting"] and run["waiting"]["children"] is None, run["waiting"]
    assert api.post("/v1/runs/%s/cancel" % rid).status == 200


# --------------------------------------------------------------------------
# Crash: SIGKILL of the instance that settled the parent's step
# --------------------------------------------------------------------------

def test_sigkill_after_the_settlement_creates_no_duplicates_and_the_survivor_finishes(services, webhook):
    a = services.start(HOOKFLOW_LEASE_MS=LEASE)
    b = services.new(HOOKFLOW_LEASE_MS=LEASE)
    release = threading.Event()
    keys = ("k1", "k2", "k3")
    family(a.api, webhook, {
        0: spawn([kid(k) for k in keys], {"mode": "all"}, payload="spawned"),
        1: lambda req: succeed([c["status"] for c in req.json["children"]]),
    }, lambda req: Hang(release=release, then=succeed({"done": req.json["payload"]["key"]})),
        child_settings={"max_attempts": 3})
    rid = a.api.submit(PARENT)["run_id"]
    ids = {k: child_run_id(rid, k) for k in keys}

    # Only a runs: it settled step 0 (the children exist, the parent waits)
    # and holds the three children's calls.
    webhook.wait_requests(1, path="/parent", run_id=rid, step=0)
    held = webhook.wait_requests(3, path="/child", timeout=15)
    assert sorted(r.run_id for r in held) == sorted(ids.values()), held
    wait_waiting_on_children(a.api, rid)
    assert [c["run_id"] for c in all_children(a.api, rid)] == [ids[k] for k in keys]

    b.start()
    a.kill()
    for req in held:
        assert req.disconnected.wait(5), "the killed instance's call stayed open: %r" % req
    release.set()

    run = b.api.wait_terminal(rid, timeout=60)
    assert run["status"] == "succeeded" and run["result"] == ["succeeded"] * 3, run

    listed = all_children(b.api, rid)
    assert [c["run_id"] for c in listed] == [ids[k] for k in keys], "exactly three children"
    assert sorted(r["run_id"] for r in b.api.runs(workflow=CHILD)) == sorted(ids.values())
    for key, cid in ids.items():
        child = b.api.run(cid)
        assert child["status"] == "succeeded" and child["result"] == {"done": key}, child
        calls = webhook.requests(path="/child", run_id=cid, step=0)
        assert calls[0].attempt == 1 and len(calls) >= 2, \
            "a held the call when it died: the step is delivered again: %r" % calls
        settled = [h for h in history(b.api, cid) if h[2] == "succeed"]
        assert len(settled) == 1, "child %s succeeded %d times: %r" % (key, len(settled), history(b.api, cid))

    assert len(webhook.requests(path="/parent", run_id=rid, step=0)) == 1
    (s1,) = webhook.requests(path="/parent", run_id=rid, step=1)
    assert s1.json["children"] == [entry(rid, k, "succeeded", result={"done": k}) for k in keys], s1.json
    assert [(h[0], h[2]) for h in history(b.api, rid)] == [(0, "continue"), (1, "succeed")]


# --------------------------------------------------------------------------
# Cancelling a parent
# --------------------------------------------------------------------------

def test_cancelling_a_parent_cancels_its_active_children_and_their_callbacks_say_so(api, webhook):
    webhook.route("/cb", lambda req: Reply(200, body=b""))
    family(api, webhook, {
        0: spawn([kid("done"), kid("h1"), kid("h2")], {"mode": "all"}),
        1: succeed("never"),
    }, by_key({"done": succeed("finished"), "h1": Hang(max_s=30), "h2": Hang(max_s=30)}),
        child_settings={"callback_url": webhook.url("/cb")})
    rid = api.submit(PARENT)["run_id"]
    ids = {k: child_run_id(rid, k) for k in ("done", "h1", "h2")}
    assert workflow(api, PARENT)["on_parent_cancel"] == "cancel"

    wait_waiting_on_children(api, rid)  # the children exist from then on
    assert api.wait_terminal(ids["done"])["status"] == "succeeded"
    held = [webhook.wait_requests(1, path="/child", run_id=ids[k])[0] for k in ("h1", "h2")]
    wait_waiting_on_children(api, rid)

    r = api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled" and run["error"] is None, run

    for req in held:
        assert req.disconnected.wait(5), "the cancelled child's in-flight call was not aborted: %r" % req
    for key in ("h1", "h2"):
        child = api.wait_terminal(ids[key])
        assert child["status"] == "cancelled", child
        (cb,) = webhook.wait_requests(1, path="/cb", run_id=ids[key], timeout=15)
        assert cb.json["status"] == "cancelled", cb.json
        assert cb.json["error"] == "parent %s cancelled" % rid, cb.json
    # A child already terminal is left as it was.
    assert api.run(ids["done"])["status"] == "succeeded"
    (cb,) = webhook.wait_requests(1, path="/cb", run_id=ids["done"], timeout=15)
    assert cb.json["status"] == "succeeded", cb.json
    assert webhook.requests(path="/parent", run_id=rid, step=1) == []
    assert len(webhook.requests(path="/child")) == 3, "no cancelled child was called again"


def test_on_parent_cancel_abandon_leaves_the_children_running(api, webhook):
    release = threading.Event()
    webhook.route("/cb", lambda req: Reply(200, body=b""))
    family(api, webhook, {
        0: spawn([kid("h1"), kid("h2")], {"mode": "all"}),
        1: succeed("never"),
    }, lambda req: Hang(release=release, then=succeed("kept " + req.json["payload"]["key"])),
        parent_settings={"on_parent_cancel": "abandon"},
        child_settings={"callback_url": webhook.url("/cb")})
    rid = api.submit(PARENT)["run_id"]
    ids = {k: child_run_id(rid, k) for k in ("h1", "h2")}
    held = [webhook.wait_requests(1, path="/child", run_id=ids[k])[0] for k in ("h1", "h2")]
    wait_waiting_on_children(api, rid)

    r = api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    assert api.wait_terminal(rid)["status"] == "cancelled"
    for cid in ids.values():
        child = api.run(cid)
        assert child["status"] == "running" and child["cancel_requested"] is False, child

    release.set()
    for key, cid in ids.items():
        child = api.wait_terminal(cid)
        assert child["status"] == "succeeded" and child["result"] == "kept " + key, child
        (cb,) = webhook.wait_requests(1, path="/cb", run_id=cid, timeout=15)
        assert cb.json["status"] == "succeeded", cb.json
    for req in held:
        assert req.disconnected_at is None and req.answered_at is not None, \
            "an abandoned child's call was aborted: %r" % req
    assert webhook.requests(path="/parent", run_id=rid, step=1) == []


# --------------------------------------------------------------------------
# GET /v1/runs/{id}/children
# --------------------------------------------------------------------------

def test_children_are_listed_by_step_and_key_and_paged_with_limit_and_cursor(api, webhook):
    # Step 0 starts m, n, z; step 1 starts a, b: the list is ordered by
    # (generation, step, key), so step 1's a and b come after step 0's z.
    family(api, webhook, {
        0: spawn([kid("z"), kid("m"), kid("n")]),
        1: spawn([kid("b"), kid("a")]),
        2: succeed("done"),
    }, lambda req: succeed(req.json["payload"]["key"]))
    rid = api.submit(PARENT)["run_id"]
    assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"
    order = [("m", 0), ("n", 0), ("z", 0), ("a", 1), ("b", 1)]
    expected = [child_run_id(rid, k, step=s) for k, s in order]

    pages, cursor = [], None
    while True:
        r = children_page(api, rid, **dict({"limit": 2}, **({"cursor": cursor} if cursor else {})))
        assert r.status == 200, r
        assert set(r.body) == {"children", "next_cursor"}, r
        pages.append([c["run_id"] for c in r.body["children"]])
        cursor = r.body["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 10, pages
    assert pages == [expected[0:2], expected[2:4], expected[4:]], pages

    listed = all_children(api, rid)
    assert [c["run_id"] for c in listed] == expected
    for c, (key, step) in zip(listed, order):
        assert c["parent"] == {"run_id": rid, "generation": 1, "step": step, "key": key}, c
        assert c["status"] == "succeeded" and c["result"] == key, c
        assert c == api.run(c["run_id"]), "a listed child is its run object"


def test_children_of_an_unknown_run_is_404_and_of_a_childless_run_empty(api, webhook):
    assert_error(children_page(api, "no-such-run"), 404, "not_found")
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_terminal(rid)
    r = children_page(api, rid)
    assert r.status == 200 and r.body == {"children": [], "next_cursor": None}, r


# --------------------------------------------------------------------------
# Bad answers
# --------------------------------------------------------------------------

def assert_failed_permanently(api, webhook, rid):
    """The parent's step 0 failed permanently (called once, not retried) and
    started no child; returns the run."""
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert len(webhook.requests(path="/parent", run_id=rid)) == 1, "a permanent error is not retried"
    assert [h[2] for h in history(api, rid)] == ["permanent_error"]
    assert all_children(api, rid) == [], "a refused answer started children"
    assert api.runs(workflow=CHILD) == []
    assert webhook.requests(path="/child") == []
    return run


def test_a_child_of_an_unknown_workflow_fails_the_parent_permanently_naming_it(api, webhook):
    family(api, webhook, {0: spawn([kid("a"), kid("b", workflow="nope")])}, lambda req: succeed(1),
           parent_settings={"max_attempts": 3})
    rid = api.submit(PARENT)["run_id"]
    run = assert_failed_permanently(api, webhook, rid)
    assert run["error"] == "children[1].workflow: workflow nope not found", run["error"]
    assert api.get("/v1/runs/" + child_run_id(rid, "a")).status == 404, "the valid sibling was not started"


@pytest.mark.parametrize("extra, field", [
    ({"children": [kid("a"), kid("a")]}, "key"),
    ({"children": [{"workflow": CHILD, "input": 1}]}, "key"),
    ({"children": [kid("")]}, "key"),
    ({"children": [kid("x" * 513)]}, "key"),
    ({"children": [{"key": "a", "input": 1}]}, "workflow"),
    ({"children": [kid("a", headers={"h": 1})]}, "headers"),
    ({"children": [kid("a", concurrency_key="")]}, "concurrency_key"),
    ({"children": {"key": "a", "workflow": CHILD}}, "children"),
    ({"children": []}, "children"),
    ({"wait_for_children": {"mode": "count", "count": 0}}, "count"),
    ({"wait_for_children": {"mode": "count", "count": 3}}, "count"),
    ({"wait_for_children": {"mode": "count"}}, "count"),
    ({"wait_for_children": {"mode": "some"}}, "mode"),
    ({"wait_for_children": {"mode": "all", "timeout_ms": 0}}, "timeout_ms"),
    ({"wait_for_children": {"mode": "all", "timeout_ms": MAX_WAIT_MS + 1}}, "timeout_ms"),
    ({"delay_ms": 1000}, "delay_ms"),
    ({"run_at": "2030-01-01T00:00:00.000Z"}, "run_at"),
    ({"wait_for_signal": {"correlation_key": "k", "timeout_ms": 1000}}, "wait_for_signal"),
], ids=["duplicate-keys", "missing-key", "empty-key", "key-over-512-bytes",
        "missing-workflow", "headers-not-strings", "empty-concurrency-key", "children-not-an-array",
        "no-children", "count-0", "count-over-children", "count-missing", "mode-some", "timeout-0",
        "timeout-over-366-days", "with-delay-ms", "with-run-at", "with-wait-for-signal"])
def test_an_invalid_children_answer_fails_the_parent_permanently_naming_the_field(api, webhook, extra, field):
    body = {"outcome": "continue", "payload": None, "children": [kid("a"), kid("b")]}
    body.update(extra)
    family(api, webhook, {0: Reply(200, body)}, lambda req: succeed(1), parent_settings={"max_attempts": 3})
    rid = api.submit(PARENT)["run_id"]
    run = assert_failed_permanently(api, webhook, rid)
    assert run["error"].startswith("invalid step response"), run["error"]
    assert field in run["error"], "the error should name %r: %r" % (field, run["error"])


@pytest.mark.service_env(HOOKFLOW_MAX_CHILDREN="3")
def test_more_children_than_hookflow_max_children_fail_the_parent_permanently(api, webhook):
    family(api, webhook, {
        0: lambda req: spawn([kid("k%d" % i) for i in range(req.json["payload"]["n"])]),
        1: lambda req: succeed(len(req.json["children"])),
    }, lambda req: succeed(1), parent_settings={"max_attempts": 3})
    over = api.submit(PARENT, input={"n": 4})["run_id"]
    run = assert_failed_permanently(api, webhook, over)
    assert "children" in run["error"] and "at most 3" in run["error"], run["error"]

    at_limit = api.submit(PARENT, input={"n": 3})["run_id"]
    run = api.wait_terminal(at_limit)
    assert run["status"] == "succeeded" and run["result"] == 3, run


def test_more_than_100_children_by_default_fail_the_parent_permanently(api, webhook):
    family(api, webhook, {0: spawn([kid("k%03d" % i) for i in range(101)])}, lambda req: succeed(1),
           parent_settings={"max_attempts": 3})
    rid = api.submit(PARENT)["run_id"]
    run = assert_failed_permanently(api, webhook, rid)
    assert "at most 100" in run["error"], run["error"]


def nesting(api, webhook):
    """Workflow "nest": step 0 starts one child of "nest" one level deeper
    (its input {"level": n}), step 1 succeeds with what it got of it."""
    webhook.route("/nest", StepScript({
        0: lambda req: spawn([{"key": "k", "workflow": "nest",
                               "input": {"level": req.json["payload"]["level"] + 1}}]),
        1: lambda req: succeed(req.json["children"]),
    }))
    api.put_workflow("nest", webhook.url("/nest"), max_attempts=3)


def chain(root, levels):
    """Run ids of the chain of only children below `root`, root first."""
    ids = [root]
    for _ in range(levels):
        ids.append(child_run_id(ids[-1], "k"))
    return ids


@pytest.mark.service_env(HOOKFLOW_MAX_CHILD_DEPTH="1")
def test_a_child_starting_children_beyond_hookflow_max_child_depth_fails_permanently(api, webhook):
    nesting(api, webhook)
    root = api.submit("nest", input={"level": 0})["run_id"]
    _, child, grandchild = chain(root, 2)

    run = api.wait_terminal(root)
    assert run["status"] == "succeeded", run
    c = api.run(child)
    assert c["status"] == "failed" and c["error_kind"] == "permanent", c
    assert "depth" in c["error"], c["error"]
    assert c["parent"] == {"run_id": root, "generation": 1, "step": 0, "key": "k"}, c
    assert run["result"] == [entry(root, "k", "failed", error=c["error"])], run
    assert api.get("/v1/runs/" + grandchild).status == 404
    assert all_children(api, child) == []
    assert len(webhook.requests(path="/nest", run_id=child)) == 1, "a permanent error is not retried"


def test_the_default_depth_allows_8_levels_below_the_root_and_not_9(api, webhook):
    nesting(api, webhook)
    root = api.submit("nest", input={"level": 0})["run_id"]
    ids = chain(root, 9)

    assert api.wait_terminal(root, timeout=60)["status"] == "succeeded"
    deepest = api.run(ids[8])
    assert deepest["input"] == {"level": 8}, deepest
    assert deepest["status"] == "failed" and deepest["error_kind"] == "permanent", deepest
    assert "depth" in deepest["error"], deepest["error"]
    for level in range(1, 8):
        run = api.run(ids[level])
        assert run["status"] == "succeeded", (level, run)
        assert run["parent"]["run_id"] == ids[level - 1], (level, run)
    assert api.get("/v1/runs/" + ids[9]).status == 404, "a 9th level was started"


# --------------------------------------------------------------------------
# The workflow setting on_parent_cancel
# --------------------------------------------------------------------------

def test_on_parent_cancel_defaults_to_cancel_and_abandon_round_trips(api, webhook):
    assert api.put_workflow("wf", webhook.url())["on_parent_cancel"] == "cancel"
    assert workflow(api, "wf")["on_parent_cancel"] == "cancel"
    for value in ("abandon", "cancel", "abandon"):
        assert api.put_workflow("wf", webhook.url(), on_parent_cancel=value)["on_parent_cancel"] == value
        assert workflow(api, "wf")["on_parent_cancel"] == value


@pytest.mark.parametrize("bad", ["x", "", "CANCEL", 1, True, {"mode": "cancel"}])
def test_on_parent_cancel_other_values_are_400_naming_it_and_change_nothing(api, webhook, bad):
    api.put_workflow("wf", webhook.url(), on_parent_cancel="abandon")
    before = workflow(api, "wf")
    body = {"url": webhook.url(), "timeout_ms": 5000, "on_parent_cancel": bad}
    assert_error(api.put("/v1/workflows/wf", body), 400, "invalid_argument", "on_parent_cancel")
    assert workflow(api, "wf") == before


def test_a_parent_that_cancels_itself_takes_its_active_children_with_it(api, webhook):
    # Its second step waits for them (mode any) and then cancels the run
    # itself: the child still active is cancelled too.
    release = threading.Event()
    family(api, webhook, {
        0: spawn([kid("quick"), kid("slow")], {"mode": "any"}),
        1: Reply(200, {"outcome": "cancel", "reason": "changed my mind"}),
    }, by_key({"quick": succeed("q"), "slow": Hang(release=release, then=succeed("s"), max_s=30)}))
    rid = api.submit(PARENT)["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled" and run["error"] == "changed my mind", run
    slow = api.wait_terminal(child_run_id(rid, "slow"))
    assert slow["status"] == "cancelled" and slow["error"] == "parent %s cancelled" % rid, slow
    assert api.run(child_run_id(rid, "quick"))["status"] == "succeeded"
    release.set()


def test_a_child_whose_headers_are_null_has_empty_headers(api, webhook):
    family(api, webhook, {0: spawn([kid("h", headers=None)]), 1: succeed("ok")},
           by_key({"h": lambda req: succeed(req.json["headers"])}))
    rid = api.submit(PARENT)["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    child = api.run(child_run_id(rid, "h"))
    assert child["headers"] == {} and child["result"] == {}, child
