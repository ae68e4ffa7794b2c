"""Issue 12, item 2: no cross-site use of a token-less instance.

Without HOOKFLOW_API_TOKENS, being on this machine is the only credential:
the service answers only requests addressed to a loopback name with its port
(a DNS-rebinding page names its own host) and refuses, 403 `forbidden`, any
request whose Origin is not its own (a page the developer visits while
`make run` serves). The dashboard's own requests (same origin) keep working
on http://127.0.0.1:PORT and http://localhost:PORT. With tokens configured
neither is checked (README, "Security")."""

import pytest

from harness import Api, assert_error

PARKED = 600000
TOKEN = "tok-origin-0123456789abcdef"


def _parked_run(api, run_id):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    api.submit("wf", run_id=run_id, delay_ms=PARKED)
    assert api.run(run_id)["status"] == "scheduled"


def test_a_foreign_page_cannot_cancel_a_run(service, api):
    """The reproduced attack: a bodyless POST from another origin, through a
    rebound name or straight to 127.0.0.1, cancels nothing."""
    _parked_run(api, "victim")
    port = service.port
    for headers in ({"Origin": "http://evil.example", "Host": "evil.example"},
                    {"Origin": "http://evil.example", "Host": "evil.example:%d" % port},
                    {"Origin": "http://evil.example", "Host": "127.0.0.1:%d" % port},
                    {"Origin": "null", "Host": "127.0.0.1:%d" % port},
                    {"Origin": "http://localhost:3000", "Host": "localhost:%d" % port}):
        r = api.request("POST", "/v1/runs/victim/cancel", headers=headers, content_type=None)
        assert_error(r, 403, "forbidden")
        assert ("origin" in r.error_message) or ("host" in r.error_message), r
    # a "simple" cross-site form post with a body is refused as well
    r = api.request("POST", "/v1/runs/victim/cancel", raw=b"x=1", content_type="text/plain",
                    headers={"Origin": "http://evil.example"})
    assert_error(r, 403, "forbidden", field="origin")
    assert api.run("victim")["status"] == "scheduled"


def test_requests_addressed_to_another_host_are_refused_on_every_route(service, api):
    port = service.port
    bad_hosts = ["evil.example", "evil.example:%d" % port, "127.0.0.1:%d" % (port + 1),
                 "localhost", "127.0.0.1", "10.0.0.1:%d" % port, "[::2]:%d" % port,
                 "localhost.evil.example:%d" % port, "127.0.0.1:%dx" % port, "[::1:%d" % port]
    for host in bad_hosts:
        for path in ("/v1/runs", "/v1/workflows", "/", "/metrics", "/readyz", "/openapi.yaml",
                     "/v1/no-such-thing"):
            r = api.get(path, headers={"Host": host})
            assert_error(r, 403, "forbidden", field="host")
    r = api.put("/v1/kv/k", {"value": 1}, headers={"Host": "evil.example:%d" % port})
    assert_error(r, 403, "forbidden", field="host")
    assert api.get("/v1/kv/k").status == 404


def test_loopback_names_with_the_port_and_their_own_origin_are_served(service, api):
    port = service.port
    for host in ("127.0.0.1:%d" % port, "localhost:%d" % port, "LocalHost:%d" % port,
                 "[::1]:%d" % port, "127.0.0.2:%d" % port):
        r = api.get("/v1/workflows", headers={"Host": host})
        assert r.status == 200, (host, r)
        r = api.get("/", headers={"Host": host})
        assert r.status == 200 and b"hookflow" in r.raw, (host, r)
        # what the dashboard's fetch() sends on a write: Origin == its page
        r = api.put("/v1/kv/k", {"value": host}, headers={"Host": host, "Origin": "http://" + host})
        assert r.status in (200, 201), (host, r)
        assert api.get("/v1/kv/k").body["value"] == host
    # the origin must be the one the request is addressed to
    r = api.put("/v1/kv/k", {"value": 0}, headers={"Host": "127.0.0.1:%d" % port,
                                                  "Origin": "http://localhost:%d" % port})
    assert_error(r, 403, "forbidden", field="origin")
    r = api.put("/v1/kv/k", {"value": 0}, headers={"Host": "127.0.0.1:%d" % port,
                                                  "Origin": "https://127.0.0.1:%d" % port})
    assert_error(r, 403, "forbidden", field="origin")
    assert api.get("/v1/kv/k").body["value"] == "127.0.0.2:%d" % port


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_with_api_tokens_host_and_origin_are_not_checked(service, api):
    """A browser never attaches a bearer token by itself and a proxy may use
    any name: with tokens, the token decides."""
    _parked_run(api, "tok-run")
    r = api.get("/v1/workflows", headers={"Host": "hookflow.internal", "Origin": "https://ops.example"})
    assert r.status == 200, r
    anon = Api(service.base_url)
    r = anon.request("POST", "/v1/runs/tok-run/cancel", content_type=None,
                     headers={"Origin": "http://evil.example", "Host": "evil.example"})
    assert_error(r, 401, "unauthenticated")
    assert api.run("tok-run")["status"] == "scheduled"
