"""Delivery tokens (README, "Security"): the token a step request carries binds
the run, its generation, the step and attempt and an expiry (the call's
deadline plus the lease); it stops working when the run ends or is rerun; its
signing keys rotate with `hookflow rotate-keys`, the old key accepted for a
grace period."""

import os
import subprocess

import pytest

from harness import Api, StepScript, cont, succeed, wait_until

TOKEN = "it-delivery-token-api-token-0123456789"


def memo_api(service, req):
    return Api(service.base_url, token=req.json["memo"]["token"])


def memo_path(rid):
    return "/v1/runs/%s/memo/m" % rid


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_a_token_works_while_its_run_is_active_and_stops_when_it_ends(api, service, webhook):
    reached = {}

    def step0(req):
        reached["during"] = memo_api(service, req).put(memo_path(req.run_id), {"value": 1}).status
        return cont({"x": 1}, delay_ms=60000)

    webhook.route("/steps", StepScript({0: step0, 1: succeed("done")}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    req = webhook.wait_requests(1, run_id=rid)[0]
    api.wait_status(rid, ["scheduled"])
    assert reached["during"] == 200
    tok = memo_api(service, req)
    assert tok.get(memo_path(rid)).status == 200  # the run is still active
    assert req.json["memo"]["token"].startswith("hf1.")

    api.post("/v1/runs/%s/cancel" % rid)
    assert api.wait_terminal(rid)["status"] == "cancelled"
    r = tok.get(memo_path(rid))
    assert r.status == 403 and "has ended" in r.error_message, r
    # An API token still reads it.
    assert api.get(memo_path(rid)).status == 200


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_a_rerun_retires_the_tokens_of_the_earlier_generation(api, service, webhook):
    gens = {}

    def step0(req):
        gens[req.field("generation")] = req
        if req.field("generation") == 1:
            return succeed("first")
        return cont({}, delay_ms=60000)

    webhook.route("/steps", StepScript({0: step0}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert api.post("/v1/runs/%s/rerun" % rid, {}).status == 201
    api.wait_status(rid, ["scheduled"])
    old, new = memo_api(service, gens[1]), memo_api(service, gens[2])
    r = old.get(memo_path(rid))
    assert r.status == 403 and "rerun" in r.error_message, r
    assert new.put(memo_path(rid), {"value": 2}).status == 200


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN, HOOKFLOW_LEASE_MS="500")
def test_a_token_expires_after_its_call_could_have_lasted(api, service, webhook):
    webhook.route("/steps", StepScript({0: cont({}, delay_ms=600000)}))
    api.put_workflow("wf", webhook.url(), timeout_ms=1000, max_pending_ms=1000)
    rid = api.submit("wf")["run_id"]
    req = webhook.wait_requests(1, run_id=rid)[0]
    api.wait_status(rid, ["scheduled"])
    tok = memo_api(service, req)
    # Bound to deadline + lease + the longest the step may stay pending
    # (max_pending_ms), in whole seconds: at most ~4 s from the call.
    expires = int(req.json["memo"]["token"].split(".")[5])
    assert 0 < expires - req.wall <= 5, (expires, req.wall)

    def refused():
        r = tok.get(memo_path(rid))
        return r if r.status == 403 else None
    r = wait_until(refused, timeout=10, message="the token to expire")
    assert "expired" in r.error_message, r
    assert api.run(rid)["status"] == "scheduled"  # the run itself goes on


def rotate(hookflow_bin, db, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKFLOW_")}
    env["HOOKFLOW_DATABASE_URL"] = db.url
    return subprocess.run([hookflow_bin, "rotate-keys"] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_keys_rotate_and_the_old_key_is_accepted_for_its_grace_period(api, service, webhook, db,
                                                                       hookflow_bin):
    webhook.route("/steps", StepScript({0: cont({}, delay_ms=600000)}))
    api.put_workflow("wf", webhook.url())
    first = api.submit("wf")["run_id"]
    before = webhook.wait_requests(1, run_id=first)[0]
    api.wait_status(first, ["scheduled"])
    old_kid = before.json["memo"]["token"].split(".")[1]

    loads = service.log_text().count("delivery-token keys loaded")
    # A grace period long enough for the checks below to run inside it even on
    # a slow machine (under ASan), short enough to wait for its end.
    r = rotate(hookflow_bin, db, "--grace-ms", "10000")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: service.log_text().count("delivery-token keys loaded") > loads, timeout=10,
               message="the instance to reload its keys")

    second = api.submit("wf")["run_id"]
    after = webhook.wait_requests(1, run_id=second)[0]
    api.wait_status(second, ["scheduled"])
    new_kid = after.json["memo"]["token"].split(".")[1]
    assert new_kid != old_kid and new_kid in r.stdout.decode()

    # During the grace period both keys' tokens work.
    assert memo_api(service, before).get(memo_path(first)).status == 404  # authorised: no memo yet
    assert memo_api(service, after).get(memo_path(second)).status == 404

    def old_refused():
        got = memo_api(service, before).get(memo_path(first))
        return got if got.status == 403 else None
    got = wait_until(old_refused, timeout=30, message="the old key's grace period to end")
    assert "retired key" in got.error_message, got
    assert memo_api(service, after).get(memo_path(second)).status == 404


def test_rotate_keys_refuses_a_bad_grace(hookflow_bin, db):
    r = rotate(hookflow_bin, db, "--grace-ms", "-1")
    assert r.returncode != 0 and b"--grace-ms" in r.stderr, r
