"""Crashes and shutdowns (the settlement table of docs/webhook-protocol.md;
README, "Cancel, leases and shutdown"): kill -9 mid-step with lease expiry and
redelivery, graceful SIGTERM with calls in flight, the last attempt's lease
expiring, and a cancel crossing instances."""

import signal
import threading
import time

from harness import Hang, Reply, StepScript, cont, succeed, wait_until
from kvcheck import step_dead_letters

LEASE = "1500"


def test_run_finishes_after_kill_9_mid_step(services, webhook):
    svc = services.start(HOOKFLOW_LEASE_MS=LEASE)
    api = svc.api

    def step0(req):
        return Hang(max_s=60) if req.attempt == 1 else cont("after crash")

    webhook.route("/steps", StepScript({0: step0, 1: succeed("done")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, timeout_ms=30000)
    rid = api.submit("wf", input={"k": 1})["run_id"]
    (held,) = webhook.wait_requests(1, run_id=rid)

    assert svc.kill() == -signal.SIGKILL
    assert held.disconnected.wait(5), "the killed process's connection stayed open"
    svc.restart(sig=None, HOOKFLOW_LEASE_MS=LEASE)

    run = api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded", run
    assert run["result"] == "done"
    reqs = webhook.requests(run_id=rid)
    assert [(r.step, r.attempt) for r in reqs] == [(0, 1), (0, 2), (1, 1)]
    assert reqs[1].json["payload"] == {"k": 1}
    assert reqs[0].headers["webhook-id"] == reqs[1].headers["webhook-id"]
    steps = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [
        (0, 1, "lease_expired"), (0, 2, "continue"), (1, 1, "succeed")]


def test_another_instance_takes_over_after_kill_9(services, webhook):
    a = services.start(HOOKFLOW_LEASE_MS=LEASE)
    b = services.new(HOOKFLOW_LEASE_MS=LEASE)
    webhook.route("/steps", StepScript({0: lambda r: Hang(max_s=60) if r.attempt == 1 else succeed("b")}))
    a.api.put_workflow("wf", webhook.url(), max_attempts=3, timeout_ms=30000)
    rid = a.api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    b.start()  # after the claim: a holds the step
    a.kill()
    run = b.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded" and run["result"] == "b"


def test_lease_expiry_on_last_attempt_fails_run_and_sends_callback(services, db, webhook):
    svc = services.start(HOOKFLOW_LEASE_MS=LEASE)
    api = svc.api
    webhook.route("/steps", StepScript({0: Hang(max_s=60)}))
    webhook.route("/cb", lambda req: Reply(200))
    api.put_workflow("wf", webhook.url(), max_attempts=1, timeout_ms=30000, callback_url=webhook.url("/cb"))
    rid = api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    svc.kill()
    svc.restart(sig=None)

    run = api.wait_terminal(rid, timeout=30)
    assert run["status"] == "failed"
    assert "lease expired" in run["error"]
    assert [s["result"] for s in api.steps(rid)] == ["lease_expired"]
    assert len(webhook.requests(path="/steps", run_id=rid)) == 1
    (dl,) = step_dead_letters(api, db, rid)
    assert "lease expired" in (dl["last_error"] or "")
    (cb,) = webhook.wait_requests(1, path="/cb", run_id=rid, timeout=15)
    assert cb.json["status"] == "failed" and "lease expired" in cb.json["error"]


def test_step_claimed_after_a_cancel_settles_cancelled_without_a_call(services, webhook):
    # a holds the call and dies; the cancel is recorded through b while nobody
    # can abort the call; when the lease expires the step must end cancelled
    # without the webhook being called again.
    a = services.start(HOOKFLOW_LEASE_MS=LEASE)
    b = services.new(HOOKFLOW_LEASE_MS=LEASE)
    webhook.route("/steps", StepScript({0: lambda r: Hang(max_s=60) if r.attempt == 1 else succeed("redelivered")}))
    a.api.put_workflow("wf", webhook.url(), max_attempts=3, timeout_ms=30000)
    rid = a.api.submit("wf")["run_id"]
    (held,) = webhook.wait_requests(1, run_id=rid)
    b.start()
    a.kill()
    assert held.disconnected.wait(5)
    r = b.api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 202 and r.body["status"] == "cancelling", r
    run = b.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "cancelled" and run["error"] is None, run
    assert len(webhook.requests(run_id=rid)) == 1, "the webhook was called after the cancel"
    assert b.api.steps(rid)[-1]["result"] == "cancelled"


def test_sigterm_lets_inflight_calls_finish_and_exits_0(services, webhook):
    grace_ms = 5000
    svc = services.start(HOOKFLOW_SHUTDOWN_GRACE_MS=str(grace_ms), HOOKFLOW_LEASE_MS=LEASE)
    api = svc.api
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "continue", "payload": "s1"}, delay=0.7),
                                        1: succeed("done")}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rids = [api.submit("wf")["run_id"] for _ in range(4)]
    webhook.wait_for(lambda reqs: len([r for r in reqs if r.step == 0]) >= 4, message="4 step-0 calls in flight")

    t0 = time.monotonic()
    svc.send_signal(signal.SIGTERM)
    code = svc.wait_exit(grace_ms / 1000 + 5)
    took = time.monotonic() - t0
    assert code == 0, "exit code %r after SIGTERM" % (code,)
    assert took <= grace_ms / 1000 + 2, "took %.2fs to exit with a %d ms grace" % (took, grace_ms)
    assert all(r.answered_at is not None for r in webhook.requests() if r.step == 0)

    svc.start()
    for rid in rids:
        run = api.wait_terminal(rid, timeout=30)
        assert run["status"] == "succeeded", run
        assert [r.attempt for r in webhook.requests(run_id=rid, step=0)] == [1], \
            "a call that finished within the grace was settled, not delivered again"
        assert [(s["step"], s["result"]) for s in api.steps(rid)] == [(0, "continue"), (1, "succeed")]


def test_sigterm_aborts_calls_past_the_grace_and_nothing_is_lost(services, webhook):
    grace_ms = 1500
    svc = services.start(HOOKFLOW_SHUTDOWN_GRACE_MS=str(grace_ms), HOOKFLOW_LEASE_MS=LEASE)
    api = svc.api
    phase = {"hang": True}
    webhook.route("/steps", StepScript({0: lambda r: Hang(max_s=60) if phase["hang"] else cont("again"),
                                        1: succeed("done")}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000, max_attempts=3)
    rids = [api.submit("wf")["run_id"] for _ in range(3)]
    held = webhook.wait_requests(3, step=0)

    t0 = time.monotonic()
    svc.send_signal(signal.SIGTERM)
    code = svc.wait_exit(grace_ms / 1000 + 5)
    took = time.monotonic() - t0
    assert code == 0, "exit code %r after SIGTERM" % (code,)
    assert took <= grace_ms / 1000 + 2, "took %.2fs to exit with a %d ms grace" % (took, grace_ms)
    for req in held:
        assert req.disconnected.wait(2), "in-flight call still open after exit"

    phase["hang"] = False
    svc.start()
    for rid in rids:
        run = api.wait_terminal(rid, timeout=30)
        assert run["status"] == "succeeded", run
        assert run["result"] == "done"
        assert len(webhook.requests(run_id=rid, step=0)) >= 2, "the interrupted step was delivered again"


def test_sigterm_with_no_work_exits_0_promptly(services):
    svc = services.start(HOOKFLOW_SHUTDOWN_GRACE_MS="10000")
    t0 = time.monotonic()
    assert svc.stop(signal.SIGTERM, timeout=10) == 0
    assert time.monotonic() - t0 < 5


def test_cancel_sent_to_another_instance_aborts_the_call(services, webhook):
    a = services.start()
    webhook.route("/steps", StepScript({0: Hang(max_s=30)}))
    a.api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rid = a.api.submit("wf")["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid)
    b = services.start()  # started after the claim: a holds the call
    t0 = time.monotonic()
    r = b.api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 202, r
    assert req.disconnected.wait(5), "the holding instance did not abort the call"
    assert req.disconnected_at - t0 <= 1.0, "aborted %.3fs after the cancel" % (req.disconnected_at - t0)
    assert b.api.wait_terminal(rid)["status"] == "cancelled"


def test_long_poll_on_one_instance_sees_termination_on_another(services, webhook):
    a = services.start()
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed("x"), max_s=30)}))
    a.api.put_workflow("wf", webhook.url())
    rid = a.api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    b = services.start()
    out = {}

    def poll():
        out["r"] = b.api.get("/v1/runs/" + rid, params={"wait_ms": 20000}, timeout=40)
        out["t"] = time.monotonic()

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    release.set()
    released = time.monotonic()
    t.join(30)
    assert out["r"].status == 200 and out["r"].body["status"] == "succeeded"
    assert out["t"] - released < 5.0


def test_service_recovers_after_postgres_restart(services, pg, webhook):
    svc = services.start()
    webhook.route("/steps", StepScript({0: cont(1), 1: succeed("after restart")}))
    svc.api.put_workflow("wf", webhook.url())
    assert svc.api.wait_terminal(svc.api.submit("wf")["run_id"])["status"] == "succeeded"
    pg.restart()
    wait_until(lambda: svc.api.get("/readyz").status == 200, timeout=30, interval=0.1,
               message="readyz after postgres restart")
    rid = wait_until(lambda: (lambda r: r.body["run_id"] if r.status == 201 else None)(
        svc.api.post("/v1/runs", {"workflow": "wf"})), timeout=30, interval=0.2, message="submit after restart")
    run = svc.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded" and run["result"] == "after restart"


def test_the_first_submission_after_a_postgres_restart_is_accepted(services, pg, webhook):
    """The submitter's own connection was closed by the restart while it sat
    idle: it notices before its next batch and connects again, so the first
    submission once PostgreSQL is back gets 201, not a 503 for a connection
    that was already gone."""
    svc = services.start()
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    svc.api.put_workflow("wf", webhook.url())
    assert svc.api.wait_terminal(svc.api.submit("wf", run_id="before")["run_id"])["status"] == "succeeded"
    pg.restart()
    wait_until(lambda: svc.api.get("/readyz").status == 200, timeout=30, interval=0.1,
               message="readyz after postgres restart")
    r = svc.api.post("/v1/runs", {"workflow": "wf", "run_id": "after"})
    assert r.status == 201, r
    assert svc.api.wait_terminal("after", timeout=30)["status"] == "succeeded"
