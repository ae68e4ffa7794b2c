"""Signals (docs/webhook-protocol.md section 5, docs/run-states.md): a step
waits for a signal on a correlation key (wait_for_signal), POST
/v1/signals/{key} delivers or buffers it, DELETE clears a buffered one. One
waiter per key, timeouts, cancel of a waiting run, redelivery, several
instances, and key encoding in the path."""

import threading
import time

import pytest

from harness import Hang, Reply, StepScript, assert_error, iso_to_epoch, succeed
from helpers_issue3 import clear_signal, qkey, send_signal, signal_outcome, wait_signal
from kvcheck import step_dead_letters

LONG = 60000       # a wait timeout the tests never reach
AT_ONCE = 5.0      # "at once": well under LONG


def _echo_signal(req):
    """A step that succeeds with what it received."""
    return succeed({"signal": req.json.get("signal"), "payload": req.json["payload"]})


# ---- buffered, delivered, timeout ---------------------------------------------

def test_signal_sent_before_the_wait_is_buffered_and_consumed_by_the_wait_at_once(api, webhook):
    assert signal_outcome(api, "order:1", {"paid": True}) == "buffered"
    webhook.route("/steps", StepScript({0: wait_signal("order:1", LONG, payload="p1"), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]

    run = api.wait_terminal(rid, timeout=AT_ONCE + 5)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"signal": {"status": "delivered", "payload": {"paid": True}}, "payload": "p1"}
    s0, s1 = webhook.requests(run_id=rid)
    assert "signal" not in s0.json, "step 0 did not wait: it carries no signal field: %r" % s0.json
    assert s1.json["signal"] == {"status": "delivered", "payload": {"paid": True}}
    assert s1.time - s0.time < AT_ONCE, "a buffered signal continues at once, not after the timeout"
    # the buffer was consumed: nothing left to clear, the next signal is buffered anew
    assert clear_signal(api, "order:1") is False
    hist = api.steps(rid)
    assert [(s["step"], s["result"]) for s in hist] == [(0, "continue"), (1, "succeed")]
    assert hist[1]["signal"] == {"status": "delivered", "payload": {"paid": True}}


def test_newer_buffered_signal_replaces_the_older_one(api, webhook):
    assert signal_outcome(api, "k-replace", "first") == "buffered"
    assert signal_outcome(api, "k-replace", "second") == "buffered"
    webhook.route("/steps", StepScript({0: wait_signal("k-replace", LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"], timeout=AT_ONCE + 5)
    assert run["result"]["signal"] == {"status": "delivered", "payload": "second"}
    assert clear_signal(api, "k-replace") is False


def test_signal_sent_during_the_wait_wakes_the_step_at_once(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("pay:42", LONG, payload={"n": 1}), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_status(rid, "waiting")

    t0 = time.monotonic()
    assert signal_outcome(api, "pay:42", {"amount": 4200}) == "delivered"
    (s1,) = webhook.wait_requests(1, run_id=rid, step=1, timeout=AT_ONCE + 5)
    assert s1.time - t0 < AT_ONCE, "step 1 came %.2fs after the signal (timeout %d ms)" % (s1.time - t0, LONG)
    assert s1.json["signal"] == {"status": "delivered", "payload": {"amount": 4200}}
    assert s1.json["payload"] == {"n": 1}
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded"
    # the signal was delivered, not buffered: a later wait on the key finds nothing
    assert clear_signal(api, "pay:42") is False


def test_waiting_run_shows_status_waiting_with_correlation_key_and_timeout_at(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("show:1", LONG)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_status(rid, "waiting")
    (s0,) = webhook.requests(run_id=rid)
    assert run["step"] == 1
    assert run["waiting"]["correlation_key"] == "show:1"
    timeout_at = iso_to_epoch(run["waiting"]["timeout_at"])
    left = timeout_at - s0.wall
    assert LONG / 1000 - 1 <= left <= LONG / 1000 + 2, "timeout_at %s is %.2fs after the step" % (
        run["waiting"]["timeout_at"], left)
    assert run["next_attempt_at"], run
    assert api.post("/v1/runs/%s/cancel" % rid).status == 200


def test_wait_timeout_delivers_signal_status_timeout(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("never:1", 1000), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid, timeout=15)
    assert run["status"] == "succeeded", run
    assert run["result"]["signal"] == {"status": "timeout"}
    s0, s1 = webhook.requests(run_id=rid)
    assert s1.json["signal"] == {"status": "timeout"}
    gap = s1.time - s0.answered_at
    assert gap >= 0.95, "a 1000 ms wait timed out after %.3fs" % gap
    # the timed-out wait is gone: a signal now is buffered
    assert signal_outcome(api, "never:1", "late") == "buffered"
    assert clear_signal(api, "never:1") is True


# ---- one waiter per key ---------------------------------------------------------

def test_second_waiter_on_a_live_key_fails_its_own_run_and_the_first_keeps_waiting(api, db, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("dup-key", LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    first = api.submit("wf", run_id="first")["run_id"]
    api.wait_status(first, "waiting")

    second = api.submit("wf", run_id="second")["run_id"]
    run2 = api.wait_terminal(second)
    assert run2["status"] == "failed", run2
    assert run2["error"] == "a waiter is already registered for correlation key dup-key", run2
    assert run2["error_kind"] == "permanent"
    assert run2["final_step"] == 0
    assert len(webhook.requests(run_id=second)) == 1, "a permanent error is not retried"
    assert [s["result"] for s in api.steps(second)] == ["permanent_error"]
    (dl,) = step_dead_letters(api, db, second)
    assert "a waiter is already registered for correlation key dup-key" in (dl["last_error"] or "")

    run1 = api.run(first)
    assert run1["status"] == "waiting" and run1["waiting"]["correlation_key"] == "dup-key", run1
    assert signal_outcome(api, "dup-key", "for the first") == "delivered"
    run1 = api.wait_terminal(first, timeout=AT_ONCE + 5)
    assert run1["status"] == "succeeded"
    assert run1["result"]["signal"] == {"status": "delivered", "payload": "for the first"}
    assert webhook.requests(run_id=second, step=1) == []


def test_a_key_can_be_waited_on_again_after_its_waiter_was_woken(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("reuse", LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    a = api.submit("wf")["run_id"]
    api.wait_status(a, "waiting")
    assert signal_outcome(api, "reuse", 1) == "delivered"
    assert api.wait_terminal(a)["status"] == "succeeded"
    b = api.submit("wf")["run_id"]
    api.wait_status(b, "waiting")
    assert signal_outcome(api, "reuse", 2) == "delivered"
    run = api.wait_terminal(b)
    assert run["status"] == "succeeded" and run["result"]["signal"]["payload"] == 2


# ---- cancel and redelivery ------------------------------------------------------

def test_cancelling_a_waiting_run_removes_its_wait(api, webhook):
    webhook.route("/steps", StepScript({0: wait_signal("cancel-me", LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_status(rid, "waiting")
    r = api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    run = api.run(rid)
    assert run["status"] == "cancelled" and run["error"] is None
    assert run.get("waiting") is None

    assert signal_outcome(api, "cancel-me", "late") == "buffered"
    assert webhook.requests(run_id=rid, step=1) == []
    # the buffered signal waits for the next waiter: a new run consumes it at once
    other = api.submit("wf")["run_id"]
    run = api.wait_terminal(other, timeout=AT_ONCE + 5)
    assert run["result"]["signal"] == {"status": "delivered", "payload": "late"}
    assert api.run(rid)["status"] == "cancelled"


def test_redelivered_step_sees_the_same_signal_every_time(api, webhook):
    later = {}

    def step1(req):
        if req.attempt == 1:
            # another signal on the key between the attempts must not change
            # what the redelivered step receives
            later["outcome"] = signal_outcome(api, "redeliver", "second signal")
            return Reply(503, body=b"try again")
        return _echo_signal(req)

    webhook.route("/steps", StepScript({0: wait_signal("redeliver", LONG), 1: step1}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    api.wait_status(rid, "waiting")
    assert signal_outcome(api, "redeliver", {"first": 1}) == "delivered"
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run

    a1, a2 = webhook.requests(run_id=rid, step=1)
    assert (a1.attempt, a2.attempt) == (1, 2)
    assert a1.json["signal"] == {"status": "delivered", "payload": {"first": 1}}
    assert a2.json["signal"] == a1.json["signal"]
    assert later["outcome"] == "buffered"
    hist = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in hist] == [
        (0, 1, "continue"), (1, 1, "transient_error"), (1, 2, "succeed")]
    assert hist[1]["signal"] == hist[2]["signal"] == {"status": "delivered", "payload": {"first": 1}}
    assert clear_signal(api, "redeliver") is True, "the second signal stays buffered for a later wait"


def test_redelivered_step_after_a_timeout_still_sees_the_timeout(api, webhook):
    later = {}

    def step1(req):
        if req.attempt == 1:
            later["outcome"] = signal_outcome(api, "timeout-redeliver", "too late")
            return Reply(503, body=b"try again")
        return _echo_signal(req)

    webhook.route("/steps", StepScript({0: wait_signal("timeout-redeliver", 300), 1: step1}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    run = api.wait_terminal(api.submit("wf")["run_id"], timeout=15)
    assert run["status"] == "succeeded", run
    a1, a2 = webhook.requests(step=1)
    assert a1.json["signal"] == a2.json["signal"] == {"status": "timeout"}
    assert later["outcome"] == "buffered"


# ---- several instances ----------------------------------------------------------

def test_signal_sent_to_one_instance_wakes_a_run_another_instance_dispatches(services, webhook):
    # b can hold one call and is kept busy by a held call, so a dispatches
    # every step of the run while the signal goes to b.
    b = services.start(HOOKFLOW_MAX_INFLIGHT="1", HOOKFLOW_WORKERS="1")
    release = threading.Event()
    webhook.route("/hold", lambda req: Hang(release=release, then=succeed("held"), max_s=60))
    webhook.route("/steps", StepScript({0: wait_signal("cross:1", LONG), 1: _echo_signal}))
    b.api.put_workflow("hold", webhook.url("/hold"), timeout_ms=60000)
    b.api.put_workflow("wf", webhook.url())
    holder = b.api.submit("hold")["run_id"]
    (held,) = webhook.wait_requests(1, path="/hold", run_id=holder)
    assert held.json["memo"]["url"].startswith(b.base_url + "/")

    a = services.start()
    try:
        rid = a.api.submit("wf")["run_id"]
        b.api.wait_status(rid, "waiting")
        (s0,) = webhook.requests(path="/steps", run_id=rid)
        assert s0.json["memo"]["url"] == a.base_url + "/v1/runs/" + rid

        t0 = time.monotonic()
        assert signal_outcome(b.api, "cross:1", "via b") == "delivered"
        (s1,) = webhook.wait_requests(1, path="/steps", run_id=rid, step=1, timeout=AT_ONCE + 5)
        assert s1.time - t0 < AT_ONCE, "step 1 came %.2fs after the signal" % (s1.time - t0)
        assert s1.json["memo"]["url"] == a.base_url + "/v1/runs/" + rid, "a dispatched the woken step"
        assert s1.json["signal"] == {"status": "delivered", "payload": "via b"}
        assert a.api.wait_terminal(rid)["status"] == "succeeded"
    finally:
        release.set()
    assert b.api.wait_terminal(holder)["status"] == "succeeded"


def test_signal_sent_to_a_new_instance_wakes_a_run_whose_wait_another_instance_registered(services, webhook):
    a = services.start()
    webhook.route("/steps", StepScript({0: wait_signal("handover", LONG), 1: _echo_signal}))
    a.api.put_workflow("wf", webhook.url())
    rid = a.api.submit("wf")["run_id"]
    a.api.wait_status(rid, "waiting")
    assert a.stop() == 0

    b = services.start()
    run = b.api.run(rid)
    assert run["status"] == "waiting" and run["waiting"]["correlation_key"] == "handover"
    t0 = time.monotonic()
    assert signal_outcome(b.api, "handover", "to b") == "delivered"
    (s1,) = webhook.wait_requests(1, run_id=rid, step=1, timeout=AT_ONCE + 5)
    assert s1.time - t0 < AT_ONCE
    assert s1.json["memo"]["url"].startswith(b.base_url + "/")
    run = b.api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"]["signal"]["payload"] == "to b"


# ---- keys in the path -----------------------------------------------------------

@pytest.mark.parametrize("key", ["orders/42:paid", "a:b/c/", "caf\u00e9/\u6f22\u5b57:\U0001F600", "sp ace+plus%25"],
                         ids=["slash-colon", "trailing-slash", "unicode", "space-plus-percent"])
def test_percent_encoded_correlation_keys_round_trip(api, webhook, key):
    webhook.route("/steps", StepScript({0: wait_signal(key, LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_status(rid, "waiting")
    assert run["waiting"]["correlation_key"] == key
    assert signal_outcome(api, key, {"k": key}) == "delivered"
    run = api.wait_terminal(rid)
    assert run["result"]["signal"] == {"status": "delivered", "payload": {"k": key}}
    # buffered under the same key, cleared under the same key
    assert signal_outcome(api, key, 1) == "buffered"
    assert clear_signal(api, key) is True
    assert clear_signal(api, key) is False


def test_correlation_key_of_512_bytes_is_accepted(api):
    key = "\u00e9" * 256  # 512 bytes of UTF-8
    assert len(key.encode()) == 512
    assert signal_outcome(api, key, 1) == "buffered"
    assert clear_signal(api, key) is True


@pytest.mark.parametrize("path,what", [
    ("/v1/signals/", "empty"),
    ("/v1/signals/" + qkey("k" * 513), "513 bytes"),
    ("/v1/signals/" + qkey("\u00e9" * 256 + "x"), "513 bytes of UTF-8"),
    ("/v1/signals/%FF", "invalid UTF-8"),
    ("/v1/signals/ab%C3", "truncated UTF-8"),
], ids=["empty", "513-bytes", "513-bytes-of-utf8", "invalid-utf8", "truncated-utf8"])
def test_invalid_correlation_key_is_400(api, path, what):
    assert_error(api.post(path, {"payload": 1}), 400, "invalid_argument")
    assert_error(api.delete(path), 400, "invalid_argument")


def test_signal_without_a_body_has_a_null_payload(api, webhook):
    r = send_signal(api, "nobody", body=False)
    assert r.status == 200 and r.body == {"outcome": "buffered"}, r
    webhook.route("/steps", StepScript({0: wait_signal("nobody", LONG), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["result"]["signal"] == {"status": "delivered", "payload": None}


def test_clear_signal_removes_a_buffered_signal(api, webhook):
    assert clear_signal(api, "clear-me") is False
    assert signal_outcome(api, "clear-me", "x") == "buffered"
    assert clear_signal(api, "clear-me") is True
    assert clear_signal(api, "clear-me") is False
    # a wait after the clear gets nothing and times out
    webhook.route("/steps", StepScript({0: wait_signal("clear-me", 300), 1: _echo_signal}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"], timeout=15)
    assert run["result"]["signal"] == {"status": "timeout"}
