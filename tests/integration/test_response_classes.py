"""The status-class table (docs/webhook-protocol.md, section 2): which webhook
answers are transient (retried), which are permanent (the run fails at once),
Retry-After, the error-body override, response size cap, deadline and transport
errors."""

import email.utils
import json
import time

import pytest

from harness import Close, Hang, Reply, StepScript, cont, iso_to_epoch, succeed
from kvcheck import step_dead_letters


def _first_then(first, then=None):
    then = then or succeed("recovered")
    return lambda req: first if req.attempt == 1 else then


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_transient_status_is_retried(api, webhook, status):
    webhook.route("/steps", StepScript({0: _first_then(Reply(status, body=b"transient body"))}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    assert run["result"] == "recovered"
    steps = api.steps(rid)
    assert [(s["attempt"], s["result"], s["http_status"]) for s in steps] == [
        (1, "transient_error", status), (2, "succeed", 200)]
    assert ("HTTP %d" % status) in steps[0]["error"]


def test_retry_after_seconds_sets_the_retry_delay(api, webhook):
    webhook.route("/steps", StepScript({0: _first_then(Reply(429, body=b"slow down", headers={"Retry-After": "1"}))}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, retry_backoff={"base_ms": 10, "max_ms": 5000})
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    a1, a2 = webhook.requests(run_id=rid)
    assert a2.time - a1.time >= 0.9, "retried %.3fs after Retry-After: 1" % (a2.time - a1.time)


def test_retry_after_http_date_sets_the_retry_delay(api, webhook):
    def step0(req):
        if req.attempt == 1:
            when = email.utils.formatdate(time.time() + 3, usegmt=True)
            return Reply(503, body=b"maintenance", headers={"Retry-After": when})
        return succeed("ok")

    webhook.route("/steps", StepScript({0: step0}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, retry_backoff={"base_ms": 10, "max_ms": 10000})
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    a1, a2 = webhook.requests(run_id=rid)
    assert a2.time - a1.time >= 1.9, "retried %.3fs after a Retry-After date ~3 s ahead" % (a2.time - a1.time)


def test_retry_after_is_capped_at_backoff_max_ms(api, webhook):
    webhook.route("/steps", StepScript({0: _first_then(Reply(429, body=b"", headers={"Retry-After": "3600"}))}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, retry_backoff={"base_ms": 10, "max_ms": 300})
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid, timeout=15)
    assert run["status"] == "succeeded"


def test_backoff_doubles_between_attempts(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(500, body=b"down")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3, retry_backoff={"base_ms": 200, "max_ms": 5000})
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "failed"
    a1, a2, a3 = webhook.requests(run_id=rid)
    assert a2.time - a1.time >= 0.18, "first retry after base_ms"
    assert a3.time - a2.time >= 0.38, "second retry after 2 * base_ms"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_other_4xx_is_permanent(api, db, webhook, status):
    body = b"start-of-body " + b"x" * 250 + b" END-OF-BODY"
    webhook.route("/steps", StepScript({0: Reply(status, body=body)}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    assert run["error_kind"] == "permanent"
    assert ("HTTP %d" % status) in run["error"], run["error"]
    assert "start-of-body" in run["error"]
    assert "END-OF-BODY" not in run["error"], "only the first 200 bytes of the body"
    assert len(webhook.requests(run_id=rid)) == 1, "a permanent error is not retried"
    steps = api.steps(rid)
    assert [(s["result"], s["http_status"]) for s in steps] == [("permanent_error", status)]
    (dl,) = step_dead_letters(api, db, rid)
    assert dl["attempts"] == 1 and dl["last_http_status"] == status and dl["step"] == 0


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_is_permanent_and_not_followed(api, webhook, status):
    webhook.route("/target", lambda req: succeed("followed"))
    webhook.route("/steps", StepScript({0: Reply(status, body=b"moved", headers={"Location": webhook.url("/target")})}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert ("HTTP %d" % status) in run["error"]
    assert webhook.requests(path="/target") == [], "redirects are never followed"
    assert len(webhook.requests(path="/steps")) == 1


@pytest.mark.parametrize("status,body", [
    (200, b""),
    (204, b""),
    (200, b"not json"),
    (200, b"[]"),
    (200, b'{"outcome": "bogus"}'),
    (200, b'{"result": 1}'),
    (200, b'{"outcome": "continue", "payload": 1, "delay_ms": -5}'),
    (201, b'{"outcome": "succeed", "result": 1'),
])
def test_2xx_with_empty_or_invalid_body_is_permanent_invalid_step_response(api, webhook, status, body):
    webhook.route("/steps", StepScript({0: Reply(status, body=body, headers={"Content-Type": "application/json"})}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"].startswith("invalid step response"), run["error"]
    assert len(webhook.requests(run_id=rid)) == 1


@pytest.mark.service_env(HOOKFLOW_MAX_RESPONSE_BYTES="4096")
def test_response_over_max_response_bytes_is_permanent(api, webhook):
    big = json.dumps({"outcome": "succeed", "result": "r" * 10000}).encode()
    small = json.dumps({"outcome": "succeed", "result": "r" * 1000}).encode()
    webhook.route("/big", StepScript({0: Reply(200, body=big)}))
    webhook.route("/small", StepScript({0: Reply(200, body=small)}))
    api.put_workflow("big", webhook.url("/big"), max_attempts=3)
    api.put_workflow("small", webhook.url("/small"), max_attempts=3)
    run = api.wait_terminal(api.submit("big")["run_id"])
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert len(webhook.requests(path="/big")) == 1
    assert api.wait_terminal(api.submit("small")["run_id"])["status"] == "succeeded"


def test_call_past_its_deadline_is_aborted_and_transient(api, webhook):
    webhook.route("/steps", StepScript({0: _first_then(Hang(max_s=30))}))
    api.put_workflow("wf", webhook.url(), timeout_ms=300, max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    a1 = webhook.requests(run_id=rid)[0]
    assert a1.disconnected.wait(5), "the call was never aborted"
    steps = api.steps(rid)
    assert [(s["attempt"], s["result"]) for s in steps] == [(1, "transient_error"), (2, "succeed")]
    # The deadline runs from the call's start, which follows the claim (the
    # attempt's started_at, the database's clock, the same as this one) and
    # precedes the request's arrival here by however long the connection
    # took: so the abort comes at least 300 ms after the claim.
    aborted_wall = a1.wall + (a1.disconnected_at - a1.time)
    after_claim = aborted_wall - iso_to_epoch(steps[0]["started_at"])
    assert after_claim >= 0.299, "aborted %.3fs after the claim, before the 300 ms deadline" % after_claim
    assert a1.disconnected_at - a1.time < 5.0
    assert steps[0]["http_status"] is None


def test_connection_refused_is_transient(api, db, refused_port):
    api.put_workflow("wf", refused_port.url(), max_attempts=2)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    assert run["error_kind"] == "transient"
    steps = api.steps(rid)
    assert [(s["attempt"], s["result"]) for s in steps] == [(1, "transient_error"), (2, "transient_error")]
    assert all(s["http_status"] is None for s in steps)
    assert len(step_dead_letters(api, db, rid)) == 1


def test_connection_closed_without_answer_is_transient(api, webhook):
    webhook.route("/steps", StepScript({0: _first_then(Close())}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert [s["result"] for s in api.steps(rid)] == ["transient_error", "succeed"]


def test_error_body_retryable_false_makes_5xx_permanent(api, webhook):
    body = {"error": {"message": "x", "retryable": False}}
    webhook.route("/steps", StepScript({0: Reply(503, body)}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    assert run["error_kind"] == "permanent"
    assert "HTTP 503" in run["error"]
    assert len(webhook.requests(run_id=rid)) == 1


def test_error_body_retryable_true_makes_4xx_transient(api, webhook):
    body = {"error": {"message": "not yet", "retryable": True}}
    webhook.route("/steps", StepScript({0: _first_then(Reply(400, body))}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert len(webhook.requests(run_id=rid)) == 2


def test_transient_error_on_later_step_retries_only_that_step(api, webhook):
    webhook.route("/steps", StepScript({0: cont("a"), 1: _first_then(Reply(500, body=b"oops"), cont("b")),
                                        2: succeed("c")}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert [(r.step, r.attempt) for r in webhook.requests(run_id=rid)] == [(0, 1), (1, 1), (1, 2), (2, 1)]
