"""docs/webhook-protocol.md section 1: what hookflow sends to the step webhook
(headers, Standard Webhooks signature, body fields)."""

import time

from harness import Reply, StepScript, cont, iso_to_epoch, new_secret, succeed, verify_signature


def test_step_request_headers_and_signature(api, webhook, service):
    secret = new_secret()

    def step0(req):
        return Reply(503, body=b"try again") if req.attempt == 1 else cont({"next": 1})

    webhook.route("/steps", StepScript({0: step0, 1: succeed("ok")}))
    api.put_workflow("signed", webhook.url(), secret=secret, max_attempts=3)
    rid = api.submit("signed", input={"x": 1})["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"

    reqs = webhook.requests(path="/steps", run_id=rid)
    assert [(r.step, r.attempt) for r in reqs] == [(0, 1), (0, 2), (1, 1)]
    for r in reqs:
        assert r.method == "POST"
        assert r.headers.get("content-type", "").split(";")[0].strip() == "application/json"
        assert r.headers.get("user-agent", "").startswith("hookflow/"), r.headers
        ts = r.headers.get("webhook-timestamp")
        assert ts and ts.isdigit(), r.headers
        assert abs(int(ts) - r.wall) < 60
        assert r.headers.get("webhook-id")
        sig = r.headers.get("webhook-signature", "")
        assert sig.startswith("v1,"), r.headers
        assert verify_signature(secret, r.headers, r.body), "bad signature on %r" % r
        assert not verify_signature(new_secret(), r.headers, r.body)
    assert reqs[0].headers["webhook-id"] == reqs[1].headers["webhook-id"], "same id on every retry of a step"
    assert reqs[2].headers["webhook-id"] != reqs[0].headers["webhook-id"], "a new id for the next step"


def test_unsigned_workflow_sends_no_signature(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(None)}))
    api.put_workflow("plain", webhook.url())
    rid = api.submit("plain")["run_id"]
    api.wait_terminal(rid)
    (req,) = webhook.requests(run_id=rid)
    assert "webhook-signature" not in req.headers
    assert req.headers.get("webhook-id") and req.headers.get("webhook-timestamp")


def test_step_request_body_fields(api, webhook, service):
    webhook.route("/steps", StepScript({0: cont({"p": 2}), 1: succeed(3)}))
    api.put_workflow("orders", webhook.url(), timeout_ms=5000, max_attempts=4)
    rid = api.submit("orders", run_id="order-42", input={"any": "json"},
                     headers={"tenant": "acme", "trace": "t-1"})["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    r0, r1 = webhook.requests(run_id=rid)
    for req, step, payload in ((r0, 0, {"any": "json"}), (r1, 1, {"p": 2})):
        b = req.json
        assert isinstance(b, dict), req.body[:200]
        assert b["run_id"] == "order-42"
        assert b["workflow"] == "orders"
        assert b["step"] == step
        assert b["attempt"] == 1
        assert b["max_attempts"] == 4
        assert b["generation"] == 1
        assert b["payload"] == payload
        assert b["headers"] == {"tenant": "acme", "trace": "t-1"}
        assert "signal" not in b, "signal only after a wait"
        assert b.get("group") is None, "group only for group members"
        left = iso_to_epoch(b["deadline"]) - req.wall
        assert 3.0 <= left <= 6.0, "deadline should be about timeout_ms (5 s) away, is %.2fs" % left
        memo = b["memo"]
        assert memo["url"] == service.base_url + "/v1/runs/order-42"
        assert isinstance(memo["token"], str) and len(memo["token"]) >= 16


def test_step_body_carries_run_level_max_attempts(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(500, body=b"no")}))
    api.put_workflow("wf", webhook.url(), max_attempts=5)
    rid = api.submit("wf", max_attempts=2)["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed"
    reqs = webhook.requests(run_id=rid)
    assert [r.attempt for r in reqs] == [1, 2]
    assert all(r.json["max_attempts"] == 2 for r in reqs)


def test_changing_the_workflow_affects_later_steps(api, webhook):
    moved = []

    def old(req):
        api.put_workflow("wf", webhook.url("/new"))
        return cont("moved")

    def new(req):
        moved.append(req)
        return succeed("new url")

    webhook.route("/old", old)
    webhook.route("/new", new)
    api.put_workflow("wf", webhook.url("/old"))
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == "new url"
    assert [r.step for r in moved] == [1]
    assert len(webhook.requests(path="/old")) == 1


def test_signature_uses_the_secret_current_at_dispatch(api, webhook):
    s1, s2 = new_secret(), new_secret(48)

    def step0(req):
        api.put_workflow("wf", webhook.url(), secret=s2)
        return cont(None)

    webhook.route("/steps", StepScript({0: step0, 1: succeed(None)}))
    api.put_workflow("wf", webhook.url(), secret=s1)
    rid = api.submit("wf")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    r0, r1 = webhook.requests(run_id=rid)
    assert verify_signature(s1, r0.headers, r0.body)
    assert verify_signature(s2, r1.headers, r1.body)
    assert time.time() - int(r1.headers["webhook-timestamp"]) < 60
