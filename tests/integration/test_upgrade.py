"""Upgrades (issue 11, item 3): a database created and loaded by release 0.1.0
is taken over by the binary under test (HOOKFLOW_BIN) with nothing lost.

The 0.1.0 binary is built from its release commit (releases.py; cached under
build/release/). The tests speak to both binaries only through the public
API and the webhook protocol, and read only tables that migration 0001
created (run, step_attempt, callback, signal_buffer), so they keep proving
the upgrade however the engine inside changes.

- test_new_binary_takes_over_a_0_1_0_database_with_runs_in_every_state: 0.1.0
  leaves runs pending, scheduled, waiting (with a signal buffered for another
  key), running with a call in flight, a callback being retried, dead letters
  and a group half done, and is killed (SIGKILL, a call in flight); the new
  binary finishes every run as 0.1.0 would have.
- test_stop_old_start_new_under_load_loses_nothing: 0.1.0 serving while runs
  are submitted continuously is stopped with SIGTERM (it drains) and the new
  binary is started on the same database and port; every acknowledged run
  succeeds, no step is settled twice, no submission gets a 500.
- test_keyed_runs_in_flight_keep_their_key_across_the_run_key_migration: the
  build before migrations/0012_run_key.sql (0.1.0 has no flow-control keys)
  leaves keyed runs running, pending behind their key's slot and ended, and is
  killed; the new binary lists them by key, counts the active ones for
  key_mode skip, and finishes them.
- test_payloads_in_flight_are_kept_across_the_payload_json_migration: the
  build before migrations/0013_payload_json.sql (step outputs stored as
  jsonb) leaves runs whose next step's payload is an earlier step's output:
  one with that step's call in flight, one waiting out a delay; the new
  binary delivers each payload, keeps the history, and stores new outputs
  as json.
- test_runs_in_flight_are_listed_across_the_run_listing_migration: the build
  before migrations/0015_run_listing.sql leaves runs ended, in a group,
  delayed and with a call in flight; the new binary lists them as the old one
  did, with each filter and page by page, and the runs it creates on top."""

import collections
import http.client
import json
import signal
import threading
import time
import urllib.parse

import pytest

from harness import Api, Hang, Reply, cont, fail, iso_to_epoch, sql_quote, succeed, wait_until
from helpers_issue3 import kv_item, signal_outcome, wait_signal
from helpers_issue4 import (counts, dead_letter_list, get_group, list_pages, member_run_id, put_group, q,
                            wait_group_terminal)
from releases import ReleaseError, binary_before, release_binary

LEASE_MS = "2000"         # a killed instance's calls are delivered again quickly
TOKEN = "upgrade-test-token-0123456789"
TIMER_MS = 5000           # delays and signal timeouts that fire after the take-over
OUTCOMES = ("continue", "succeed", "fail", "cancel")


@pytest.fixture(scope="module")
def release_0_1_0():
    try:
        return release_binary("0.1.0")
    except ReleaseError as e:
        pytest.fail(str(e), pytrace=False)


class Steps:
    """The step webhook's behaviour per run id (fn(request) -> Reply | Hang;
    `default` for the others), and a log of every outcome it answered."""

    def __init__(self, default=None):
        self.by_run = {}
        self.default = default
        self._answered = []
        self._held = []  # (request, Hang) whose `then` is answered on release
        self.lock = threading.Lock()

    def on(self, run_id, fn):
        self.by_run[run_id] = fn

    def __call__(self, req):
        fn = self.by_run.get(req.run_id, self.default)
        reply = fn(req) if fn else Reply(500, body=b"no behaviour for this run")
        with self.lock:
            if isinstance(reply, Hang):
                self._held.append((req, reply))
            elif 200 <= reply.status < 300:
                self._answered.append((req, reply))
        return reply

    def answered(self):
        """(run_id, generation, step, attempt, outcome, request seq) of every
        outcome answered, held calls released with one included."""
        with self.lock:
            out = list(self._answered) + [(req, h.then) for req, h in self._held
                                          if h.then is not None and req.answered_at is not None]
        return [(req.run_id, req.field("generation"), req.step, req.attempt,
                 json.loads(reply.body).get("outcome"), req.seq) for req, reply in out]


def assert_no_step_settled_twice(db, webhook, answered, path="/steps"):
    """No attempt has two history rows; no (run, generation, step) has two
    outcome rows; the webhook answered an outcome at most once per (run,
    generation, step) and was never called for that step again afterwards;
    every outcome it answered was settled, as that outcome, once."""
    rows = db.sql("SELECT run_id, generation, step, attempt, result FROM step_attempt")
    attempts = collections.Counter((r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows)
    dup = [k for k, n in attempts.items() if n > 1]
    assert not dup, "attempts settled twice: %r" % dup[:10]
    settled = collections.Counter((r[0], int(r[1]), int(r[2])) for r in rows if r[4] in OUTCOMES)
    dup = [k for k, n in settled.items() if n > 1]
    assert not dup, "steps settled with an outcome twice: %r" % dup[:10]

    by_step = collections.defaultdict(list)
    for a in answered:
        by_step[a[:3]].append(a)
    dup = {k: v for k, v in by_step.items() if len(v) > 1}
    assert not dup, "the webhook answered an outcome twice for one step: %r" % list(dup.items())[:5]
    history = {(r[0], int(r[1]), int(r[2]), int(r[3])): r[4] for r in rows}
    for (rid, gen, step, att, outcome, seq) in answered:
        again = [r for r in webhook.requests(path=path, run_id=rid, step=step)
                 if r.field("generation") == gen and r.seq > seq]
        assert not again, "%s generation %d step %d was called again after it answered %s: %r" % (
            rid, gen, step, outcome, again)
        assert history.get((rid, gen, step, att)) == outcome, \
            "%s generation %d step %d attempt %d answered %s but its history says %r" % (
                rid, gen, step, att, outcome, history.get((rid, gen, step, att)))


def history(api, rid):
    return [(s["generation"], s["step"], s["attempt"], s["result"]) for s in api.steps(rid)]


def signal_of(req):
    return req.field("signal")


# --------------------------------------------------------------------------
# Take-over of a database holding runs in every state
# --------------------------------------------------------------------------

def test_new_binary_takes_over_a_0_1_0_database_with_runs_in_every_state(
        services, db, webhook, release_0_1_0):
    env = dict(HOOKFLOW_LEASE_MS=LEASE_MS, HOOKFLOW_API_TOKENS=TOKEN)
    old = services.start(binary=release_0_1_0, **env)
    api = old.api

    steps = Steps()
    webhook.route("/steps", steps)
    cb_ok = threading.Event()       # callback receivers answer 503 / 400 until set
    cb_answers = []                 # (path, request seq, status)

    def callback(path, refusal):
        def answer(req):
            reply = Reply(200) if cb_ok.is_set() else refusal
            cb_answers.append((path, req.seq, reply.status))
            return reply
        webhook.route(path, answer)
    callback("/cb-retry", Reply(503, body=b"receiver warming up"))
    callback("/cb-dead", Reply(400, body=b"receiver refuses"))

    api.put_workflow("up-main", webhook.url(), timeout_ms=30000, max_attempts=3,
                     retry_backoff={"base_ms": 200, "max_ms": 500})
    api.put_workflow("up-capped", webhook.url(), timeout_ms=30000, max_concurrency=1)
    api.put_workflow("up-group", webhook.url(), timeout_ms=30000)
    acked = []                      # every run id a 201 acknowledged

    def submit(workflow, rid, **fields):
        body = api.submit(workflow, run_id=rid, **fields)
        assert body["newly_submitted"] is True
        acked.append(rid)
        return body

    # running, a call in flight when 0.1.0 dies: delivered again as attempt 2
    legacy = {}      # the delivery token 0.1.0 gave the call in flight at the kill
    memo_reads = {}  # what attempt 2 (by the new binary) read of that call's memo

    def running_step(r):
        if r.step == 1:
            return succeed(r.field("payload"))
        if r.attempt == 1:
            return Hang(max_s=60)
        # The memo 0.1.0's call wrote is there for the retry, read with the
        # 0.1.0 token (accepted during the upgrade's grace period) and with
        # this attempt's own token.
        path = "/v1/runs/up-running/memo/progress"
        for name, tok in (("legacy", legacy.get("token")), ("own", r.field("memo")["token"])):
            got = Api(r.field("memo")["url"][:-len("/v1/runs/up-running")], token=tok).get(path)
            memo_reads[name] = (got.status, got.body)
        return cont({"taken_over": r.attempt})
    steps.on("up-running", running_step)
    submit("up-main", "up-running", input={"n": 1})

    # a concurrency cap of 1: cap-0 holds the slot (in flight), cap-1 and
    # cap-2 stay pending behind it
    def capped_step(req):  # 0.1 s per call, so that two calls at once would overlap
        return Reply(200, {"outcome": "succeed", "result": req.run_id}, delay=0.1)
    steps.on("up-cap-0", lambda r: Hang(max_s=60) if r.attempt == 1 else capped_step(r))
    for i in (1, 2):
        steps.on("up-cap-%d" % i, capped_step)
    submit("up-capped", "up-cap-0")

    # a group half done: k0, k1 succeed, k4 fails (re-submitted after the
    # take-over), k2 is in flight, k3 waits for a signal
    group_keys = ["k0", "k1", "k2", "k3", "k4"]
    gids = {k: member_run_id("up-grp", k) for k in group_keys}
    for k in ("k0", "k1"):
        steps.on(gids[k], lambda r: succeed({"key": r.field("group")["key"]}))
    steps.on(gids["k2"], lambda r: Hang(max_s=60) if r.attempt == 1 else succeed({"key": "k2"}))
    steps.on(gids["k3"], lambda r: wait_signal("up-grp-k3", 60000, payload="k3") if r.step == 0
             else succeed({"key": "k3", "signal": signal_of(r)}))
    steps.on(gids["k4"], lambda r: fail("first try") if r.field("generation") == 1 else succeed({"key": "k4"}))
    members = [{"key": k, "input": {"member": k}} for k in group_keys]
    r = put_group(api, "up-grp", "up-group", members)
    assert r.status == 201, r
    acked.extend(gids.values())

    # a dead step (permanent error); generation 2, after its redrive, succeeds
    steps.on("up-dead", lambda r: Reply(400, body=b"bad request, permanently") if r.field("generation") == 1
             else succeed({"redriven": r.field("payload")}))
    submit("up-main", "up-dead", input={"d": 1})

    # a callback being retried (503s), and a dead callback (400)
    steps.on("up-cb-retry", lambda r: succeed("cb-retry"))
    submit("up-main", "up-cb-retry", callback_url=webhook.url("/cb-retry"), max_attempts=1000)
    steps.on("up-cb-dead", lambda r: succeed("cb-dead"))
    submit("up-main", "up-cb-dead", callback_url=webhook.url("/cb-dead"))

    # waiting on a signal (with a kv effect), and a signal buffered for another key
    steps.on("up-waiting", lambda r: wait_signal("up-key", 60000, payload={"w": 1},
                                                 kv={"put": {"up/waiting": {"by": "0.1.0"}}}) if r.step == 0
             else succeed({"signal": signal_of(r), "payload": r.field("payload")}))
    submit("up-main", "up-waiting")
    assert signal_outcome(api, "up-other", {"for": "the consumer"}) == "buffered"

    # Everything above has reached the state it is to be left in.
    held = {rid: webhook.wait_requests(1, run_id=rid)[0] for rid in ("up-running", "up-cap-0", gids["k2"])}
    submit("up-capped", "up-cap-1")
    submit("up-capped", "up-cap-2")
    assert api.wait_terminal("up-dead")["status"] == "failed"
    assert api.wait_terminal(gids["k4"])["status"] == "failed"
    for rid in ("up-cb-retry", "up-cb-dead", gids["k0"], gids["k1"]):
        assert api.wait_terminal(rid)["status"] == "succeeded"
    api.wait_status("up-waiting", "waiting")
    api.wait_status(gids["k3"], "waiting")
    webhook.wait_requests(2, path="/cb-retry")
    wait_until(lambda: len(dead_letter_list(api)) == 2, timeout=10, message="a dead step and a dead callback")
    # the in-flight step's memo, written through 0.1.0 with its delivery token
    token = held["up-running"].json["memo"]["token"]
    legacy["token"] = token
    r = api.with_token(token).put("/v1/runs/up-running/memo/progress", {"value": {"seen": 1}})
    assert r.status in (200, 201, 204), r

    # Timers last, so that they are still ahead when 0.1.0 dies: scheduled
    # at submission, scheduled between steps, a wait that times out, and a
    # scheduled run whose step 0 consumes the signal buffered for up-other.
    steps.on("up-delayed", lambda r: succeed("delayed"))
    delayed = submit("up-main", "up-delayed", delay_ms=TIMER_MS)
    steps.on("up-mid-delay", lambda r: cont({"carried": True}, delay_ms=TIMER_MS) if r.step == 0
             else succeed({"payload": r.field("payload")}))
    submit("up-main", "up-mid-delay")
    steps.on("up-wait-timeout", lambda r: wait_signal("up-timeout-key", TIMER_MS) if r.step == 0
             else succeed({"signal": signal_of(r)}))
    submit("up-main", "up-wait-timeout")
    steps.on("up-consumer", lambda r: wait_signal("up-other", 60000) if r.step == 0
             else succeed({"signal": signal_of(r)}))
    submit("up-main", "up-consumer", delay_ms=TIMER_MS)
    api.wait_status("up-mid-delay", "scheduled")
    api.wait_status("up-wait-timeout", "waiting")

    # The snapshot 0.1.0 leaves behind.
    before = {rid: api.run(rid) for rid in acked}
    expected = {
        "up-running": "running", "up-cap-0": "running", "up-cap-1": "pending", "up-cap-2": "pending",
        "up-dead": "failed", "up-cb-retry": "succeeded", "up-cb-dead": "succeeded",
        "up-waiting": "waiting", "up-delayed": "scheduled", "up-mid-delay": "scheduled",
        "up-wait-timeout": "waiting", "up-consumer": "scheduled",
        gids["k0"]: "succeeded", gids["k1"]: "succeeded", gids["k2"]: "running",
        gids["k3"]: "waiting", gids["k4"]: "failed",
    }
    assert {rid: b["status"] for rid, b in before.items()} == expected
    assert before["up-mid-delay"]["step"] == 1
    assert before["up-waiting"]["waiting"]["correlation_key"] == "up-key"
    assert counts(get_group(api, "up-grp").body) == {
        "total": 5, "pending": 1, "running": 1, "succeeded": 2, "failed": 1, "cancelled": 0}
    assert db.sql("SELECT payload FROM signal_buffer WHERE correlation_key = 'up-other'") == \
        [['{"for": "the consumer"}']]
    assert db.scalar("SELECT status FROM callback WHERE run_id = 'up-cb-retry'") in ("pending", "scheduled",
                                                                                     "running")
    assert {(d["run_id"], d["kind"]) for d in dead_letter_list(api)} == {("up-dead", "step"),
                                                                          ("up-cb-dead", "callback")}
    assert all(not req.disconnected.is_set() for req in held.values()), "calls in flight at the kill"

    # 0.1.0 dies with three calls in flight.
    assert old.kill() == -signal.SIGKILL
    killed_at = time.time()
    for rid, req in held.items():
        assert req.disconnected.wait(5), "the call of %s stayed open after the kill" % rid

    new = services.start(**env)
    api = new.api
    started_at = time.time()

    # The new binary keeps retrying the callback 0.1.0 scheduled, then it is
    # acknowledged.
    webhook.wait_for(lambda reqs: [r for r in reqs if r.path == "/cb-retry" and r.wall > started_at],
                     timeout=10, message="a callback retry by the new binary")
    cb_ok.set()
    # The waiting runs take their signals.
    assert signal_outcome(api, "up-key", {"paid": True}) == "delivered"
    assert signal_outcome(api, "up-grp-k3", "go") == "delivered"
    # Both dead letters are redriven.
    for dl in dead_letter_list(api):
        r = api.post("/v1/dead-letters/%s/redrive" % q(dl["id"]))
        assert r.status == 200 and r.body["kind"] == dl["kind"], r
    # The group's failed member runs again; its active members are untouched.
    r = put_group(api, "up-grp", "up-group", members)
    assert r.status == 200, "the same member set, recorded by 0.1.0, is recognised: %r" % r

    # Nothing is lost: every acknowledged run ends.
    after = {rid: api.wait_terminal(rid, timeout=30) for rid in acked}
    assert {rid: b["status"] for rid, b in after.items()} == {rid: "succeeded" for rid in acked}
    g = wait_group_terminal(api, "up-grp")
    assert counts(g) == {"total": 5, "pending": 0, "running": 0, "succeeded": 5, "failed": 0, "cancelled": 0}

    # ... and each ends as 0.1.0 would have ended it.
    lease = [(1, 0, 1, "lease_expired")]
    assert after["up-running"]["result"] == {"taken_over": 2}
    assert history(api, "up-running") == lease + [(1, 0, 2, "continue"), (1, 1, 1, "succeed")]
    assert memo_reads == {"legacy": (200, {"value": {"seen": 1}}), "own": (200, {"value": {"seen": 1}})}, \
        "the memo and 0.1.0's delivery token survive the upgrade: %r" % memo_reads
    # A delivery token stops working when its run ends.
    r = api.with_token(token).get("/v1/runs/up-running/memo/progress")
    assert r.status == 403 and "ended" in r.error_message, r

    assert history(api, "up-cap-0") == lease + [(1, 0, 2, "succeed")]
    for rid in ("up-cap-0", "up-cap-1", "up-cap-2"):
        assert after[rid]["result"] == rid
    for rid in ("up-cap-1", "up-cap-2"):
        assert history(api, rid) == [(1, 0, 1, "succeed")]
    capped_calls = sorted([r for r in webhook.requests(path="/steps") if r.field("workflow") == "up-capped"
                           and not (r.run_id == "up-cap-0" and r.attempt == 1)], key=lambda r: r.time)
    assert len(capped_calls) == 3, capped_calls
    for a, b in zip(capped_calls, capped_calls[1:]):
        assert b.time - a.time >= 0.1 - 0.01, "max_concurrency 1 let two calls overlap: %r, %r" % (a, b)

    assert after["up-dead"]["generation"] == 2 and after["up-dead"]["result"] == {"redriven": {"d": 1}}
    assert history(api, "up-dead") == [(1, 0, 1, "permanent_error"), (2, 0, 1, "succeed")]

    assert after["up-waiting"]["result"] == {"signal": {"status": "delivered", "payload": {"paid": True}},
                                             "payload": {"w": 1}}
    assert (kv_item(api, "up/waiting") or {}).get("value") == {"by": "0.1.0"}, "a kv effect settled by 0.1.0"
    assert after["up-wait-timeout"]["result"] == {"signal": {"status": "timeout"}}
    (timed_out,) = webhook.requests(run_id="up-wait-timeout", step=1)
    assert timed_out.wall >= iso_to_epoch(before["up-wait-timeout"]["waiting"]["timeout_at"]) - 0.01

    (first,) = webhook.requests(path="/steps", run_id="up-delayed")
    assert first.wall >= iso_to_epoch(delayed["next_attempt_at"]) - 0.01, "a scheduled step ran early"
    assert after["up-delayed"]["result"] == "delayed"
    (mid,) = webhook.requests(run_id="up-mid-delay", step=1)
    assert mid.wall >= iso_to_epoch(before["up-mid-delay"]["next_attempt_at"]) - 0.01
    assert after["up-mid-delay"]["result"] == {"payload": {"carried": True}}

    # the signal buffered for up-other under 0.1.0 was kept and consumed once
    assert after["up-consumer"]["result"] == {"signal": {"status": "delivered",
                                                         "payload": {"for": "the consumer"}}}
    assert db.sql("SELECT correlation_key FROM signal_buffer") == []

    for k in group_keys:
        assert after[gids[k]]["result"]["key"] == k
    assert after[gids["k3"]]["result"]["signal"] == {"status": "delivered", "payload": "go"}
    assert history(api, gids["k2"]) == lease + [(1, 0, 2, "succeed")]
    assert history(api, gids["k4"]) == [(1, 0, 1, "fail"), (2, 0, 1, "succeed")]

    # Callbacks: the retried one and the redriven dead one are delivered,
    # each the same callback as 0.1.0 sent, and acknowledged.
    for path, rid in (("/cb-retry", "up-cb-retry"), ("/cb-dead", "up-cb-dead")):
        wait_until(lambda: db.scalar("SELECT status FROM callback WHERE run_id = %s" % sql_quote(rid)) == "done",
                   timeout=10, message="callback of %s acknowledged" % rid)
        calls = webhook.requests(path=path)
        assert any(c.wall < killed_at for c in calls) and any(c.wall > started_at for c in calls), calls
        assert len({c.headers["webhook-id"] for c in calls}) == 1, "one callback, delivered again"
        assert all(c.json == calls[0].json for c in calls)
        assert calls[0].json["run_id"] == rid and calls[0].json["status"] == "succeeded"
        oks = [seq for (p, seq, status) in cb_answers if p == path and status == 200]
        assert len(oks) == 1, "acknowledged once: %r" % cb_answers
    assert dead_letter_list(api) == []

    assert db.sql("SELECT run_id, status FROM run WHERE status NOT IN ('succeeded', 'failed', 'cancelled')") == []
    assert db.sql("SELECT run_id, status FROM callback WHERE status <> 'done'") == []
    assert_no_step_settled_twice(db, webhook, steps.answered())
    assert new.stop(signal.SIGTERM) == 0


# --------------------------------------------------------------------------
# Stop the old, start the new, under load
# --------------------------------------------------------------------------

@pytest.mark.serial
def test_stop_old_start_new_under_load_loses_nothing(services, db, webhook, release_0_1_0):
    grace_ms = 1500
    old = services.start(binary=release_0_1_0, HOOKFLOW_LEASE_MS=LEASE_MS,
                         HOOKFLOW_SHUTDOWN_GRACE_MS=str(grace_ms))

    def three_steps(req):
        i = req.field("payload")["i"]
        if req.step < 2:
            return Reply(200, {"outcome": "continue", "payload": {"i": i, "s": req.step + 1}}, delay=0.02)
        return Reply(200, {"outcome": "succeed", "result": {"i": i, "done": True}}, delay=0.02)
    steps = Steps(default=three_steps)
    webhook.route("/steps", steps)
    old.api.put_workflow("load", webhook.url(), timeout_ms=30000, max_attempts=3)
    # Two calls are sure to be in flight when the drain starts: one answers
    # within the grace (0.1.0 settles it), one is still held at the end of the
    # grace (0.1.0 aborts it and releases the step without using up its
    # attempt; the new binary delivers it again).
    release = threading.Event()
    held = set()

    def hold_first_step_1(hang):
        def fn(req):
            if req.step == 1 and req.run_id not in held:
                held.add(req.run_id)
                return hang(req)
            return three_steps(req)
        return fn
    steps.on("held-finish", hold_first_step_1(lambda r: Hang(release=release, then=three_steps(r), max_s=60)))
    steps.on("held-abort", hold_first_step_1(lambda r: Hang(max_s=60)))

    client = Api(old.base_url, timeout=15)   # the same address before and after the switch
    acked = []
    refused = collections.Counter()          # how unacknowledged submissions ended
    stop = threading.Event()
    problems = []

    def submitter():
        n = 0
        while not stop.is_set():
            rid = "load-%05d" % n
            try:
                r = client.post("/v1/runs", {"workflow": "load", "run_id": rid, "input": {"i": n}})
            except (OSError, http.client.HTTPException) as e:  # the switch: not acknowledged
                refused[type(e).__name__] += 1
            else:
                if r.status == 201:
                    acked.append(rid)
                elif r.status == 503 and r.error_code == "unavailable":
                    refused["503 unavailable"] += 1   # shutting down: not acknowledged
                else:
                    problems.append((rid, r))
            n += 1
            stop.wait(0.01)              # load shaping: about 50 runs a second on two cores

    thread = threading.Thread(target=submitter, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acked) >= 50, timeout=20, message="50 runs acknowledged by 0.1.0")
        for rid, i in (("held-finish", -1), ("held-abort", -2)):  # see `special` below
            old.api.submit("load", run_id=rid, input={"i": i})
            acked.append(rid)
        (finishing,) = webhook.wait_requests(1, run_id="held-finish", step=1)
        (aborted,) = webhook.wait_requests(1, run_id="held-abort", step=1)

        t0 = time.monotonic()
        old.send_signal(signal.SIGTERM)
        wait_until(lambda: "shutting down" in old.log_text(), timeout=5, message="0.1.0 draining")
        release.set()
        assert old.wait_exit(grace_ms / 1000 + 5) == 0, "0.1.0 did not drain and exit 0"
        wait_until(lambda: finishing.answered_at is not None, timeout=5,
                   message="the call released in the drain answered")
        assert not finishing.disconnected.is_set(), "the call released within the grace was aborted"
        assert aborted.disconnected.wait(5), "the call held past the grace was not aborted"
        by_old = len(acked)
        new = services.start(port=old.port, HOOKFLOW_LEASE_MS=LEASE_MS)
        switch_s = time.monotonic() - t0
        wait_until(lambda: len(acked) >= by_old + 50, timeout=20, message="50 runs acknowledged by the new binary")
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()
    assert not problems, "submissions answered neither 201 nor 503 unavailable: %r" % problems[:5]

    # Every acknowledged run (and any run committed whose answer was lost)
    # succeeds; nothing is left behind.
    def all_done():
        rows = dict(db.sql("SELECT status, count(*) FROM run GROUP BY status"))
        assert "failed" not in rows and "cancelled" not in rows, rows
        return set(rows) == {"succeeded"}
    wait_until(all_done, timeout=60, interval=0.2,
               message=lambda: "every run succeeded: %r" % db.sql("SELECT status, count(*) FROM run GROUP BY status"))
    in_db = {r[0] for r in db.sql("SELECT run_id FROM run")}
    assert set(acked) <= in_db, "acknowledged runs missing: %r" % sorted(set(acked) - in_db)[:10]
    special = {"held-finish": -1, "held-abort": -2}
    for rid in acked:
        run = new.api.run(rid)
        i = special[rid] if rid in special else int(rid.split("-")[1])
        assert run["status"] == "succeeded" and run["input"] == {"i": i} and \
            run["result"] == {"i": i, "done": True} and run["final_step"] == 2, run
    outcome_steps = collections.defaultdict(set)
    for rid, gen, step in db.sql("SELECT run_id, generation, step FROM step_attempt WHERE result IN "
                                 "('continue', 'succeed')"):
        outcome_steps[rid].add((int(gen), int(step)))
    wrong = [(rid, outcome_steps[rid]) for rid in in_db if outcome_steps[rid] != {(1, 0), (1, 1), (1, 2)}]
    assert not wrong, "runs whose steps were not each settled once: %r" % wrong[:5]
    assert_no_step_settled_twice(db, webhook, steps.answered())

    # The call answered during the drain was settled by 0.1.0 and not
    # delivered again; the aborted one was delivered again by the new binary,
    # as the same attempt, and left no history row of its own.
    assert len(webhook.requests(path="/steps", run_id="held-finish", step=1)) == 1
    again = webhook.requests(path="/steps", run_id="held-abort", step=1)
    assert [r.attempt for r in again] == [1, 1] and again[1].headers["webhook-id"] == aborted.headers["webhook-id"]
    assert history(new.api, "held-abort") == [(1, 0, 1, "continue"), (1, 1, 1, "continue"), (1, 2, 1, "succeed")]

    assert new.stop(signal.SIGTERM) == 0
    print("upgrade under load: %d runs acknowledged (%d by 0.1.0), switch %.2fs, not acknowledged: %r"
          % (len(acked), by_old, switch_s, dict(refused)))


def _binary_before(migration):
    """binary_before(migration), or the test fails saying why it cannot be had."""
    try:
        return binary_before(migration)
    except ReleaseError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def before_run_key():
    return _binary_before("migrations/0012_run_key.sql")


def test_keyed_runs_in_flight_keep_their_key_across_the_run_key_migration(
        services, db, webhook, before_run_key):
    env = dict(HOOKFLOW_LEASE_MS=LEASE_MS, HOOKFLOW_API_TOKENS=TOKEN)
    old = services.start(binary=before_run_key, **env)
    api = old.api
    steps = Steps(default=lambda r: succeed(r.run_id))
    for rid in ("key-held", "skip-held"):  # in flight at the kill, then delivered again
        steps.on(rid, lambda r: Hang(max_s=60) if r.attempt == 1 else succeed(r.run_id))
    webhook.route("/steps", steps)
    api.put_workflow("up-keyq", webhook.url("/steps"), timeout_ms=30000, key_concurrency=1)
    api.put_workflow("up-keyskip", webhook.url("/steps"), timeout_ms=30000, key_mode="skip")
    api.submit("up-keyq", run_id="key-ended", concurrency_key="k2")
    assert api.wait_terminal("key-ended")["status"] == "succeeded"
    api.submit("up-keyq", run_id="key-held", concurrency_key="k1")
    api.submit("up-keyskip", run_id="skip-held", concurrency_key="s1")
    held = {rid: webhook.wait_requests(1, run_id=rid)[0] for rid in ("key-held", "skip-held")}
    api.submit("up-keyq", run_id="key-queued", concurrency_key="k1")  # behind key-held's slot
    assert api.run("key-queued")["status"] == "pending"

    assert old.kill() == -signal.SIGKILL
    for rid, req in held.items():
        assert req.disconnected.wait(5), "the call of %s stayed open after the kill" % rid
    new = services.start(**env)
    api = new.api

    # The keys' lists, newest first, and key_mode skip sees the active run.
    def listed(key):
        r = api.get("/v1/runs", params={"concurrency_key": key})
        assert r.status == 200, r
        return [x["run_id"] for x in r.body["runs"]]
    assert listed("k1") == ["key-queued", "key-held"]
    assert listed("k2") == ["key-ended"]
    r = api.post("/v1/runs", {"workflow": "up-keyskip", "run_id": "skip-new",
                              "concurrency_key": "s1"})
    assert r.status == 200 and r.body["skipped"] is True and r.body["run_id"] == "skip-held", r
    # Every run finishes: the held calls are delivered again once their
    # lease runs out, the queued run takes its key's slot after them.
    for rid in ("key-held", "skip-held", "key-queued"):
        assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"
    # The key's run ended: a submission with it starts again.
    api.submit("up-keyskip", run_id="skip-after", concurrency_key="s1")
    assert api.wait_terminal("skip-after")["status"] == "succeeded"
    assert listed("s1") == ["skip-after", "skip-held"]


@pytest.fixture(scope="module")
def before_payload_json():
    return _binary_before("migrations/0013_payload_json.sql")


def test_payloads_in_flight_are_kept_across_the_payload_json_migration(
        services, db, webhook, before_payload_json):
    env = dict(HOOKFLOW_LEASE_MS=LEASE_MS, HOOKFLOW_API_TOKENS=TOKEN)
    old = services.start(binary=before_payload_json, **env)
    api = old.api
    p1 = {"held": [1, 2.5, "caf\u00e9"], "pad": "x" * 5000}  # TOASTed
    p2 = {"delayed": True}
    steps = Steps()
    # pj-held: step 1's call is in flight at the kill, delivered again after.
    steps.on("pj-held", lambda r: cont(p1) if r.step == 0 else
             Hang(max_s=60) if r.attempt == 1 else succeed(r.field("payload")))
    # pj-delayed: step 1 waits out a delay that ends after the take-over.
    steps.on("pj-delayed", lambda r: Reply(200, {"outcome": "continue", "payload": p2,
                                                 "delay_ms": TIMER_MS}) if r.step == 0
             else cont({"after": r.field("payload")}) if r.step == 1
             else succeed(r.field("payload")))
    webhook.route("/steps", steps)
    api.put_workflow("up-pj", webhook.url("/steps"), timeout_ms=30000)
    api.submit("up-pj", run_id="pj-held", input={"start": 1})
    api.submit("up-pj", run_id="pj-delayed", input={"start": 2})
    held = webhook.wait_requests(1, run_id="pj-held", step=1)[0]
    wait_until(lambda: api.run("pj-delayed")["status"] == "scheduled", message="pj-delayed scheduled")
    assert db.scalar("SELECT pg_typeof(output)::text FROM step_attempt "
                     "WHERE run_id = 'pj-held' AND step = 0") == "jsonb"

    assert old.kill() == -signal.SIGKILL
    assert held.disconnected.wait(5), "the held call stayed open after the kill"
    new = services.start(**env)
    api = new.api
    done = api.wait_terminal("pj-held", timeout=30)
    assert done["status"] == "succeeded" and done["result"] == p1, done
    done = api.wait_terminal("pj-delayed", timeout=30)
    assert done["status"] == "succeeded" and done["result"] == {"after": p2}, done
    # Every call of step 1 got its payload: the one before the kill and the
    # ones after it, read from the copied output.
    assert [r.field("payload") for r in webhook.requests(path="/steps", run_id="pj-held", step=1)] \
        == [p1, p1]
    assert [(s["step"], s["payload"]) for s in api.steps("pj-held")] == \
        [(0, {"start": 1}), (1, p1), (1, p1)]
    assert db.sql("SELECT step, pg_typeof(output)::text FROM step_attempt "
                  "WHERE run_id = 'pj-delayed' AND output IS NOT NULL ORDER BY step") == \
        [["0", "json"], ["1", "json"]]
    assert_no_step_settled_twice(db, webhook, steps.answered())


@pytest.fixture(scope="module")
def before_run_listing():
    return _binary_before("migrations/0015_run_listing.sql")


def test_runs_in_flight_are_listed_across_the_run_listing_migration(
        services, db, webhook, before_run_listing):
    """The build before migrations/0015_run_listing.sql (lists read run's own
    indexes) leaves runs ended, failed, in a group, waiting out a delay and
    with a call in flight, and is killed; the new binary lists every one of
    them in the order it did, with and without filters, page by page, then
    the runs it creates itself (one by one, in a batch and in a group) on top,
    and finishes the old ones."""
    env = dict(HOOKFLOW_LEASE_MS=LEASE_MS, HOOKFLOW_API_TOKENS=TOKEN)
    old = services.start(binary=before_run_listing, **env)
    api = old.api
    steps = Steps(default=lambda r: succeed(r.run_id))
    steps.on("ls-held", lambda r: Hang(max_s=60) if r.attempt == 1 else succeed(r.run_id))
    steps.on("ls-failed", lambda r: fail("no"))
    steps.on("ls-delayed", lambda r: Reply(200, {"outcome": "continue", "delay_ms": TIMER_MS})
             if r.step == 0 else succeed(r.run_id))
    webhook.route("/steps", steps)
    api.put_workflow("up-la", webhook.url("/steps"), timeout_ms=30000)
    api.put_workflow("up-lb", webhook.url("/steps"), timeout_ms=30000)
    for rid, wf in (("ls-a1", "up-la"), ("ls-b1", "up-lb"), ("ls-failed", "up-la")):
        api.submit(wf, run_id=rid)
        api.wait_terminal(rid)
    assert put_group(api, "ls-g", "up-lb", [{"key": "m%d" % i} for i in range(3)]).status == 201
    wait_group_terminal(api, "ls-g")
    api.submit("up-lb", run_id="ls-delayed")
    api.submit("up-la", run_id="ls-held")
    held = webhook.wait_requests(1, run_id="ls-held")[0]
    wait_until(lambda: api.run("ls-delayed")["status"] == "scheduled", message="ls-delayed scheduled")

    def in_db_order(where=""):
        return [r[0] for r in db.sql("SELECT run_id FROM run %s ORDER BY created_at DESC, "
                                     "run_id DESC" % where)]

    before = {q: _listed(api, q) for q in ("", "workflow=up-lb", "status=failed",
                                           "status=succeeded,failed")}
    assert before[""] == in_db_order() and len(before[""]) == 8, before[""]

    assert old.kill() == -signal.SIGKILL
    assert held.disconnected.wait(5), "the held call stayed open after the kill"
    new = services.start(**env)
    api = new.api
    # The same answers from the new binary, and no run lost or listed twice.
    for q, runs in before.items():
        assert _listed(api, q) == runs, q
    assert _listed(api, "status=scheduled") == ["ls-delayed"]
    assert _listed(api, "workflow=up-la&status=running") == ["ls-held"]

    # Runs the new binary creates come first: one, a batch (submitted at
    # once, so the submitter inserts them together) and a group.
    api.submit("up-la", run_id="ls-new")
    threads = [threading.Thread(target=api.submit, args=("up-lb",), kwargs={"run_id": "ls-batch%d" % i})
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert put_group(api, "ls-g2", "up-la", [{"key": "m%d" % i} for i in range(2)]).status == 201
    for rid in ("ls-held", "ls-delayed"):
        assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"
    wait_group_terminal(api, "ls-g2")
    everything = _listed(api, "")
    assert everything == in_db_order() and len(everything) == 8 + 1 + 6 + 2, everything
    assert everything[len(everything) - 8:] == before[""]
    assert _listed(api, "workflow=up-la") == in_db_order("WHERE workflow = 'up-la'")
    assert _listed(api, "workflow=up-lb") == in_db_order("WHERE workflow = 'up-lb'")
    assert_no_step_settled_twice(db, webhook, steps.answered())


def _listed(api, query, limit=3):
    """Every run id GET /v1/runs?<query> lists, following next_cursor over
    pages of `limit`."""
    pages = list_pages(api, "/v1/runs", "runs", limit=str(limit),
                       **dict(urllib.parse.parse_qsl(query)))
    return [x["run_id"] for page in pages for x in page]
