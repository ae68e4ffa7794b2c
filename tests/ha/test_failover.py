"""hookflow on a pg_auto_failover formation (tests/ha/autofailover.py): a
primary and its synchronous standby, two hookflow instances on the multi-host
URL (target_session_attrs=read-write), several hundred runs of 5 steps in
flight, and then

- test_failover_...: the primary node dies (SIGKILL of its pg_autoctl and of
  its postmaster, so nothing restarts it) and the monitor promotes the
  standby;
- test_switchover_...: `pg_autoctl perform switchover` under the same load.

Of the runs in flight when it happens, some wait for a signal, some have
their step-2 call held by the webhook (released at once, so their answers
arrive while there is no primary; or held until they are cancelled) and
the rest go step by step with delays, so their next steps fall due after
the new primary took over. Meanwhile two threads keep submitting.

Both tests check that: every submission is answered 201, or 503 with the
code `unavailable`, within the client's timeout (never a 500, never a hang),
and some were 503 (the outage was seen); each instance reconnects every
connection by itself (/readyz answers 200 again on both: the LISTEN
connection is back, and a signal sent after the failover wakes its run
through NOTIFY: HOOKFLOW_POLL_MS is a minute); signals and cancels sent after
it through either instance reach their runs (a cancel aborts the call held on
the other instance); every run acknowledged with 201 ends as planned
(succeeded with the result its webhook derived, or cancelled); every run in
the database is terminal; no step was settled twice
(harness.step_history_problems, as the chaos test checks it); the webhook saw
every payload chained and every signal; long-polls made before the fault
answer with their run terminal; the instances exit 0 with no sanitizer report.
The timings (fault to new primary, to writable, to /readyz 200, the 503s) are
printed; README.md, "High availability", has them."""

import collections
import json
import os
import threading
import time

from harness import TERMINAL, Api, Hang, Reply, step_history_problems, wait_until

N_RUNS = int(os.environ.get("HOOKFLOW_HA_RUNS", "300"))
STEPS = 5                  # steps 0..4; step 4 succeeds
SIGNAL_TIMEOUT_MS = 600000  # far beyond the test: a signal wait only ends by a signal or a cancel
CLIENT_TIMEOUT = 10.0      # every API call's client timeout: an answer later than this is a hang
SERVICE_ENV = {
    "HOOKFLOW_WORKERS": "2",
    "HOOKFLOW_MAX_INFLIGHT": "256",
    "HOOKFLOW_LEASE_MS": "5000",
    # No safety-net poll within the test: work after the failover is found
    # through notifications on the re-established LISTEN connection (and
    # the due-time timer it recomputes on reconnect).
    "HOOKFLOW_POLL_MS": "60000",
    "HOOKFLOW_LOG_LEVEL": "info",
}


def plan_of(i):
    """What run i does (i % 10): 'signal' (2 in 10) waits at step 1 for a
    signal sent after the fault; 'cancel' (1) waits there too and is
    cancelled instead; 'cancel-held' (1) has its step-2 call held until it is
    cancelled after the fault, through the other instance; 'held' (2) has
    its step-2 call held until just after the fault; 'plain' (4) goes step by
    step with delays of 0.3-2.5 s."""
    k = i % 10
    return ("signal", "signal", "cancel", "cancel-held", "held", "held", "plain", "plain", "plain", "plain")[k]


def signal_key(prefix, i):
    return "%s-sig-%d" % (prefix, i)


class Steps:
    """The webhook: every answer derived from the payload, which carries the
    run's index and plan and the step it is for; anything unexpected is
    recorded in `bad` (and the run fails)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.release = threading.Event()  # ends the 'held' plan's holds
        self.lock = threading.Lock()
        self.bad = []
        self.held = {}      # run_id -> the held step-2 request (first attempt held)
        self.signals = {}   # run_id -> (monotonic time of the first step-2 request, its signal)

    def _bad(self, req, why):
        with self.lock:
            self.bad.append((req.run_id, req.step, req.attempt, why))
        return Reply(200, {"outcome": "fail", "reason": "ha test: " + why})

    def __call__(self, req):
        p = req.field("payload")
        n = req.step
        if not isinstance(p, dict) or p.get("step") != n or req.field("generation") != 1:
            return self._bad(req, "payload %r does not chain to step %r" % (p, n))
        i, plan = p["i"], p["plan"]
        nxt = {"i": i, "plan": plan, "step": n + 1, "signal": p.get("signal")}
        if plan in ("signal", "cancel") and n == 1:
            return Reply(200, {"outcome": "continue", "payload": nxt,
                               "wait_for_signal": {"correlation_key": signal_key(self.prefix, i),
                                                   "timeout_ms": SIGNAL_TIMEOUT_MS}})
        if plan == "cancel" and n == 2:
            return self._bad(req, "step 2 of a run cancelled while it waited was called")
        if plan == "signal" and n == 2:
            sig = req.field("signal")
            with self.lock:
                self.signals.setdefault(req.run_id, (req.time, sig))
            if sig != {"status": "delivered", "payload": {"i": i}}:
                return self._bad(req, "signal %r" % (sig,))
            nxt["signal"] = sig["payload"]
        if plan in ("held", "cancel-held") and n == 2:
            with self.lock:
                first = req.run_id not in self.held
                if first:
                    self.held[req.run_id] = req
            if plan == "cancel-held":
                # Until hookflow drops the call (the cancel); a redelivery
                # (a lease lost meanwhile) is held the same way.
                return Hang(max_s=120)
            if not self.release.is_set():
                return Hang(release=self.release, then=self._next(n, nxt), max_s=120)
        if plan == "cancel-held" and n > 2:
            return self._bad(req, "step %d of a cancelled run was called" % n)
        return self._next(n, nxt)

    @staticmethod
    def _next(n, nxt):
        if n == STEPS - 1:
            return Reply(200, {"outcome": "succeed",
                               "result": {"i": nxt["i"], "plan": nxt["plan"], "signal": nxt["signal"]}})
        body = {"outcome": "continue", "payload": nxt}
        if nxt["plan"] in ("plain", "late"):
            body["delay_ms"] = 300 + (nxt["i"] * 157 + n * 311) % 2200
        return Reply(200, body)


def expected_end(plan, i):
    """(status, result) run i must end with."""
    if plan in ("cancel", "cancel-held"):
        return "cancelled", None
    return "succeeded", {"i": i, "plan": plan, "signal": {"i": i} if plan == "signal" else None}


def instance_of(req):
    """The base URL of the instance that made a webhook request (memo.url)."""
    url = (req.field("memo") or {}).get("url") or ""
    return "/".join(url.split("/")[:3])


def sql_json(db, query):
    rows = db.sql("SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb) FROM (%s) t" % query)
    return json.loads("\n".join("\t".join(r) for r in rows)) if rows else []


def sanitizer_reports(text):
    marks = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")
    return [line for line in text.splitlines() if any(m in line for m in marks)]


class Submitters:
    """Threads that submit 'late' runs (plain, one at a time each) until
    stopped, alternating the instances, and record every answer: (instance,
    start, end, status or the exception, error code, run_id)."""

    def __init__(self, prefix, instances, nthreads=2):
        self.prefix = prefix
        self.apis = [Api(s.base_url, timeout=CLIENT_TIMEOUT) for s in instances]
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers = []
        self.seq = 100000
        self.threads = [threading.Thread(target=self._loop, args=(k,), daemon=True) for k in range(nthreads)]

    def start(self):
        for t in self.threads:
            t.start()

    def _next(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def _loop(self, k):
        n = 0
        while not self.stop.is_set():
            i = self._next()
            api = self.apis[(n + k) % len(self.apis)]
            n += 1
            rid = "%s-%d" % (self.prefix, i)
            body = {"workflow": "ha", "run_id": rid, "input": {"i": i, "plan": "late", "step": 0, "signal": None}}
            t0 = time.monotonic()
            try:
                r = api.post("/v1/runs", body)
                rec = (api.base_url, t0, time.monotonic(), r.status, r.error_code, rid)
            except Exception as e:  # a timeout or a refused connection: both wrong here
                rec = (api.base_url, t0, time.monotonic(), repr(e), None, rid)
            with self.lock:
                self.answers.append(rec)
            self.stop.wait(0.02)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(CLIENT_TIMEOUT + 5)

    def acknowledged(self):
        with self.lock:
            return {rec[5]: rec for rec in self.answers if rec[3] == 201}

    def count_since(self, t, status):
        with self.lock:
            return sum(1 for rec in self.answers if rec[1] >= t and rec[3] == status)


class Prober:
    """A thread that keeps asking both instances, in turn, what a client may
    ask during the outage: GET /readyz, GET /v1/runs/{id} of a run in flight
    and POST /v1/signals/{key} on a key no run waits for (buffered). Records
    (what, instance, start, end, status or the exception, error code)."""

    def __init__(self, prefix, instances, run_id):
        self.apis = [Api(s.base_url, timeout=CLIENT_TIMEOUT) for s in instances]
        self.calls = [("readyz", lambda api, n: api.get("/readyz")),
                      ("get run", lambda api, n: api.get("/v1/runs/" + run_id)),
                      ("signal", lambda api, n: api.post("/v1/signals/%s-probe-%d" % (prefix, n), {"payload": n}))]
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.thread.start()

    def _loop(self):
        n = 0
        while not self.stop.is_set():
            what, call = self.calls[n % len(self.calls)]
            api = self.apis[(n // len(self.calls)) % len(self.apis)]
            n += 1
            t0 = time.monotonic()
            try:
                r = call(api, n)
                rec = (what, api.base_url, t0, time.monotonic(), r.status, r.error_code)
            except Exception as e:
                rec = (what, api.base_url, t0, time.monotonic(), repr(e), None)
            with self.lock:
                self.answers.append(rec)
            self.stop.wait(0.02)

    def finish(self):
        self.stop.set()
        self.thread.join(CLIENT_TIMEOUT + 5)


class LongPolls:
    """GET /v1/runs/{id}?wait_ms=... of some runs, each in a thread, started
    before the fault: the answer must be the run terminal (the termination
    reached the waiting instance through its LISTEN connection, re-established
    after the fault)."""

    def __init__(self, instances, run_ids, wait_ms=120000):
        self.results = {}
        self.threads = []
        for k, rid in enumerate(run_ids):
            api = Api(instances[k % len(instances)].base_url, timeout=wait_ms / 1000.0 + 10)
            t = threading.Thread(target=self._poll, args=(api, rid, wait_ms), daemon=True)
            self.threads.append(t)

    def _poll(self, api, rid, wait_ms):
        try:
            r = api.get("/v1/runs/" + rid, params={"wait_ms": wait_ms})
            self.results[rid] = (time.monotonic(), r.status, r.body.get("status") if isinstance(r.body, dict) else r.text)
        except Exception as e:
            self.results[rid] = (time.monotonic(), repr(e), None)

    def start(self):
        for t in self.threads:
            t.start()

    def join(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))


def submit_all(instances, prefix, n):
    """Submits runs 0..n-1 from 4 threads through the instances in turn;
    returns {run_id: (i, plan)}. Every one must be answered 201."""
    apis = [Api(s.base_url, timeout=CLIENT_TIMEOUT) for s in instances]
    out, problems, lock = {}, [], threading.Lock()

    def worker(k):
        for i in range(k, n, 4):
            plan = plan_of(i)
            rid = "%s-%d" % (prefix, i)
            r = apis[i % len(apis)].post("/v1/runs", {"workflow": "ha", "run_id": rid,
                                                      "input": {"i": i, "plan": plan, "step": 0, "signal": None}})
            with lock:
                if r.status == 201:
                    out[rid] = (i, plan)
                else:
                    problems.append((rid, r.status, r.text[:200]))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, "submissions before the fault failed: %r" % problems[:5]
    return out


def scenario(formation, db, services, webhook, prefix, fault):
    """The load, `fault` (a callable given the primary node, returning when
    the fault has been made; it may start what heals it), the recovery and
    every check. Returns the timings."""
    a = services.start(**SERVICE_ENV)
    b = services.start(**SERVICE_ENV)
    instances = [a, b]
    steps = Steps(prefix)
    webhook.route("/steps", steps)
    a.api.put_workflow("ha", webhook.url(), timeout_ms=60000, max_attempts=10,
                       retry_backoff={"base_ms": 100, "max_ms": 1000})

    runs = submit_all(instances, prefix, N_RUNS)
    by_plan = collections.defaultdict(list)
    for rid, (i, plan) in runs.items():
        by_plan[plan].append(rid)
    n_waiting = len(by_plan["signal"]) + len(by_plan["cancel"])
    n_held = len(by_plan["held"]) + len(by_plan["cancel-held"])
    wait_until(lambda: int(db.sql("SELECT count(*) FROM run WHERE status = 'waiting'")[0][0]) == n_waiting,
               timeout=90, interval=0.2, message="%d runs waiting for their signal" % n_waiting)
    wait_until(lambda: len(steps.held) == n_held, timeout=90, interval=0.1,
               message=lambda: "%d step-2 calls held (have %d)" % (n_held, len(steps.held)))
    in_flight = int(db.sql("SELECT count(*) FROM run WHERE status NOT IN ('succeeded', 'failed', 'cancelled')")[0][0])

    polls = LongPolls(instances, sorted(by_plan["signal"])[:10])
    polls.start()
    subs = Submitters(prefix + "-late", instances)
    subs.start()
    prober = Prober(prefix, instances, sorted(by_plan["plain"])[0])
    prober.start()
    wait_until(lambda: len(subs.acknowledged()) >= 10, timeout=30, message="late submissions before the fault")

    primary = formation.primary()
    standby = formation.standby_of(primary)
    t_fault = time.monotonic()
    fault(primary)
    t_made = time.monotonic()
    steps.release.set()  # the held calls answer while there is no primary

    def new_primary_assigned():
        st = formation.states().get(standby.name)
        return st is not None and st[0] == st[1] and st[0] in ("wait_primary", "primary")
    wait_until(new_primary_assigned, timeout=120, interval=0.05,
               message=lambda: "the monitor promoting %s: %r" % (standby.name, formation.states()))
    t_promoted = time.monotonic()
    wait_until(lambda: formation.writable() == standby.port, timeout=60, interval=0.05,
               message="%s taking writes" % standby.name)
    t_writable = time.monotonic()

    def ready(svc):
        try:
            return Api(svc.base_url, timeout=2).get("/readyz").status == 200
        except OSError:
            return False
    t_ready = {}
    for svc in instances:
        wait_until(lambda: ready(svc), timeout=30, interval=0.05,
                   message="GET /readyz 200 on %s after the fault" % svc.base_url)
        t_ready[svc.base_url] = time.monotonic()

    # Signals and cancels, now, through either instance.
    problems = []
    t_signals = time.monotonic()
    for k, rid in enumerate(sorted(by_plan["signal"])):
        i = runs[rid][0]
        r = instances[k % 2].api.post("/v1/signals/" + signal_key(prefix, i), {"payload": {"i": i}})
        if r.status != 200 or r.body.get("outcome") != "delivered":
            problems.append("signal to %s through instance %d: %r" % (rid, k % 2, r))
    for k, rid in enumerate(sorted(by_plan["cancel"])):
        r = instances[k % 2].api.post("/v1/runs/%s/cancel" % rid)
        if r.status not in (200, 202):
            problems.append("cancel of %s (waiting) through instance %d: %r" % (rid, k % 2, r))
    t_cancel_held = time.monotonic()
    cancelled_held = []
    for rid in sorted(by_plan["cancel-held"]):
        req = steps.held[rid]
        other = b if instance_of(req) == a.base_url else a
        r = other.api.post("/v1/runs/%s/cancel" % rid)
        if r.status not in (200, 202):
            problems.append("cancel of %s (held by %s) through %s: %r" % (rid, instance_of(req), other.base_url, r))
        cancelled_held.append(rid)

    # Late submissions go on until some were acknowledged on the new primary.
    wait_until(lambda: subs.count_since(t_writable, 201) >= 20, timeout=60,
               message="late submissions acknowledged after the fault")
    subs.finish()
    prober.finish()

    # Every held call that was cancelled is dropped by whichever instance holds it
    # (a redelivery after a lost lease is held too: all its requests count).
    def aborted():
        left = [rid for rid in cancelled_held
                if not all(q.disconnected.is_set() for q in webhook.requests(run_id=rid, step=2))]
        return not left or None
    wait_until(aborted, timeout=30, interval=0.1, message="held calls of cancelled runs dropped")
    t_aborted = time.monotonic()

    acked = dict(runs)
    for rid, rec in subs.acknowledged().items():
        acked[rid] = (int(rid.rsplit("-", 1)[1]), "late")

    def unfinished():
        rows = db.sql("SELECT count(*) FROM run WHERE status NOT IN ('succeeded', 'failed', 'cancelled')")
        return int(rows[0][0]) == 0
    wait_until(unfinished, timeout=180, interval=0.5, message=lambda: "every run terminal: %r" % (
        db.sql("SELECT status, count(*) FROM run GROUP BY status"),))
    t_done = time.monotonic()

    # ---- the checks ----
    db_runs = {r["run_id"]: r for r in sql_json(db, "SELECT run_id, status, result, error, final_step, generation "
                                                    "FROM run")}
    attempts = sql_json(db, "SELECT run_id, generation, step, attempt, result, error FROM step_attempt ORDER BY id")

    answers = list(subs.answers)
    wrong_answers = [rec for rec in answers if not (rec[3] == 201 or (rec[3] == 503 and rec[4] == "unavailable"))]
    slow_answers = [rec for rec in answers if rec[2] - rec[1] >= CLIENT_TIMEOUT]
    n503 = sum(1 for rec in answers if rec[3] == 503)
    if wrong_answers:
        problems.append("submissions answered neither 201 nor 503 unavailable: %d, e.g. %r"
                        % (len(wrong_answers), wrong_answers[:5]))
    if slow_answers:
        problems.append("submissions answered after %.0fs or more: %r" % (CLIENT_TIMEOUT, slow_answers[:5]))
    if n503 == 0:
        problems.append("no submission was answered 503 during the outage (%d submissions)" % len(answers))

    probes = list(prober.answers)
    wrong_probes = [rec for rec in probes if not (rec[4] == 200 or (rec[4] == 503 and rec[5] == "unavailable"))]
    slow_probes = [rec for rec in probes if rec[3] - rec[2] >= CLIENT_TIMEOUT]
    if wrong_probes:
        problems.append("calls during the outage answered neither 200 nor 503 unavailable: %d, e.g. %r"
                        % (len(wrong_probes), wrong_probes[:5]))
    if slow_probes:
        problems.append("calls during the outage answered after %.0fs or more: %r" % (CLIENT_TIMEOUT, slow_probes[:5]))
    if not any(rec[0] == "readyz" and rec[4] == 503 for rec in probes):
        problems.append("/readyz never answered 503 during the outage")

    polls.join(60)
    for rid, (t_end, status, run_status) in sorted(polls.results.items()):
        if status != 200 or run_status != "succeeded":
            problems.append("long-poll of %s across the fault answered %r %r" % (rid, status, run_status))
    if len(polls.results) != len(polls.threads):
        problems.append("long-polls across the fault not answered: %d of %d"
                        % (len(polls.threads) - len(polls.results), len(polls.threads)))

    missing = [rid for rid in acked if rid not in db_runs]
    wrong_end = []
    for rid, (i, plan) in acked.items():
        r = db_runs.get(rid)
        if r is None:
            continue
        want = expected_end(plan, i)
        if (r["status"], r["result"] if want[0] == "succeeded" else None) != want or r["generation"] != 1:
            wrong_end.append((rid, plan, r["status"], r["result"], r["error"]))
    if missing:
        problems.append("acknowledged runs missing from the database: %d, e.g. %r" % (len(missing), missing[:5]))
    if wrong_end:
        problems.append("acknowledged runs that did not end as planned: %d, e.g. %r" % (len(wrong_end), wrong_end[:5]))
    # A submission answered 503 may still have committed (the answer was lost
    # with the connection): such a run must end too, as planned.
    unacked = [r for rid, r in db_runs.items() if rid not in acked]
    strays = [r for r in unacked if not r["run_id"].startswith(prefix + "-late-") or r["status"] != "succeeded"]
    if strays:
        problems.append("runs nobody got a 201 for that did not succeed: %r" % strays[:5])
    not_terminal = [rid for rid, r in db_runs.items() if r["status"] not in TERMINAL]
    if not_terminal:
        problems.append("runs not terminal: %r" % not_terminal[:5])

    _, hp = step_history_problems(db_runs, attempts)
    for what, found in hp.items():
        if found:
            problems.append("step history, %s: %d, e.g. %r" % (what, len(found), list(found)[:5] if not isinstance(
                found, dict) else list(found.items())[:5]))

    if steps.bad:
        problems.append("the webhook saw wrong requests: %d, e.g. %r" % (len(steps.bad), steps.bad[:5]))
    no_signal = [rid for rid in by_plan["signal"] if rid not in steps.signals]
    if no_signal:
        problems.append("signal runs whose step 2 never came: %r" % no_signal[:5])
    sig_latency = sorted(steps.signals[rid][0] - t_signals for rid in by_plan["signal"] if rid in steps.signals)
    if sig_latency and sig_latency[-1] > 20:
        problems.append("a signalled run's next step came %.1fs after the signals were sent (the poll is %s ms: "
                        "the notification did not wake it)" % (sig_latency[-1], SERVICE_ENV["HOOKFLOW_POLL_MS"]))

    # Each instance claimed work on the new primary, reconnected its listener
    # (logged after the fault) and stops cleanly.
    after = [q for q in webhook.requests(path="/steps") if q.time >= t_writable]
    for svc in instances:
        if not any(instance_of(q) == svc.base_url for q in after):
            problems.append("%s made no webhook call after the fault" % svc.base_url)
    for svc in instances:
        code = svc.stop(timeout=30)
        if code != 0:
            problems.append("%s exited %r on SIGTERM" % (svc.base_url, code))
        log = svc.log_text()
        reports = sanitizer_reports(log)
        if reports:
            problems.append("sanitizer reports in %s: %r" % (svc.log_path, reports[:5]))
        relistens = log.count(" listener listening")
        if relistens < 2:
            problems.append("%s: the listener never logged a reconnection (%d 'listening')" % (svc.base_url,
                                                                                             relistens))

    timings = collections.OrderedDict([
        ("runs in flight at the fault", in_flight),
        ("fault made in (s)", round(t_made - t_fault, 2)),
        ("new primary assigned by the monitor after (s)", round(t_promoted - t_fault, 2)),
        ("new primary taking writes after (s)", round(t_writable - t_fault, 2)),
        ("/readyz 200 again after (s)", {u: round(t - t_fault, 2) for u, t in t_ready.items()}),
        ("late submissions: 201 / 503 / other", "%d / %d / %d" % (
            sum(1 for rec in answers if rec[3] == 201), n503, len(wrong_answers))),
        ("slowest submission answer (s)", round(max((rec[2] - rec[1] for rec in answers), default=0), 2)),
        ("other calls during the outage: 200 / 503", "%d / %d" % (
            sum(1 for rec in probes if rec[4] == 200), sum(1 for rec in probes if rec[4] == 503))),
        ("slowest of those (s)", round(max((rec[3] - rec[2] for rec in probes), default=0), 2)),
        ("signal -> next step call, max (s)", round(sig_latency[-1], 2) if sig_latency else None),
        ("cancel -> held call dropped, all within (s)", round(t_aborted - t_cancel_held, 2)),
        ("every run terminal after (s)", round(t_done - t_fault, 2)),
        ("runs checked", len(db_runs)),
        ("step attempts", len(attempts)),
        ("attempt results", dict(collections.Counter(x["result"] for x in attempts))),
    ])
    print("\n==== %s ====" % prefix)
    for k, v in timings.items():
        print("  %-48s %s" % (k, v))
    assert not problems, "\n".join(problems)
    return timings


def test_failover_when_the_primary_dies_under_load_loses_nothing(formation, db, services, webhook):
    def kill(primary):
        formation.kill_node(primary)

    scenario(formation, db, services, webhook, "fo", kill)
    # The dead node comes back as the new primary's synchronous standby.
    old = [n for n in formation.nodes if n.proc is None or n.proc.poll() is not None]
    assert len(old) == 1, old
    t0 = time.monotonic()
    formation.start(old[0])
    formation.wait_healthy(timeout=120)
    print("  %-48s %.2f" % ("old primary back as synchronous standby in (s)", time.monotonic() - t0))


def test_switchover_under_load_loses_nothing(formation, db, services, webhook):
    done = {}

    def switchover(primary):
        def run():
            t0 = time.monotonic()
            try:
                done["out"] = formation.switchover()
            except Exception as e:  # reported below
                done["error"] = e
            done["took"] = time.monotonic() - t0
        th = threading.Thread(target=run, daemon=True)
        th.start()
        done["thread"] = th

    scenario(formation, db, services, webhook, "sw", switchover)
    done["thread"].join(120)
    assert "error" not in done, "pg_autoctl perform switchover: %s" % done.get("error")
    print("  %-48s %.2f" % ("pg_autoctl perform switchover took (s)", done["took"]))
    formation.wait_healthy(timeout=120)
