"""Issue 12, item 3: the races ThreadSanitizer found, end to end.

The long-poll race: a request that armed a waiter and then answered at once
(its re-read found the run terminal) withdrew the waiter while the listener
thread was firing and freeing it: a use after free, or the wrong waiter
unlinked. The stress below makes that moment as common as a black-box test
can: per run, hundreds of long-polls parked on it (so that the listener has a
long list to fire when it ends) and clients whose polls of a few milliseconds
time out, re-arm and re-read continuously while it terminates. On the old
code ThreadSanitizer reported the use after free in about one run of this
test in three; the certain proof is tests/unit/test_longpoll.c, which hits
the same code thousands of times a second (ASan in `make unit`, TSan in
`make tsan-test`).

The pool race: db_pool_acquire stored a newly opened connection in its slot
outside the pool's mutex while db_pool_release read the slots under it. The
test below builds the moment deterministically: a request opens a slot while
its connect is held back, and another request opens a higher slot and gives
it back meanwhile (reading the first slot before it is stored).

Both run in `make tsan-test` (build/tsan/hookflow, halt_on_error) and in the
integration suite (build/asan/hookflow): a report aborts the process, and
every test here also fails on a report in the log."""

import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from harness import PG_BIN, Reply, wait_until
from helpers_issue4 import read_response

SANITIZER_MARKS = ("ThreadSanitizer", "AddressSanitizer", "LeakSanitizer", "runtime error:")


def _assert_clean(svc):
    assert svc.running(), "hookflow died: %s\n%s" % (svc.state(), svc.log_tail(80))
    log = svc.log_text()
    found = [m for m in SANITIZER_MARKS if m in log]
    assert not found, "sanitizer report in the log (%s):\n%s" % (found, svc.log_tail(120))


class _Client:
    """A keep-alive HTTP/1.1 connection to the service (one per thread)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def get(self, path, timeout=30):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()


ROUNDS = 40          # runs, one after the other
PARKED = 200         # long-polls parked on each run (suspended until it ends)
SPINNERS = 16        # clients polling each run with waits of a few ms
WAITS_MS = (1, 2, 3, 5, 8)



def _park(port, rid, n):
    """`n` connections each sending one long-poll on `rid` (answered when the
    run ends); returns the sockets."""
    socks = []
    req = ("GET /v1/runs/%s?wait_ms=60000 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Connection: close\r\n\r\n" % (urllib.parse.quote(rid), port)).encode()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(req)
        socks.append(s)
    return socks


def _answer(sock):
    r = read_response(sock, timeout=60)
    sock.close()
    return r


@pytest.mark.serial
@pytest.mark.service_env(HOOKFLOW_HTTP_THREADS="4", HOOKFLOW_LOG_LEVEL="info",
                         HOOKFLOW_MAX_CONNS_PER_IP="0")
def test_longpolls_on_runs_that_terminate_as_the_polls_time_out(service, api, webhook):
    """Per run: PARKED long-polls suspended on it (so that the listener has
    hundreds of waiters to fire and free when it ends) and SPINNERS clients
    whose polls of 1 to 8 ms time out, re-arm and re-read continuously; then
    the run terminates. Every answer is the run, the last one terminal."""
    gate = {}
    lock = threading.Lock()

    def step(req):
        with lock:
            ev = gate.setdefault(req.run_id, threading.Event())
        ev.wait(30)
        return Reply(200, {"outcome": "succeed", "result": req.run_id})

    webhook.route("/steps", step)
    api.put_workflow("lp", webhook.url(), timeout_ms=40000)
    errors = []
    polls = [0]

    def spinner(rid, k, spins, stop):
        c = _Client(service.port)
        i = k
        try:
            while True:
                wait = WAITS_MS[i % len(WAITS_MS)]
                i += 1
                status, raw = c.get("/v1/runs/%s?wait_ms=%d" % (urllib.parse.quote(rid), wait))
                with lock:
                    polls[0] += 1
                    spins[k] += 1
                if status != 200:
                    errors.append("GET %s answered %d: %.200r" % (rid, status, raw))
                    return
                body = json.loads(raw)
                if body.get("run_id") != rid:
                    errors.append("GET %s answered another run: %.200r" % (rid, raw))
                    return
                if body["status"] == "succeeded":
                    if body.get("result") != rid:
                        errors.append("run %s result %r" % (rid, body.get("result")))
                    return
                if body["status"] not in ("pending", "running"):
                    errors.append("run %s status %r" % (rid, body["status"]))
                    return
                if stop.is_set():
                    errors.append("run %s: no terminal answer" % rid)
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("GET %s failed: %r" % (rid, e))
        finally:
            c.close()

    t0 = time.monotonic()
    for n in range(ROUNDS):
        rid = "lp-%d" % n
        with lock:
            ev = gate.setdefault(rid, threading.Event())
        api.submit("lp", run_id=rid)
        webhook.wait_requests(1, run_id=rid)
        parked = _park(service.port, rid, PARKED)
        spins = [0] * SPINNERS
        stop = threading.Event()
        threads = [threading.Thread(target=spinner, args=(rid, k, spins, stop), daemon=True)
                   for k in range(SPINNERS)]
        for t in threads:
            t.start()
        # the parked requests were sent before the spinners started: once
        # every spinner has had a few answers, the service has read them
        wait_until(lambda: min(spins) >= 3 or errors, timeout=30, message="spinners on " + rid)
        ev.set()  # the run terminates while every client waits on it
        for t in threads:
            t.join(60)
        stop.set()
        answers = [_answer(s) for s in parked]
        _assert_clean(service)
        assert not any(t.is_alive() for t in threads), "spinners of %s still running" % rid
        assert not errors, errors[:10]
        bad = [r for r in answers if r.status != 200 or json.loads(r.body).get("status") != "succeeded"]
        assert not bad, "%d parked long-polls of %s answered %r" % (len(bad), rid, bad[:3])
    assert api.get("/healthz").status == 200
    _assert_clean(service)
    print("%d spinning polls and %d parked ones on %d runs in %.1fs"
          % (polls[0], ROUNDS * PARKED, ROUNDS, time.monotonic() - t0))





class _StallingProxy:
    """A TCP proxy to PostgreSQL that can hold back the next new connection
    (its client waits in connect) until released."""

    def __init__(self, host, port):
        self.upstream = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.cv = threading.Condition()
        self.stall_next = False
        self.stalled = 0
        self.release = threading.Event()
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with self.cv:
            stall = self.stall_next
            self.stall_next = False
            if stall:
                self.stalled += 1
                self.cv.notify_all()
        if stall:
            self.release.wait(60)
        try:
            u = socket.create_connection(self.upstream)
        except OSError:
            c.close()
            return
        threading.Thread(target=self._pump, args=(u, c), daemon=True).start()
        self._pump(c, u)

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.release.set()
        self.sock.close()


POOL_CLIENTS = 16
POOL_REQUESTS = 10


@pytest.mark.serial
def test_pool_contention_while_connections_are_opened(services, db, pg):
    """The pool opens each connection on first use. One request holds a
    pooled connection (it waits on a row lock another session holds); a
    second one opens the next connection, slowly (its connect is held back);
    a third opens another one and gives it back meanwhile. Then a crowd of
    clients shares the pool, more of them than connections. Every request is
    answered, correctly, the held ones once let go."""
    proxy = _StallingProxy(pg.host, pg.port)
    locker = None
    try:
        # ThreadSanitizer takes every read from a socket as synchronizing
        # with every earlier write to any socket of the process (io_sync=1),
        # which hides this race: the connection opening ends with a read from
        # its database socket. io_sync=0 turns that off for this instance
        # (the ASan build ignores TSAN_OPTIONS).
        tsan = (os.environ.get("TSAN_OPTIONS", "") + " io_sync=0").strip()
        url = "postgresql://%s@127.0.0.1:%d/%s" % (pg.user, proxy.port, db.name)
        svc = services.start(HOOKFLOW_DATABASE_URL=url, HOOKFLOW_DB_POOL="4", HOOKFLOW_HTTP_THREADS="8",
                             HOOKFLOW_LOG_LEVEL="warn", TSAN_OPTIONS=tsan)
        api = svc.api
        api.put_workflow("locked", "http://127.0.0.1:9/locked")
        api.put_workflow("free", "http://127.0.0.1:9/free")
        locker = subprocess.Popen(
            [os.path.join(PG_BIN, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", pg.host,
             "-p", str(pg.port), "-U", pg.user, "-d", db.name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        locker.stdin.write("BEGIN;\nSELECT name FROM workflow WHERE name = 'locked' FOR UPDATE;\n")
        locker.stdin.flush()
        assert locker.stdout.readline().strip() == "locked"
        out = {}

        def call(name, method, path, body=None):
            out[name] = api.request(method, path, json_body=body)

        # 1. holds a connection, waiting on the row lock
        held = threading.Thread(target=call, args=("held", "PUT", "/v1/workflows/locked",
                                                   {"url": "http://127.0.0.1:9/h"}), daemon=True)
        held.start()
        waiting = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND wait_event_type = 'Lock'")
        wait_until(lambda: db.scalar(waiting) == "1", timeout=30, message="a request waiting on the lock")
        # 2. opens the next connection, held back in connect (a libmicrohttpd
        # thread blocked in a request accepts no new connection: each of these
        # requests has a thread of its own)
        with proxy.cv:
            proxy.stall_next = True
        slow = threading.Thread(target=call, args=("slow", "GET", "/v1/workflows/free"), daemon=True)
        slow.start()
        with proxy.cv:
            assert proxy.cv.wait_for(lambda: proxy.stalled == 1, timeout=30), "no connection held back"
        # 3. opens another connection and gives it back meanwhile
        r = api.get("/v1/workflows/free")
        assert r.status == 200 and r.body["url"] == "http://127.0.0.1:9/free", r
        proxy.release.set()
        slow.join(30)
        assert out.get("slow") is not None and out["slow"].status == 200, out.get("slow")
        _assert_clean(svc)

        # 4. a crowd on the pool: more clients than connections
        go = threading.Event()
        ready = threading.Semaphore(0)
        errors = []
        answered = [0]
        lock = threading.Lock()

        def client():
            c = _Client(svc.port)
            try:
                c.get("/healthz")
                ready.release()
                go.wait(10)
                for _ in range(POOL_REQUESTS):
                    status, raw = c.get("/v1/workflows/free")
                    if status != 200 or json.loads(raw).get("url") != "http://127.0.0.1:9/free":
                        errors.append("%d %.200r" % (status, raw))
                        return
                    with lock:
                        answered[0] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
            finally:
                c.close()

        threads = [threading.Thread(target=client, daemon=True) for _ in range(POOL_CLIENTS)]
        for t in threads:
            t.start()
        for _ in threads:
            assert ready.acquire(timeout=30)
        go.set()
        for t in threads:
            t.join(60)
        _assert_clean(svc)
        assert not errors, errors[:5]
        assert answered[0] == POOL_CLIENTS * POOL_REQUESTS
        assert "held" not in out, "the held request answered while the lock was held: %r" % out["held"]
        locker.communicate("COMMIT;\n", timeout=30)
        locker = None
        held.join(30)
        assert out.get("held") is not None and out["held"].status == 200, out.get("held")
        assert api.get("/v1/workflows/locked").body["url"] == "http://127.0.0.1:9/h"
        _assert_clean(svc)
    finally:
        if locker is not None:
            locker.communicate("ROLLBACK;\n", timeout=30)
        proxy.close()
