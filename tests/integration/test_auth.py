"""Bearer-token authentication when HOOKFLOW_API_TOKENS is set (the conventions
of openapi/openapi.yaml, info.description)."""

import pytest

from harness import Api, assert_error

TOKEN_A = "tok-alpha-0123456789abcdef"
TOKEN_B = "tok-beta-0123456789abcdef"
TOKENS = TOKEN_A + "," + TOKEN_B


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_v1_requests_without_token_get_401(service):
    anon = Api(service.base_url)
    assert_error(anon.get("/v1/workflows"), 401, "unauthenticated")
    assert_error(anon.post("/v1/runs", {"workflow": "x"}), 401, "unauthenticated")


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_v1_requests_with_wrong_token_get_401(service):
    for tok in ("nope", TOKEN_A[:-1], TOKEN_A + "0", TOKENS, TOKEN_A.upper()):
        assert_error(Api(service.base_url, token=tok).get("/v1/workflows"), 401, "unauthenticated")
    r = Api(service.base_url).get("/v1/workflows", headers={"Authorization": "Basic " + TOKEN_A})
    assert_error(r, 401, "unauthenticated")


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_v1_requests_with_any_configured_token_succeed(service):
    for tok in (TOKEN_A, TOKEN_B):
        r = Api(service.base_url, token=tok).get("/v1/workflows")
        assert r.status == 200, r


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_health_endpoints_need_no_token(service):
    anon = Api(service.base_url)
    assert anon.get("/healthz").status == 200
    assert anon.get("/readyz").status == 200


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKENS)
def test_unauthenticated_response_carries_request_id(service):
    r = Api(service.base_url).get("/v1/workflows", headers={"X-Request-Id": "auth-req-1"})
    assert r.status == 401
    assert r.headers.get("X-Request-Id") == "auth-req-1"
