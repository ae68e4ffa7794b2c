"""Workflows (openapi/openapi.yaml, tag workflows) and the request conventions
(openapi/openapi.yaml, info.description)."""

import json

import pytest

from harness import assert_error, new_secret

DEFAULTS = {
    "timeout_ms": 30000,
    "max_attempts": 3,
    "priority": 1000,
    "retry_backoff": {"base_ms": 1000, "max_ms": 300000},
    "max_concurrency": 0,
    "step_output_replay": False,
}


def test_put_creates_with_201_and_fills_defaults(api):
    r = api.put("/v1/workflows/orders", {"url": "http://127.0.0.1:9/steps"})
    assert r.status == 201, r
    wf = r.body
    assert wf["url"] == "http://127.0.0.1:9/steps"
    for k, v in DEFAULTS.items():
        assert wf[k] == v, "default of %s: %r" % (k, wf)
    assert wf["signed"] is False
    assert "secret" not in wf
    assert wf.get("name", "orders") == "orders"


def test_put_again_replaces_with_200(api):
    assert api.put("/v1/workflows/orders", {"url": "http://127.0.0.1:9/a"}).status == 201
    r = api.put("/v1/workflows/orders", {"url": "http://127.0.0.1:9/b", "max_attempts": 7,
                                         "retry_backoff": {"base_ms": 10, "max_ms": 20}})
    assert r.status == 200, r
    assert r.body["url"] == "http://127.0.0.1:9/b"
    assert r.body["max_attempts"] == 7
    assert r.body["retry_backoff"] == {"base_ms": 10, "max_ms": 20}
    # a replace is a replace: fields not given fall back to defaults
    r = api.put("/v1/workflows/orders", {"url": "http://127.0.0.1:9/c"})
    assert r.status == 200, r
    assert r.body["max_attempts"] == 3
    got = api.get("/v1/workflows/orders")
    assert got.status == 200 and got.body["url"] == "http://127.0.0.1:9/c", got


def test_put_with_all_settings_round_trips(api):
    body = {"url": "https://example.invalid/steps", "callback_url": "http://127.0.0.1:9/done",
            "timeout_ms": 1234, "max_attempts": 9, "priority": 5,
            "retry_backoff": {"base_ms": 7, "max_ms": 70}, "max_concurrency": 4,
            "step_output_replay": True}
    r = api.put("/v1/workflows/full.name_1-x", body)
    assert r.status == 201, r
    for k, v in body.items():
        assert r.body[k] == v, (k, r.body)
    g = api.get("/v1/workflows/full.name_1-x")
    assert g.status == 200
    for k, v in body.items():
        assert g.body[k] == v, (k, g.body)


def test_secret_is_never_returned_but_signed_is_true(api):
    secret = new_secret()
    r = api.put("/v1/workflows/signed", {"url": "http://127.0.0.1:9/s", "secret": secret})
    assert r.status == 201, r
    assert r.body["signed"] is True
    assert secret not in r.text and "secret" not in r.body
    g = api.get("/v1/workflows/signed")
    assert g.body["signed"] is True and secret not in g.text and "secret" not in g.body
    lst = api.get("/v1/workflows")
    assert secret not in lst.text


def test_list_workflows(api):
    for n in ("a", "b", "c"):
        api.put_workflow(n, "http://127.0.0.1:9/" + n)
    r = api.get("/v1/workflows")
    assert r.status == 200, r
    names = sorted(w["name"] for w in r.body["workflows"])
    assert names == ["a", "b", "c"]
    assert "next_cursor" in r.body


def test_get_unknown_workflow_is_404(api):
    assert_error(api.get("/v1/workflows/nope"), 404, "not_found")


def test_delete_workflow_is_204_then_404(api):
    api.put_workflow("gone", "http://127.0.0.1:9/x")
    r = api.delete("/v1/workflows/gone")
    assert r.status == 204, r
    assert r.raw == b""
    assert_error(api.get("/v1/workflows/gone"), 404, "not_found")
    assert_error(api.delete("/v1/workflows/gone"), 404, "not_found")


def test_delete_workflow_with_active_run_is_409_workflow_in_use(api):
    api.put_workflow("busy", "http://127.0.0.1:9/x")
    run = api.submit("busy", delay_ms=600000)
    assert_error(api.delete("/v1/workflows/busy"), 409, "workflow_in_use")
    assert api.get("/v1/workflows/busy").status == 200
    assert api.post("/v1/runs/%s/cancel" % run["run_id"]).status == 200
    assert api.delete("/v1/workflows/busy").status == 204


@pytest.mark.parametrize("body,field", [
    ({}, "url"),
    ({"url": 5}, "url"),
    ({"url": "ftp://127.0.0.1/x"}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": "http://127.0.0.1:9/", "callback_url": "gopher://x"}, "callback_url"),
    ({"url": "http://127.0.0.1:9/", "timeout_ms": 0}, "timeout_ms"),
    ({"url": "http://127.0.0.1:9/", "timeout_ms": 3600001}, "timeout_ms"),
    ({"url": "http://127.0.0.1:9/", "timeout_ms": "100"}, "timeout_ms"),
    ({"url": "http://127.0.0.1:9/", "max_attempts": 0}, "max_attempts"),
    ({"url": "http://127.0.0.1:9/", "max_attempts": 1001}, "max_attempts"),
    ({"url": "http://127.0.0.1:9/", "priority": -1}, "priority"),
    ({"url": "http://127.0.0.1:9/", "priority": 2147483648}, "priority"),
    ({"url": "http://127.0.0.1:9/", "retry_backoff": {"base_ms": -1, "max_ms": 10}}, "retry_backoff"),
    ({"url": "http://127.0.0.1:9/", "retry_backoff": "fast"}, "retry_backoff"),
    ({"url": "http://127.0.0.1:9/", "max_concurrency": -1}, "max_concurrency"),
    ({"url": "http://127.0.0.1:9/", "secret": "plaintext"}, "secret"),
    ({"url": "http://127.0.0.1:9/", "step_output_replay": "yes"}, "step_output_replay"),
])
def test_invalid_workflow_is_400_naming_the_field(api, body, field):
    assert_error(api.put("/v1/workflows/wf", body), 400, "invalid_argument", field)
    assert api.get("/v1/workflows/wf").status == 404


@pytest.mark.parametrize("name", ["bad%20name", pytest.param("x" * 129, id="129-bytes"), "caf%C3%A9",
                                  "semi%3Bcolon"])
def test_invalid_workflow_name_is_400(api, name):
    assert_error(api.put("/v1/workflows/" + name, {"url": "http://127.0.0.1:9/"}), 400, "invalid_argument")


def test_wrong_content_type_is_415(api):
    r = api.request("PUT", "/v1/workflows/wf", raw=json.dumps({"url": "http://127.0.0.1:9/"}),
                    content_type="text/plain")
    assert_error(r, 415, "unsupported_media_type")
    r = api.request("POST", "/v1/runs", raw=b"workflow=wf", content_type="application/x-www-form-urlencoded")
    assert_error(r, 415, "unsupported_media_type")


def test_json_content_type_with_charset_is_accepted(api):
    r = api.request("PUT", "/v1/workflows/wf", raw=json.dumps({"url": "http://127.0.0.1:9/"}),
                    content_type="application/json; charset=utf-8")
    assert r.status == 201, r


def test_malformed_json_is_400(api):
    for raw in (b"{not json", b'{"url": "http://127.0.0.1:9/"', b"", b"\xff\xfe"):
        r = api.request("PUT", "/v1/workflows/wf", raw=raw)
        assert_error(r, 400, "invalid_argument")


def test_json_that_is_not_an_object_is_400(api):
    for raw in (b"[]", b"42", b'"url"', b"null"):
        assert_error(api.request("PUT", "/v1/workflows/wf", raw=raw), 400, "invalid_argument")


@pytest.mark.service_env(HOOKFLOW_MAX_BODY_BYTES="1024")
def test_body_over_max_body_bytes_is_413(api):
    body = {"url": "http://127.0.0.1:9/", "pad": "x" * 2000}
    assert_error(api.put("/v1/workflows/wf", body), 413, "payload_too_large")
    big_run = {"workflow": "wf", "input": "y" * 5000}
    assert_error(api.post("/v1/runs", big_run), 413, "payload_too_large")
    # just under the cap is fine
    assert api.put("/v1/workflows/wf", {"url": "http://127.0.0.1:9/"}).status == 201


def test_errors_carry_request_id(api):
    r = api.request("PUT", "/v1/workflows/wf", raw=b"{", headers={"X-Request-Id": "bad-json-1"})
    assert r.status == 400
    assert r.headers.get("X-Request-Id") == "bad-json-1"
