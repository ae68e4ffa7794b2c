"""Asynchronous step completion, heartbeats and run_at (issue 15, items 1 and 4:
the pending answer, POST /v1/runs/{id}/steps/{n}/complete and .../heartbeat,
the run's pending_* fields, the workflow's max_pending_ms, continue's run_at).

What these tests prove, against the real binary, PostgreSQL and webhook servers:

- A step answering {"outcome": "pending"} leaves its run "running" with
  pending_since / pending_timeout_at / heartbeat_timeout_at set, and holds no
  worker slot, no HOOKFLOW_MAX_INFLIGHT slot and no socket (1,000 pending runs
  with 64 call slots; hookflow_inflight_calls 0; no TCP connection to the
  webhook).
- POST /v1/runs/{id}/steps/{n}/complete, authorised by the attempt's delivery
  token (memo.token), settles the step on any instance with any outcome body
  (continue with payload, succeed with kv effects); the step history records
  pending_since and the last heartbeat.
- Completion is once per attempt (409 already_completed), for the current
  attempt only (409 stale_attempt), and not after an external cancel (409
  run_cancelled); API tokens are refused (403), no credential is 401, a bad
  body is 400 naming the field and changes nothing.
- POST .../heartbeat extends heartbeat_timeout_at and records details (at
  most 64 KiB); a missed heartbeat and the pending timeout are transient
  errors retried as new attempts (which see "last_heartbeat") and
  dead-lettered on the last one; an external cancel ends a pending run at
  once and heartbeats then answer cancel_requested true.
- A pending answer takes only timeout_ms and heartbeat_timeout_ms, clamped to
  the workflow's max_pending_ms (default 86400000, 1000..31536000000).
- {"outcome": "continue", "run_at": RFC 3339} schedules the next step at that
  time (the past means now); it is exclusive with delay_ms and
  wait_for_signal.
"""

import concurrent.futures
import time
import urllib.parse

import pytest

from harness import (TS_RE, Api, Reply, StepScript, assert_error, cont, epoch_to_iso, iso_to_epoch, pending,
                     succeed, tcp_sockets_to, wait_until)
from helpers_issue3 import kv_item, kv_value

API_TOKEN = "async-steps-api-token-0123456789"
DAY_MS = 86400000
FAST_RETRY = {"base_ms": 50, "max_ms": 200}
PENDING_FIELDS = ("pending_since", "pending_timeout_at", "heartbeat_timeout_at")
_NO_BODY = object()


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def ms(ts):
    """An RFC 3339 timestamp with milliseconds as epoch milliseconds."""
    return round(iso_to_epoch(ts) * 1000)


def step_path(run_id, step, action):
    return "/v1/runs/%s/steps/%d/%s" % (urllib.parse.quote(run_id, safe=""), step, action)


def token_of(req):
    """The delivery token of step request `req` (its memo.token)."""
    return req.json["memo"]["token"]


def complete(svc, req, body, step=None):
    """POST .../steps/{n}/complete on instance `svc` with the delivery token of
    step request `req` (n is that request's step unless given)."""
    client = Api(svc.base_url, token=token_of(req))
    return client.post(step_path(req.run_id, req.step if step is None else step, "complete"), body)


def heartbeat(svc, req, details=_NO_BODY):
    """POST .../steps/{n}/heartbeat with the delivery token of `req`; with
    `details`, the body {"details": details}, else no body."""
    client = Api(svc.base_url, token=token_of(req))
    path = step_path(req.run_id, req.step, "heartbeat")
    if details is _NO_BODY:
        return client.post(path)
    return client.post(path, {"details": details})


def assert_completed(resp, run_id):
    """A 200 completion answer: the run after settlement (like POST .../cancel); returns it."""
    assert resp.status == 200, "complete: %r" % (resp,)
    assert isinstance(resp.body, dict) and resp.body.get("run_id") == run_id, resp
    return resp.body


def assert_heartbeat_answer(resp, cancel_requested):
    assert resp.status == 200, "heartbeat: %r" % (resp,)
    assert resp.body == {"cancel_requested": cancel_requested}, resp


def wait_pending(api, run_id, attempt=None, timeout=10.0):
    """Waits until the run shows a pending step (pending_since set), of
    `attempt` when given; returns the run."""
    def seen():
        run = api.run(run_id)
        if run.get("pending_since") and (attempt is None or run["attempt"] == attempt):
            return run
        return None
    return wait_until(seen, timeout=timeout,
                      message="run %s pending%s" % (run_id, "" if attempt is None else " in attempt %d" % attempt))


def assert_pending_run(run):
    assert run["status"] == "running", run
    for field in ("pending_since", "pending_timeout_at"):
        assert isinstance(run.get(field), str) and TS_RE.match(run[field]), (field, run)
    assert "heartbeat_timeout_at" in run, run


def assert_not_pending(run):
    for field in PENDING_FIELDS:
        assert field in run and run[field] is None, (field, run)


def history(api, run_id):
    return [(s["step"], s["attempt"], s["result"]) for s in api.steps(run_id)]


def park(api, webhook, reply, **settings):
    """Registers workflow "wf" whose step 0 answers `reply` (step 1 succeeds
    with its payload), submits a run and waits for its step to be pending.
    Returns (run_id, step-0 request, the pending run)."""
    webhook.route("/steps", StepScript({0: reply, 1: lambda req: succeed(req.json["payload"])}))
    api.put_workflow("wf", webhook.url(), **settings)
    rid = api.submit("wf")["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid)
    return rid, req, wait_pending(api, rid)


# --------------------------------------------------------------------------
# Completion
# --------------------------------------------------------------------------

def test_a_pending_step_is_completed_through_another_instance_and_the_run_goes_on(services, webhook):
    a = services.start()
    b = services.start()
    webhook.route("/steps", StepScript({0: pending(), 1: lambda req: succeed({"got": req.json["payload"]})}))
    a.api.put_workflow("wf", webhook.url())
    rid = a.api.submit("wf", input={"order": 7})["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid, step=0)

    run = wait_pending(a.api, rid)
    assert_pending_run(run)
    assert run["heartbeat_timeout_at"] is None, "no heartbeat_timeout_ms: no heartbeat required"
    # Without timeout_ms the step may stay pending max_pending_ms (default a day).
    assert ms(run["pending_timeout_at"]) - ms(run["pending_since"]) == DAY_MS, run
    pending_since = run["pending_since"]
    assert b.api.run(rid)["pending_since"] == pending_since

    # memo.url is the delivering instance's HOOKFLOW_PUBLIC_URL: complete
    # through the other one.
    url = req.json["memo"]["url"]
    assert url.startswith(a.base_url + "/") or url.startswith(b.base_url + "/"), url
    other = b if url.startswith(a.base_url + "/") else a
    settled = assert_completed(complete(other, req, {"outcome": "continue", "payload": {"paid": True}}), rid)
    assert settled["step"] == 1, settled
    assert settled["status"] in ("pending", "running"), settled
    assert_not_pending(settled)

    run = other.api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"got": {"paid": True}}, run
    assert_not_pending(run)
    (step1,) = webhook.wait_requests(1, run_id=rid, step=1)
    assert step1.json["payload"] == {"paid": True}
    assert step1.attempt == 1

    steps = a.api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [(0, 1, "continue"), (1, 1, "succeed")]
    assert steps[0]["pending_since"] == pending_since, steps[0]
    assert steps[0]["heartbeat"] is None
    assert steps[1]["pending_since"] is None and steps[1]["heartbeat"] is None
    assert len(webhook.requests(run_id=rid, step=0)) == 1


def test_completing_with_succeed_ends_the_run_with_the_result_and_applies_kv(api, service, webhook):
    rid, req, _ = park(api, webhook, pending())
    key = "app/async/order-7"
    assert kv_item(api, key) is None

    body = {"outcome": "succeed", "result": {"shipped": True}, "kv": {"put": {key: {"state": "shipped"}}}}
    settled = assert_completed(complete(service, req, body), rid)
    assert settled["status"] == "succeeded" and settled["result"] == {"shipped": True}, settled

    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"shipped": True}, run
    assert_not_pending(run)
    assert kv_value(api, key) == {"state": "shipped"}
    assert history(api, rid) == [(0, 1, "succeed")]
    assert len(webhook.requests(run_id=rid)) == 1


def test_a_second_completion_of_the_same_attempt_is_409_already_completed(api, service, webhook):
    rid, req, _ = park(api, webhook, pending())
    # The first completion leaves the run active (step 1 ten minutes later), so
    # a second one that was wrongly accepted could still change it.
    first = {"outcome": "continue", "payload": {"n": 1}, "delay_ms": 600000}
    settled = assert_completed(complete(service, req, first), rid)
    assert settled["status"] == "scheduled", settled
    before = api.run(rid)
    assert before["status"] == "scheduled" and before["step"] == 1, before

    assert_error(complete(service, req, {"outcome": "succeed", "result": "again"}), 409, "already_completed")
    assert_error(complete(service, req, first), 409, "already_completed")
    assert_error(heartbeat(service, req, {"late": True}), 409, "already_completed")

    assert api.run(rid) == before
    assert history(api, rid) == [(0, 1, "continue")]
    assert webhook.requests(run_id=rid, step=1) == []


# --------------------------------------------------------------------------
# Heartbeats and timeouts
# --------------------------------------------------------------------------

@pytest.mark.serial  # the one heartbeat must come within 1.5 s of the pending answer
def test_a_missed_heartbeat_retries_with_a_new_token_and_the_old_token_is_stale(api, service, webhook):
    def step0(req):
        # Attempt 1 must heartbeat every 1.5 s; attempt 2 need not.
        return pending(heartbeat_timeout_ms=1500) if req.attempt == 1 else pending()

    rid, first, run = park(api, webhook, step0, max_attempts=3, retry_backoff=FAST_RETRY)
    assert first.attempt == 1
    assert isinstance(run["heartbeat_timeout_at"], str) and TS_RE.match(run["heartbeat_timeout_at"]), run

    # One heartbeat with details, then none: the attempt times out.
    sent = time.time()
    assert_heartbeat_answer(heartbeat(service, first, {"progress": 40}), False)

    second = webhook.wait_requests(2, run_id=rid, step=0, timeout=15)[1]
    assert second.attempt == 2
    # The heartbeat moved the deadline to (its arrival) + 1.5 s.
    assert second.wall >= sent + 1.5 - 0.05, (second.wall - sent)
    assert token_of(second) != token_of(first)
    assert token_of(first).split(".")[4] == "1" and token_of(second).split(".")[4] == "2"
    assert "last_heartbeat" not in first.json, first.json
    assert second.json["last_heartbeat"] == {"progress": 40}, second.json

    before = wait_pending(api, rid, attempt=2)
    assert before["heartbeat_timeout_at"] is None, before
    steps = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps][:1] == [(0, 1, "transient_error")], steps
    assert "heartbeat timeout" in (steps[0]["error"] or ""), steps[0]
    assert TS_RE.match(steps[0]["pending_since"] or ""), steps[0]
    beat = steps[0]["heartbeat"]
    assert isinstance(beat, dict) and beat["details"] == {"progress": 40} and TS_RE.match(beat["at"]), steps[0]

    # Attempt 1's token no longer completes nor heartbeats anything.
    assert_error(complete(service, first, {"outcome": "succeed", "result": "late"}), 409, "stale_attempt")
    assert_error(heartbeat(service, first, {"progress": 41}), 409, "stale_attempt")
    assert api.run(rid) == before

    settled = assert_completed(complete(service, second, {"outcome": "succeed", "result": "second"}), rid)
    assert settled["status"] == "succeeded" and settled["result"] == "second", settled
    assert history(api, rid) == [(0, 1, "transient_error"), (0, 2, "succeed")]
    assert len(webhook.requests(run_id=rid)) == 2


@pytest.mark.serial  # heartbeats paced 400 ms apart against a 1.5 s timeout
def test_heartbeats_keep_a_pending_step_alive_past_its_heartbeat_timeout(api, service, webhook):
    h = 1.5
    rid, req, run = park(api, webhook, pending(heartbeat_timeout_ms=int(h * 1000)),
                         max_attempts=3, retry_backoff=FAST_RETRY)
    since = iso_to_epoch(run["pending_since"])
    first_deadline = ms(run["heartbeat_timeout_at"])
    assert first_deadline - ms(run["pending_since"]) == int(h * 1000), run

    # The step's work: a heartbeat every ~400 ms until more than three
    # heartbeat timeouts have passed since the step became pending (the wall
    # clock, which is also the database's).
    beats = 0
    while True:
        at = time.time()
        assert_heartbeat_answer(heartbeat(service, req, {"beat": beats}), False)
        beats += 1
        if at > since + 3 * h:
            break
        time.sleep(0.4)  # the pace of the work between two heartbeats
    last_sent = at

    run = api.run(rid)
    assert run["status"] == "running" and run["attempt"] == 1, run
    assert run["pending_since"] is not None and iso_to_epoch(run["pending_since"]) == since, run
    # Each heartbeat set the deadline to its arrival + H.
    assert iso_to_epoch(run["heartbeat_timeout_at"]) >= last_sent + h - 0.05, (run, last_sent)
    assert ms(run["heartbeat_timeout_at"]) > first_deadline

    settled = assert_completed(complete(service, req, {"outcome": "succeed", "result": beats}), rid)
    assert settled["status"] == "succeeded", settled
    assert api.wait_terminal(rid)["status"] == "succeeded"
    reqs = webhook.requests(run_id=rid)
    assert [(r.step, r.attempt) for r in reqs] == [(0, 1)], "only one attempt was ever delivered: %r" % reqs
    steps = api.steps(rid)
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [(0, 1, "succeed")]
    assert steps[0]["heartbeat"]["details"] == {"beat": beats - 1}, steps[0]


def test_the_pending_timeout_fails_the_run_and_dead_letters_the_step(api, service, webhook):
    webhook.route("/steps", StepScript({0: pending(timeout_ms=1000)}))
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    rid = api.submit("wf")["run_id"]

    run = api.wait_terminal(rid, timeout=20)
    assert run["status"] == "failed" and run["error_kind"] == "transient", run
    assert "pending timeout" in run["error"], run
    assert_not_pending(run)
    assert len(webhook.requests(run_id=rid)) == 1

    (attempt,) = api.steps(rid)
    assert (attempt["step"], attempt["attempt"], attempt["result"]) == (0, 1, "transient_error"), attempt
    assert "pending timeout" in attempt["error"], attempt
    assert ms(attempt["finished_at"]) - ms(attempt["pending_since"]) >= 1000, attempt

    r = api.get("/v1/dead-letters", params={"kind": "step", "limit": 1000})
    assert r.status == 200, r
    (dead,) = [d for d in r.body["dead_letters"] if d["run_id"] == rid]
    assert dead["step"] == 0 and dead["attempts"] == 1, dead
    assert "pending timeout" in dead["last_error"], dead


def test_cancelling_a_pending_run_ends_it_at_once_and_later_calls_see_the_cancel(api, service, webhook):
    webhook.route("/cb", lambda req: Reply(200, body=b""))
    rid, req, _ = park(api, webhook, pending(heartbeat_timeout_ms=600000), callback_url=webhook.url("/cb"))

    r = api.post("/v1/runs/%s/cancel" % rid)
    # No call is in flight to abort: the run ends in the cancel itself.
    assert r.status == 200 and r.body["status"] == "cancelled", r
    run = api.wait_terminal(rid, timeout=5)
    assert run["status"] == "cancelled" and run["error"] is None and run["error_kind"] is None, run
    assert run["cancel_requested"] is True
    assert_not_pending(run)

    (cb,) = webhook.wait_requests(1, path="/cb", run_id=rid, timeout=15)
    assert cb.json["status"] == "cancelled" and cb.json["run_id"] == rid, cb.json

    assert_heartbeat_answer(heartbeat(service, req, {"progress": 99}), True)
    assert_error(complete(service, req, {"outcome": "succeed", "result": "too late"}), 409, "run_cancelled")
    assert api.run(rid) == run
    assert webhook.requests(path="/steps", run_id=rid) == [req]


# --------------------------------------------------------------------------
# Pending steps hold nothing
# --------------------------------------------------------------------------

PENDING_RUNS = 1000


@pytest.mark.serial
def test_1000_pending_runs_hold_no_call_slot_and_no_socket(services, webhook):
    # 64 call slots for 1,000 runs: more than 64 pending at once is only
    # possible if a pending step gives its slot back.
    svc = services.start(HOOKFLOW_MAX_INFLIGHT="64")
    webhook.route("/steps", StepScript({0: pending()}))
    svc.api.put_workflow("wf", webhook.url(), timeout_ms=30000)

    # POST /v1/runs takes one run (openapi/openapi.yaml has no batch form of it).
    rids = ["async-%04d" % i for i in range(PENDING_RUNS)]

    def submit(i):
        return svc.api.post("/v1/runs", {"workflow": "wf", "run_id": rids[i], "input": {"i": i}})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        bad = [r for r in pool.map(submit, range(PENDING_RUNS)) if r.status != 201]
    assert not bad, bad[:5]

    def pending_runs():
        return sum(1 for r in svc.api.runs(workflow="wf") if r["status"] == "running" and r.get("pending_since"))
    wait_until(lambda: pending_runs() == PENDING_RUNS, timeout=240, interval=0.5,
               message=lambda: "all %d runs pending at once with 64 call slots (%d are)"
               % (PENDING_RUNS, pending_runs()))

    assert svc.api.metrics()["hookflow_inflight_calls"] == 0

    # Sockets: those the hookflow process has a descriptor for whose remote
    # end is the webhook's port, read from /proc/<pid>/fd and
    # /proc/<pid>/net/tcp{,6} (harness.tcp_sockets_to; no dependence on ss or
    # lsof). A pending step holds none: what is left is the keep-alive pool
    # every call shares (libcurl's connection cache), which never holds more
    # connections than calls were in flight at once (at most the 64 call
    # slots), each idle (no call unanswered), whereas a socket per pending
    # step would be 1,000.
    held = tcp_sockets_to(svc.pid, webhook.port)
    unanswered = [r for r in webhook.requests(path="/steps") if r.answered_at is None]
    assert not unanswered, "%d step calls are still open" % len(unanswered)
    assert len(held) <= 64, (
        "hookflow (pid %d) holds %d TCP connections to the webhook (port %d, states %s) with %d "
        "steps pending: more than its 64 call slots, so pending steps hold sockets"
        % (svc.pid, len(held), webhook.port, sorted({st for _, st in held}), PENDING_RUNS))

    calls = webhook.requests(path="/steps")
    assert sorted((r.run_id, r.attempt) for r in calls) == [(rid, 1) for rid in rids]

    by_run = {r.run_id: r for r in calls}

    def finish(rid):
        req = by_run[rid]
        return rid, complete(svc, req, {"outcome": "succeed", "result": {"i": req.json["payload"]["i"]}})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(finish, rids))
    bad = [(rid, r) for rid, r in answers
           if r.status != 200 or not isinstance(r.body, dict) or r.body.get("status") != "succeeded"]
    assert not bad, bad[:5]

    runs = {r["run_id"]: r for r in svc.api.runs(workflow="wf")}
    assert len(runs) == PENDING_RUNS
    wrong = [r for rid, r in runs.items()
             if r["status"] != "succeeded" or r["result"] != {"i": int(rid.split("-")[1])}]
    assert not wrong, wrong[:5]
    assert len(webhook.requests(path="/steps")) == PENDING_RUNS, "no step was delivered again"


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

@pytest.fixture
def parked(api, service, webhook):
    """A run whose step 0 is pending with a heartbeat deadline ten minutes out:
    (run_id, step-0 request, the pending run)."""
    return park(api, webhook, pending(heartbeat_timeout_ms=600000))


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=API_TOKEN)
def test_complete_and_heartbeat_refuse_api_tokens_403_and_no_credential_401(api, service, parked):
    rid, req, before = parked
    by_api_token = Api(service.base_url, token=API_TOKEN)
    anonymous = Api(service.base_url)
    done = {"outcome": "succeed", "result": 1}
    for action, body in (("complete", done), ("heartbeat", {"details": {"x": 1}})):
        assert_error(by_api_token.post(step_path(rid, 0, action), body), 403, "forbidden")
        assert_error(anonymous.post(step_path(rid, 0, action), body), 401, "unauthenticated")
    assert api.run(rid) == before
    # The attempt is still open to its own token.
    assert assert_completed(complete(service, req, done), rid)["status"] == "succeeded"


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=API_TOKEN)
@pytest.mark.parametrize("body, field", [
    ({"outcome": "pending"}, "outcome"),
    ({"outcome": "continue", "delay_ms": -1}, "delay_ms"),
    ({"outcome": "continue", "payload": 1, "run_at": "tomorrow"}, "run_at"),
    ({"outcome": "succeed", "result": 1, "colour": "red"}, "colour"),
    ({"error": {"message": "boom", "retryable": "yes"}}, "retryable"),
], ids=["pending", "negative-delay", "bad-run-at", "unknown-field", "retryable-not-bool"])
def test_complete_with_an_invalid_body_is_400_naming_the_field_and_changes_nothing(api, service, parked,
                                                                                    body, field):
    rid, req, before = parked
    assert_error(complete(service, req, body), 400, "invalid_argument", field)
    after = api.run(rid)
    assert after == before, "a refused completion changed the run"
    assert_pending_run(after)
    # The attempt was not used up: a valid completion still settles it.
    settled = assert_completed(complete(service, req, {"outcome": "succeed", "result": "ok"}), rid)
    assert settled["status"] == "succeeded", settled


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=API_TOKEN)
def test_heartbeat_details_over_64_kib_are_refused_and_change_nothing(api, service, parked):
    rid, req, before = parked
    details = {"blob": "x" * (64 * 1024)}  # over 64 KiB as JSON
    r = heartbeat(service, req, details)
    if r.status == 413:
        assert_error(r, 413, "payload_too_large")
    else:
        assert_error(r, 400, "invalid_argument", "details")
    assert api.run(rid) == before, "a refused heartbeat changed the run (heartbeat_timeout_at moved?)"
    assert_completed(complete(service, req, {"outcome": "succeed", "result": 1}), rid)
    (attempt,) = api.steps(rid)
    assert attempt["heartbeat"] is None, "the refused details were recorded: %r" % (attempt,)


@pytest.mark.parametrize("extra, field", [
    ({"kv": {"put": {"app/async/refused": 1}}}, "kv"),
    ({"bogus": 1}, "bogus"),
], ids=["kv", "unknown-key"])
def test_a_pending_answer_with_another_key_fails_the_run_permanently(api, webhook, extra, field):
    webhook.route("/steps", StepScript({0: pending(timeout_ms=60000, **extra)}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"].startswith("invalid step response"), run["error"]
    assert field in run["error"], run["error"]
    assert_not_pending(run)
    assert len(webhook.requests(run_id=rid)) == 1
    assert kv_item(api, "app/async/refused") is None


# --------------------------------------------------------------------------
# run_at
# --------------------------------------------------------------------------

def test_run_at_schedules_the_next_step_at_that_time(api, webhook):
    chosen = {}

    def step0(req):
        chosen["run_at"] = epoch_to_iso(time.time() + 2.0)
        return cont({"n": 1}, run_at=chosen["run_at"])

    webhook.route("/steps", StepScript({0: step0, 1: lambda req: succeed(req.json["payload"])}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]

    run = api.wait_status(rid, "scheduled")
    assert ms(run["next_attempt_at"]) == ms(chosen["run_at"]), (run["next_attempt_at"], chosen["run_at"])

    (step1,) = webhook.wait_requests(1, run_id=rid, step=1, timeout=15)
    early = iso_to_epoch(chosen["run_at"]) - step1.wall
    assert early <= 0.05, "step 1 came %.3f s before run_at %s" % (early, chosen["run_at"])
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"n": 1}, run


def test_run_at_in_the_past_continues_at_once(api, webhook):
    webhook.route("/steps", StepScript({
        0: lambda req: cont({"n": 1}, run_at=epoch_to_iso(time.time() - 3600)),
        1: lambda req: succeed(req.json["payload"]),
    }))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"n": 1}, run
    step0, step1 = webhook.requests(run_id=rid)
    # At once: as a plain continue, well inside the service's 5 s safety poll.
    assert step1.time - step0.answered_at < 2.0, step1.time - step0.answered_at


@pytest.mark.parametrize("extra", [
    {"run_at": "tomorrow"},
    {"run_at": "2030-01-01T00:00:00Z", "delay_ms": 1000},
    {"run_at": "2030-01-01T00:00:00Z", "wait_for_signal": {"correlation_key": "k", "timeout_ms": 1000}},
], ids=["not-a-time", "with-delay-ms", "with-wait-for-signal"])
def test_an_invalid_run_at_fails_the_run_permanently_naming_run_at(api, webhook, extra):
    webhook.route("/steps", StepScript({0: cont({"n": 1}, **extra)}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"].startswith("invalid step response") and "run_at" in run["error"], run["error"]
    assert len(webhook.requests(run_id=rid)) == 1


# --------------------------------------------------------------------------
# max_pending_ms
# --------------------------------------------------------------------------

def _workflow(api):
    r = api.get("/v1/workflows/wf")
    assert r.status == 200, r
    return r.body


def test_max_pending_ms_defaults_to_a_day_and_round_trips(api, webhook):
    assert api.put_workflow("wf", webhook.url())["max_pending_ms"] == DAY_MS
    assert _workflow(api)["max_pending_ms"] == DAY_MS
    for value in (2000, 1000, 31536000000):
        assert api.put_workflow("wf", webhook.url(), max_pending_ms=value)["max_pending_ms"] == value
        assert _workflow(api)["max_pending_ms"] == value


@pytest.mark.parametrize("bad", [0, 999, 31536000001, 10 ** 12, -1, "x"])
def test_max_pending_ms_out_of_range_is_400_naming_it_and_changes_nothing(api, webhook, bad):
    api.put_workflow("wf", webhook.url(), max_pending_ms=2000)
    before = _workflow(api)
    body = {"url": webhook.url(), "timeout_ms": 5000, "retry_backoff": FAST_RETRY, "max_pending_ms": bad}
    assert_error(api.put("/v1/workflows/wf", body), 400, "invalid_argument", "max_pending_ms")
    assert _workflow(api) == before


def test_pending_timeouts_are_clamped_to_max_pending_ms(api, webhook):
    # Both timeouts end 2 s after the pending answer; three attempts so that
    # some attempt is seen pending even on a slow machine.
    rid, _, run = park(api, webhook, pending(timeout_ms=999999999, heartbeat_timeout_ms=999999999),
                       max_pending_ms=2000, max_attempts=3, retry_backoff=FAST_RETRY)
    since = ms(run["pending_since"])
    assert 2000 - 5 <= ms(run["pending_timeout_at"]) - since <= 2000 + 5, run
    assert 2000 - 5 <= ms(run["heartbeat_timeout_at"]) - since <= 2000 + 5, run
