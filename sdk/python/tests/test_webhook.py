"""The webhook helper on its own (no service): signatures against the Standard Webhooks
test vector, the wire shape of every answer builder, and how a delivery is answered
(handle_delivery, the http.server adapter, the WSGI adapter)."""
from __future__ import annotations

import datetime
import io
import json
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from threading import Thread
from typing import Any, Dict, List, Tuple

import pytest
from conftest import new_secret

from hookflow import webhook
from hookflow.types import StepRequest
from hookflow.webhook import (WebhookVerificationError, cancel, continue_with, fail,
                              handle_delivery, http_handler, pending, permanent_error, sign,
                              start_children, succeed, transient_error, verify_signature,
                              wait_for_signal, wsgi_app)

# The example of the Standard Webhooks specification.
VECTOR = {
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "timestamp": 1614265330,
    "body": '{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}


def signed(secret: str, body: bytes, msg_id: str = "msg_1", ts: int = 0) -> Dict[str, str]:
    ts = ts or int(time.time())
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": sign(secret, msg_id, ts, body)}


# ---- signatures ----------------------------------------------------------------------

def test_sign_reproduces_the_standard_webhooks_vector() -> None:
    v = VECTOR
    assert sign(v["secret"], v["id"], v["timestamp"], v["body"]) == v["signature"]
    assert sign(v["secret"], v["id"], v["timestamp"], v["body"].encode()) == v["signature"]


def test_the_vector_verifies_at_its_time_and_not_six_minutes_away() -> None:
    v = VECTOR
    headers = {"webhook-id": v["id"], "webhook-timestamp": str(v["timestamp"]),
               "webhook-signature": v["signature"]}
    verify_signature(v["secret"], headers, v["body"].encode(), now=v["timestamp"] + 299)
    for now in (v["timestamp"] + 360, v["timestamp"] - 360):
        with pytest.raises(WebhookVerificationError, match="too far from now"):
            verify_signature(v["secret"], headers, v["body"].encode(), now=now)


def test_refuses_a_missing_header_another_secret_a_changed_body_a_bad_timestamp() -> None:
    secret, body = new_secret(), b'{"a":1}'
    good = signed(secret, body)
    for name in good:
        partial = {k: v for k, v in good.items() if k != name}
        with pytest.raises(WebhookVerificationError, match="missing"):
            verify_signature(secret, partial, body)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify_signature(new_secret(), good, body)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify_signature(secret, good, b'{"a":2}')
    with pytest.raises(WebhookVerificationError, match="not unix seconds"):
        verify_signature(secret, {**good, "webhook-timestamp": "12a"}, body)
    with pytest.raises(WebhookVerificationError, match="no matching signature"):
        verify_signature(secret, {**good, "webhook-signature": "v1,%%%"}, body)


def test_any_of_several_signatures_secrets_and_header_casings() -> None:
    a, b = new_secret(), new_secret()
    body = b"{}"
    h = signed(a, body)
    verify_signature(a, {**h, "webhook-signature": "v1,bm90IGl0 " + h["webhook-signature"]}, body)
    verify_signature([b, a], h, body)
    with pytest.raises(WebhookVerificationError):
        verify_signature([b], h, body)
    verify_signature(a, {k.title(): v for k, v in h.items()}, body)


def test_a_secret_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ValueError, match="secret"):
        sign("whsec_not base64!", "m", 1, b"")
    with pytest.raises(ValueError, match="secret"):
        http_handler("", lambda r, c: succeed())


# ---- answers ---------------------------------------------------------------------------

def test_every_outcome_has_the_wire_shape_of_the_protocol() -> None:
    kv = {"put": {"app/k": {"v": 1}}, "delete": ["app/old"]}
    assert continue_with({"n": 1}) == {"outcome": "continue", "payload": {"n": 1}}
    assert continue_with() == {"outcome": "continue", "payload": None}
    assert continue_with({"n": 1}, delay_ms=60000, kv=kv) == {
        "outcome": "continue", "payload": {"n": 1}, "delay_ms": 60000, "kv": kv}
    at = datetime.datetime(2026, 12, 3, 9, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert continue_with(1, run_at=at) == {
        "outcome": "continue", "payload": 1, "run_at": "2026-12-03T08:00:00.000Z"}
    assert wait_for_signal("payment:42", timeout_ms=604800000, payload={"o": 42}) == {
        "outcome": "continue", "payload": {"o": 42},
        "wait_for_signal": {"correlation_key": "payment:42", "timeout_ms": 604800000}}
    assert wait_for_signal(["payment:42", "refund:42"], timeout_ms=1000) == {
        "outcome": "continue", "payload": None,
        "wait_for_signal": {"correlation_keys": ["payment:42", "refund:42"], "timeout_ms": 1000}}
    children = [{"key": "invoice", "workflow": "invoices", "input": {"o": 42}}]
    assert start_children(children, payload=7, wait={"mode": "any", "timeout_ms": 3600000}) == {
        "outcome": "continue", "payload": 7, "children": children,
        "wait_for_children": {"mode": "any", "timeout_ms": 3600000}}
    assert succeed({"shipped": True}, kv=kv) == {"outcome": "succeed", "result": {"shipped": True},
                                                 "kv": kv}
    assert succeed() == {"outcome": "succeed", "result": None}
    assert fail("card declined") == {"outcome": "fail", "reason": "card declined"}
    assert cancel("user left", kv=kv) == {"outcome": "cancel", "reason": "user left", "kv": kv}
    assert pending() == {"outcome": "pending"}
    assert pending(timeout_ms=3600000, heartbeat_timeout_ms=300000) == {
        "outcome": "pending", "timeout_ms": 3600000, "heartbeat_timeout_ms": 300000}


def test_combinations_the_protocol_refuses_raise_at_once() -> None:
    with pytest.raises(ValueError, match="exclude"):
        continue_with(1, delay_ms=1, run_at="2026-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="at least one key"):
        wait_for_signal([], timeout_ms=1)
    with pytest.raises(ValueError, match="at least one child"):
        start_children([])
    with pytest.raises(ValueError, match="time zone"):
        continue_with(1, run_at=datetime.datetime(2026, 1, 1))


def test_errors_transient_503_and_permanent_422() -> None:
    t = transient_error("busy", retry_after_ms=1500)
    assert (t.status, t.to_json()) == (503, {"error": {"message": "busy", "retryable": True}})
    p = permanent_error("no such order", status=404)
    assert (p.status, p.to_json()) == (404, {"error": {"message": "no such order",
                                                       "retryable": False}})


# ---- delivery ------------------------------------------------------------------------------

STEP: StepRequest = {
    "run_id": "r1", "workflow": "w", "step": 0, "attempt": 1, "max_attempts": 3,
    "generation": 1, "payload": {"n": 1}, "headers": {}, "concurrency_key": None,
    "deadline": "2026-12-02T10:00:30.000Z",
    "memo": {"url": "http://127.0.0.1:9/v1/runs/r1",
             "token": "hf1.x.1.0.1.1.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
}
CALLBACK = {
    "run_id": "r1", "workflow": "w", "status": "succeeded", "result": 1, "error": None,
    "error_kind": None, "headers": {}, "final_step": 0, "generation": 1,
    "finished_at": "2026-12-02T10:05:00.000Z", "group": None, "concurrency_key": None,
}
SECRET = new_secret()


def deliver(doc: Any, fn: Any, **kw: Any) -> Tuple[int, Dict[str, str], Any]:
    raw = json.dumps(doc).encode()
    a = handle_delivery(SECRET, fn, signed(SECRET, raw), raw, on_error=lambda e: None, **kw)
    return a.status, a.headers, json.loads(a.body)


def test_an_outcome_is_200_pending_is_202() -> None:
    status, headers, body = deliver(STEP, lambda req, ctx: succeed(req["payload"]["n"] + 1))
    assert (status, body) == (200, {"outcome": "succeed", "result": 2})
    assert headers["Content-Type"] == "application/json"
    assert deliver(STEP, lambda r, c: pending(timeout_ms=1000))[::2] == (
        202, {"outcome": "pending", "timeout_ms": 1000})


def test_a_step_error_returned_or_raised_is_its_status_and_retry_after() -> None:
    status, headers, body = deliver(STEP, lambda r, c: transient_error("busy", retry_after_ms=1500))
    assert (status, headers["Retry-After"], body) == (
        503, "2", {"error": {"message": "busy", "retryable": True}})

    def raises(r: Any, c: Any) -> Any:
        raise permanent_error("bad order")
    assert deliver(STEP, raises)[::2] == (422, {"error": {"message": "bad order",
                                                          "retryable": False}})


def test_any_other_exception_is_a_transient_500_so_is_no_outcome() -> None:
    seen: List[BaseException] = []

    def boom(r: Any, c: Any) -> Any:
        raise RuntimeError("db down")
    raw = json.dumps(STEP).encode()
    a = handle_delivery(SECRET, boom, signed(SECRET, raw), raw, on_error=seen.append)
    assert (a.status, json.loads(a.body)) == (500, {"error": {"message": "db down",
                                                              "retryable": True}})
    assert len(seen) == 1
    assert deliver(STEP, lambda r, c: {"nope": 1})[0] == 500


def test_a_bad_signature_is_401_and_the_handler_is_not_called() -> None:
    called: List[int] = []
    told: List[BaseException] = []
    raw = json.dumps(STEP).encode()
    a = handle_delivery(SECRET, lambda r, c: called.append(1) or succeed(),
                        signed(new_secret(), raw), raw, on_error=told.append)
    assert (a.status, json.loads(a.body)) == (
        401, {"error": {"message": "no matching signature", "retryable": False}})
    assert called == []
    assert len(told) == 1 and isinstance(told[0], WebhookVerificationError)


def test_a_body_without_memo_is_a_callback_without_a_handler_404() -> None:
    got: List[Any] = []
    status, _, _ = deliver(CALLBACK, lambda r, c: succeed(),
                           callback=lambda req, ctx: got.append((req, ctx.webhook_id)))
    assert status == 200
    assert got == [(CALLBACK, "msg_1")]
    assert deliver(CALLBACK, lambda r, c: succeed())[0] == 404
    assert deliver([1], lambda r, c: succeed())[0] == 400
    assert deliver({**STEP, "step": "0"}, lambda r, c: succeed())[0] == 400


def test_none_secret_skips_verification() -> None:
    a = handle_delivery(None, lambda r, c: succeed(), {}, json.dumps(STEP).encode())
    assert a.status == 200


def test_http_handler_answers_a_signed_post_and_refuses_a_body_over_the_cap() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 http_handler(SECRET, lambda r, c: succeed(r["payload"]),
                                              max_body_bytes=4096))
    Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/steps"
    try:
        raw = json.dumps(STEP).encode()
        req = urllib.request.Request(url, data=raw, headers=signed(SECRET, raw), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert (resp.status, json.loads(resp.read())) == (
                200, {"outcome": "succeed", "result": {"n": 1}})
        big = json.dumps({**STEP, "payload": "x" * 5000}).encode()
        req = urllib.request.Request(url, data=big, headers=signed(SECRET, big), method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 413
    finally:
        server.shutdown()
        server.server_close()


def test_wsgi_app_answers_like_the_http_handler() -> None:
    app = wsgi_app(SECRET, lambda r, c: pending())
    raw = json.dumps(STEP).encode()
    environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(raw)),
               "wsgi.input": io.BytesIO(raw)}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v
                    for k, v in signed(SECRET, raw).items()})
    started: List[Any] = []
    body = b"".join(app(environ, lambda status, headers: started.append((status, headers))))
    assert started[0][0] == "202 Accepted"
    assert ("Content-Length", str(len(body))) in started[0][1]
    assert json.loads(body) == {"outcome": "pending"}
    got: List[Any] = []
    app(dict(environ, REQUEST_METHOD="GET"), lambda s, h: got.append(s))
    assert got == ["405 Method Not Allowed"]


def test_the_module_exports_what_it_documents() -> None:
    for name in webhook.__all__:
        assert hasattr(webhook, name), name
