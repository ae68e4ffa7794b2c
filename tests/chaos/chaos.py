#!/usr/bin/python3
"""hookflow chaos test: many runs of 5 steps under load while the service is
SIGKILLed and restarted, PostgreSQL is restarted under it, and the webhook
answers 500s, hangs past the step timeout and resets connections.

    /usr/bin/python3 tests/chaos/chaos.py --mode short|long     (or tests/chaos/run.sh MODE)

Every failure is decided per (run_id, step, attempt) by a seeded hash, so the
outcome of every run is known in advance: chaos only strikes attempts
1..CHAOS_ATTEMPTS and the workflow allows more attempts than chaos, SIGKILLs and
the PostgreSQL restart can use up together, so each run ends as its step 4
verdict says (succeed with a result derived from its id, fail, or cancel).

Afterwards it checks, prints and fails on: runs lost, runs not terminal, outcome
mismatches, non-contiguous step history, steps settled twice, callbacks missing
or contradicting each other, dead letters, payloads that did not chain, the
/readyz behaviour across the PostgreSQL restart, and sanitizer reports in the
service log. The last line is "chaos: 1 passed, 0 failed" (or 0 passed, 1
failed) and the exit status is non-zero on failure.

Environment: HOOKFLOW_BIN (default build/hookflow), CHAOS_SEED (default
20240601), CHAOS_RUNS (overrides the mode's run count), CHAOS_KEEP=1 (keep the
logs even on success), CHAOS_LOG_LEVEL (service log level, default info),
HOOKFLOW_TEST_PG_BIN / HOOKFLOW_TEST_PG_USER as for the integration suite.
"""

import argparse
import collections
import hashlib
import http.server
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import harness  # noqa: E402  (tests/integration/harness.py)
from harness import Api, Postgres, Service, TERMINAL  # noqa: E402

STEPS = 5                 # steps 0..4; step 4 gives the run's verdict
WORKFLOW = "chaos"

MODES = {
    # runs, SIGKILLs and the PostgreSQL restart at fractions of the expected
    # step answers (runs * STEPS), deadline for everything to end (s).
    "short": dict(runs=200, events=[(0.25, "kill"), (0.50, "pg")], deadline=150),
    "long": dict(runs=1000, events=[(0.15, "kill"), (0.35, "kill"), (0.50, "pg"), (0.65, "kill")],
                 deadline=900),
}

P_500 = 0.20
P_HANG = 0.05
P_RESET = 0.05
P_VERDICT_FAIL = 0.10
P_VERDICT_CANCEL = 0.05
P_CALLBACK_500 = 0.20

CHAOS_ATTEMPTS = 6        # chaos strikes attempts 1..6 only
MAX_ATTEMPTS = 16         # > 6 chaos + 3 lease expiries (kills) + PG restart + slow answers
CALLBACK_CHAOS_DELIVERIES = 4
TIMEOUT_MS = 1000
LEASE_MS = 2000
LATE_FRACTION = 0.2       # share of runs submitted during the chaos instead of up front
LATE_UNTIL = 0.55         # late submissions are spread until this progress
MIN_GAP = 0.10            # share of the expected step answers between two events


def log(msg):
    print("chaos: [%6.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


# --------------------------------------------------------------------------
# The deterministic policy
# --------------------------------------------------------------------------

class Policy:
    def __init__(self, seed):
        self.seed = seed

    def u(self, *parts):
        """A uniform number in [0, 1) decided by the seed and `parts`."""
        h = hashlib.sha256(("%s|%s" % (self.seed, "|".join(map(str, parts)))).encode()).digest()
        return int.from_bytes(h[:8], "big") / 2.0 ** 64

    def step_action(self, rid, step, attempt):
        if attempt <= CHAOS_ATTEMPTS:
            x = self.u("step", rid, step, attempt)
            if x < P_500:
                return "500"
            if x < P_500 + P_HANG:
                return "hang"
            if x < P_500 + P_HANG + P_RESET:
                return "reset"
        return "answer"

    def verdict(self, rid):
        """(terminal status, outcome body, expected result, expected error)."""
        x = self.u("verdict", rid)
        if x < P_VERDICT_FAIL:
            reason = "chaos verdict: fail %s" % rid
            return "failed", {"outcome": "fail", "reason": reason}, None, reason
        if x < P_VERDICT_FAIL + P_VERDICT_CANCEL:
            reason = "chaos verdict: cancel %s" % rid
            return "cancelled", {"outcome": "cancel", "reason": reason}, None, reason
        result = {"run_id": rid, "i": run_index(rid),
                  "digest": hashlib.sha256(rid.encode()).hexdigest()[:16]}
        return "succeeded", {"outcome": "succeed", "result": result}, result, None

    def callback_fails(self, rid, delivery):
        return delivery < CALLBACK_CHAOS_DELIVERIES and self.u("callback", rid, delivery) < P_CALLBACK_500


def run_id_of(i):
    return "chaos-%05d" % i


def run_index(rid):
    return int(rid.rsplit("-", 1)[1])


def payload_for(i, step):
    return {"i": i} if step == 0 else {"i": i, "step": step}


# --------------------------------------------------------------------------
# The webhook: steps on /steps, terminal callbacks on /cb
# --------------------------------------------------------------------------

class ChaosWebhook:
    def __init__(self, policy):
        self.policy = policy
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.kinds = collections.Counter()          # what was answered
        self.deliveries = collections.Counter()     # (rid, step, attempt) -> step requests
        self.bad_payloads = []
        self.unexpected = []
        self.cb_received = collections.defaultdict(list)   # rid -> [body]
        self.cb_acked = collections.defaultdict(list)      # rid -> [body] answered 200
        self.inflight = 0
        self.answers = 0                            # outcome answers written (progress)
        self.hang_ends = collections.Counter()
        self.timing = {}                            # (rid, step, attempt) -> (s left at arrival, s taken, ok)
        self._resets = set()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "hookflow-chaos-webhook"
            sys_version = ""

            def log_message(self, fmt, *args):
                pass

            def do_POST(self):
                with hook.lock:
                    hook.inflight += 1
                try:
                    hook._serve(self)
                finally:
                    with hook.lock:
                        hook.inflight -= 1

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 1024

            def handle_error(self, request, client_address):
                pass  # resets and aborted calls are the point of this test

            def shutdown_request(self, request):
                with hook.lock:
                    reset = request in hook._resets
                    hook._resets.discard(request)
                if reset:
                    # SO_LINGER 0 and close without shutdown(): the peer gets a RST.
                    try:
                        request.close()
                    except OSError:
                        pass
                else:
                    super().shutdown_request(request)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def count(self, kind):
        with self.lock:
            self.kinds[kind] += 1

    @staticmethod
    def _reply(h, status, body, ctype="application/json"):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            h.wfile.flush()
            return True
        except OSError:
            h.close_connection = True
            return False

    def _serve(self, h):
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            req = json.loads(raw)
        except ValueError:
            req = None
        path = h.path.split("?", 1)[0]
        if path == "/cb" and isinstance(req, dict):
            return self._callback(h, req)
        if path == "/steps" and isinstance(req, dict):
            return self._step(h, req)
        with self.lock:
            self.unexpected.append((path, raw[:200]))
        self._reply(h, 404, b"no route", "text/plain")

    def _step(self, h, req):
        t_in = time.time()
        rid, step, attempt, payload = req.get("run_id"), req.get("step"), req.get("attempt"), req.get("payload")
        i = run_index(rid)
        with self.lock:
            self.deliveries[(rid, step, attempt)] += 1
            if payload != payload_for(i, step) or req.get("generation") != 1:
                self.bad_payloads.append((rid, step, attempt, req.get("generation"), payload))
        if not isinstance(step, int) or step >= STEPS:
            with self.lock:
                self.unexpected.append(("/steps", "step %r of %s" % (step, rid)))
            self._reply(h, 400, b"no such step", "text/plain")
            return
        action = self.policy.step_action(rid, step, attempt)
        self.count("step_" + action)
        if action == "500":
            self._reply(h, 500, b"chaos: internal error", "text/plain")
        elif action == "hang":
            self._hang(h)
        elif action == "reset":
            try:
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            with self.lock:
                self._resets.add(h.request)
            h.close_connection = True
        else:
            if step < STEPS - 1:
                body = {"outcome": "continue", "payload": payload_for(i, step + 1)}
            else:
                body = self.policy.verdict(rid)[1]
            ok = self._reply(h, 200, body)
            with self.lock:
                if ok:
                    self.answers += 1
                # how long before its deadline the call arrived, and how long we took
                try:
                    left = harness.iso_to_epoch(req.get("deadline")) - t_in
                except Exception:
                    left = None
                self.timing[(rid, step, attempt)] = (left, time.time() - t_in, ok, t_in)

    def _hang(self, h):
        """Holds the call without answering until hookflow gives up on it
        (timeout_ms) or dies; never longer than the timeout + 10 s."""
        sock = h.connection
        deadline = time.monotonic() + TIMEOUT_MS / 1000.0 + 10
        how = "expired"
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                r, _, _ = select.select([sock], [], [], min(left, 0.25))
                if r and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    how = "client_closed"
                    break
            except BlockingIOError:
                continue
            except OSError:
                how = "client_reset"
                break
        with self.lock:
            self.hang_ends[how] += 1
        h.close_connection = True

    def _callback(self, h, body):
        rid = body.get("run_id")
        with self.lock:
            n = len(self.cb_received[rid])
            self.cb_received[rid].append(body)
        if self.policy.callback_fails(rid, n):
            self.count("callback_500")
            self._reply(h, 500, b"chaos: callback refused", "text/plain")
            return
        if self._reply(h, 200, {"ok": True}):
            self.count("callback_200")
            with self.lock:
                self.cb_acked[rid].append(body)

    def progress(self):
        with self.lock:
            return self.answers

    def in_flight(self):
        with self.lock:
            return self.inflight

    def close(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------
# Submissions
# --------------------------------------------------------------------------

class Submitter:
    """Submits runs, retrying while the service or its database is down."""

    def __init__(self, base_url, give_up_s):
        self.api = Api(base_url, timeout=10)
        self.give_up_s = give_up_s
        self.lock = threading.Lock()
        self.confirmed = {}          # rid -> newly_submitted of the confirming answer
        self.failed = {}             # rid -> last answer
        self.retries = 0
        self.dup_answers = 0         # deliberate duplicates answered 200 newly_submitted false
        self.dup_wrong = []

    def submit(self, i, duplicate=False):
        rid = run_id_of(i)
        body = {"workflow": WORKFLOW, "run_id": rid, "input": payload_for(i, 0)}
        deadline = time.monotonic() + self.give_up_s
        last = None
        while time.monotonic() < deadline:
            try:
                r = self.api.post("/v1/runs", body)
                last = r
                if r.status in (200, 201) and isinstance(r.body, dict):
                    with self.lock:
                        if duplicate:
                            if r.status == 200 and r.body.get("newly_submitted") is False:
                                self.dup_answers += 1
                            else:
                                self.dup_wrong.append((rid, r.status, r.text[:200]))
                        else:
                            self.confirmed.setdefault(rid, r.body.get("newly_submitted"))
                    return True
                if r.status < 500:   # 4xx: a bug, retrying will not help
                    break
            except Exception as e:  # connection refused/reset while the service is down
                last = e
            with self.lock:
                self.retries += 1
            time.sleep(0.1)
        with self.lock:
            self.failed[rid] = repr(last)[:300]
        return False


# --------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------

class Failures(list):
    def check(self, ok, what):
        if not ok:
            self.append(what)
        return ok


def sql_json(db, query):
    """Runs `query` wrapped in json_agg and returns the list of row objects."""
    out = db.pg.psql(db.name, "SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb) FROM (%s) t" % query,
                     timeout=120)
    return json.loads("\n".join("\t".join(row) for row in out)) if out else []


def readyz_poller(base_url, stop, seen):
    api = Api(base_url, timeout=2)
    while not stop.is_set():
        t = time.monotonic()
        try:
            seen.append((t, api.get("/readyz").status))
        except Exception as e:
            seen.append((t, "error: %s" % type(e).__name__))
        stop.wait(0.05)


def sanitizer_reports(text):
    marks = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")
    return [line for line in text.splitlines() if any(m in line for m in marks)]


def scenario(mode, cfg, binary, seed, tmp, fails, timings):
    policy = Policy(seed)
    nruns = cfg["runs"]
    total_answers = nruns * STEPS
    ids = list(range(nruns))
    rng = random.Random(seed)
    rng.shuffle(ids)
    n_late = int(nruns * LATE_FRACTION)
    late, initial = ids[:n_late], ids[n_late:]

    t = time.monotonic()
    pg = Postgres(os.path.join(tmp, "pg"))
    os.makedirs(pg.base_dir)
    resources = {"pg": pg}
    try:
        pg.init()
        db = pg.create_database("chaos")
        timings["postgres start"] = time.monotonic() - t

        hook = ChaosWebhook(policy)
        resources["hook"] = hook
        svc = Service(binary, db, os.path.join(tmp, "logs", "hookflow.log"), {
            "HOOKFLOW_LEASE_MS": str(LEASE_MS),
            "HOOKFLOW_WORKERS": "2",
            "HOOKFLOW_MAX_INFLIGHT": os.environ.get("CHAOS_MAX_INFLIGHT", "64"),
            "HOOKFLOW_LOG_LEVEL": os.environ.get("CHAOS_LOG_LEVEL", "info"),
            "HOOKFLOW_SHUTDOWN_GRACE_MS": "5000",
        })
        resources["svc"] = svc
        t = time.monotonic()
        svc.start(timeout=90)
        timings["hookflow start"] = time.monotonic() - t
        log("hookflow %s pid %d on %s; webhook on port %d; postgres on port %d"
            % (binary, svc.pid, svc.base_url, hook.port, pg.port))
        api = Api(svc.base_url, timeout=10)
        r = api.put("/v1/workflows/" + WORKFLOW, {
            "url": hook.url("/steps"), "callback_url": hook.url("/cb"), "timeout_ms": TIMEOUT_MS,
            "max_attempts": MAX_ATTEMPTS, "retry_backoff": {"base_ms": 20, "max_ms": 200}})
        if not fails.check(r.status in (200, 201), "PUT workflow: %r" % (r,)):
            return

        sub = Submitter(svc.base_url, give_up_s=cfg["deadline"] / 2)
        t_load = time.monotonic()

        # Up front: the initial runs from 4 threads, as fast as they go.
        init_left = [4]

        def initial_submitter(k):
            for i in initial[k::4]:
                sub.submit(i)
            with sub.lock:
                init_left[0] -= 1
                if init_left[0] == 0:
                    timings["initial submissions (%d runs, 4 threads)" % len(initial)] = time.monotonic() - t_load
                    log("%d initial runs submitted in %.1fs (progress %d/%d step answers)"
                        % (len(initial), time.monotonic() - t_load, hook.progress(), total_answers))
        init_threads = [threading.Thread(target=initial_submitter, args=(k,), daemon=True) for k in range(4)]
        for th in init_threads:
            th.start()

        # During the chaos: the late runs spread over the progress, plus
        # deliberate duplicates of runs already confirmed.
        late_done = threading.Event()

        def late_submitter():
            try:
                for j, i in enumerate(late):
                    due = 0.05 + (LATE_UNTIL - 0.05) * j / max(1, len(late))
                    while hook.progress() < due * total_answers and time.monotonic() - t_load < cfg["deadline"] / 2:
                        time.sleep(0.05)
                    sub.submit(i)
                    if j % 5 == 0:
                        with sub.lock:
                            done = list(sub.confirmed)
                        if done:
                            sub.submit(run_index(rng.choice(done)), duplicate=True)
            finally:
                late_done.set()
        late_thread = threading.Thread(target=late_submitter, daemon=True)
        late_thread.start()

        # The events, at fractions of the expected step answers (while the
        # submissions go on), at least MIN_GAP of them apart.
        kills = 0
        pg_report = {}
        last = 0
        for frac, what in cfg["events"]:
            want = max(int(frac * total_answers), last + int(MIN_GAP * total_answers))
            harness.wait_until(lambda: hook.progress() >= want, timeout=cfg["deadline"], interval=0.05,
                               message="%d step answers before the %s" % (want, what))
            if what == "kill":
                # Make sure calls are in flight when the process dies.
                harness.wait_until(lambda: hook.in_flight() > 0, timeout=10, interval=0.005,
                                   message="a step call in flight")
                inflight = hook.in_flight()
                t = time.monotonic()
                code = svc.kill()
                kills += 1
                fails.check(code == -signal.SIGKILL, "SIGKILL #%d: exit code %r" % (kills, code))
                svc.start(timeout=90)
                took = time.monotonic() - t
                timings["SIGKILL #%d to ready" % kills] = took
                log("SIGKILL #%d at %d step answers with %d calls in flight; restarted (pid %d) ready in %.1fs"
                    % (kills, hook.progress(), inflight, svc.pid, took))
            else:
                pg_report = restart_postgres(pg, svc, hook, fails, timings)
            last = hook.progress()

        for th in init_threads:
            th.join()
        late_done.wait(cfg["deadline"])
        late_thread.join(5)
        timings["submissions (all)"] = time.monotonic() - t_load
        log("submissions done: %d confirmed, %d given up, %d retries, %d deliberate duplicates"
            % (len(sub.confirmed), len(sub.failed), sub.retries, sub.dup_answers))

        # Every run terminal, every callback acknowledged.
        t = time.monotonic()
        deadline = t_load + cfg["deadline"]
        submitted = sorted(sub.confirmed)

        def counts():
            rows = db.sql("SELECT status, count(*) FROM run GROUP BY status ORDER BY 1")
            return {s: int(n) for s, n in rows}
        last_log = [0.0]

        def all_terminal():
            c = counts()
            if time.monotonic() - last_log[0] > 10:
                last_log[0] = time.monotonic()
                log("waiting for terminal runs: %s" % c)
            return sum(c.get(s, 0) for s in TERMINAL) >= len(submitted)
        try:
            harness.wait_until(all_terminal, timeout=max(5, deadline - time.monotonic()), interval=0.25,
                               message="every run terminal")
        except harness.WaitTimeout as e:
            fails.append("not every run terminal before the deadline: %s" % (counts(),))
            log(str(e))
        timings["drain: all runs terminal"] = time.monotonic() - t
        t = time.monotonic()

        def callbacks_done():
            with hook.lock:
                acked = set(hook.cb_acked)
            busy = int(db.scalar("SELECT count(*) FROM callback WHERE status NOT IN ('done', 'dead')"))
            return busy == 0 and all(r in acked for r in submitted)
        try:
            harness.wait_until(callbacks_done, timeout=max(30, deadline - time.monotonic()), interval=0.25,
                               message="every callback acknowledged")
        except harness.WaitTimeout:
            fails.append("callbacks still outstanding at the deadline")
        timings["drain: callbacks acknowledged"] = time.monotonic() - t
        timings["load to end"] = time.monotonic() - t_load

        # The service ends cleanly (SIGTERM: exit 0, no sanitizer report).
        t = time.monotonic()
        try:
            code = svc.stop(signal.SIGTERM, timeout=30)
            fails.check(code == 0, "hookflow exit code after SIGTERM: %r" % (code,))
        except harness.ServiceError as e:
            fails.append(str(e))
        timings["hookflow SIGTERM to exit"] = time.monotonic() - t
        reports = sanitizer_reports(svc.log_text())
        # With hookflow gone every connection is closed: no webhook handler
        # (a hang in particular) may still be running.
        try:
            harness.wait_until(lambda: hook.in_flight() == 0, timeout=15, interval=0.05,
                               message="webhook handlers finished")
        except harness.WaitTimeout:
            fails.append("%d webhook handlers still running 15 s after hookflow exited" % hook.in_flight())
        fails.check(not reports, "sanitizer reports in the service log: %r" % reports[:5])

        t = time.monotonic()
        verify(db, hook, sub, policy, submitted, nruns, kills, pg_report, fails)
        timings["checks"] = time.monotonic() - t
    finally:
        cleanup(resources)


def restart_postgres(pg, svc, hook, fails, timings):
    """Stops PostgreSQL under the running service; /readyz must answer 503 while
    it is down and 200 again afterwards, with the same process."""
    pid = svc.pid
    seen = []
    stop = threading.Event()
    poller = threading.Thread(target=readyz_poller, args=(svc.base_url, stop, seen), daemon=True)
    poller.start()
    t = time.monotonic()
    log("stopping PostgreSQL at %d step answers (%d calls in flight)" % (hook.progress(), hook.in_flight()))
    pg.stop("fast")
    t_down = time.monotonic()
    got_503 = True
    try:
        harness.wait_until(lambda: any(s == 503 for ts, s in seen if ts >= t_down), timeout=15, interval=0.02,
                           message="/readyz 503 while PostgreSQL is down")
    except harness.WaitTimeout:
        got_503 = False
    time.sleep(2.0)   # leases (2 s) run out while the database is away
    pg.start()
    t_up = time.monotonic()
    back = True
    try:
        harness.wait_until(lambda: any(s == 200 for ts, s in seen if ts >= t_up), timeout=60, interval=0.02,
                           message="/readyz 200 after PostgreSQL is back")
    except harness.WaitTimeout:
        back = False
    stop.set()
    poller.join(5)
    down = [s for ts, s in seen if t_down <= ts < t_up]
    report = {
        "readyz_503_while_down": sum(1 for s in down if s == 503),
        "readyz_other_while_down": collections.Counter(s for s in down if s != 503),
        "readyz_polls_while_down": len(down),
        "down_s": t_up - t_down,
        "ready_again_s": (next((ts for ts, s in seen if ts >= t_up and s == 200), time.monotonic()) - t_up),
        "same_process": svc.running() and svc.pid == pid,
    }
    timings["PostgreSQL down"] = report["down_s"]
    timings["PostgreSQL back to /readyz 200"] = report["ready_again_s"]
    log("PostgreSQL was down %.1fs: /readyz answered 503 %d times (%d polls, others %s); 200 again %.1fs after "
        "it started; hookflow pid %d %s"
        % (report["down_s"], report["readyz_503_while_down"], report["readyz_polls_while_down"],
           dict(report["readyz_other_while_down"]), report["ready_again_s"], svc.pid,
           "still running" if report["same_process"] else "NOT THE SAME PROCESS / NOT RUNNING"))
    fails.check(got_503, "/readyz never answered 503 while PostgreSQL was down")
    fails.check(back, "/readyz did not answer 200 within 60s of PostgreSQL's restart")
    fails.check(report["same_process"], "hookflow did not survive the PostgreSQL restart: %s" % svc.state())
    log("(PostgreSQL restart took %.1fs in all)" % (time.monotonic() - t))
    return report


def verify(db, hook, sub, policy, submitted, nruns, kills, pg_report, fails):
    runs = {r["run_id"]: r for r in sql_json(db, "SELECT run_id, status, result, error, error_kind, final_step, "
                                                 "generation FROM run")}
    attempts = sql_json(db, "SELECT run_id, generation, step, attempt, result, http_status, error FROM step_attempt "
                            "ORDER BY id")
    callbacks = sql_json(db, "SELECT run_id, generation, status, attempt FROM callback")
    dead = sql_json(db, "SELECT kind, run_id, step, attempts, last_error FROM dead_letter")

    # Submitted, lost, terminal.
    by_status = collections.Counter(runs[r]["status"] for r in submitted if r in runs)
    missing = [r for r in submitted if r not in runs]
    not_terminal = [r for r in submitted if r in runs and runs[r]["status"] not in TERMINAL]
    extra = sorted(set(runs) - set(submitted))
    lost = missing + not_terminal + sorted(sub.failed)

    # Outcomes.
    mismatches = []
    expected_by_status = collections.Counter()
    for rid in submitted:
        st, _, result, error = policy.verdict(rid)
        expected_by_status[st] += 1
        r = runs.get(rid)
        if r is None:
            continue
        got = (r["status"], r["result"], r["error"] if st != "succeeded" else None, r["final_step"], r["generation"])
        want = (st, result, error, STEPS - 1, 1)
        if got != want:
            mismatches.append((rid, "want %r got %r" % (want, got)))

    # History: per run and generation, steps 0..final_step without gaps;
    # attempts 1..k per step; one settling result per step, as its last attempt.
    hist = collections.defaultdict(lambda: collections.defaultdict(list))
    dup_attempt_rows = collections.Counter()
    results = collections.Counter()
    for a in attempts:
        hist[(a["run_id"], a["generation"])][a["step"]].append(a)
        dup_attempt_rows[(a["run_id"], a["generation"], a["step"], a["attempt"])] += 1
        results[a["result"]] += 1
    dup_attempts = {k: n for k, n in dup_attempt_rows.items() if n > 1}
    noncontiguous, settled_twice, attempt_gaps, after_settle, wrong_settle = [], [], [], [], []
    settling = ("continue", "succeed", "fail", "cancel")
    verdict_result = {"succeeded": "succeed", "failed": "fail", "cancelled": "cancel"}
    for rid in submitted:
        r = runs.get(rid)
        gens = sorted(g for (x, g) in hist if x == rid)
        if r is None:
            continue
        if gens != [1]:
            noncontiguous.append((rid, "generations %r" % gens))
            continue
        steps = hist[(rid, 1)]
        final = r["final_step"] if r["final_step"] is not None else -1
        if sorted(steps) != list(range(final + 1)):
            noncontiguous.append((rid, "steps %r, final_step %r" % (sorted(steps), r["final_step"])))
        for n, rows in sorted(steps.items()):
            nums = [a["attempt"] for a in rows]
            if sorted(nums) != list(range(1, len(nums) + 1)):
                attempt_gaps.append((rid, n, nums))
            s = [a for a in rows if a["result"] in settling]
            if len(s) > 1:
                settled_twice.append((rid, n, [(a["attempt"], a["result"]) for a in s]))
            if s and any(a["attempt"] > s[0]["attempt"] for a in rows):
                after_settle.append((rid, n, [(a["attempt"], a["result"]) for a in rows]))
            want = "continue" if n < STEPS - 1 else verdict_result[policy.verdict(rid)[0]]
            if [a["result"] for a in s] != [want]:
                wrong_settle.append((rid, n, [(a["attempt"], a["result"]) for a in rows]))

    # Callbacks: every run acknowledged with its status; one termination.
    with hook.lock:
        acked = {k: list(v) for k, v in hook.cb_acked.items()}
        received = {k: list(v) for k, v in hook.cb_received.items()}
        deliveries = dict(hook.deliveries)
        kinds = dict(hook.kinds)
        hang_ends = dict(hook.hang_ends)
        bad_payloads = list(hook.bad_payloads)
        unexpected = list(hook.unexpected)
    cb_missing, cb_wrong, cb_two_terminations = [], [], []
    cb_dups = 0
    for rid in submitted:
        got = acked.get(rid, [])
        if not got:
            cb_missing.append(rid)
            continue
        cb_dups += len(got) - 1
        st, _, result, error = policy.verdict(rid)
        for b in received.get(rid, []):
            if (b.get("status"), b.get("result"), b.get("final_step"), b.get("generation")) != \
                    (st, result, STEPS - 1, 1) or (st != "succeeded" and b.get("error") != error):
                cb_wrong.append((rid, b))
        if len({(b.get("status"), b.get("finished_at")) for b in received.get(rid, [])}) > 1:
            cb_two_terminations.append((rid, [(b.get("status"), b.get("finished_at")) for b in received[rid]]))
    cb_rows = collections.Counter(c["run_id"] for c in callbacks)
    cb_rows_bad = [(r, n) for r, n in cb_rows.items() if n != 1] + [(r, 0) for r in submitted if r not in cb_rows]
    cb_status = collections.Counter(c["status"] for c in callbacks)
    cb_unknown = sorted(set(received) - set(submitted))
    dead_kinds = collections.Counter(d["kind"] for d in dead)
    twice = [k for k, n in deliveries.items() if n > 1]
    same_attempt_twice = collections.Counter(policy.step_action(*k) for k in twice)
    max_attempt = max((a["attempt"] for a in attempts), default=0)
    # Attempts that ended in an error although the webhook meant to answer them:
    # they use up attempts chaos did not plan. Sorted by what the webhook saw:
    # the call reached it after its deadline (the Python server was slow to
    # accept), it answered in time (>= 0.3 s before the deadline) and yet the
    # attempt timed out, or something else (no answer written: a crash).
    unplanned = collections.Counter()
    unplanned_errors = collections.Counter()
    answered_in_time = []
    for a in attempts:
        if a["result"] not in ("transient_error", "permanent_error") or \
                policy.step_action(a["run_id"], a["step"], a["attempt"]) != "answer":
            continue
        unplanned_errors[(a["error"] or "")[:60]] += 1
        tm = hook.timing.get((a["run_id"], a["step"], a["attempt"]))
        if tm is None:
            unplanned["never reached the handler"] += 1
        elif tm[0] is not None and tm[0] <= 0:
            unplanned["reached the webhook after its deadline"] += 1
        elif tm[0] is not None and tm[0] - tm[1] >= 0.3 and tm[2]:
            unplanned["answered in time, recorded as an error"] += 1
            answered_in_time.append((a["run_id"], a["step"], a["attempt"], a["error"],
                                     "answered %.3fs before the deadline at %s UTC" % (
                                         tm[0] - tm[1], time.strftime("%H:%M:%S", time.gmtime(tm[3])))))
        else:
            unplanned["other"] += 1
    errors_by_action = collections.defaultdict(collections.Counter)
    for a in attempts:
        act = policy.step_action(a["run_id"], a["step"], a["attempt"])
        if act != "answer":
            errors_by_action[act]["%s: %s" % (a["result"], (a["error"] or "")[:50])] += 1
    lease_per_step = collections.Counter()
    for a in attempts:
        if a["result"] == "lease_expired":
            lease_per_step[(a["run_id"], a["step"])] += 1

    # ---- the counts ----
    print("chaos: ---- counts ----")
    rows = [
        ("runs submitted (confirmed)", len(submitted), "= %d" % nruns),
        ("runs given up on submission", len(sub.failed), "0"),
        ("submission retries (service/db down)", sub.retries, "-"),
        ("deliberate duplicate submissions answered 200 newly_submitted=false", sub.dup_answers, "-"),
        ("duplicate submissions answered otherwise", len(sub.dup_wrong), "0"),
        ("runs terminal", sum(by_status.values()) - len(not_terminal), "= submitted"),
        ("  succeeded", by_status.get("succeeded", 0), "= %d expected" % expected_by_status["succeeded"]),
        ("  failed", by_status.get("failed", 0), "= %d expected" % expected_by_status["failed"]),
        ("  cancelled", by_status.get("cancelled", 0), "= %d expected" % expected_by_status["cancelled"]),
        ("expected outcome matches", len(submitted) - len(mismatches) - len(missing), "= submitted"),
        ("expected outcome mismatches", len(mismatches), "0"),
        ("runs lost (missing, not terminal or never accepted)", len(lost), "0"),
        ("runs in the database nobody submitted", len(extra), "0"),
        ("runs with non-contiguous step history", len(noncontiguous), "0"),
        ("steps with attempt-number gaps", len(attempt_gaps), "0"),
        ("(run, generation, step, attempt) rows duplicated", len(dup_attempts), "0"),
        ("steps settled twice (two settling results)", len(settled_twice), "0"),
        ("steps with attempts after their settlement", len(after_settle), "0"),
        ("steps settled with the wrong result", len(wrong_settle), "0"),
        ("step attempts recorded", len(attempts), "-"),
        ("  by result", dict(sorted(results.items())), "-"),
        ("webhook step requests", sum(deliveries.values()), "-"),
        ("  answered", dict(sorted((k, v) for k, v in kinds.items() if k.startswith("step_"))), "-"),
        ("  hangs ended (client_closed: hookflow gave up on the call)", dict(sorted(hang_ends.items())),
         "= %d hangs" % kinds.get("step_hang", 0)),
        ("  highest attempt number used (max_attempts %d)" % MAX_ATTEMPTS, max_attempt, "< %d" % MAX_ATTEMPTS),
        ("  most lease expiries on one step", max(lease_per_step.values(), default=0), "-"),
        ("  errors on attempts the webhook meant to answer", "%d %s" % (sum(unplanned.values()), dict(unplanned)),
         "-"),
        ("  same (run, step, attempt) delivered more than once, by answer",
         "%d %s" % (len(twice), dict(same_attempt_twice)), "- (at-least-once)"),
        ("step payloads that did not chain", len(bad_payloads), "0"),
        ("unexpected webhook requests", len(unexpected), "0"),
        ("callbacks: runs with an acknowledged callback", len(submitted) - len(cb_missing), "= submitted"),
        ("callbacks: runs without one", len(cb_missing), "0"),
        ("callbacks: deliveries received / refused with 500", "%d / %d" % (
            sum(len(v) for v in received.values()), kinds.get("callback_500", 0)), "-"),
        ("callbacks: duplicate acknowledged deliveries", cb_dups, "- (at-least-once)"),
        ("callbacks: with a wrong status/result/error", len(cb_wrong), "0"),
        ("callbacks: runs with two different terminations", len(cb_two_terminations), "0"),
        ("callbacks: rows per run != 1", len(cb_rows_bad), "0"),
        ("callbacks: rows by status", dict(cb_status), "all done"),
        ("callbacks for unknown runs", len(cb_unknown), "0"),
        ("dead letters (step / callback)", "%d / %d" % (dead_kinds.get("step", 0), dead_kinds.get("callback", 0)),
         "0 / 0"),
        ("SIGKILLs", kills, "-"),
        ("PostgreSQL restarts (readyz 503 seen while down)", "1 (%d)" % pg_report.get("readyz_503_while_down", 0)
         if pg_report else "0", "-"),
    ]
    for name, value, want in rows:
        print("chaos:   %-70s %-28s %s" % (name, value, "want " + want if want != "-" else ""))

    def show(label, items):
        if items:
            print("chaos:   e.g. %s: %s" % (label, items[:5]))

    for act in sorted(errors_by_action):
        print("chaos:   how hookflow recorded '%s' answers: %s" % (act, errors_by_action[act].most_common(3)))
    show("errors on attempts the webhook meant to answer", unplanned_errors.most_common(5))
    show("answered in time yet recorded as an error", answered_in_time)

    fails.check(len(submitted) == nruns, "%d of %d runs confirmed" % (len(submitted), nruns))
    fails.check(not sub.dup_wrong, "duplicate submissions answered wrongly: %r" % sub.dup_wrong[:5])
    fails.check(not lost, "runs lost: %d" % len(lost)) or show("lost", lost)
    fails.check(not extra, "unknown runs in the database: %r" % extra[:5])
    fails.check(not mismatches, "outcome mismatches: %d" % len(mismatches)) or show("mismatch", mismatches)
    fails.check(not noncontiguous, "non-contiguous histories: %d" % len(noncontiguous)) or \
        show("non-contiguous", noncontiguous)
    fails.check(not attempt_gaps, "attempt gaps: %d" % len(attempt_gaps)) or show("attempt gaps", attempt_gaps)
    fails.check(not dup_attempts, "duplicate attempt rows: %d" % len(dup_attempts)) or \
        show("duplicate attempt rows", list(dup_attempts.items()))
    fails.check(not settled_twice, "steps settled twice: %d" % len(settled_twice)) or \
        show("settled twice", settled_twice)
    fails.check(not after_settle, "attempts after settlement: %d" % len(after_settle)) or \
        show("after settlement", after_settle)
    fails.check(not wrong_settle, "wrong settling results: %d" % len(wrong_settle)) or \
        show("wrong settlement", wrong_settle)
    fails.check(not bad_payloads, "payloads that did not chain: %d" % len(bad_payloads)) or \
        show("bad payload", bad_payloads)
    fails.check(sum(hang_ends.values()) == kinds.get("step_hang", 0),
                "hangs that did not end: %d of %d" % (kinds.get("step_hang", 0) - sum(hang_ends.values()),
                                                      kinds.get("step_hang", 0)))
    fails.check(not unexpected, "unexpected webhook requests: %r" % unexpected[:5])
    fails.check(not cb_missing, "runs without an acknowledged callback: %d" % len(cb_missing)) or \
        show("no callback", cb_missing)
    fails.check(not cb_wrong, "wrong callbacks: %d" % len(cb_wrong)) or show("wrong callback", cb_wrong)
    fails.check(not cb_two_terminations, "runs terminated twice per callbacks: %d" % len(cb_two_terminations)) or \
        show("two terminations", cb_two_terminations)
    fails.check(not cb_rows_bad, "callback rows per run != 1: %r" % cb_rows_bad[:5])
    fails.check(set(cb_status) <= {"done"}, "callback rows not done: %r" % dict(cb_status))
    fails.check(not cb_unknown, "callbacks for unknown runs: %r" % cb_unknown[:5])
    fails.check(not dead, "dead letters: %r" % dead[:5])
    fails.check(kinds.get("step_hang", 0) > 0 and kinds.get("step_reset", 0) > 0 and kinds.get("step_500", 0) > 0
                and kinds.get("callback_500", 0) > 0, "some chaos never happened: %r" % kinds)


def cleanup(resources):
    svc = resources.get("svc")
    if svc is not None and svc.running():
        try:
            svc.stop(signal.SIGTERM, timeout=10)
        except Exception:
            svc.kill()
    hook = resources.get("hook")
    if hook is not None:
        hook.close()
    pg = resources.get("pg")
    if pg is not None:
        log_path = pg.log_path
        keep = os.path.join(os.path.dirname(pg.base_dir), "logs", "postgres.log")
        try:
            shutil.copyfile(log_path, keep)
        except OSError:
            pass
        pg.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=sorted(MODES), default=os.environ.get("CHAOS_MODE", "short"))
    args = ap.parse_args()
    cfg = dict(MODES[args.mode])
    if os.environ.get("CHAOS_RUNS"):
        cfg["runs"] = int(os.environ["CHAOS_RUNS"])
    binary = os.path.abspath(os.environ.get("HOOKFLOW_BIN", os.path.join(ROOT, "build", "hookflow")))
    seed = os.environ.get("CHAOS_SEED", "20240601")
    tmp = tempfile.mkdtemp(prefix="hookflow-chaos-")
    os.makedirs(os.path.join(tmp, "logs"))
    if os.geteuid() == 0:
        os.chmod(tmp, 0o755)  # PostgreSQL runs as an unprivileged user below it
    nkills = sum(1 for _, e in cfg["events"] if e == "kill")
    log("mode %s: %d runs x %d steps, %d SIGKILL, %d PostgreSQL restart, webhook %d%% 500 / %d%% hang "
        "(timeout_ms %d) / %d%% reset, verdicts %d%% fail / %d%% cancel, callbacks %d%% 500; seed %s"
        % (args.mode, cfg["runs"], STEPS, nkills, sum(1 for _, e in cfg["events"] if e == "pg"),
           P_500 * 100, P_HANG * 100, TIMEOUT_MS, P_RESET * 100, P_VERDICT_FAIL * 100, P_VERDICT_CANCEL * 100,
           P_CALLBACK_500 * 100, seed))
    # SIGTERM (make interrupted) unwinds through the finally blocks, so
    # PostgreSQL and hookflow are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fails = Failures()
    timings = collections.OrderedDict()
    t = time.monotonic()
    try:
        scenario(args.mode, cfg, binary, seed, tmp, fails, timings)
    except Exception:
        fails.append("scenario raised:\n" + traceback.format_exc())
    timings["total"] = time.monotonic() - t
    print("chaos: ---- timings ----")
    for k, v in timings.items():
        print("chaos:   %-45s %7.1fs" % (k, v))
    if fails:
        print("chaos: ---- failures ----")
        for f in fails:
            print("chaos: FAIL: %s" % f)
        logs = os.path.join(tmp, "logs")
        print("chaos: logs kept in %s" % logs)
        svc_log = os.path.join(logs, "hookflow.log")
        try:
            with open(svc_log, "rb") as f:
                tail = f.read().decode("utf-8", "replace").splitlines()[-40:]
            print("chaos: ---- hookflow log tail ----")
            for line in tail:
                print("chaos: | " + line)
        except OSError:
            pass
    elif os.environ.get("CHAOS_KEEP") == "1":
        print("chaos: logs kept in %s" % os.path.join(tmp, "logs"))
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    passed = 0 if fails else 1
    print("chaos: %d passed, %d failed (%s, %.1fs)" % (passed, 1 - passed, args.mode, timings["total"]))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
