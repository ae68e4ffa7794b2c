"""A full scenario against build/hookflow running under valgrind memcheck:
workflows, a 3-step run with a delay, retries, a dead letter, a cancel of an
in-flight call, a signal wait, memo, KV, a group, a long-poll, then SIGTERM.
Passes when every run ends as expected and the process exits 0 (memcheck
turns any error or definite leak into exit code 42)."""
import os
import signal
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import harness as h  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    base = tempfile.mkdtemp(prefix="hookflow-valgrind-")
    os.chmod(base, 0o755)
    pg = h.Postgres(base)
    pg.init()  # also starts it
    hook = h.Webhook()
    svc = None
    try:
        db = pg.create_database("vg")
        log = os.path.join(base, "service.log")
        env = {"HOOKFLOW_LEASE_MS": "3000", "HOOKFLOW_LOG_LEVEL": "info",
               "HOOKFLOW_VALGRIND_LOG": os.path.join(base, "valgrind.log")}
        svc = h.Service(os.path.join(ROOT, "tests/valgrind/hookflow-under-valgrind"), db, log, env)
        svc.start(timeout=120)
        api = svc.api
        attempts = {}
        release = threading.Event()

        def steps(req):
            rid, step = req.run_id, req.step
            attempts[(rid, step)] = attempts.get((rid, step), 0) + 1
            if rid.startswith("flaky") and attempts[(rid, step)] == 1:
                return h.Reply(503, body="try later", headers={"Retry-After": "0"})
            if rid.startswith("dead"):
                return h.Reply(500, body="always broken")
            if rid.startswith("hang"):
                return h.Hang(release=release)
            if rid.startswith("wait") and step == 0:
                return h.Reply(json_body={"outcome": "continue", "payload": 1,
                                          "wait_for_signal": {"correlation_key": "vg:" + rid,
                                                              "timeout_ms": 60000}})
            if step < 2:
                return h.Reply(json_body={"outcome": "continue", "payload": {"n": step + 1},
                                          "delay_ms": 100 if step == 1 else 0,
                                          "kv": {"put": {"vg/" + rid: step}}})
            return h.Reply(json_body={"outcome": "succeed", "result": {"done": rid}})

        hook.route("/steps", steps)
        hook.route("/done", lambda req: h.Reply(200))
        api.put_workflow("vg", hook.url("/steps"), callback_url=hook.url("/done"),
                         secret=h.new_secret(), timeout_ms=20000,
                         retry_backoff={"base_ms": 10, "max_ms": 50})
        for rid in ("ok1", "ok2", "flaky1", "dead1", "hang1", "wait1"):
            api.submit("vg", run_id=rid, input={"rid": rid})
        g = api.put("/v1/groups/vg-group", {"workflow": "vg", "members": [{"key": "a"}, {"key": "b"}]})
        assert g.status == 201, g.body
        assert api.put("/v1/kv/vg%2Fdirect", {"value": [1, 2, 3]}).status == 200

        hook.wait_requests(1, run_id="hang1", timeout=60)
        assert api.post("/v1/runs/hang1/cancel").status in (200, 202)
        hook.wait_requests(1, run_id="wait1", timeout=60)
        api.wait_status("wait1", ["waiting"], timeout=60)
        assert api.post("/v1/signals/vg:wait1", {"payload": {"ok": True}}).body["outcome"] == "delivered"

        expect = {"ok1": "succeeded", "ok2": "succeeded", "flaky1": "succeeded", "dead1": "failed",
                  "hang1": "cancelled", "wait1": "succeeded"}
        for rid, status in expect.items():
            run = api.wait_terminal(rid, timeout=120)
            assert run["status"] == status, (rid, run)
        gr = api.get("/v1/groups/vg-group", params={"wait_ms": 60000}).body
        assert gr["succeeded"] == 2, gr
        assert api.get("/v1/kv", params={"prefix": "vg/"}).status == 200
        assert api.get("/v1/dead-letters").status == 200
        assert api.get("/metrics").status == 200
        release.set()

        svc.send_signal(signal.SIGTERM)
        code = svc.wait_exit(120)
        report = open(env["HOOKFLOW_VALGRIND_LOG"]).read() if os.path.exists(env["HOOKFLOW_VALGRIND_LOG"]) else ""
        if code != 0:
            print(report[-8000:])
            print(svc.log_tail(80))
            print("valgrind: 0 passed, 1 failed (exit code %s)" % code)
            return 1
        print("valgrind: 1 passed, 0 failed (no memory errors, no definite leaks)")
        return 0
    finally:
        if svc is not None and svc.running():
            svc.kill()
        hook.close()
        pg.destroy()


if __name__ == "__main__":
    sys.exit(main())
