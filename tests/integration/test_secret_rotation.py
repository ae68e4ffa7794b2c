"""Issue 12, item 7: signing secrets rotate without downtime and cannot be
dropped by accident.

PUT /v1/workflows/{name} without `secret` keeps the secret (it is write-only);
`"secret": null` removes it. POST /v1/workflows/{name}/secret rotates: for the
grace period every step request and terminal callback carries both
signatures in webhook-signature, then only the new one. Signatures are
checked with the Standard Webhooks project's own library (npm
standardwebhooks, webhook_verify.py)."""

import base64
import re
import time

import pytest

from harness import Reply, assert_error, cont, iso_to_epoch, new_secret, succeed
from webhook_verify import verify_with_library

SECRET_RE = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")  # base64 of 32 bytes
INPUT_KEYS = ("url", "callback_url", "timeout_ms", "max_attempts", "priority", "retry_backoff",
              "max_concurrency", "step_output_replay")


def rotate(api, name, body=None):
    return api.post("/v1/workflows/%s/secret" % name, body)


def signatures(req):
    return req.headers.get("webhook-signature", "").split()


def read_back_input(api, name):
    """The workflow as GET shows it, reduced to what PUT takes: what a client
    that re-PUTs a read-back workflow sends (no secret: it is write-only)."""
    r = api.get("/v1/workflows/" + name)
    assert r.status == 200, r
    return {k: r.body[k] for k in INPUT_KEYS if r.body.get(k) is not None}


def one_signed_run(api, webhook, workflow, path="/steps"):
    """Runs one single-step run of `workflow` and returns its step request."""
    webhook.route(path, lambda req: succeed("ok"))
    rid = api.submit(workflow)["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    (req,) = webhook.requests(path=path, run_id=rid)
    return req


@pytest.mark.serial
def test_rotation_in_flight_signs_with_both_secrets_in_grace_then_only_the_new(api, webhook):
    """Runs in flight across a rotation with grace_ms 5000: every step request
    and callback verifies (standardwebhooks) with the old secret before the
    rotation, with the old or the new one during the grace period (both, for
    every call claimed in it), and after it only with the new one."""
    old = new_secret()
    grace_ms = 5000
    state = {"rotated": None, "until": None}

    def before(req):
        """The call of req's run just before `req` (step requests, then the
        callback after the last step), or None."""
        seq = [x for x in webhook.requests(run_id=req.run_id) if x.seq < req.seq]
        return seq[-1] if seq else None

    def claimed_after(req, t):
        """True when `req`'s call was certainly claimed after wall time `t`:
        the call before it in its run reached the webhook after `t`, and a
        run's next call is claimed only once that one's answer came back."""
        prev = before(req)
        return t is not None and prev is not None and prev.wall > t

    def steps(req):
        group = req.run_id.split("-")[0]
        # a runs end on a call claimed in the grace period, b runs on one
        # claimed after it (so are their callbacks); c-1 starts after it.
        if group == "c" or (group == "a" and claimed_after(req, state["rotated"])) or \
                (group == "b" and claimed_after(req, state["until"])):
            return succeed(group)
        return cont({"n": req.step}, delay_ms=100)

    webhook.route("/steps", steps)
    webhook.route("/cb", lambda req: Reply(200, body=b""))
    api.put_workflow("rot", webhook.url("/steps"), callback_url=webhook.url("/cb"), secret=old,
                     max_attempts=5)
    runs = ["a-1", "a-2", "b-1", "b-2"]
    for rid in runs:
        api.submit("rot", run_id=rid)
    webhook.wait_for(lambda reqs: all(any(r.run_id == rid for r in reqs) for rid in runs),
                     timeout=15, message="a first step request of every run")

    rotated_at = time.time()
    r = rotate(api, "rot", {"grace_ms": grace_ms})
    rotated_done = time.time()
    assert r.status == 200, r
    new = r.body["secret"]
    assert SECRET_RE.match(new), new
    until = iso_to_epoch(r.body["previous_valid_until"])
    state["until"] = until
    assert rotated_at + grace_ms / 1000.0 - 1 <= until <= rotated_done + grace_ms / 1000.0 + 1
    assert r.body["workflow"]["signed"] is True
    assert r.body["workflow"]["previous_secret_valid_until"] == r.body["previous_valid_until"]
    assert old not in r.text
    state["rotated"] = rotated_done

    def in_grace(req):
        return claimed_after(req, rotated_done) and req.wall < until

    # During the grace period: a step of every run and the callbacks of the a
    # runs, claimed after the rotation, reach the webhook before `until`.
    def grace_seen(reqs):
        steps_ok = all(any(x.run_id == rid and x.path == "/steps" and in_grace(x) for x in reqs)
                       for rid in runs)
        cbs_ok = all(any(x.run_id == rid and x.path == "/cb" and in_grace(x) for x in reqs)
                     for rid in ("a-1", "a-2"))
        return steps_ok and cbs_ok
    webhook.wait_for(grace_seen, timeout=max(until - time.time(), 0.1),
                     message="calls claimed within the grace period, before it ended")

    # After it (a deadline on the clock): the b runs end, a fresh run starts.
    webhook.wait_for(lambda reqs: time.time() > until + 0.01, timeout=grace_ms / 1000.0 + 5,
                     message="the end of the grace period")
    api.submit("rot", run_id="c-1")
    for rid in runs + ["c-1"]:
        assert api.wait_terminal(rid)["status"] == "succeeded"
        webhook.wait_requests(1, path="/cb", run_id=rid, timeout=15)
    wf = api.get("/v1/workflows/rot").body
    assert wf["signed"] is True and wf["previous_secret_valid_until"] is None

    reqs = webhook.requests()
    assert all(r.path in ("/steps", "/cb") for r in reqs), reqs
    cases = [(old, r) for r in reqs] + [(new, r) for r in reqs]
    results = verify_with_library(cases)
    by_old = dict(zip((r.seq for r in reqs), results[:len(reqs)]))
    by_new = dict(zip((r.seq for r in reqs), results[len(reqs):]))
    counts = {"before": 0, "grace": 0, "both": 0, "after": 0}
    for r in reqs:
        o, n = by_old[r.seq] is True, by_new[r.seq] is True
        if r.wall < rotated_at:
            assert o and not n, ("before the rotation: old secret only", r, by_old[r.seq])
            assert len(signatures(r)) == 1, r.headers
            counts["before"] += 1
        else:
            assert o or n, ("after the rotation: either secret", r, by_old[r.seq], by_new[r.seq])
            counts["grace"] += r.wall < until
        if in_grace(r):
            assert o and n, ("claimed in the grace period: both secrets", r, by_old[r.seq],
                             by_new[r.seq])
            assert len(signatures(r)) == 2, r.headers
            counts["both"] += 1
        if claimed_after(r, until) or r.run_id == "c-1":
            assert n and not o, ("after the grace period: the new secret only", r, by_old[r.seq])
            assert len(signatures(r)) == 1, r.headers
            counts["after"] += 1
    # Every class was exercised: steps and callbacks in the grace period and after it.
    assert counts["before"] >= 4 and counts["grace"] >= 6 and counts["both"] >= 6, counts
    after_cbs = [r for r in reqs if r.path == "/cb" and (claimed_after(r, until) or r.run_id == "c-1")]
    assert {r.run_id for r in after_cbs} == {"b-1", "b-2", "c-1"}, after_cbs
    assert counts["after"] >= 6, counts


def test_put_without_secret_keeps_signing(api, webhook):
    """A client that reads a signed workflow back and PUTs it (with no secret:
    GET never shows one) does not turn signing off."""
    secret = new_secret()
    api.put_workflow("keep", webhook.url("/steps"), secret=secret)
    body = read_back_input(api, "keep")
    body["max_attempts"] = 7
    r = api.put("/v1/workflows/keep", body)
    assert r.status == 200, r
    assert r.body["signed"] is True and r.body["max_attempts"] == 7
    assert api.get("/v1/workflows/keep").body["signed"] is True
    req = one_signed_run(api, webhook, "keep")
    assert verify_with_library([(secret, req)]) == [True]


def test_put_without_secret_keeps_a_rotation_in_progress(api, webhook):
    s1 = new_secret()
    api.put_workflow("keep", webhook.url("/steps"), secret=s1)
    r = rotate(api, "keep", {"grace_ms": 600000})
    assert r.status == 200, r
    s2, until = r.body["secret"], r.body["previous_valid_until"]
    r = api.put("/v1/workflows/keep", read_back_input(api, "keep"))
    assert r.status == 200 and r.body["previous_secret_valid_until"] == until, r
    # PUT with the current secret again (an identical PUT) changes nothing either.
    r = api.put("/v1/workflows/keep", dict(read_back_input(api, "keep"), secret=s2))
    assert r.status == 200 and r.body["previous_secret_valid_until"] == until, r
    req = one_signed_run(api, webhook, "keep")
    assert len(signatures(req)) == 2, req.headers
    assert verify_with_library([(s1, req), (s2, req)]) == [True, True]


def test_put_with_another_secret_switches_at_once(api, webhook):
    s1 = new_secret()
    api.put_workflow("switch", webhook.url("/steps"), secret=s1)
    assert rotate(api, "switch", {"grace_ms": 600000}).status == 200
    s3 = new_secret()
    r = api.put("/v1/workflows/switch", dict(read_back_input(api, "switch"), secret=s3))
    assert r.status == 200 and r.body["signed"] is True, r
    assert r.body["previous_secret_valid_until"] is None, r
    req = one_signed_run(api, webhook, "switch")
    assert len(signatures(req)) == 1, req.headers
    ok_new, ok_old = verify_with_library([(s3, req), (s1, req)])
    assert ok_new is True and ok_old is not True


def test_put_secret_null_removes_signing_and_the_previous_secret(api, webhook):
    api.put_workflow("plain", webhook.url("/steps"), secret=new_secret())
    assert rotate(api, "plain", {"grace_ms": 600000}).status == 200
    r = api.put("/v1/workflows/plain", dict(read_back_input(api, "plain"), secret=None))
    assert r.status == 200, r
    assert r.body["signed"] is False and r.body["previous_secret_valid_until"] is None, r
    req = one_signed_run(api, webhook, "plain")
    assert "webhook-signature" not in req.headers, req.headers


def test_rotate_generates_a_secret_with_a_24_hour_grace_by_default(api, webhook):
    old = new_secret()
    api.put_workflow("gen", webhook.url("/steps"), secret=old)
    t0 = time.time()
    r = rotate(api, "gen")  # no body at all
    assert r.status == 200, r
    assert set(r.body) == {"secret", "previous_valid_until", "workflow"}, r.body
    assert SECRET_RE.match(r.body["secret"]), r.body
    assert len(base64.b64decode(r.body["secret"][len("whsec_"):])) == 32
    assert abs(iso_to_epoch(r.body["previous_valid_until"]) - (t0 + 86400)) < 60, r.body
    assert r.body["workflow"]["name"] == "gen" and r.body["workflow"]["signed"] is True
    again = rotate(api, "gen", {})
    assert again.status == 200 and again.body["secret"] != r.body["secret"], again


def test_rotate_takes_a_given_secret(api, webhook):
    old, given = new_secret(), new_secret(48)
    api.put_workflow("given", webhook.url("/steps"), secret=old)
    r = rotate(api, "given", {"secret": given, "grace_ms": 0})
    assert r.status == 200 and r.body["secret"] == given, r
    assert r.body["previous_valid_until"] is None, "grace_ms 0: no previous secret"
    req = one_signed_run(api, webhook, "given")
    assert len(signatures(req)) == 1, req.headers
    ok_given, ok_old = verify_with_library([(given, req), (old, req)])
    assert ok_given is True and ok_old is not True


def test_rotating_an_unsigned_workflow_signs_it_with_no_previous_secret(api, webhook):
    api.put_workflow("unsigned", webhook.url("/steps"))
    r = rotate(api, "unsigned", {"grace_ms": 60000})
    assert r.status == 200, r
    assert r.body["previous_valid_until"] is None and r.body["workflow"]["signed"] is True, r
    req = one_signed_run(api, webhook, "unsigned")
    assert len(signatures(req)) == 1, req.headers
    assert verify_with_library([(r.body["secret"], req)]) == [True]


def test_rotating_again_in_the_grace_period_drops_the_oldest_secret(api, webhook):
    s1 = new_secret()
    api.put_workflow("twice", webhook.url("/steps"), secret=s1)
    s2 = rotate(api, "twice", {"grace_ms": 600000}).body["secret"]
    r = rotate(api, "twice", {"grace_ms": 600000})
    assert r.status == 200, r
    s3 = r.body["secret"]
    req = one_signed_run(api, webhook, "twice")
    assert len(signatures(req)) == 2, req.headers
    ok3, ok2, ok1 = verify_with_library([(s3, req), (s2, req), (s1, req)])
    assert ok3 is True and ok2 is True and ok1 is not True


@pytest.mark.parametrize("body,field", [
    ({"grace_ms": -1}, "grace_ms"),
    ({"grace_ms": 2592000001}, "grace_ms"),
    ({"grace_ms": "1000"}, "grace_ms"),
    ({"grace_ms": 1.5}, "grace_ms"),
    ({"secret": "plaintext"}, "secret"),
    ({"secret": "whsec_c2hvcnQ="}, "secret"),
    ({"secret": 5}, "secret"),
    ({"secret": "whsec_" + "A" * 600}, "secret"),
    ({"secret_key": new_secret()}, "secret_key"),
])
def test_bad_rotation_is_400_naming_the_field_and_changes_nothing(api, webhook, body, field):
    secret = new_secret()
    before = api.put_workflow("bad", webhook.url("/steps"), secret=secret)
    assert_error(rotate(api, "bad", body), 400, "invalid_argument", field)
    assert api.get("/v1/workflows/bad").body == before
    req = one_signed_run(api, webhook, "bad")
    assert len(signatures(req)) == 1 and verify_with_library([(secret, req)]) == [True]


def test_rotation_body_must_be_a_json_object(api, webhook):
    api.put_workflow("shape", webhook.url("/steps"), secret=new_secret())
    assert_error(rotate(api, "shape", [1]), 400, "invalid_argument")
    r = api.request("POST", "/v1/workflows/shape/secret", raw="{", content_type="application/json")
    assert_error(r, 400, "invalid_argument")


def test_rotating_an_unknown_workflow_is_404(api):
    assert_error(rotate(api, "nope"), 404, "not_found", "workflow nope not found")
    assert_error(rotate(api, "nope", {"grace_ms": 0}), 404, "not_found")
    assert_error(rotate(api, "bad%20name"), 400, "invalid_argument", "name")


def test_no_get_ever_shows_a_secret(service, api, webhook):
    s1 = new_secret()
    api.put_workflow("hidden", webhook.url("/steps"), secret=s1)
    s2 = rotate(api, "hidden", {"grace_ms": 600000}).body["secret"]
    req = one_signed_run(api, webhook, "hidden")
    rid = req.run_id
    gets = ["/v1/workflows", "/v1/workflows/hidden", "/v1/runs", "/v1/runs/" + rid,
            "/v1/runs/%s/steps" % rid, "/v1/dead-letters", "/metrics", "/readyz", "/"]
    texts = []
    for path in gets:
        r = api.get(path)
        assert r.status == 200, (path, r)
        texts.append(r.text)
    wf = api.get("/v1/workflows/hidden").body
    assert wf["signed"] is True and isinstance(wf["previous_secret_valid_until"], str)
    assert not any("secret" in k and k not in ("previous_secret_valid_until",) for k in wf), wf
    texts.append(service.log_text())
    for s in (s1, s2):
        key = s[len("whsec_"):]
        for path, t in zip(gets + ["service log"], texts):
            assert key not in t, "a signing secret leaked in %s" % path
