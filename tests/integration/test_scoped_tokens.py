"""Issue 12, item 9: scoped tokens.

HOOKFLOW_API_TOKENS entries may carry a scope: `read:TOKEN` may only GET
(403 `forbidden` on every write, nothing changes), `admin:TOKEN` and a token
written without a scope may do everything, as before. GET /v1/whoami tells a
caller what its credential may do (the dashboard disables its actions for a
read token)."""

import pytest

from harness import Api, assert_error

ADMIN = "tok-admin-0123456789abcdef"
ADMIN2 = "tok-admin2-0123456789abcdef"
READ = "tok-read-0123456789abcdef"
TOKENS = "%s, read:%s ,admin:%s" % (ADMIN, READ, ADMIN2)
PARKED = 600000


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_a_read_token_reads_and_every_write_is_refused(service, api, sql):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    api.submit("wf", run_id="r1", delay_ms=PARKED, input={"a": 1})
    assert api.put("/v1/kv/app%2Fk", {"value": 1}).status in (200, 201)
    assert api.put("/v1/runs/r1/memo/m", {"value": 2}).status in (200, 201)
    reader = Api(service.base_url, token=READ)
    for path in ("/v1/workflows", "/v1/workflows/wf", "/v1/runs", "/v1/runs/r1", "/v1/runs/r1/steps",
                 "/v1/kv", "/v1/kv/app%2Fk", "/v1/dead-letters", "/v1/runs/r1/memo/m"):
        r = reader.get(path)
        assert r.status == 200, (path, r)
    assert reader.get("/v1/runs/r1").body["input"] == {"a": 1}
    writes = [("PUT", "/v1/workflows/wf2", {"url": "http://127.0.0.1:9/x"}),
              ("DELETE", "/v1/workflows/wf", None),
              ("POST", "/v1/workflows/wf/pause", None),
              ("POST", "/v1/workflows/wf/resume", {}),
              ("POST", "/v1/runs", {"workflow": "wf", "run_id": "r2"}),
              ("POST", "/v1/runs/r1/cancel", None),
              ("POST", "/v1/runs/r1/rerun", {}),
              ("POST", "/v1/runs:cancel", {"workflow": "wf"}),
              ("PUT", "/v1/groups/g", {"workflow": "wf", "members": [{"key": "a"}]}),
              ("DELETE", "/v1/groups/g", None),
              ("POST", "/v1/groups/g/cancel", None),
              ("POST", "/v1/dead-letters/x/redrive", None),
              ("DELETE", "/v1/dead-letters/x", None),
              ("PUT", "/v1/runs/r1/memo/m", {"value": 3}),
              ("DELETE", "/v1/runs/r1/memo/m", None),
              ("PUT", "/v1/runs/r1/steps/0/memo/m", {"value": 3}),
              ("POST", "/v1/signals/k", {"payload": 1}),
              ("DELETE", "/v1/signals/k", None),
              ("PUT", "/v1/kv/app%2Fk", {"value": 9}),
              ("DELETE", "/v1/kv/app%2Fk", None)]
    before = {t: sql("SELECT count(*) FROM %s" % t)[0][0] for t in ("workflow", "run", "kv", "memo", "signal_buffer")}
    for method, path, body in writes:
        if body is None:
            r = reader.request(method, path, content_type=None)
        else:
            r = reader.request(method, path, json_body=body)
        assert_error(r, 403, "forbidden", field="read")
    after = {t: sql("SELECT count(*) FROM %s" % t)[0][0] for t in ("workflow", "run", "kv", "memo", "signal_buffer")}
    assert after == before
    assert api.run("r1")["status"] == "scheduled"
    assert api.get("/v1/workflows/wf").body["paused"] is False
    assert api.get("/v1/kv/app%2Fk").body["value"] == 1
    assert api.get("/v1/runs/r1/memo/m").body["value"] == 2


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_admin_tokens_with_or_without_the_prefix_may_do_everything(service):
    for tok in (ADMIN, ADMIN2):
        a = Api(service.base_url, token=tok)
        assert a.put("/v1/kv/app%2Fw", {"value": tok}).status in (200, 201)
        assert a.get("/v1/kv/app%2Fw").body["value"] == tok
        assert a.delete("/v1/kv/app%2Fw").status == 204
    # the prefix is no part of the token
    assert_error(Api(service.base_url, token="read:" + READ).get("/v1/workflows"), 401, "unauthenticated")
    assert_error(Api(service.base_url, token="admin:" + ADMIN2).get("/v1/workflows"), 401, "unauthenticated")


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_whoami_tells_the_scope_of_the_token(service):
    r = Api(service.base_url, token=READ).get("/v1/whoami")
    assert r.status == 200 and r.body == {"scope": "read", "token_required": True}, r
    for tok in (ADMIN, ADMIN2):
        r = Api(service.base_url, token=tok).get("/v1/whoami")
        assert r.status == 200 and r.body == {"scope": "admin", "token_required": True}, r
    assert_error(Api(service.base_url).get("/v1/whoami"), 401, "unauthenticated")


def test_whoami_without_tokens_is_admin_and_says_no_token_is_needed(api):
    r = api.get("/v1/whoami")
    assert r.status == 200 and r.body == {"scope": "admin", "token_required": False}, r


@pytest.mark.parametrize("value, why", [
    ("raed:" + READ, "unknown scope"),
    ("read:short", "16"),
    ("read:", "16"),
    (ADMIN + ",admin:" + ADMIN, "repeats"),
    (ADMIN + ",read:" + ADMIN, "repeats"),
    ("tok with spaces 0123456789", "visible ASCII"),
])
def test_bad_token_entries_stop_the_start_naming_the_variable(services, value, why):
    svc = services.new(HOOKFLOW_API_TOKENS=value)
    svc.start(wait_ready=False)
    code = svc.wait_exit(15)
    assert code is not None and code != 0, "hookflow started with HOOKFLOW_API_TOKENS=%r" % value
    log = svc.log_text()
    assert "HOOKFLOW_API_TOKENS" in log and why in log, log[-2000:]
    for secret in (READ, ADMIN):
        assert secret not in log, "the start-up error quotes a token"
