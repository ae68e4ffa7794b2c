"""Waiting for the first of several signals (issue 15 item 3, README "Signals"):
wait_for_signal takes "correlation_keys" (1 to 16 distinct keys) instead of
"correlation_key". The first signal on any of them wakes the run and removes
all its waits in the same transaction; the next step hears which key
("correlation_key" in its signal). A buffered signal on any key is taken at
once, the oldest when several are; one waiter per key still holds; a
timeout, a cancel and a redelivery behave as for one key."""

import concurrent.futures
import threading

import pytest

from harness import Reply, StepScript, succeed
from helpers_issue3 import clear_signal, signal_outcome
from kvcheck import step_dead_letters

LONG = 60000  # a wait timeout the tests never reach
AT_ONCE = 5.0


def wait_any(keys, timeout_ms=LONG, payload=None):
    """A continue outcome that waits for the first signal on any of `keys`."""
    return Reply(200, {"outcome": "continue", "payload": payload,
                       "wait_for_signal": {"correlation_keys": keys, "timeout_ms": timeout_ms}})


def echo(req):
    return succeed({"signal": req.json.get("signal"), "payload": req.json["payload"]})


def start(api, webhook, keys, run_id=None, timeout_ms=LONG):
    webhook.route("/steps", StepScript({0: wait_any(keys, timeout_ms, payload="p"), 1: echo}))
    api.put_workflow("wf", webhook.url())
    fields = {"run_id": run_id} if run_id else {}
    return api.submit("wf", **fields)["run_id"]


def test_a_live_signal_on_the_second_key_wakes_the_run_and_says_which_key(api, webhook):
    rid = start(api, webhook, ["pay:1", "cancel:1"])
    run = api.wait_status(rid, "waiting")
    assert run["waiting"]["correlation_keys"] == ["cancel:1", "pay:1"], run["waiting"]
    assert run["waiting"]["correlation_key"] == "pay:1"
    assert run["waiting"]["children"] is None

    assert signal_outcome(api, "cancel:1", {"why": "user"}) == "delivered"
    run = api.wait_terminal(rid, timeout=AT_ONCE + 5)
    want = {"status": "delivered", "correlation_key": "cancel:1", "payload": {"why": "user"}}
    assert run["result"] == {"signal": want, "payload": "p"}, run
    assert api.steps(rid)[1]["signal"] == want, "the history shows which key woke the run"
    # every wait of the run ended with it: the other key has no waiter now
    assert signal_outcome(api, "pay:1", "late") == "buffered"
    assert clear_signal(api, "pay:1") is True


def test_a_buffered_signal_on_either_key_is_taken_at_once_the_oldest_first(api, webhook):
    assert signal_outcome(api, "b:2", "older") == "buffered"
    assert signal_outcome(api, "a:2", "newer") == "buffered"
    rid = start(api, webhook, ["a:2", "b:2"])
    run = api.wait_terminal(rid, timeout=AT_ONCE + 5)
    assert run["result"]["signal"] == {"status": "delivered", "correlation_key": "b:2",
                                       "payload": "older"}, run
    s0, s1 = webhook.requests(run_id=rid)
    assert s1.time - s0.time < AT_ONCE, "a buffered signal continues at once"
    # the newer one stays buffered for the next waiter
    assert clear_signal(api, "b:2") is False
    assert clear_signal(api, "a:2") is True


def test_a_second_run_waiting_on_one_of_the_keys_fails_and_the_first_keeps_waiting(api, webhook, db):
    first = start(api, webhook, ["x:1", "y:1"], run_id="first")
    api.wait_status(first, "waiting")
    webhook.route("/steps", StepScript({0: wait_any(["z:1", "y:1"]), 1: echo}))
    second = api.submit("wf", run_id="second")["run_id"]
    run = api.wait_terminal(second)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"] == "a waiter is already registered for correlation key y:1", run
    assert len(step_dead_letters(api, db, "second")) == 1
    assert api.run(first)["status"] == "waiting"
    # the failed run registered none of its keys: z:1 has no waiter
    assert signal_outcome(api, "z:1") == "buffered"
    assert signal_outcome(api, "y:1", "for first") == "delivered"
    assert api.wait_terminal(first)["result"]["signal"]["correlation_key"] == "y:1"


def test_a_timeout_takes_a_signal_buffered_meanwhile_else_reports_timeout(api, webhook):
    rid = start(api, webhook, ["t:1", "t:2"], timeout_ms=1000)
    run = api.wait_terminal(rid, timeout=10)
    assert run["result"]["signal"] == {"status": "timeout"}, run
    # the waits ended with the timeout
    assert signal_outcome(api, "t:1") == "buffered"
    assert signal_outcome(api, "t:2") == "buffered"


def test_cancelling_a_run_waiting_on_several_keys_removes_every_wait(api, webhook):
    rid = start(api, webhook, ["c:1", "c:2", "c:3"])
    api.wait_status(rid, "waiting")
    r = api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    for key in ("c:1", "c:2", "c:3"):
        assert signal_outcome(api, key) == "buffered", key
    # a new run can wait on the same keys
    rid2 = start(api, webhook, ["c:9", "c:2"], run_id="again")
    run = api.wait_terminal(rid2, timeout=AT_ONCE + 5)
    assert run["result"]["signal"]["correlation_key"] == "c:2", run


def test_two_signals_at_once_on_two_keys_wake_the_run_once(api, webhook):
    rid = start(api, webhook, ["r:1", "r:2"])
    api.wait_status(rid, "waiting")
    go = threading.Barrier(2)

    def send(key):
        go.wait()
        return signal_outcome(api, key, key)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(send, ["r:1", "r:2"]))
    assert outcomes == ["buffered", "delivered"], outcomes
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded"
    assert len(webhook.requests(run_id=rid, step=1)) == 1


def test_a_signal_sent_to_another_instance_wakes_a_run_waiting_on_several_keys(services, webhook):
    a = services.start()
    b = services.start()
    rid = start(a.api, webhook, ["m:1", "m:2"])
    a.api.wait_status(rid, "waiting")
    assert signal_outcome(b.api, "m:2", "via b") == "delivered"
    run = a.api.wait_terminal(rid)
    assert run["result"]["signal"] == {"status": "delivered", "correlation_key": "m:2",
                                       "payload": "via b"}


def test_one_key_in_a_list_keeps_the_single_key_signal_shape(api, webhook):
    rid = start(api, webhook, ["solo:1"])
    api.wait_status(rid, "waiting")
    assert signal_outcome(api, "solo:1", "x") == "delivered"
    run = api.wait_terminal(rid)
    assert run["result"]["signal"] == {"status": "delivered", "payload": "x"}, run


@pytest.mark.parametrize("wait, message", [
    ({"correlation_keys": [], "timeout_ms": 1000},
     "wait_for_signal.correlation_keys: must be an array of 1 to 16 keys"),
    ({"correlation_keys": ["k%d" % i for i in range(17)], "timeout_ms": 1000},
     "wait_for_signal.correlation_keys: must be an array of 1 to 16 keys"),
    ({"correlation_keys": ["a", "a"], "timeout_ms": 1000},
     "wait_for_signal.correlation_keys[1]: repeats an earlier key"),
    ({"correlation_keys": ["a", 5], "timeout_ms": 1000},
     "wait_for_signal.correlation_keys[1]: must be a string"),
    ({"correlation_keys": ["a"], "correlation_key": "b", "timeout_ms": 1000},
     "wait_for_signal.correlation_keys: cannot be combined with correlation_key"),
], ids=["empty", "seventeen", "repeated", "not-a-string", "both-forms"])
def test_an_invalid_list_of_keys_fails_the_step_naming_the_field(api, webhook, wait, message):
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "continue", "wait_for_signal": wait})}))
    api.put_workflow("wf", webhook.url())
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"] == "invalid step response: " + message, run
