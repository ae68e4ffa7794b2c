"""Step-output replay (workflow "step_output_replay": true; the notes of the
settlement table in docs/webhook-protocol.md): the validated outcome of a 2xx
answer is stored before its settlement; if the service dies in between, the
redelivered step is settled from the stored answer without calling the webhook
again, with delays and signal timeouts shortened by the time already passed.
Without replay the webhook is called again.

Two ways to die between the answer and the settlement:
- HOOKFLOW_TEST_FAULT=exit_before_settle: the process _exit(99)s right after
  storing replay records, before committing the settlements;
- a psql session holds the run's row lock, so the settlement blocks after
  the answer was received; the test kills -9 the service, terminates the
  blocked statement and lets the lock go (this works with replay off too)."""

import threading
import time

from harness import Hang, Reply, StepScript, cont, iso_to_epoch, sql_quote, succeed, wait_until
from helpers_issue3 import RowLock, kv_value, wait_log, wait_signal

LEASE = "1500"
DELAY_MS = 4000
MARGIN = 1.0


def _pause_until(t):
    """Lets time pass until monotonic time `t`: the replay must shorten the
    delay by time that really elapsed, so this is the behaviour under test,
    not a wait for a condition."""
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def _crash_on_first_answer(services, db, webhook, script, replay=True, before_start=None):
    """Starts hookflow with the exit_before_settle fault, runs `script` until
    the process exits 99 after storing the step-0 replay record; returns
    (service, run_id, step-0 request)."""
    svc = services.start(HOOKFLOW_LEASE_MS=LEASE, HOOKFLOW_TEST_FAULT="exit_before_settle")
    # Step 0 answers only once the submission's own answer has arrived: the
    # process exits at that answer's settlement, and the run can reach it
    # before the submitting request has been answered.
    submitted = threading.Event()
    first = script[0]
    script = dict(script)
    script[0] = lambda req: Hang(release=submitted, then=first(req) if callable(first) else first,
                                 max_s=30)
    webhook.route("/steps", StepScript(script))
    if before_start is not None:
        before_start(svc.api)
    svc.api.put_workflow("wf", webhook.url(), step_output_replay=replay, max_attempts=3, timeout_ms=30000)
    rid = svc.api.submit("wf", input={"order": 7})["run_id"]
    submitted.set()
    code = svc.wait_exit(20)
    assert code == 99, "hookflow should _exit(99) before settling (exit %r); log:\n%s" % (code, svc.log_tail(40))
    (s0,) = webhook.requests(run_id=rid, step=0)
    assert s0.answered_at is not None
    # the answer is stored, the settlement is not
    assert db.scalar("SELECT count(*) FROM step_output WHERE run_id = %s AND step = 0" % sql_quote(rid)) == "1"
    assert db.scalar("SELECT status || ':' || step FROM run WHERE run_id = %s" % sql_quote(rid)) == "running:0"
    assert db.scalar("SELECT count(*) FROM step_attempt WHERE run_id = %s" % sql_quote(rid)) == "0"
    return svc, rid, s0


def test_replay_settles_the_redelivered_step_from_the_stored_answer_with_the_delay_shortened(services, db, webhook):
    svc, rid, s0 = _crash_on_first_answer(services, db, webhook, {
        0: cont({"charged": True}, delay_ms=DELAY_MS, kv={"put": {"app/replayed": {"once": True}}}),
        1: lambda req: succeed({"got": req.json["payload"]}),
    })
    assert db.scalar("SELECT count(*) FROM kv WHERE key = 'app/replayed'") == "0"

    _pause_until(s0.answered_at + 2.0)
    restart_t = time.monotonic()
    svc.restart(sig=None, HOOKFLOW_TEST_FAULT=None)
    run = svc.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"got": {"charged": True}}

    assert len(webhook.requests(run_id=rid, step=0)) == 1, "the webhook was called again for the replayed step"
    (s1,) = webhook.requests(run_id=rid, step=1)
    after_answer = s1.time - s0.answered_at
    after_restart = s1.time - restart_t
    assert after_answer >= DELAY_MS / 1000 - 0.05, \
        "step 1 came %.2fs after step 0 answered with a %d ms delay" % (after_answer, DELAY_MS)
    assert after_restart < DELAY_MS / 1000 - MARGIN, (
        "step 1 came %.2fs after the restart (%.2fs after the answer): the delay was not shortened by "
        "the time already passed" % (after_restart, after_answer))
    assert kv_value(svc.api, "app/replayed") == {"once": True}, "the replayed outcome's kv effects apply"
    assert [(s["step"], s["attempt"], s["result"]) for s in svc.api.steps(rid)] == [
        (0, 1, "lease_expired"), (0, 2, "continue"), (1, 1, "succeed")]
    assert "replaying stored step outcome" in svc.log_text()


def test_replay_shortens_the_signal_timeout_by_the_time_already_passed(services, db, webhook):
    svc, rid, s0 = _crash_on_first_answer(services, db, webhook, {
        0: wait_signal("replay-wait", DELAY_MS, payload="p"),
        1: lambda req: succeed({"signal": req.json.get("signal")}),
    })
    _pause_until(s0.answered_at + 2.0)
    restart_t = time.monotonic()
    restart_wall = time.time()
    svc.restart(sig=None, HOOKFLOW_TEST_FAULT=None)

    def waiting_or_done():
        r = svc.api.run(rid)
        return r if r["status"] != "running" and r["status"] != "pending" else None
    run = wait_until(waiting_or_done, timeout=15, message="run %s waiting after the replay" % rid)
    if run["status"] == "waiting":
        timeout_at = iso_to_epoch(run["waiting"]["timeout_at"])
        assert timeout_at < restart_wall + DELAY_MS / 1000 - MARGIN, (
            "timeout_at %s is %.2fs after the restart: not shortened" % (
                run["waiting"]["timeout_at"], timeout_at - restart_wall))
        assert timeout_at >= s0.wall + DELAY_MS / 1000 - 0.1

    run = svc.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"signal": {"status": "timeout"}}
    assert len(webhook.requests(run_id=rid, step=0)) == 1
    (s1,) = webhook.requests(run_id=rid, step=1)
    assert s1.time - s0.answered_at >= DELAY_MS / 1000 - 0.05
    assert s1.time - restart_t < DELAY_MS / 1000 - MARGIN, \
        "the timeout ran %.2fs from the restart: not shortened" % (s1.time - restart_t)


def test_replay_of_a_signal_wait_still_consumes_a_signal_sent_meanwhile(services, db, webhook):
    svc, rid, s0 = _crash_on_first_answer(services, db, webhook, {
        0: wait_signal("replay-sig", 60000),
        1: lambda req: succeed({"signal": req.json.get("signal")}),
    })
    svc.restart(sig=None, HOOKFLOW_TEST_FAULT=None)
    svc.api.wait_status(rid, "waiting", timeout=15)
    r = svc.api.post("/v1/signals/replay-sig", {"payload": "after the crash"})
    assert r.status == 200 and r.body == {"outcome": "delivered"}, r
    run = svc.api.wait_terminal(rid, timeout=15)
    assert run["result"] == {"signal": {"status": "delivered", "payload": "after the crash"}}
    assert len(webhook.requests(run_id=rid, step=0)) == 1


def _answer_then_block_settlement(services, db, webhook, replay):
    """The webhook answers step 0 (continue) while a psql session holds the
    run's row lock; once the service has the answer and its settlement waits
    on the lock, the service is killed -9 and the lock released. Returns
    (service, run_id)."""
    # a lease long enough that no renewal (every lease/3) falls between the
    # lock and the answer
    svc = services.start(HOOKFLOW_LEASE_MS="6000")
    release = threading.Event()

    def step0(req):
        if req.attempt == 1:
            return Hang(release=release, then=cont({"from": "attempt 1"}), max_s=30)
        return cont({"from": "attempt %d" % req.attempt})

    webhook.route("/steps", StepScript({0: step0, 1: lambda req: succeed(req.json["payload"])}))
    svc.api.put_workflow("wf", webhook.url(), step_output_replay=replay, max_attempts=3, timeout_ms=30000)
    rid = svc.api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid, step=0)
    lock = RowLock(db, "SELECT 1 FROM run WHERE run_id = %s FOR UPDATE" % sql_quote(rid))
    try:
        release.set()
        wait_log(svc, r"call done kind=step run_id=%s \S+ step=0 attempt=1 http_status=200 .*result=continue" % rid)
        wait_until(lambda: lock.blocked_backends() >= 1, timeout=10, message="the settlement waiting on the row lock")
        svc.kill()
    finally:
        lock.release(terminate_others=True)
    assert db.scalar("SELECT status || ':' || step FROM run WHERE run_id = %s" % sql_quote(rid)) == "running:0"
    assert db.scalar("SELECT count(*) FROM step_attempt WHERE run_id = %s" % sql_quote(rid)) == "0"
    return svc, rid


def test_without_replay_a_crash_before_settlement_calls_the_webhook_again(services, db, webhook):
    svc, rid = _answer_then_block_settlement(services, db, webhook, replay=False)
    assert db.scalar("SELECT count(*) FROM step_output WHERE run_id = %s" % sql_quote(rid)) == "0"
    svc.restart(sig=None)
    run = svc.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"from": "attempt 2"}
    assert [r.attempt for r in webhook.requests(run_id=rid, step=0)] == [1, 2]
    assert [(s["step"], s["attempt"], s["result"]) for s in svc.api.steps(rid)] == [
        (0, 1, "lease_expired"), (0, 2, "continue"), (1, 1, "succeed")]


def test_with_replay_a_crash_before_settlement_does_not_call_the_webhook_again(services, db, webhook):
    svc, rid = _answer_then_block_settlement(services, db, webhook, replay=True)
    assert db.scalar("SELECT count(*) FROM step_output WHERE run_id = %s" % sql_quote(rid)) == "1"
    svc.restart(sig=None)
    run = svc.api.wait_terminal(rid, timeout=30)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"from": "attempt 1"}
    assert [r.attempt for r in webhook.requests(run_id=rid, step=0)] == [1]


def test_replay_does_not_record_step_errors_so_a_retry_calls_the_webhook(api, db, webhook):
    def step0(req):
        if req.attempt == 1:
            return Reply(503, {"outcome": "continue", "payload": "from the error"})
        return cont("from attempt 2")

    webhook.route("/steps", StepScript({0: step0, 1: lambda req: succeed(req.json["payload"])}))
    api.put_workflow("wf", webhook.url(), step_output_replay=True, max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == "from attempt 2", run
    assert [r.attempt for r in webhook.requests(run_id=rid, step=0)] == [1, 2]
    rows = db.sql("SELECT step, outcome->>'outcome' FROM step_output WHERE run_id = %s ORDER BY step"
                  % sql_quote(rid))
    assert [r[0] for r in rows] == ["0", "1"], "one replay record per acknowledged outcome: %r" % rows


def test_workflow_step_output_replay_setting_round_trips(api, webhook):
    wf = api.put_workflow("wf", webhook.url(), step_output_replay=True)
    assert wf["step_output_replay"] is True
    assert api.get("/v1/workflows/wf").body["step_output_replay"] is True
    wf = api.put_workflow("wf", webhook.url())
    assert wf["step_output_replay"] is False


def test_replay_of_an_answer_that_starts_children_starts_them_once_and_shortens_their_wait(
        services, db, webhook):
    webhook.route("/child", StepScript({0: lambda req: Hang(max_s=30)}))
    svc, rid, s0 = _crash_on_first_answer(services, db, webhook, {
        0: cont("p", children=[{"key": "a", "workflow": "child"}, {"key": "b", "workflow": "child"}],
                wait_for_children={"mode": "all", "timeout_ms": DELAY_MS}),
        1: lambda req: succeed([c["status"] for c in req.json["children"]]),
    }, before_start=lambda api: api.put_workflow("child", webhook.url("/child")))
    _pause_until(s0.answered_at + 2.0)
    restart_t = time.monotonic()
    svc.restart(sig=None, HOOKFLOW_TEST_FAULT=None)
    run = svc.api.wait_terminal(rid, timeout=30)
    # both children were held past the (shortened) wait: it timed out
    assert run["status"] == "succeeded" and run["result"] == ["timeout", "timeout"], run
    assert len(webhook.requests(run_id=rid, step=0)) == 1, "the webhook was called again for the replayed step"
    (s1,) = webhook.requests(run_id=rid, step=1)
    assert s1.time - s0.answered_at >= DELAY_MS / 1000 - 0.05
    assert s1.time - restart_t < DELAY_MS / 1000 - MARGIN, \
        "the children's wait ran %.2fs from the restart: not shortened" % (s1.time - restart_t)
    page = svc.api.get("/v1/runs/%s/children" % rid)
    assert page.status == 200 and [c["parent"]["key"] for c in page.body["children"]] == ["a", "b"], page
