"""docs/webhook-protocol.md section 6: a terminal callback is POSTed, signed,
on every termination path, with the documented body; a failing callback is
retried."""

import pytest

from harness import (TS_RE, Hang, Reply, StepScript, cancel, cont, fail, new_secret, sql_quote,
                     succeed, verify_signature, wait_until)
from kvcheck import callback_dead_letters

CB_FIELDS = {"run_id", "workflow", "status", "result", "error", "error_kind", "headers",
             "final_step", "generation", "finished_at", "group"}


@pytest.fixture
def secret():
    return new_secret()


@pytest.fixture
def setup(api, webhook, secret):
    """Registers workflow "wf" (steps at /steps, callbacks at /cb, signed) with
    the given step script; returns a submit function."""
    webhook.route("/cb", lambda req: Reply(200, body=b""))

    def make(script, **wf_settings):
        webhook.route("/steps", StepScript(script))
        settings = dict(max_attempts=3, callback_url=webhook.url("/cb"), secret=secret)
        settings.update(wf_settings)
        api.put_workflow("wf", webhook.url(), **settings)
        return lambda **kw: api.submit("wf", headers={"tenant": "acme"}, **kw)["run_id"]
    return make


def _callback(webhook, rid, secret, n=1):
    reqs = webhook.wait_requests(n, path="/cb", run_id=rid, timeout=15)
    for req in reqs:
        assert req.method == "POST"
        assert req.headers.get("content-type", "").startswith("application/json")
        assert req.headers.get("user-agent", "").startswith("hookflow/")
        assert verify_signature(secret, req.headers, req.body), "callback signature"
        assert isinstance(req.json, dict)
        assert CB_FIELDS <= set(req.json), "missing fields: %s" % (CB_FIELDS - set(req.json))
    return reqs[-1].json


def _check_common(cb, api, rid):
    run = api.run(rid)
    assert cb["run_id"] == rid
    assert cb["workflow"] == "wf"
    assert cb["status"] == run["status"]
    assert cb["headers"] == {"tenant": "acme"}
    assert cb["generation"] == 1
    assert cb["final_step"] == run["final_step"]
    assert TS_RE.match(cb["finished_at"]) and cb["finished_at"] == run["finished_at"]
    assert cb["group"] is None
    return run


def test_callback_on_succeed(api, webhook, setup, secret):
    rid = setup({0: cont(1), 1: succeed({"ok": True})})()
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "succeeded"
    assert cb["result"] == {"ok": True}
    assert cb["error"] is None and cb["error_kind"] is None
    assert cb["final_step"] == 1


def test_callback_on_fail_outcome(api, webhook, setup, secret):
    rid = setup({0: fail("card declined")})()
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "failed"
    assert cb["error"] == "card declined" and cb["error_kind"] == "permanent"
    assert cb["result"] is None


def test_callback_on_webhook_cancel(api, webhook, setup, secret):
    rid = setup({0: cancel("user left")})()
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "cancelled" and cb["error"] == "user left"


def test_callback_on_external_cancel_of_queued_run(api, webhook, setup, secret):
    rid = setup({0: succeed(1)})(delay_ms=600000)
    assert api.post("/v1/runs/%s/cancel" % rid).status == 200
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "cancelled" and cb["error"] is None and cb["error_kind"] is None
    assert cb["final_step"] == 0


def test_callback_on_external_cancel_of_running_run(api, webhook, setup, secret):
    rid = setup({0: Hang(max_s=30)})()
    webhook.wait_requests(1, path="/steps", run_id=rid)
    assert api.post("/v1/runs/%s/cancel" % rid).status == 202
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "cancelled" and cb["error"] is None


def test_callback_on_permanent_error_dead_letter(api, webhook, setup, secret):
    rid = setup({0: Reply(404, body=b"no such handler")})()
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "failed" and cb["error_kind"] == "permanent"
    assert "HTTP 404" in cb["error"] and "no such handler" in cb["error"]


def test_callback_on_transient_exhausted_dead_letter(api, webhook, setup, secret):
    rid = setup({0: Reply(500, body=b"down")}, max_attempts=2)()
    cb = _callback(webhook, rid, secret)
    _check_common(cb, api, rid)
    assert cb["status"] == "failed" and cb["error_kind"] == "transient"
    assert len(webhook.requests(path="/steps", run_id=rid)) == 2


def test_failing_callback_is_retried_then_acknowledged(api, db, webhook, setup, secret):
    submit = setup({0: succeed("v")})
    webhook.route("/cb", lambda req: Reply(500, body=b"cb down") if len(webhook.requests(path="/cb")) == 1
                  else Reply(204))
    rid = submit()
    reqs = webhook.wait_requests(2, path="/cb", run_id=rid, timeout=15)
    _callback(webhook, rid, secret, n=2)
    assert reqs[0].headers["webhook-id"] == reqs[1].headers["webhook-id"], "same id on a callback retry"
    assert reqs[0].body == reqs[1].body or reqs[0].json == reqs[1].json
    if db.table_exists("callback"):
        wait_until(lambda: db.scalar("SELECT status FROM callback WHERE run_id = %s" % sql_quote(rid)) == "done",
                   timeout=10, message="callback row acknowledged (status done)")
    assert callback_dead_letters(api, db, rid) == []
    assert len(webhook.requests(path="/cb", run_id=rid)) == 2


def test_exhausted_callback_is_dead_lettered(api, db, webhook, setup, secret):
    submit = setup({0: succeed("v")}, max_attempts=2)
    webhook.route("/cb", lambda req: Reply(503, body=b"cb down"))
    rid = submit()
    webhook.wait_requests(2, path="/cb", run_id=rid, timeout=15)
    dls = wait_until(lambda: callback_dead_letters(api, db, rid), timeout=10, message="callback dead letter")
    assert len(dls) == 1 and dls[0]["attempts"] == 2
    assert api.run(rid)["status"] == "succeeded", "a dead callback does not change the run"


def test_run_callback_url_overrides_workflow_callback_url(api, webhook, setup, secret):
    webhook.route("/cb-run", lambda req: Reply(200, body=b""))
    submit = setup({0: succeed(1)})
    rid = submit(callback_url=webhook.url("/cb-run"))
    (req,) = webhook.wait_requests(1, path="/cb-run", run_id=rid, timeout=15)
    assert verify_signature(secret, req.headers, req.body)
    assert webhook.requests(path="/cb", run_id=rid) == []


def test_run_without_any_callback_url_sends_none(api, db, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_terminal(rid)
    if db.table_exists("callback"):
        assert db.scalar("SELECT count(*) FROM callback WHERE run_id = %s" % sql_quote(rid)) == "0"
    assert [r.path for r in webhook.requests()] == ["/steps"]
