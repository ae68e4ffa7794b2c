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

Two hookflow instances share the database. Besides those runs, under the same
chaos: async runs (15% as many) whose step answers 202 pending, some asking
for heartbeats, and which the Completer completes later through either
instance (succeed with a result derived from the id), and parent runs (15%)
whose step 0 starts 2-3 child runs (succeeding with a value derived from their
input) and waits for all, and whose step 1 checks every child's result and
succeeds with their list. At each SIGKILL an async call is held in flight and
the instance delivering it is the one killed.

Afterwards it checks, prints and fails on: runs lost, runs not terminal, outcome
mismatches, non-contiguous step history, steps settled twice, callbacks missing
or contradicting each other, dead letters, payloads that did not chain, async
runs not settled by the completion the Completer gave, completions of a
superseded attempt not refused with 409 stale_attempt, parents whose children
(in the database, in GET /v1/runs/{id}/children, in their step-1 request) are
not exactly theirs, the /readyz behaviour across the PostgreSQL restart, and
sanitizer reports in the services' logs. The last line is "chaos: 1 passed, 0
failed" (or 0 passed, 1 failed) and the exit status is non-zero on failure.

Environment: HOOKFLOW_BIN (default build/hookflow), CHAOS_SEED (default
20240601), CHAOS_RUNS (overrides the mode's run count), CHAOS_KEEP=1 (keep the
logs even on success), CHAOS_LOG_LEVEL (service log level, default info),
HOOKFLOW_TEST_PG_BIN / HOOKFLOW_TEST_PG_USER as for the integration suite.
"""

import argparse
import collections
import hashlib
import heapq
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
from harness import SETTLING_RESULTS, TERMINAL, Api, Postgres, Service, step_history_problems  # noqa: E402

STEPS = 5                 # steps 0..4; step 4 gives the run's verdict
WORKFLOW = "chaos"
# Added to the chaos runs (same chaos policy on every call, same callbacks):
ASYNC_WORKFLOW = "chaos-async"    # step 0 answers pending; the Completer completes it
PARENT_WORKFLOW = "chaos-parent"  # step 0 starts 2-3 children and waits for all; step 1 checks them
CHILD_WORKFLOW = "chaos-child"    # step 0 succeeds with a value derived from its input

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
ASYNC_SHARE = 0.15        # async runs added, as a share of the mode's runs
PARENT_SHARE = 0.15       # parent runs added (2-3 children each), as a share of the mode's runs
P_HEARTBEAT = 0.4         # share of the async runs whose pending answer asks for heartbeats
P_STALL = 0.3             # share of those attempts (1 and 2) whose heartbeats the completer skips on purpose
KILL_ASYNC = 2            # async runs submitted at each SIGKILL, one of whose calls is held while it dies
HEARTBEAT_TIMEOUT_MS = 1500
HEARTBEAT_EVERY = 0.4     # s between two heartbeats of one pending step
COMPLETE_AFTER = (0.1, 2.5)   # s after the pending answer (or the last heartbeat) its completion is due
COMPLETERS = 4            # completer threads
COMPLETE_GIVE_UP_S = 60   # a completion or heartbeat retried (5xx, instance down) longer than this fails the test


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

    # Async runs ------------------------------------------------------------

    def async_plan(self, rid, attempt):
        """(heartbeat_timeout_ms or None, heartbeats before the completion,
        pending timeout_ms or None, s from the last of them to the completion,
        stall: no heartbeat at all, so that the attempt times out and the
        completion, sent once the next attempt arrived, meets 409 stale_attempt)."""
        beats = self.u("async-hb", rid, attempt) < P_HEARTBEAT
        stall = beats and attempt <= 2 and self.u("async-stall", rid, attempt) < P_STALL
        n = 1 + int(self.u("async-beats", rid, attempt) * 3) if beats and not stall else 0
        timeout_ms = 60000 if self.u("async-timeout", rid) < 0.5 else None
        lo, hi = COMPLETE_AFTER
        return (HEARTBEAT_TIMEOUT_MS if beats else None, n, timeout_ms,
                lo + (hi - lo) * self.u("async-delay", rid, attempt), stall)

    @staticmethod
    def async_result(rid):
        """The result the Completer gives an async run's pending step."""
        return {"run_id": rid, "completed": True, "digest": hashlib.sha256(("async/" + rid).encode()).hexdigest()[:16]}

    # Parent and child runs -------------------------------------------------

    def child_keys(self, prid):
        return ["c%d" % k for k in range(2 if self.u("children", prid) < 0.5 else 3)]

    def child_input(self, prid, key):
        return {"parent": prid, "key": key, "n": int(self.u("child-n", prid, key) * 1000000)}

    @staticmethod
    def child_result(inp):
        """What a child's webhook answers: derived from the child's input."""
        return {"parent": inp["parent"], "key": inp["key"], "n_squared": inp["n"] * inp["n"]}

    def children_of(self, prid):
        """[(key, child run id, input, result)] ordered by key."""
        return [(k, child_run_id(prid, k), self.child_input(prid, k), self.child_result(self.child_input(prid, k)))
                for k in self.child_keys(prid)]

    def parent_result(self, prid):
        return [res for _, _, _, res in self.children_of(prid)]


def run_id_of(i):
    return "chaos-%05d" % i


def async_run_id(i):
    return "async-%05d" % i


def parent_run_id(i):
    return "parent-%05d" % i


def child_run_id(prid, key, generation=1, step=0):
    """A child's run id: the lowercase hex SHA-256 of
    "<parent run id>/<parent generation>/<parent step>/<key>"."""
    return hashlib.sha256(("%s/%d/%d/%s" % (prid, generation, step, key)).encode()).hexdigest()


def run_index(rid):
    return int(rid.rsplit("-", 1)[1])


def payload_for(i, step):
    return {"i": i} if step == 0 else {"i": i, "step": step}


def async_input(i):
    return {"a": i}


def parent_input(i):
    return {"p": i}


def parent_payload_1(prid, policy):
    """The payload parent step 0 continues with (step 1's payload)."""
    return {"p": run_index(prid), "children": len(policy.child_keys(prid))}


class Spec:
    """One root run to submit: its id, workflow and input."""

    def __init__(self, kind, rid, workflow, inp):
        self.kind, self.rid, self.workflow, self.input = kind, rid, workflow, inp

    def body(self):
        return {"workflow": self.workflow, "run_id": self.rid, "input": self.input}


def chaos_spec(i):
    return Spec("chaos", run_id_of(i), WORKFLOW, payload_for(i, 0))


def async_spec(i):
    return Spec("async", async_run_id(i), ASYNC_WORKFLOW, async_input(i))


def parent_spec(i):
    return Spec("parent", parent_run_id(i), PARENT_WORKFLOW, parent_input(i))


def expectations(policy, specs):
    """run id -> (kind, status, result, error, final_step, the settling result of
    each step) for every root run in `specs` and every child a parent starts."""
    verdict_result = {"succeeded": "succeed", "failed": "fail", "cancelled": "cancel"}
    out = {}
    for sp in specs:
        if sp.kind == "chaos":
            st, _, result, error = policy.verdict(sp.rid)
            out[sp.rid] = ("chaos", st, result, error, STEPS - 1, ["continue"] * (STEPS - 1) + [verdict_result[st]])
        elif sp.kind == "async":
            out[sp.rid] = ("async", "succeeded", policy.async_result(sp.rid), None, 0, ["succeed"])
        else:
            out[sp.rid] = ("parent", "succeeded", policy.parent_result(sp.rid), None, 1, ["continue", "succeed"])
            for _, cid, _, res in policy.children_of(sp.rid):
                out[cid] = ("child", "succeeded", res, None, 0, ["succeed"])
    return out


# --------------------------------------------------------------------------
# The webhook: steps on /steps (/async, /parent, /child), terminal callbacks on /cb
# --------------------------------------------------------------------------

STEP_PATHS = {"/steps": "chaos", "/async": "async", "/parent": "parent", "/child": "child"}
LAST_STEP = {"chaos": STEPS - 1, "async": 0, "parent": 1, "child": 0}


class ChaosWebhook:
    def __init__(self, policy, completer):
        self.policy = policy
        self.completer = completer                  # gets every async step request answered pending
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.kinds = collections.Counter()          # what was answered
        self.deliveries = collections.Counter()     # (rid, step, attempt) -> step requests
        self.bad_payloads = []
        self.bad_children = []                      # parent step 1 requests whose "children" were wrong
        self.unexpected = []
        self.inflight_by = collections.Counter()    # delivering instance (memo.url) -> step calls in flight
        self.hold_armed = False                     # hold the next async call answered (arm_hold)
        self.held = None                            # the call held: {"inst", "rid", "attempt", "ended"}
        self.held_calls = []
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
        if path in STEP_PATHS and isinstance(req, dict):
            return self._step(h, req, STEP_PATHS[path])
        with self.lock:
            self.unexpected.append((path, raw[:200]))
        self._reply(h, 404, b"no route", "text/plain")

    def _expected_payload(self, kind, rid, step, payload):
        if kind == "chaos":
            return payload_for(run_index(rid), step)
        if kind == "async":
            return async_input(run_index(rid))
        if kind == "parent":
            return parent_input(run_index(rid)) if step == 0 else parent_payload_1(rid, self.policy)
        # A child: its input names its parent and key, which give its run id.
        if isinstance(payload, dict) and isinstance(payload.get("parent"), str) and \
                child_run_id(payload["parent"], payload.get("key")) == rid:
            return self.policy.child_input(payload["parent"], payload["key"])
        return "(the input of a child of another run)"

    @staticmethod
    def _instance(req):
        """The delivering instance: scheme://host:port of memo.url."""
        url = (req.get("memo") or {}).get("url") or ""
        return "/".join(url.split("/")[:3])

    def _step(self, h, req, kind):
        inst = self._instance(req)
        with self.lock:
            self.inflight_by[inst] += 1
        try:
            self._step_call(h, req, kind)
        finally:
            with self.lock:
                self.inflight_by[inst] -= 1

    def _step_call(self, h, req, kind):
        t_in = time.time()
        rid, step, attempt, payload = req.get("run_id"), req.get("step"), req.get("attempt"), req.get("payload")
        if not isinstance(rid, str) or not isinstance(step, int) or not 0 <= step <= LAST_STEP[kind]:
            with self.lock:
                self.unexpected.append((kind, "step %r of %r" % (step, rid)))
            self._reply(h, 400, b"no such step", "text/plain")
            return
        with self.lock:
            self.deliveries[(rid, step, attempt)] += 1
            if payload != self._expected_payload(kind, rid, step, payload) or req.get("generation") != 1:
                self.bad_payloads.append((rid, step, attempt, req.get("generation"), payload))
        if kind == "async":
            self.completer.saw(rid, attempt)
        action = self.policy.step_action(rid, step, attempt)
        if kind == "async" and action == "answer" and self._take_hold(req):
            # Held until hookflow drops the call (the scenario SIGKILLs the
            # instance holding it); the attempt's lease then expires.
            how = self._hang(h, count=False)
            with self.lock:
                self.held["ended"] = how
            self.completer.add(rid, step, attempt, (req.get("memo") or {}).get("token"), killed=True)
            return
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
            status, body = self._answer(kind, rid, step, attempt, req)
            ok = self._reply(h, status, body)
            if kind == "async":
                # Even when the answer could not be written (hookflow gave up
                # on the call): the completion then meets a newer attempt.
                self.completer.add(rid, step, attempt, (req.get("memo") or {}).get("token"))
            with self.lock:
                if ok:
                    self.answers += 1
                # how long before its deadline the call arrived, and how long we took
                try:
                    left = harness.iso_to_epoch(req.get("deadline")) - t_in
                except Exception:
                    left = None
                self.timing[(rid, step, attempt)] = (left, time.time() - t_in, ok, t_in)

    def _answer(self, kind, rid, step, attempt, req):
        """(status, body) of an answered step call."""
        if kind == "chaos":
            if step < STEPS - 1:
                return 200, {"outcome": "continue", "payload": payload_for(run_index(rid), step + 1)}
            return 200, self.policy.verdict(rid)[1]
        if kind == "async":
            hb_ms, _, timeout_ms, _, _ = self.policy.async_plan(rid, attempt)
            body = {"outcome": "pending"}
            if hb_ms:
                body["heartbeat_timeout_ms"] = hb_ms
            if timeout_ms:
                body["timeout_ms"] = timeout_ms
            return 202, body
        if kind == "child":
            return 200, {"outcome": "succeed", "result": self.policy.child_result(req["payload"])}
        if step == 0:
            return 200, {"outcome": "continue", "payload": parent_payload_1(rid, self.policy),
                         "children": [{"key": k, "workflow": CHILD_WORKFLOW, "input": inp}
                                      for k, _, inp, _ in self.policy.children_of(rid)],
                         "wait_for_children": {"mode": "all"}}
        # Step 1: every child's result must be there, ordered by key.
        want = [{"key": k, "run_id": cid, "status": "succeeded", "result": res, "error": None}
                for k, cid, _, res in self.policy.children_of(rid)]
        if req.get("children") != want:
            with self.lock:
                self.bad_children.append((rid, attempt, req.get("children")))
            return 200, {"outcome": "fail", "reason": "chaos: parent %s got children %s" % (
                rid, json.dumps(req.get("children"))[:500])}
        return 200, {"outcome": "succeed", "result": [c["result"] for c in req["children"]]}

    def arm_hold(self):
        """Holds the next async step call the policy means to answer."""
        with self.lock:
            self.held = None
            self.hold_armed = True

    def disarm_hold(self):
        with self.lock:
            self.hold_armed = False

    def held_call(self):
        with self.lock:
            return dict(self.held) if self.held else None

    def _take_hold(self, req):
        with self.lock:
            if not self.hold_armed:
                return False
            self.hold_armed = False
            self.held = {"inst": self._instance(req), "rid": req.get("run_id"), "attempt": req.get("attempt"),
                         "ended": None}
            self.held_calls.append(self.held)
            return True

    def _hang(self, h, count=True):
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
        if count:
            with self.lock:
                self.hang_ends[how] += 1
        h.close_connection = True
        return how

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

    def in_flight_of(self, base_url):
        """Step calls in flight delivered by the instance at `base_url`."""
        with self.lock:
            return self.inflight_by[base_url]

    def close(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------
# The completer: finishes the async runs' pending steps from outside
# --------------------------------------------------------------------------

class Completer:
    """Completes every pending step an async run's webhook answered, from
    COMPLETERS threads, through a randomly chosen instance, with the step
    request's memo.token as Bearer: first the heartbeats the policy plans
    (every HEARTBEAT_EVERY s), then POST .../complete with succeed and
    Policy.async_result. A connection error or 5xx (the instance is down, or
    PostgreSQL) is retried at once on the other instance, then on both again
    after a backoff (0.1 s doubling up to 0.5 s). 409 stale_attempt (the
    attempt was redelivered after a kill, or its heartbeat timed out) drops
    the job and brings forward the job of the newer attempt of that run (the
    webhook adds one for every step request it answers pending).

    Two kinds of jobs meet 409 stale_attempt by design: an attempt whose
    heartbeats are skipped (Policy.async_plan's stall) and the attempt whose
    call was held while its instance was SIGKILLed. Their completion is sent
    only once the webhook has seen a newer attempt of the run, so hookflow
    must refuse it; a 200 or already_completed for them is a failure."""

    class Job:
        def __init__(self, rid, step, attempt, token, plan, killed):
            self.rid, self.step, self.attempt, self.token = rid, step, attempt, token
            _, self.beats_left, _, self.delay, stall = plan
            self.must_be_stale = stall or killed
            if killed:   # held while its instance died: no heartbeats
                self.beats_left, self.delay = 0, 0.1
            self.action = "heartbeat" if self.beats_left else "complete"
            self.first_try = None       # when the current action was first tried
            self.retries = 0            # of the current action
            self.queued = None          # seq of its live heap entry; None while acted on or done
            self.done = False

    def __init__(self, policy):
        self.policy = policy
        self.instances = []             # Service objects; base_url read at call time
        self.cond = threading.Condition()
        self.heap = []                  # (due, seq, job)
        self.seq = 0
        self.jobs = collections.defaultdict(list)       # rid -> [Job]
        self.stats = collections.Counter()
        self.landed = collections.defaultdict(list)     # rid -> [(attempt, "200" | "already_completed")]
        self.latest = collections.Counter()             # rid -> highest attempt the webhook saw
        self.problems = []
        self.stopping = threading.Event()
        self.threads = []
        self.rng = random.Random(policy.seed)

    def saw(self, rid, attempt):
        """The webhook received a step request of async run `rid`."""
        with self.cond:
            self.latest[rid] = max(self.latest[rid], attempt)

    def add(self, rid, step, attempt, token, killed=False):
        """A pending step to complete: `token` is the request's memo.token;
        `killed`: its call was held while its instance was SIGKILLed."""
        job = self.Job(rid, step, attempt, token, self.policy.async_plan(rid, attempt), killed)
        with self.cond:
            self.stats["pending answers" if not killed else "calls held at a SIGKILL"] += 1
            if job.must_be_stale:
                self.stats["jobs that must meet stale_attempt"] += 1
            self.jobs[rid].append(job)
            self._push(job, time.monotonic() + (HEARTBEAT_EVERY if job.beats_left else job.delay))

    def _push(self, job, due):
        """Schedules the job's next action (replacing the entry it has in the
        heap, if any). Called with self.cond held."""
        self.seq += 1
        job.queued = self.seq
        heapq.heappush(self.heap, (due, self.seq, job))
        self.cond.notify()

    def start(self, instances):
        self.instances = list(instances)
        for k in range(COMPLETERS):
            th = threading.Thread(target=self._worker, name="completer-%d" % k, daemon=True)
            th.start()
            self.threads.append(th)

    def stop(self):
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()
        for th in self.threads:
            th.join(10)

    def _worker(self):
        while not self.stopping.is_set():
            with self.cond:
                while not self.stopping.is_set():
                    now = time.monotonic()
                    if self.heap and self.heap[0][0] <= now:
                        _, seq, job = heapq.heappop(self.heap)
                        if seq != job.queued:
                            continue    # an entry the job's rescheduling replaced
                        job.queued = None
                        break
                    self.cond.wait(min(0.25, self.heap[0][0] - now) if self.heap else 0.25)
                else:
                    return
            if not job.done:
                try:
                    self._act(job)
                except Exception:
                    with self.cond:
                        self.problems.append((job.rid, job.attempt, "raised: " + traceback.format_exc()[-500:]))

    def _call(self, job, action, body):
        """POSTs to a randomly chosen instance, then to the others when one
        does not answer or answers 5xx. Returns the answer, or None when none
        gave one."""
        path = "/v1/runs/%s/steps/%d/%s" % (job.rid, job.step, action)
        order = self.rng.sample(self.instances, len(self.instances))
        for n, svc in enumerate(order):
            if n:
                with self.cond:
                    self.stats["%s retried on another instance" % action] += 1
            try:
                r = Api(svc.base_url, token=job.token, timeout=5).post(path, body)
            except Exception:
                with self.cond:
                    self.stats["%s: no answer (instance down)" % action] += 1
                continue
            if r.status < 500:
                return r
            with self.cond:
                self.stats["%s: %d" % (action, r.status)] += 1
        return None

    def _act(self, job):
        now = time.monotonic()
        if job.first_try is None:
            job.first_try = now
        if job.must_be_stale:
            with self.cond:
                if self.latest[job.rid] <= job.attempt:    # wait for the newer attempt
                    if now - job.first_try > COMPLETE_GIVE_UP_S:
                        job.done = True
                        self.problems.append((job.rid, job.attempt, "no newer attempt within %d s" %
                                              COMPLETE_GIVE_UP_S))
                    else:
                        self._push(job, now + 0.1)
                    return
        if job.action == "heartbeat":
            r = self._call(job, "heartbeat", {"details": {"beats_left": job.beats_left}})
        else:
            r = self._call(job, "complete", {"outcome": "succeed", "result": self.policy.async_result(job.rid)})
        with self.cond:
            if r is None:
                if now - job.first_try > COMPLETE_GIVE_UP_S:
                    job.done = True
                    self.problems.append((job.rid, job.attempt, "%s given up after %d s" % (
                        job.action, COMPLETE_GIVE_UP_S)))
                else:
                    job.retries += 1
                    self._push(job, time.monotonic() + min(0.5, 0.05 * 2 ** job.retries))
                return
            job.retries = 0
            code = r.body.get("error", {}).get("code") if r.status == 409 and isinstance(r.body, dict) else None
            if r.status == 200 and job.action == "heartbeat" and r.body == {"cancel_requested": False}:
                self.stats["heartbeat 200"] += 1
                job.beats_left -= 1
                job.action = "heartbeat" if job.beats_left else "complete"
                job.first_try = None
                self._push(job, time.monotonic() + (HEARTBEAT_EVERY if job.beats_left else
                                                    min(job.delay, HEARTBEAT_EVERY)))
                return
            job.done = True
            if job.must_be_stale and code != "stale_attempt":
                self.problems.append((job.rid, job.attempt, "completed after attempt %d was delivered: %d %s" % (
                    self.latest[job.rid], r.status, r.text[:200])))
            elif r.status == 200 and job.action == "complete":
                b = r.body if isinstance(r.body, dict) else {}
                if (b.get("run_id"), b.get("status"), b.get("result")) == \
                        (job.rid, "succeeded", self.policy.async_result(job.rid)):
                    self.stats["complete 200"] += 1
                    self.landed[job.rid].append((job.attempt, "200"))
                else:
                    self.problems.append((job.rid, job.attempt, "complete answered 200 with %r" % (r.body,)))
            elif code == "already_completed":
                # This attempt was completed already: by an earlier try whose
                # answer was lost, or by the job of a duplicate delivery.
                self.stats["%s 409 already_completed" % job.action] += 1
                self.landed[job.rid].append((job.attempt, "already_completed"))
            elif code == "stale_attempt":
                self.stats["%s 409 stale_attempt" % job.action] += 1
                if job.must_be_stale:
                    self.stats["jobs that met stale_attempt as they must"] += 1
                newer = [j for j in self.jobs[job.rid] if j.attempt > job.attempt and j.queued is not None]
                if newer:
                    self.stats["stale_attempt: newer attempt's job brought forward"] += 1
                    for j in newer:
                        self._push(j, time.monotonic())
                else:
                    self.stats["stale_attempt: no newer job waiting"] += 1
            else:
                self.problems.append((job.rid, job.attempt, "%s answered %d %s" % (job.action, r.status, r.text[:200])))


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
        self.specs = {}              # rid -> Spec of every confirmed run
        self.failed = {}             # rid -> last answer
        self.retries = 0
        self.dup_answers = 0         # deliberate duplicates answered 200 newly_submitted false
        self.dup_wrong = []

    def submit(self, spec, duplicate=False):
        rid = spec.rid
        body = spec.body()
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
                            self.specs[rid] = spec
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


def added_runs(cfg):
    """(async runs, parent runs) added to the mode's runs: at least the async
    runs the SIGKILLs need."""
    nkills = sum(1 for _, e in cfg["events"] if e == "kill")
    return max(int(cfg["runs"] * ASYNC_SHARE), KILL_ASYNC * nkills), int(cfg["runs"] * PARENT_SHARE)


def interleave(a, b):
    """The items of a and b, each list's spread evenly over the result."""
    keyed = [((k + 0.5) / len(a), 0, k) for k in range(len(a))] + [((k + 0.5) / len(b), 1, k) for k in range(len(b))]
    return [(a, b)[w][k] for _, w, k in sorted(keyed)]


def scenario(mode, cfg, binary, seed, tmp, fails, timings):
    policy = Policy(seed)
    nruns = cfg["runs"]
    ids = list(range(nruns))
    rng = random.Random(seed)
    rng.shuffle(ids)
    n_late = int(nruns * LATE_FRACTION)
    late, initial = ids[:n_late], ids[n_late:]
    # The async and parent runs, split the same way between up front and late
    # (their own random stream: the chaos runs' split is as it always was).
    n_async, n_parent = added_runs(cfg)
    n_kill_async = KILL_ASYNC * sum(1 for _, e in cfg["events"] if e == "kill")
    kill_async = [async_spec(i) for i in range(n_async - n_kill_async, n_async)]   # submitted at the SIGKILLs
    extra = [async_spec(i) for i in range(n_async - n_kill_async)] + [parent_spec(i) for i in range(n_parent)]
    random.Random("%s/extra" % seed).shuffle(extra)
    n_late_extra = int(len(extra) * LATE_FRACTION)
    late = interleave([chaos_spec(i) for i in late], extra[:n_late_extra])
    initial = interleave([chaos_spec(i) for i in initial], extra[n_late_extra:])
    n_children = sum(len(policy.child_keys(parent_run_id(i))) for i in range(n_parent))
    total_answers = nruns * STEPS + n_async + 2 * n_parent + n_children

    t = time.monotonic()
    pg = Postgres(os.path.join(tmp, "pg"))
    os.makedirs(pg.base_dir)
    resources = {"pg": pg}
    try:
        pg.init()
        db = pg.create_database("chaos")
        timings["postgres start"] = time.monotonic() - t

        completer = Completer(policy)
        resources["completer"] = completer
        hook = ChaosWebhook(policy, completer)
        resources["hook"] = hook
        env = {
            "HOOKFLOW_LEASE_MS": str(LEASE_MS),
            "HOOKFLOW_WORKERS": "2",
            "HOOKFLOW_MAX_INFLIGHT": os.environ.get("CHAOS_MAX_INFLIGHT", "64"),
            "HOOKFLOW_LOG_LEVEL": os.environ.get("CHAOS_LOG_LEVEL", "info"),
            "HOOKFLOW_SHUTDOWN_GRACE_MS": "5000",
        }
        # Two instances on the same database: the completions go through
        # either. Each SIGKILL strikes the one holding the async call the
        # webhook holds at that moment (svc if none could be held).
        svc = Service(binary, db, os.path.join(tmp, "logs", "hookflow.log"), env)
        svc_b = Service(binary, db, os.path.join(tmp, "logs", "hookflow-b.log"), env)
        resources["svc"] = svc
        resources["svc_b"] = svc_b
        t = time.monotonic()
        svc.start(timeout=90)
        svc_b.start(timeout=90)
        timings["hookflow start (2 instances)"] = time.monotonic() - t
        log("hookflow %s pids %d on %s and %d on %s; webhook on port %d; postgres on port %d"
            % (binary, svc.pid, svc.base_url, svc_b.pid, svc_b.base_url, hook.port, pg.port))
        api = Api(svc.base_url, timeout=10)
        for name, path in ((WORKFLOW, "/steps"), (ASYNC_WORKFLOW, "/async"), (CHILD_WORKFLOW, "/child"),
                           (PARENT_WORKFLOW, "/parent")):
            r = api.put("/v1/workflows/" + name, {
                "url": hook.url(path), "callback_url": hook.url("/cb"), "timeout_ms": TIMEOUT_MS,
                "max_attempts": MAX_ATTEMPTS, "retry_backoff": {"base_ms": 20, "max_ms": 200}})
            if not fails.check(r.status in (200, 201), "PUT workflow %s: %r" % (name, r)):
                return
        completer.start([svc, svc_b])

        sub = Submitter(svc.base_url, give_up_s=cfg["deadline"] / 2)
        t_load = time.monotonic()

        # Up front: the initial runs from 4 threads, as fast as they go.
        init_left = [4]

        def initial_submitter(k):
            for spec in initial[k::4]:
                sub.submit(spec)
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
                for j, spec in enumerate(late):
                    due = 0.05 + (LATE_UNTIL - 0.05) * j / max(1, len(late))
                    while hook.progress() < due * total_answers and time.monotonic() - t_load < cfg["deadline"] / 2:
                        time.sleep(0.05)
                    sub.submit(spec)
                    if j % 5 == 0:
                        with sub.lock:
                            done = list(sub.confirmed)
                        if done:
                            sub.submit(sub.specs[rng.choice(done)], duplicate=True)
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
                # An async step call in flight when its instance dies: the
                # webhook holds the next one (of the runs submitted now) and
                # the instance delivering it is the one killed, with that
                # and other calls in flight.
                hook.arm_hold()
                for spec in kill_async[kills * KILL_ASYNC:(kills + 1) * KILL_ASYNC]:
                    sub.submit(spec)
                victim = svc
                try:
                    held = harness.wait_until(hook.held_call, timeout=20, interval=0.002,
                                              message="an async step call held")
                    victim = next((x for x in (svc, svc_b) if x.base_url == held["inst"]), None)
                    if not fails.check(victim is not None, "held call from an unknown instance: %r" % (held,)):
                        victim = svc
                except harness.WaitTimeout:
                    hook.disarm_hold()
                    fails.append("SIGKILL #%d: no async step call to hold" % (kills + 1))
                    held = None
                harness.wait_until(lambda: hook.in_flight_of(victim.base_url) > 0, timeout=10, interval=0.005,
                                   message="a step call of %s in flight" % victim.base_url)
                inflight = hook.in_flight_of(victim.base_url)
                t = time.monotonic()
                code = victim.kill()
                kills += 1
                fails.check(code == -signal.SIGKILL, "SIGKILL #%d: exit code %r" % (kills, code))
                victim.start(timeout=90)
                took = time.monotonic() - t
                timings["SIGKILL #%d to ready" % kills] = took
                log("SIGKILL #%d of %s at %d step answers with %d calls in flight (holding async %s attempt %s); "
                    "restarted (pid %d) ready in %.1fs"
                    % (kills, "the first instance" if victim is svc else "the second instance", hook.progress(),
                       inflight, held and held["rid"], held and held["attempt"], victim.pid, took))
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
        expected = expectations(policy, [sub.specs[r] for r in submitted])

        def counts():
            rows = db.sql("SELECT status, count(*) FROM run GROUP BY status ORDER BY 1")
            return {s: int(n) for s, n in rows}
        last_log = [0.0]

        def all_terminal():
            c = counts()
            if time.monotonic() - last_log[0] > 10:
                last_log[0] = time.monotonic()
                log("waiting for terminal runs: %s" % c)
            return sum(c.get(s, 0) for s in TERMINAL) >= len(expected)
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
            return busy == 0 and all(r in acked for r in expected)
        try:
            harness.wait_until(callbacks_done, timeout=max(30, deadline - time.monotonic()), interval=0.25,
                               message="every callback acknowledged")
        except harness.WaitTimeout:
            fails.append("callbacks still outstanding at the deadline")
        timings["drain: callbacks acknowledged"] = time.monotonic() - t
        timings["load to end"] = time.monotonic() - t_load
        completer.stop()

        # Every parent's children as GET /v1/runs/{id}/children lists them.
        t = time.monotonic()
        listings = {r: list_children(Api(svc_b.base_url, timeout=10), r) for r in submitted
                    if sub.specs[r].kind == "parent"}
        timings["GET children of every parent"] = time.monotonic() - t

        # The services end cleanly (SIGTERM: exit 0, no sanitizer report).
        t = time.monotonic()
        reports = []
        for name, one in (("hookflow", svc), ("hookflow (second instance)", svc_b)):
            try:
                code = one.stop(signal.SIGTERM, timeout=30)
                fails.check(code == 0, "%s exit code after SIGTERM: %r" % (name, code))
            except harness.ServiceError as e:
                fails.append("%s: %s" % (name, e))
            reports += sanitizer_reports(one.log_text())
        timings["hookflow SIGTERM to exit (2 instances)"] = time.monotonic() - t
        # With hookflow gone every connection is closed: no webhook handler
        # (a hang in particular) may still be running.
        try:
            harness.wait_until(lambda: hook.in_flight() == 0, timeout=15, interval=0.05,
                               message="webhook handlers finished")
        except harness.WaitTimeout:
            fails.append("%d webhook handlers still running 15 s after hookflow exited" % hook.in_flight())
        fails.check(not reports, "sanitizer reports in the service log: %r" % reports[:5])

        t = time.monotonic()
        verify(db, hook, sub, policy, submitted, expected, (nruns, n_async, n_parent), completer, listings, kills,
               pg_report, fails)
        timings["checks"] = time.monotonic() - t
    finally:
        cleanup(resources)


def list_children(api, rid):
    """GET /v1/runs/{id}/children, every page: the list of run objects, or
    the failing answer."""
    out, params = [], None
    while True:
        r = api.get("/v1/runs/%s/children" % rid, params=params)
        if r.status != 200 or not isinstance(r.body, dict) or not isinstance(r.body.get("children"), list):
            return "GET children: %r" % (r,)
        out.extend(r.body["children"])
        if not r.body.get("next_cursor"):
            return out
        params = {"cursor": r.body["next_cursor"]}


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


def verify(db, hook, sub, policy, submitted, expected, wanted, completer, listings, kills, pg_report, fails):
    """`submitted`: the root runs confirmed; `expected`: every run that must
    exist (those and their children) -> expectations(); `wanted`: the
    numbers of chaos, async and parent runs the mode asked for; `listings`:
    parent -> GET /v1/runs/{id}/children (or the failing answer)."""
    every = sorted(expected)
    kind_of = {r: e[0] for r, e in expected.items()}
    runs = {r["run_id"]: r for r in sql_json(db, "SELECT run_id, status, result, error, error_kind, final_step, "
                                                 "generation, parent_run_id, parent_generation, parent_step, "
                                                 "child_key FROM run")}
    attempts = sql_json(db, "SELECT run_id, generation, step, attempt, result, http_status, error FROM step_attempt "
                            "ORDER BY id")
    callbacks = sql_json(db, "SELECT run_id, generation, status, attempt FROM callback")
    dead = sql_json(db, "SELECT kind, run_id, step, attempts, last_error FROM dead_letter")

    # Submitted, lost, terminal.
    by_status = collections.Counter(runs[r]["status"] for r in every if r in runs and kind_of[r] == "chaos")
    by_kind = collections.defaultdict(collections.Counter)      # kind -> status -> runs
    for r in every:
        by_kind[kind_of[r]][runs[r]["status"] if r in runs else "missing"] += 1
    missing = [r for r in every if r not in runs]
    not_terminal = [r for r in every if r in runs and runs[r]["status"] not in TERMINAL]
    extra = sorted(set(runs) - set(every))
    lost = missing + not_terminal + sorted(sub.failed)

    # Outcomes.
    mismatches = []
    expected_by_status = collections.Counter()
    for rid in every:
        kind, st, result, error, final_step, _ = expected[rid]
        if kind == "chaos":
            expected_by_status[st] += 1
        r = runs.get(rid)
        if r is None:
            continue
        got = (r["status"], r["result"], r["error"] if st != "succeeded" else None, r["final_step"], r["generation"])
        want = (st, result, error, final_step, 1)
        if got != want:
            mismatches.append((rid, "want %r got %r" % (want, got)))

    # History: per run and generation, steps 0..final_step without gaps;
    # attempts 1..k per step; one settling result per step, as its last attempt
    # (harness.step_history_problems); and that result the expected one.
    hist, hp = step_history_problems({rid: runs[rid] for rid in every if rid in runs}, attempts)
    dup_attempts, noncontiguous, attempt_gaps, settled_twice, after_settle = (
        hp["duplicate_attempts"], hp["noncontiguous"], hp["attempt_gaps"], hp["settled_twice"],
        hp["after_settle"])
    results = collections.Counter(a["result"] for a in attempts)
    wrong_settle = []
    for rid in every:
        if rid not in runs or sorted(g for (x, g) in hist if x == rid) != [1]:
            continue
        for n, rows in sorted(hist[(rid, 1)].items()):
            s = [a for a in rows if a["result"] in SETTLING_RESULTS]
            settles = expected[rid][5]
            want = settles[n] if n < len(settles) else "(no such step)"
            if [a["result"] for a in s] != [want]:
                wrong_settle.append((rid, n, [(a["attempt"], a["result"]) for a in rows]))

    # Async runs: each ended with the completion the completer gave, on an
    # attempt it completed (a 200, or already_completed after a lost answer).
    with completer.cond:
        landed = {k: list(v) for k, v in completer.landed.items()}
        c_stats = dict(completer.stats)
        c_problems = list(completer.problems)
    async_runs = [r for r in every if kind_of[r] == "async"]
    async_not_landed = []
    for rid in async_runs:
        done = [a["attempt"] for a in hist[(rid, 1)].get(0, []) if a["result"] == "succeed"]
        if not done or done[0] not in [att for att, _ in landed.get(rid, [])]:
            async_not_landed.append((rid, "settled attempts %r, completer landed %r" % (done, landed.get(rid))))
    pending_timeouts = collections.Counter(
        a["error"] for a in attempts if kind_of.get(a["run_id"]) == "async"
        and a["error"] in ("heartbeat timeout", "pending timeout"))

    # Parent runs: the children the database holds and the API lists are
    # exactly those the parent's step 0 asked for, each succeeded once with
    # the value derived from its input.
    children_db = collections.defaultdict(list)
    for r in runs.values():
        if r["parent_run_id"]:
            children_db[r["parent_run_id"]].append(
                (r["child_key"], r["run_id"], r["parent_generation"], r["parent_step"]))
    parents = [r for r in every if kind_of[r] == "parent"]
    children_db_wrong, children_api_wrong = [], []
    for prid in parents:
        kids = policy.children_of(prid)
        if sorted(children_db.get(prid, [])) != [(k, cid, 1, 0) for k, cid, _, _ in kids]:
            children_db_wrong.append((prid, sorted(children_db.get(prid, []))))
        got = listings.get(prid)
        want = [(cid, "succeeded", res, {"run_id": prid, "generation": 1, "step": 0, "key": k}, CHILD_WORKFLOW)
                for k, cid, _, res in kids]
        if not isinstance(got, list) or \
                [(c.get("run_id"), c.get("status"), c.get("result"), c.get("parent"), c.get("workflow"))
                 for c in got] != want:
            children_api_wrong.append((prid, got if not isinstance(got, list) else
                                       [(c.get("run_id"), c.get("status"), c.get("result"), c.get("parent"))
                                        for c in got]))
    children_of_others = sorted(p for p in children_db if p not in parents)

    # Callbacks: every run acknowledged with its status; one termination.
    with hook.lock:
        acked = {k: list(v) for k, v in hook.cb_acked.items()}
        received = {k: list(v) for k, v in hook.cb_received.items()}
        deliveries = dict(hook.deliveries)
        kinds = dict(hook.kinds)
        hang_ends = dict(hook.hang_ends)
        bad_payloads = list(hook.bad_payloads)
        bad_children = list(hook.bad_children)
        held_calls = [dict(c) for c in hook.held_calls]
        unexpected = list(hook.unexpected)
    cb_missing, cb_wrong, cb_two_terminations = [], [], []
    cb_dups = 0
    for rid in every:
        got = acked.get(rid, [])
        if not got:
            cb_missing.append(rid)
            continue
        cb_dups += len(got) - 1
        _, st, result, error, final_step, _ = expected[rid]
        for b in received.get(rid, []):
            if (b.get("status"), b.get("result"), b.get("final_step"), b.get("generation")) != \
                    (st, result, final_step, 1) or (st != "succeeded" and b.get("error") != error):
                cb_wrong.append((rid, b))
        if len({(b.get("status"), b.get("finished_at")) for b in received.get(rid, [])}) > 1:
            cb_two_terminations.append((rid, [(b.get("status"), b.get("finished_at")) for b in received[rid]]))
    cb_rows = collections.Counter(c["run_id"] for c in callbacks)
    cb_rows_bad = [(r, n) for r, n in cb_rows.items() if n != 1] + [(r, 0) for r in every if r not in cb_rows]
    cb_status = collections.Counter(c["status"] for c in callbacks)
    cb_unknown = sorted(set(received) - set(every))
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
                policy.step_action(a["run_id"], a["step"], a["attempt"]) != "answer" or \
                a["error"] in ("heartbeat timeout", "pending timeout"):   # counted with the async runs
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
    sub_kinds = collections.Counter(sub.specs[r].kind for r in submitted)
    got_kinds = (sub_kinds["chaos"], sub_kinds["async"], sub_kinds["parent"])
    n_children = sum(1 for r in every if kind_of[r] == "child")

    def stat(*names):
        return " / ".join(str(c_stats.get(n, 0)) for n in names)
    rows = [
        ("runs submitted (confirmed): chaos / async / parent", "%d / %d / %d" % got_kinds, "= %d / %d / %d" % wanted),
        ("child runs the parents start (2-3 each)", n_children, "-"),
        ("runs given up on submission", len(sub.failed), "0"),
        ("submission retries (service/db down)", sub.retries, "-"),
        ("deliberate duplicate submissions answered 200 newly_submitted=false", sub.dup_answers, "-"),
        ("duplicate submissions answered otherwise", len(sub.dup_wrong), "0"),
        ("runs terminal (all kinds, children included)", len(every) - len(missing) - len(not_terminal),
         "= %d" % len(every)),
        ("  chaos runs succeeded", by_status.get("succeeded", 0), "= %d expected" % expected_by_status["succeeded"]),
        ("  chaos runs failed", by_status.get("failed", 0), "= %d expected" % expected_by_status["failed"]),
        ("  chaos runs cancelled", by_status.get("cancelled", 0), "= %d expected" % expected_by_status["cancelled"]),
        ("  async runs by status", dict(by_kind["async"]), "all succeeded"),
        ("  parent runs by status", dict(by_kind["parent"]), "all succeeded"),
        ("  child runs by status", dict(by_kind["child"]), "all succeeded"),
        ("expected outcome matches", len(every) - len(mismatches) - len(missing), "= %d" % len(every)),
        ("expected outcome mismatches", len(mismatches), "0"),
        ("runs lost (missing, not terminal or never accepted)", len(lost), "0"),
        ("runs in the database nobody submitted or started", len(extra), "0"),
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
        ("async: pending answers / heartbeats 200 / completions 200",
         stat("pending answers", "heartbeat 200", "complete 200"), "-"),
        ("async: calls retried on another instance (heartbeat / complete)",
         stat("heartbeat retried on another instance", "complete retried on another instance"), "-"),
        ("async: no answer (instance down) / 503 (heartbeat, complete)",
         stat("heartbeat: no answer (instance down)", "heartbeat: 503", "complete: no answer (instance down)",
              "complete: 503"), "-"),
        ("async: 409 stale_attempt (heartbeat / complete)",
         stat("heartbeat 409 stale_attempt", "complete 409 stale_attempt"), "-"),
        ("  then the newer attempt's job brought forward / none waiting (done, or not answered yet)",
         stat("stale_attempt: newer attempt's job brought forward", "stale_attempt: no newer job waiting"),
         "-"),
        ("async: calls held while their instance was SIGKILLed", "%d %s" % (
            len(held_calls), [(c["rid"], c["attempt"], c["ended"]) for c in held_calls]), "= SIGKILLs"),
        ("async: jobs completed only after a newer attempt came (stalled or killed) / met 409 stale_attempt",
         stat("jobs that must meet stale_attempt", "jobs that met stale_attempt as they must"), "equal"),
        ("async: 409 already_completed (heartbeat / complete)",
         stat("heartbeat 409 already_completed", "complete 409 already_completed"), "-"),
        ("async: pending steps timed out (retried as new attempts)", dict(pending_timeouts), "-"),
        ("async: runs not settled by a completion the completer gave", len(async_not_landed), "0"),
        ("async: completer problems (unexpected answers, given up)", len(c_problems), "0"),
        ("children: parents whose child runs in the database differ", len(children_db_wrong), "0"),
        ("children: parents whose GET /v1/runs/{id}/children differs", len(children_api_wrong), "0"),
        ("children: parent step-1 requests with the wrong children", len(bad_children), "0"),
        ("children: child runs of runs that are not parent runs", len(children_of_others), "0"),
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

    fails.check(got_kinds == wanted, "runs confirmed (chaos, async, parent) %r of %r" % (got_kinds, wanted))
    fails.check(not async_not_landed, "async runs not settled by a completion: %d" % len(async_not_landed)) or \
        show("not settled by a completion", async_not_landed)
    fails.check(not c_problems, "completer problems: %d" % len(c_problems)) or show("completer problem", c_problems)
    fails.check(not children_db_wrong, "parents with the wrong child runs: %d" % len(children_db_wrong)) or \
        show("child runs in the database", children_db_wrong)
    fails.check(not children_api_wrong, "parents whose children listing is wrong: %d" % len(children_api_wrong)) or \
        show("GET children", children_api_wrong)
    fails.check(not bad_children, "parent step-1 requests with the wrong children: %d" % len(bad_children)) or \
        show("wrong children in a step request", bad_children)
    fails.check(not children_of_others, "child runs of runs that are not parents: %r" % children_of_others[:5])
    fails.check(c_stats.get("pending answers", 0) > 0 and c_stats.get("complete 200", 0) > 0,
                "no async step was answered pending and completed: %r" % c_stats)
    fails.check(len(held_calls) == kills, "async calls held at the SIGKILLs: %d of %d" % (len(held_calls), kills))
    fails.check(c_stats.get("jobs that must meet stale_attempt", 0) ==
                c_stats.get("jobs that met stale_attempt as they must", 0) > 0,
                "completions of stalled or killed attempts that met 409 stale_attempt: %s"
                % stat("jobs that must meet stale_attempt", "jobs that met stale_attempt as they must"))
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
    completer = resources.get("completer")
    if completer is not None:
        completer.stop()
    for name in ("svc", "svc_b"):
        svc = resources.get(name)
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
    log("mode %s: %d runs x %d steps (+ %d async runs, %d parent runs with 2-3 children each), 2 instances, "
        "%d SIGKILL, %d PostgreSQL restart, webhook %d%% 500 / %d%% hang "
        "(timeout_ms %d) / %d%% reset, verdicts %d%% fail / %d%% cancel, callbacks %d%% 500; seed %s"
        % ((args.mode, cfg["runs"], STEPS) + added_runs(cfg) +
           (nkills, sum(1 for _, e in cfg["events"] if e == "pg"),
            P_500 * 100, P_HANG * 100, TIMEOUT_MS, P_RESET * 100, P_VERDICT_FAIL * 100, P_VERDICT_CANCEL * 100,
            P_CALLBACK_500 * 100, seed)))
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
