"""What hookflow does in the moments of a database failover, one piece at a
time on a single PostgreSQL (the whole failover, with a real HA manager, is
tests/ha):

- the server it is connected to turns read-only (SQLSTATE 25006), as
  pg_auto_failover makes the standby it promotes until the old primary is
  known gone: requests are answered 503 `unavailable` (never 500), the
  connections are dropped and made again once the server takes writes
  (target_session_attrs=read-write in the URL);
- the LISTEN connection is lost and comes back: every long-poll is woken to
  read again (a termination may have been missed meanwhile), and one whose run
  has not terminated waits on until it does or until its wait_ms;
- a host of a multi-host URL never answers (it accepts connections and says
  nothing, as a node whose PostgreSQL hangs): without connect_timeout in the
  URL, libpq would wait for it forever; hookflow adds one (db/conninfo.h), so
  each connection moves on to the next host after it."""

import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import types

from harness import Api, Hang, Postgres, Service, StepScript, cont, succeed, wait_until


def test_a_server_turned_read_only_gets_503_then_hookflow_reconnects_when_it_takes_writes(
        hookflow_bin, log_dir, webhook):
    # A cluster of its own: default_transaction_read_only is set for the
    # whole server (ALTER SYSTEM), which would disturb the other tests.
    base = tempfile.mkdtemp(prefix="hookflow-it-ro-")
    pg = Postgres(base)
    svc = None
    try:
        pg.init()
        db = pg.create_database("ro")
        db.url += "?target_session_attrs=read-write&connect_timeout=5"
        svc = Service(hookflow_bin, db, os.path.join(log_dir, "read_only.hookflow.log"),
                      {"HOOKFLOW_POLL_MS": "200"})
        svc.start()
        api = svc.api
        webhook.route("/steps", StepScript({0: cont("a"), 1: succeed("done")}))
        api.put_workflow("wf", webhook.url())
        assert api.wait_terminal(api.submit("wf")["run_id"])["status"] == "succeeded"

        pg.psql("postgres", "ALTER SYSTEM SET default_transaction_read_only = on")
        pg.psql("postgres", "SELECT pg_reload_conf()")
        wait_until(lambda: pg.psql("postgres", "SHOW default_transaction_read_only") == [["on"]], timeout=10)

        # A session applies a reload after its next statement: submissions go
        # on until they are refused, and every answer is 201 or 503.
        answers, acked = [], []

        def submit(into):
            r = api.post("/v1/runs", {"workflow": "wf"})
            into.append((r.status, r.error_code))
            assert (r.status, r.error_code) in ((201, None), (503, "unavailable")), r
            if r.status == 201:
                acked.append(r.body["run_id"])
            return r

        wait_until(lambda: submit(answers).status == 503 or None, timeout=30, interval=0.05,
                   message="a submission refused while read-only")
        for _ in range(5):  # the connections made again find no server that takes writes
            submit(answers)
        assert answers[-5:] == [(503, "unavailable")] * 5, answers
        signal_answer = api.post("/v1/signals/ro-key", {"payload": 1})
        assert (signal_answer.status, signal_answer.error_code) == (503, "unavailable"), signal_answer
        assert "server is read-only, reconnecting" in svc.log_text()

        pg.psql("postgres", "ALTER SYSTEM RESET default_transaction_read_only")
        pg.psql("postgres", "SELECT pg_reload_conf()")
        later = []
        wait_until(lambda: submit(later).status == 201 or None, timeout=30, interval=0.1,
                   message="a submission accepted again")
        # Every run acknowledged, before or after, ends; no other run exists.
        for rid in acked:
            assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"
        assert db.sql("SELECT status, count(*) FROM run GROUP BY status") == [["succeeded", str(len(acked) + 1)]]
        assert svc.stop(signal.SIGTERM) == 0
    finally:
        if svc is not None and svc.running():
            svc.kill()
        pg.destroy()
        shutil.rmtree(base, ignore_errors=True)


def test_a_long_poll_woken_by_a_listen_reconnect_waits_on_until_the_run_ends(services, db, webhook):
    svc = services.start()
    api = svc.api
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed("late"), max_s=60)}))
    api.put_workflow("wf", webhook.url(), timeout_ms=60000)
    rid = api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    out, sent = {}, threading.Event()

    def poll():
        api = Api(svc.base_url, timeout=60)
        sent.set()
        r = api.get("/v1/runs/" + rid, params={"wait_ms": 30000})
        out["answer"] = (time.monotonic(), r.status, r.body)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    assert sent.wait(5)
    assert svc.log_text().count(" listener listening") == 1

    # The LISTEN connection is cut; the listener makes it again a second
    # later (the long-poll is waiting by then), wakes every waiter, then
    # reloads the delivery-token keys.
    db.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
           "WHERE datname = current_database() AND query LIKE 'LISTEN %'")
    wait_until(lambda: svc.log_text().count("delivery-token keys loaded") >= 2, timeout=15,
               message="the listener back and its waiters woken")
    assert "answer" not in out, "the long-poll answered when the LISTEN connection came back: %r" % (out,)

    t_release = time.monotonic()
    release.set()
    t.join(40)
    t_answer, status, body = out["answer"]
    assert status == 200 and body["status"] == "succeeded" and body["result"] == "late", body
    assert t_answer >= t_release


class SilentHost:
    """A TCP port on 127.0.0.1 that accepts every connection and never says
    anything (nor closes it) until close()."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for c in self.accepted:
            c.close()


def test_a_host_that_never_answers_first_in_the_url_delays_each_connection_but_hangs_none(
        hookflow_bin, pg, db, log_dir, webhook):
    silent = SilentHost()
    # No connect_timeout: hookflow's default (5 s per host) applies.
    url = "postgresql://%s@127.0.0.1:%d,127.0.0.1:%d/%s" % (pg.user, silent.port, pg.port, db.name)
    svc = Service(hookflow_bin, types.SimpleNamespace(url=url), os.path.join(log_dir, "silent_host.hookflow.log"),
                  {"HOOKFLOW_WORKERS": "1"})
    try:
        t0 = time.monotonic()
        svc.start(timeout=90)
        ready_after = time.monotonic() - t0
        assert silent.accepted, "the silent host was never tried"
        assert ready_after >= 5, "ready after %.1fs: the silent host did not cost a connect timeout" % ready_after
        webhook.route("/steps", StepScript({0: succeed("through the second host")}))
        svc.api.timeout = 60
        svc.api.put_workflow("wf", webhook.url())
        run = svc.api.wait_terminal(svc.api.submit("wf")["run_id"], timeout=60)
        assert run["status"] == "succeeded" and run["result"] == "through the second host", run
        assert svc.stop(signal.SIGTERM) == 0
    finally:
        if svc.running():
            svc.kill()
        silent.close()


def test_on_sigterm_long_polls_answer_at_once_with_the_run_and_the_group_as_they_stand(services, webhook):
    # The wait ends when the service stops (listener_close_waits), though a
    # fired long-poll otherwise waits again while its run is not terminal.
    from helpers_issue4 import get_group, put_group

    svc = services.start(HOOKFLOW_SHUTDOWN_GRACE_MS="1000")
    webhook.route("/steps", lambda req: Hang(max_s=60))
    svc.api.put_workflow("wf", webhook.url(), timeout_ms=60000)
    rid = svc.api.submit("wf")["run_id"]
    assert put_group(svc.api, "g", "wf", [{"key": "a"}]).status == 201
    webhook.wait_requests(2, path="/steps")
    out, sent = {}, threading.Barrier(3)

    def run_poll():
        api = Api(svc.base_url, timeout=60)
        sent.wait()
        out["run"] = api.get("/v1/runs/" + rid, params={"wait_ms": 50000})

    def group_poll():
        api = Api(svc.base_url, timeout=60)
        sent.wait()
        out["group"] = get_group(api, "g", wait_ms=50000)

    threads = [threading.Thread(target=f, daemon=True) for f in (run_poll, group_poll)]
    for t in threads:
        t.start()
    sent.wait()
    # The waits end after the calls in flight had their grace (1 s: the two
    # long-polls are waiting by then), their steps released, not run.
    t0 = time.monotonic()
    assert svc.stop(signal.SIGTERM, timeout=20) == 0
    for t in threads:
        t.join(10)
    assert time.monotonic() - t0 < 10
    assert out["run"].status == 200 and out["run"].body["status"] == "pending", out["run"]
    assert out["group"].status == 200 and out["group"].body["pending"] == 1, out["group"]
