"""Flow control in the claim (issue 14; README "Flow control"): per-key
concurrency across instances, fair share between keys, pause and resume."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from harness import Hang, Reply, wait_until


class InFlight:
    """Counts the webhook's calls in flight, per concurrency key and in all."""

    def __init__(self, key_of, hold_s):
        self.key_of = key_of
        self.hold_s = hold_s
        self.lock = threading.Lock()
        self.now = {}
        self.peak = {}
        self.total_now = 0
        self.total_peak = 0

    def step(self, req):
        key = self.key_of(req.run_id)
        with self.lock:
            self.now[key] = self.now.get(key, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.now[key])
            self.total_now += 1
            self.total_peak = max(self.total_peak, self.total_now)
        try:
            # Hold the call so that every instance tries to claim more meanwhile.
            threading.Event().wait(self.hold_s)
        finally:
            with self.lock:
                self.now[key] -= 1
                self.total_now -= 1
        return Reply(200, {"outcome": "succeed", "result": req.run_id})


def _submit_all(api, workflow, runs):
    """Submits runs [(run_id, key or None)] from a few threads."""
    def one(item):
        rid, key = item
        fields = {"run_id": rid}
        if key is not None:
            fields["concurrency_key"] = key
        api.submit(workflow, **fields)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, runs))


def test_key_concurrency_holds_across_two_instances(services, webhook, db):
    a = services.start()
    b = services.start()
    keys = {}
    counter = InFlight(lambda rid: keys[rid], hold_s=0.05)
    webhook.route("/steps", counter.step)
    a.api.put_workflow("keyed", webhook.url(), key_concurrency=2, timeout_ms=10000)
    runs = []
    for i in range(300):
        key = None if i % 10 == 9 else "k%d" % (i % 4)
        rid = "kc%03d" % i
        keys[rid] = key
        runs.append((rid, key))
    _submit_all(a.api, "keyed", runs[:150])
    _submit_all(b.api, "keyed", runs[150:])
    for rid, _ in runs:
        assert a.api.wait_terminal(rid, timeout=120)["status"] == "succeeded", rid
    keyed_peaks = {k: v for k, v in counter.peak.items() if k is not None}
    assert max(keyed_peaks.values()) <= 2, "a key had more than 2 calls in flight: %r" % keyed_peaks
    assert max(keyed_peaks.values()) == 2, \
        "no key reached its limit (%r): the test proves nothing" % keyed_peaks
    # The limit is per key: the keys ran side by side, and runs without a key
    # are not limited by it.
    assert counter.total_peak > 2, counter.total_peak
    assert counter.peak[None] > 2, "runs without a key were held to key_concurrency: %r" % counter.peak
    # Every key slot was given back.
    assert db.scalar("SELECT count(*) FROM run WHERE holds_key_slot") == "0"
    # ... counted through holds_key_slot alone: the counter table of
    # migration 0007 is gone (0014).
    assert db.scalar("SELECT to_regclass('flow_key') IS NULL") == "t"


def test_a_key_with_a_backlog_does_not_delay_another_key(services, webhook, db):
    """Key A has 5,000 queued runs when key B submits 10: B's runs take turns
    with A's (within a priority, lanes are claimed in turn; a lane waits at
    most ceil(lanes / claim batch) claims), so they all finish while A still
    has thousands queued, where FIFO order would run them last."""
    svc = services.start()
    done = []
    lock = threading.Lock()

    def step(req):
        with lock:
            done.append(req.run_id)
        threading.Event().wait(0.002)
        return Reply(200, {"outcome": "succeed"})

    webhook.route("/steps", step)
    # Two calls at a time: A's backlog drains slowly enough to measure.
    svc.api.put_workflow("fair", webhook.url(), max_concurrency=2, timeout_ms=10000)
    assert svc.api.post("/v1/workflows/fair/pause").status == 200
    _submit_all(svc.api, "fair", [("a%04d" % i, "A") for i in range(5000)])
    _submit_all(svc.api, "fair", [("b%02d" % i, "B") for i in range(10)])
    assert svc.api.post("/v1/workflows/fair/resume").status == 200
    for i in range(10):
        assert svc.api.wait_terminal("b%02d" % i, timeout=60)["status"] == "succeeded"
    with lock:
        a_done = sum(1 for rid in done if rid.startswith("a"))
        b_calls = [i for i, rid in enumerate(done) if rid.startswith("b")]
    queued_a = int(db.scalar("SELECT count(*) FROM run WHERE run_id LIKE 'a%' "
                             "AND status NOT IN ('succeeded', 'failed', 'cancelled')"))
    assert queued_a >= 4000, "B finished only after %d of A's runs" % a_done
    # Turns: B's calls are interleaved with A's from the start, not queued behind them.
    assert b_calls[-1] < 40, "B's last call was call #%d" % b_calls[-1]


def test_nothing_is_called_while_paused_and_everything_runs_after_resume(services, webhook):
    svc = services.start()
    calls = []
    lock = threading.Lock()
    release = threading.Event()

    def step(req):
        with lock:
            calls.append(req.run_id)
        if req.run_id == "in-flight":
            release.wait(30)
        return Reply(200, {"outcome": "succeed"})

    webhook.route("/steps", step)
    svc.api.put_workflow("pausable", webhook.url(), timeout_ms=60000)
    svc.api.put_workflow("other", webhook.url(), timeout_ms=60000)
    svc.api.submit("pausable", run_id="in-flight")
    wait_until(lambda: "in-flight" in calls, message="the first call never started")

    paused = svc.api.post("/v1/workflows/pausable/pause")
    assert paused.status == 200 and paused.json()["paused"] is True, paused
    for i in range(20):
        svc.api.submit("pausable", run_id="p%02d" % i)
    svc.api.submit("pausable", run_id="p-cancel")
    # The call in flight when the pause came finishes.
    release.set()
    assert svc.api.wait_terminal("in-flight")["status"] == "succeeded"
    # The dispatcher claims meanwhile: a run of another workflow submitted
    # after the paused ones is called and finishes...
    svc.api.submit("other", run_id="other-1")
    assert svc.api.wait_terminal("other-1")["status"] == "succeeded"
    # ...and no run of the paused workflow was.
    with lock:
        assert [c for c in calls if c.startswith("p")] == [], calls
    for i in range(20):
        assert svc.api.run("p%02d" % i)["status"] == "pending"
    # Cancelling a run of a paused workflow still ends it at once.
    resp = svc.api.post("/v1/runs/p-cancel/cancel")
    assert resp.status == 200, resp
    assert svc.api.run("p-cancel")["status"] == "cancelled"

    resumed = svc.api.post("/v1/workflows/pausable/resume")
    assert resumed.status == 200 and resumed.json()["paused"] is False, resumed
    for i in range(20):
        assert svc.api.wait_terminal("p%02d" % i)["status"] == "succeeded"
    with lock:
        assert "p-cancel" not in calls


def _max_in_window(times, window):
    """The most timestamps found in any interval [t, t + window)."""
    times = sorted(times)
    best = 0
    for i, t in enumerate(times):
        j = i
        while j < len(times) and times[j] < t + window:
            j += 1
        best = max(best, j - i)
    return best


# The webhook sees a call a little after the claim that counted it: windows
# are checked this much shorter than the period.
JITTER_S = 0.15


def test_calls_per_period_never_exceed_the_rate_limit(service, webhook):
    times = []
    lock = threading.Lock()

    def step(req):
        with lock:
            times.append(req.time)
        return Reply(200, {"outcome": "succeed"})

    webhook.route("/steps", step)
    wf = service.api.put_workflow("limited", webhook.url(),
                                  rate_limit={"limit": 5, "period_ms": 1000})
    assert wf["rate_limit"] == {"limit": 5, "period_ms": 1000, "per_key": False}, wf
    _submit_all(service.api, "limited", [("rl%02d" % i, "k%d" % (i % 3)) for i in range(20)])
    for i in range(20):
        run = service.api.wait_terminal("rl%02d" % i, timeout=30)
        assert run["status"] == "succeeded", run
        # Waiting for the window used no attempt.
        assert run["attempt"] == 1, run
    assert len(times) == 20
    assert _max_in_window(times, 1.0 - JITTER_S) <= 5, sorted(t - times[0] for t in times)
    # The limit was what paced them: 20 calls at 5 a second span 3 periods.
    assert max(times) - min(times) >= 3.0 - JITTER_S, sorted(t - min(times) for t in times)


def test_a_rate_limit_per_key_paces_each_key_on_its_own(service, webhook):
    times = {}
    lock = threading.Lock()

    def step(req):
        with lock:
            times.setdefault(req.run_id[:2], []).append(req.time)
        return Reply(200, {"outcome": "succeed"})

    webhook.route("/steps", step)
    service.api.put_workflow("per-key", webhook.url(),
                             rate_limit={"limit": 3, "period_ms": 1000, "per_key": True})
    _submit_all(service.api, "per-key",
                [("%s%02d" % (k, i), k) for i in range(9) for k in ("ka", "kb")])
    for i in range(9):
        for k in ("ka", "kb"):
            assert service.api.wait_terminal("%s%02d" % (k, i), timeout=30)["status"] == "succeeded"
    for k in ("ka", "kb"):
        assert _max_in_window(times[k], 1.0 - JITTER_S) <= 3, (k, times[k])
    # The two keys ran side by side: more than one key's limit in a period.
    assert _max_in_window(times["ka"] + times["kb"], 1.0) > 3


# ---- what a submission does when its key is busy (key_mode) ----------------


def test_key_mode_skip_answers_with_the_active_run_and_writes_nothing(service, webhook, db):
    release = threading.Event()
    webhook.route("/steps", lambda req: Hang(release=release,
                                             then=Reply(200, {"outcome": "succeed"}))
                  if req.run_id == "s1" else Reply(200, {"outcome": "succeed"}))
    service.api.put_workflow("skipper", webhook.url(), key_mode="skip", timeout_ms=60000)
    service.api.submit("skipper", run_id="s1", concurrency_key="K")
    webhook.wait_requests(1, run_id="s1")
    before = db.scalar("SELECT count(*) FROM run")
    resp = service.api.post("/v1/runs", {"workflow": "skipper", "run_id": "s2",
                                         "concurrency_key": "K"})
    assert resp.status == 200, resp
    body = resp.json()
    assert body["skipped"] is True and body["run_id"] == "s1", body
    assert db.scalar("SELECT count(*) FROM run") == before
    assert service.api.get("/v1/runs/s2").status == 404
    # Another key is not busy.
    service.api.submit("skipper", run_id="s3", concurrency_key="L")
    release.set()
    assert service.api.wait_terminal("s1")["status"] == "succeeded"
    # Once the key's run ended, a submission starts again.
    service.api.submit("skipper", run_id="s4", concurrency_key="K")
    assert service.api.wait_terminal("s4")["status"] == "succeeded"
    assert service.api.wait_terminal("s3")["status"] == "succeeded"


def test_key_mode_cancel_active_cancels_the_keys_runs_then_starts_the_new_one(service, webhook):
    def step(req):
        if req.run_id in ("c1", "c2"):
            return Hang(max_s=60)
        return Reply(200, {"outcome": "succeed"})

    webhook.route("/steps", step)
    webhook.route("/cb", lambda req: Reply(200, {}))
    service.api.put_workflow("canceller", webhook.url(), key_mode="cancel_active",
                             timeout_ms=60000, callback_url=webhook.url("/cb"))
    service.api.submit("canceller", run_id="c1", concurrency_key="K")
    (first,) = webhook.wait_requests(1, run_id="c1")
    service.api.submit("canceller", run_id="q1", concurrency_key="K", delay_ms=60000)
    service.api.submit("canceller", run_id="c2", concurrency_key="K")
    # Each submission cancels the key's active runs: q1's the running c1
    # (its call is aborted), c2's the queued q1 (it ends at once). Both end
    # cancelled, superseded, and their callbacks are sent.
    assert first.disconnected.wait(10), "the call of the cancelled run was not aborted"
    for rid, by in (("c1", "q1"), ("q1", "c2")):
        run = service.api.wait_terminal(rid)
        assert run["status"] == "cancelled" and run["error"] == "superseded by " + by, run
    (second,) = webhook.wait_requests(1, run_id="c2")
    assert second.time >= first.disconnected_at, "the new run started before the old call ended"
    cbs = webhook.wait_requests(2, path="/cb")
    assert {c.json["run"]["run_id"] if "run" in c.json else c.json["run_id"] for c in cbs} >= {"c1", "q1"}
    # A run of another key is left alone.
    service.api.submit("canceller", run_id="other", concurrency_key="L")
    assert service.api.wait_terminal("other")["status"] == "succeeded"
    assert service.api.run("c2")["status"] == "running"


def test_key_mode_cancel_active_waits_for_the_cancelled_call_of_an_instance_that_died(
        services, webhook, db):
    """cancel_active: one call of a key at a time. The instance calling the
    cancelled run is killed, so nobody aborts or settles that call: the new
    run waits for its lease to expire (the reaper of the other instance),
    even when it is the only run pending (the claim's quick path checks the
    key's mode too)."""
    a = services.start(HOOKFLOW_LEASE_MS="1500")
    b = services.new(HOOKFLOW_LEASE_MS="1500")
    webhook.route("/steps", lambda req: Hang(max_s=60) if req.run_id == "d1"
                  else Reply(200, {"outcome": "succeed"}))
    a.api.put_workflow("dying", webhook.url(), key_mode="cancel_active", timeout_ms=60000)
    a.api.submit("dying", run_id="d1", concurrency_key="K")
    webhook.wait_requests(1, run_id="d1")
    b.start()  # after the claim: a holds d1's call
    a.kill()
    b.api.submit("dying", run_id="d2", concurrency_key="K")
    assert b.api.wait_terminal("d2", timeout=30)["status"] == "succeeded"
    assert b.api.wait_terminal("d1", timeout=30)["status"] == "cancelled"
    # d1's slot passed to d2 only when d1's lease expired and was settled.
    assert db.scalar("SELECT a.started_at >= (SELECT max(x.finished_at) FROM step_attempt x "
                     "WHERE x.run_id = 'd1') FROM step_attempt a WHERE a.run_id = 'd2'") == "t", \
        db.sql("SELECT run_id, attempt, result, started_at, finished_at FROM step_attempt "
               "WHERE run_id IN ('d1', 'd2') ORDER BY started_at")


def test_key_mode_debounce_starts_the_last_run_after_a_quiet_period(service, webhook):
    webhook.route("/steps", lambda req: Reply(200, {"outcome": "succeed"}))
    service.api.put_workflow("debouncer", webhook.url(), key_mode="debounce",
                             debounce_ms=400, debounce_max_ms=60000)
    submitted = {}
    for i in range(4):
        submitted["d%d" % i] = time.monotonic()
        service.api.submit("debouncer", run_id="d%d" % i, concurrency_key="K")
        threading.Event().wait(0.1)   # pacing: each comes within the quiet period
    last = service.api.wait_terminal("d3")
    assert last["status"] == "succeeded", last
    for i in range(3):
        run = service.api.run("d%d" % i)
        assert run["status"] == "cancelled", run
        assert run["error"] == "superseded by d%d" % (i + 1), run
    calls = webhook.requests(path="/steps")
    assert [c.run_id for c in calls] == ["d3"], [c.run_id for c in calls]
    assert calls[0].time - submitted["d3"] >= 0.4


def test_key_mode_debounce_starts_at_the_latest_debounce_max_ms_after_the_first(service, webhook):
    webhook.route("/steps", lambda req: Reply(200, {"outcome": "succeed"}))
    service.api.put_workflow("bounded", webhook.url(), key_mode="debounce",
                             debounce_ms=500, debounce_max_ms=1000)
    first = time.monotonic()
    i = 0
    # Submissions every 100 ms, never quiet for 500 ms: without the bound no
    # run would start while they come.
    while time.monotonic() - first < 2.0:
        service.api.submit("bounded", run_id="b%02d" % i, concurrency_key="K")
        i += 1
        threading.Event().wait(0.1)
    calls = webhook.wait_requests(1, path="/steps")
    assert calls[0].time - first <= 1.0 + JITTER_S + 0.2, calls[0].time - first
    assert calls[0].time - first >= 1.0 - JITTER_S, calls[0].time - first
