"""Cancel (docs/run-states.md, openapi/openapi.yaml): queued runs end at once
(200), an in-flight call is aborted at once (202 cancelling), terminal runs
answer 409, unknown 404."""

import threading
import time

from harness import Hang, StepScript, assert_error, cont, epoch_to_iso, succeed


def _cancel(api, rid):
    return api.post("/v1/runs/%s/cancel" % rid)


def test_cancel_pending_run_ends_it_without_calling_the_webhook(api, webhook):
    # max_concurrency 1 with the first run's call held: the second run stays
    # pending (claimable, but no slot).
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed("first"))}))
    api.put_workflow("wf", webhook.url(), max_concurrency=1)
    first = api.submit("wf", run_id="holder")["run_id"]
    webhook.wait_requests(1, run_id=first)
    second = api.submit("wf", run_id="queued")["run_id"]
    assert api.run(second)["status"] == "pending"

    r = _cancel(api, second)
    assert r.status == 200, r
    assert r.body["status"] == "cancelled"
    run = api.run(second)
    assert run["status"] == "cancelled" and run["error"] is None and run["error_kind"] is None
    assert run["cancel_requested"] is True

    release.set()
    assert api.wait_terminal(first)["status"] == "succeeded"
    assert webhook.requests(run_id=second) == []
    assert api.steps(second) == []


def test_cancel_scheduled_run_by_delay(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", delay_ms=1000)["run_id"]
    r = _cancel(api, rid)
    assert r.status == 200, r
    assert r.body["status"] == "cancelled"
    # the delay has passed: the cancelled step must not be dispatched
    probe = api.submit("wf", delay_ms=1200)["run_id"]
    assert api.wait_terminal(probe)["status"] == "succeeded"
    assert webhook.requests(run_id=rid) == []
    assert api.run(rid)["status"] == "cancelled"


def test_cancel_scheduled_run_by_run_at(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_at=epoch_to_iso(time.time() + 3600))["run_id"]
    assert api.run(rid)["status"] == "scheduled"
    r = _cancel(api, rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    run = api.run(rid)
    assert run["status"] == "cancelled" and run["error"] is None
    assert run.get("next_attempt_at") is None
    assert webhook.requests(run_id=rid) == []


def test_cancel_run_scheduled_between_steps(api, webhook):
    webhook.route("/steps", StepScript({0: cont("x", delay_ms=600000), 1: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_status(rid, "scheduled")
    r = _cancel(api, rid)
    assert r.status == 200 and r.body["status"] == "cancelled", r
    run = api.run(rid)
    assert run["final_step"] == 1
    assert len(webhook.requests(run_id=rid)) == 1


def test_cancel_aborts_inflight_call(api, webhook):
    webhook.route("/steps", StepScript({0: Hang(max_s=30)}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rid = api.submit("wf")["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid)

    t0 = time.monotonic()
    r = _cancel(api, rid)
    assert r.status == 202, r
    assert r.body["status"] == "cancelling"
    assert req.disconnected.wait(5), "the in-flight call was not aborted"
    took = req.disconnected_at - t0
    assert took <= 1.0, "webhook saw its connection closed %.3fs after the cancel" % took

    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled"
    assert run["error"] is None
    assert run["error_kind"] is None
    assert run["cancel_requested"] is True
    steps = api.steps(rid)
    assert steps[-1]["result"] == "cancelled"
    assert len(webhook.requests(run_id=rid)) == 1, "a cancelled step is not redelivered"


def test_cancel_terminal_run_is_409_already_terminal(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_terminal(rid)
    assert_error(_cancel(api, rid), 409, "already_terminal")
    assert api.run(rid)["status"] == "succeeded"


def test_cancel_cancelled_run_is_409_already_terminal(api):
    api.put_workflow("wf", "http://127.0.0.1:9/x")
    rid = api.submit("wf", delay_ms=600000)["run_id"]
    assert _cancel(api, rid).status == 200
    assert_error(_cancel(api, rid), 409, "already_terminal")


def test_cancel_unknown_run_is_404(api):
    assert_error(_cancel(api, "no-such-run"), 404, "not_found")
