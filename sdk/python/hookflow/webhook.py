"""The webhook side of hookflow (standard library only).

Standard Webhooks signatures, the typed step and callback requests, a builder for
every answer the protocol defines, the step's memo, completion and heartbeat
through its delivery token, and adapters for http.server and WSGI:

    from http.server import ThreadingHTTPServer
    from hookflow import webhook

    def step(req, ctx):
        if req["step"] == 0:
            return webhook.continue_with({"seen": req["payload"]})
        return webhook.succeed(req["payload"])

    handler = webhook.http_handler(os.environ["WEBHOOK_SECRET"], step)
    ThreadingHTTPServer(("127.0.0.1", 9000), handler).serve_forever()
"""
from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import logging
import re
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import (Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Type, Union)

from ._generated import (JSON, CallbackRequest, CancelOutcome, ChildRun, CompletionRequest,
                         ContinueOutcome, FailOutcome, HeartbeatAnswer, KvEffects, PendingOutcome,
                         Run, StepOutcome, StepRequest, SucceedOutcome, WaitForChildren,
                         WaitForSignal, WebhookErrorAnswer)
from .client import Client, HookflowError

__all__ = [
    "DEFAULT_TOLERANCE_S", "Secret", "WebhookVerificationError", "secret_key", "sign",
    "verify_signature", "continue_with", "wait_for_signal", "start_children", "succeed", "fail",
    "cancel", "pending", "StepError", "transient_error", "permanent_error", "MemoValue", "Memo",
    "StepContext", "CallbackContext", "StepResult", "StepHandler", "CallbackHandler",
    "WebhookAnswer", "handle_delivery", "http_handler", "wsgi_app", "StepRequest",
    "CallbackRequest", "StepOutcome",
]

DEFAULT_TOLERANCE_S = 300
"""Standard Webhooks' default: a timestamp more than 5 minutes from now is refused."""
DEFAULT_MAX_BODY_BYTES = 16 << 20

Secret = Union[str, Sequence[str]]
"""A signing secret (whsec_ + base64 of the key, as given to the workflow), or several:
a request signed by any of them verifies (a receiver's side of a rotation)."""

HeaderSource = Union[Mapping[str, str], Any]
"""A mapping of header names to values (http.server's self.headers, a dict, ...)."""

log = logging.getLogger("hookflow.webhook")


class WebhookVerificationError(Exception):
    """A request whose Standard Webhooks headers do not verify."""


def _header(headers: HeaderSource, name: str) -> Optional[str]:
    value = headers.get(name)
    if value is None and hasattr(headers, "items"):
        for k, v in headers.items():
            if k.lower() == name:
                return str(v)
    return None if value is None else str(value)


def secret_key(secret: str) -> bytes:
    """The HMAC key of a secret: the base64-decoded part after "whsec_"."""
    b64 = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    if not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", b64):
        raise ValueError("secret: must be whsec_ followed by standard base64")
    try:
        return base64.b64decode(b64, validate=True)
    except binascii.Error as e:
        raise ValueError(f"secret: {e}") from None


def _secrets(secret: Secret) -> List[str]:
    out = [secret] if isinstance(secret, str) else list(secret)
    if not out:
        raise ValueError("secret: at least one is required")
    return out


def sign(secret: str, webhook_id: str, timestamp: int, body: Union[bytes, str]) -> str:
    """The webhook-signature value of a request:
    v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    mac = hmac.new(secret_key(secret), f"{webhook_id}.{timestamp}.".encode() + raw, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify_signature(secret: Secret, headers: HeaderSource, body: Union[bytes, str], *,
                     tolerance_s: int = DEFAULT_TOLERANCE_S, now: Optional[float] = None) -> None:
    """Verifies the Standard Webhooks headers of a request against its raw body (the
    bytes as received, not JSON decoded and encoded again): webhook-id,
    webhook-timestamp within tolerance_s of now, and a webhook-signature (one of
    several, space separated) made with one of the secrets. Raises
    WebhookVerificationError otherwise."""
    keys = [secret_key(s) for s in _secrets(secret)]
    msg_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not msg_id or not stamp or not signatures:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not re.fullmatch(r"[0-9]{1,15}", stamp):
        raise WebhookVerificationError("webhook-timestamp: not unix seconds")
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp: too far from now")
    raw = body.encode("utf-8") if isinstance(body, str) else body
    signed = f"{msg_id}.{stamp}.".encode() + raw
    expected = [hmac.new(k, signed, hashlib.sha256).digest() for k in keys]
    for sig in signatures.split(" "):
        version, _, value = sig.partition(",")
        if version != "v1":
            continue
        try:
            got = base64.b64decode(value, validate=True)
        except binascii.Error:
            continue
        if any(hmac.compare_digest(got, e) for e in expected):
            return
    raise WebhookVerificationError("no matching signature")


# ---- answers -------------------------------------------------------------------------

def continue_with(payload: JSON = None, *, delay_ms: Optional[int] = None,
                  run_at: Union[str, datetime.datetime, None] = None,
                  kv: Optional[KvEffects] = None) -> ContinueOutcome:
    """continue: the next step gets payload, now, after delay_ms, or at run_at (an RFC
    3339 string or an aware datetime); kv effects commit with the outcome."""
    if delay_ms is not None and run_at is not None:
        raise ValueError("continue_with: delay_ms and run_at exclude each other")
    out: ContinueOutcome = {"outcome": "continue", "payload": payload}
    if delay_ms is not None:
        out["delay_ms"] = delay_ms
    if run_at is not None:
        out["run_at"] = _rfc3339(run_at) if isinstance(run_at, datetime.datetime) else run_at
    if kv is not None:
        out["kv"] = kv
    return out


def _rfc3339(t: datetime.datetime) -> str:
    if t.tzinfo is None:
        raise ValueError("run_at: a datetime needs a time zone")
    t = t.astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def wait_for_signal(key: Union[str, Sequence[str]], *, timeout_ms: int, payload: JSON = None,
                    kv: Optional[KvEffects] = None) -> ContinueOutcome:
    """continue once a signal arrives on key (or on the first of several keys), or after
    timeout_ms (the next step then gets signal {"status": "timeout"})."""
    wait: WaitForSignal
    if isinstance(key, str):
        wait = {"correlation_key": key, "timeout_ms": timeout_ms}
    else:
        keys = list(key)
        if not keys:
            raise ValueError("wait_for_signal: at least one key")
        wait = {"correlation_keys": keys, "timeout_ms": timeout_ms}
    out: ContinueOutcome = {"outcome": "continue", "payload": payload, "wait_for_signal": wait}
    if kv is not None:
        out["kv"] = kv
    return out


def start_children(children: Iterable[ChildRun], *, payload: JSON = None,
                   wait: Optional[WaitForChildren] = None,
                   kv: Optional[KvEffects] = None) -> ContinueOutcome:
    """continue after starting child runs: the next step runs once they have ended
    (wait: all of them by default, {"mode": "any"}, {"mode": "count", "count": n}, with
    timeout_ms), and receives them in children."""
    kids = list(children)
    if not kids:
        raise ValueError("start_children: at least one child")
    out: ContinueOutcome = {"outcome": "continue", "payload": payload, "children": kids}
    if wait is not None:
        out["wait_for_children"] = wait
    if kv is not None:
        out["kv"] = kv
    return out


def succeed(result: JSON = None, *, kv: Optional[KvEffects] = None) -> SucceedOutcome:
    """succeed: the run ends succeeded with result."""
    out: SucceedOutcome = {"outcome": "succeed", "result": result}
    if kv is not None:
        out["kv"] = kv
    return out


def fail(reason: str, *, kv: Optional[KvEffects] = None) -> FailOutcome:
    """fail: the run ends failed with reason as its error (no dead letter, no retry)."""
    out: FailOutcome = {"outcome": "fail", "reason": reason}
    if kv is not None:
        out["kv"] = kv
    return out


def cancel(reason: str, *, kv: Optional[KvEffects] = None) -> CancelOutcome:
    """cancel: the run ends cancelled with reason as its error."""
    out: CancelOutcome = {"outcome": "cancel", "reason": reason}
    if kv is not None:
        out["kv"] = kv
    return out


def pending(*, timeout_ms: Optional[int] = None,
            heartbeat_timeout_ms: Optional[int] = None) -> PendingOutcome:
    """pending: the step stays open after this answer (202) until it is completed with
    its delivery token (ctx.complete), or timeout_ms passes, or no heartbeat comes for
    heartbeat_timeout_ms."""
    out: PendingOutcome = {"outcome": "pending"}
    if timeout_ms is not None:
        out["timeout_ms"] = timeout_ms
    if heartbeat_timeout_ms is not None:
        out["heartbeat_timeout_ms"] = heartbeat_timeout_ms
    return out


class StepError(Exception):
    """An error answer instead of an outcome: a transient one is retried with backoff
    while the step has attempts left (retry_after_ms sets the delay, capped by the
    workflow's retry_backoff.max_ms), a permanent one dead-letters the step and fails
    the run. Return it or raise it from a step handler; ctx.complete takes it too."""

    def __init__(self, message: str, *, retryable: bool, status: Optional[int] = None,
                 retry_after_ms: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status if status is not None else (503 if retryable else 422)
        self.retry_after_ms = retry_after_ms

    def to_json(self) -> WebhookErrorAnswer:
        """The error answer's body: {"error": {"message", "retryable"}}."""
        return {"error": {"message": self.message, "retryable": self.retryable}}


def transient_error(message: str, *, retry_after_ms: Optional[int] = None,
                    status: Optional[int] = None) -> StepError:
    """A transient error: retried (503 unless status says otherwise)."""
    return StepError(message, retryable=True, status=status, retry_after_ms=retry_after_ms)


def permanent_error(message: str, *, status: Optional[int] = None) -> StepError:
    """A permanent error: the step is dead-lettered and the run fails (422 unless status
    says otherwise)."""
    return StepError(message, retryable=False, status=status)


# ---- the step's context ------------------------------------------------------------------

class MemoValue(NamedTuple):
    """A memo lookup: found, and the value (None when not found)."""
    found: bool
    value: JSON


class Memo:
    """A memo scope of the run (its own, or one step's), reached with the delivery token."""

    def __init__(self, client: Client, run_id: str, token: str, step: Optional[int] = None):
        self._client = client
        self._run_id = run_id
        self._token = token
        self._step = step

    def get(self, key: str) -> MemoValue:
        """The memo's value; MemoValue(False, None) when there is none."""
        try:
            if self._step is None:
                got = self._client.get_run_memo(self._run_id, key, token=self._token)
            else:
                got = self._client.get_step_memo(self._run_id, self._step, key, token=self._token)
        except HookflowError as e:
            if e.status == 404:
                return MemoValue(False, None)
            raise
        return MemoValue(True, got["value"])

    def put(self, key: str, value: JSON) -> None:
        """Stores a value (any JSON, at most 256 KiB); immediate, not part of the outcome."""
        if self._step is None:
            self._client.put_run_memo(self._run_id, key, {"value": value}, token=self._token)
        else:
            self._client.put_step_memo(self._run_id, self._step, key, {"value": value},
                                       token=self._token)

    def delete(self, key: str) -> None:
        if self._step is None:
            self._client.delete_run_memo(self._run_id, key, token=self._token)
        else:
            self._client.delete_step_memo(self._run_id, self._step, key, token=self._token)


class StepContext:
    """What a step handler gets next to the request.

    webhook_id  the same on every delivery of this step
    client      a client of the service that delivered the step (its memo.url),
                authorised by the delivery token
    memo        the run's memos; step_memo: this step's
    """

    def __init__(self, request: StepRequest, webhook_id: str):
        self.request = request
        self.webhook_id = webhook_id
        suffix = "/v1/runs/" + urllib.parse.quote(request["run_id"], safe="")
        url = request["memo"]["url"].rstrip("/")
        if not url.endswith(suffix):
            raise ValueError(f"memo.url: does not end with {suffix}")
        token = request["memo"]["token"]
        self.client = Client(url[: -len(suffix)], token=token)
        self.memo = Memo(self.client, request["run_id"], token)
        self.step_memo = Memo(self.client, request["run_id"], token, request["step"])

    def complete(self, result: Union[StepOutcome, StepError]) -> Run:
        """Ends a step that answered pending with an outcome (not pending) or a StepError."""
        body: CompletionRequest
        if isinstance(result, StepError):
            body = {"error": {"message": result.message, "retryable": result.retryable}}
        else:
            body = result  # type: ignore[assignment]  # PendingOutcome is refused by the API
        return self.client.complete_step(self.request["run_id"], self.request["step"], body)

    def heartbeat(self, details: JSON = None) -> HeartbeatAnswer:
        """Keeps a pending step alive, recording details (when not None); answers
        {"cancel_requested": bool}."""
        return self.client.heartbeat_step(self.request["run_id"], self.request["step"],
                                          None if details is None else {"details": details})


class CallbackContext(NamedTuple):
    webhook_id: str


StepResult = Union[StepOutcome, StepError]
StepHandler = Callable[[StepRequest, StepContext], StepResult]
CallbackHandler = Callable[[CallbackRequest, CallbackContext], None]


# ---- handling a delivery -------------------------------------------------------------------

class WebhookAnswer(NamedTuple):
    """An HTTP answer: what handle_delivery decided."""
    status: int
    headers: Dict[str, str]
    body: bytes


_OUTCOMES = {"continue", "succeed", "fail", "cancel", "pending"}


def _json(status: int, obj: Any, headers: Optional[Dict[str, str]] = None) -> WebhookAnswer:
    return WebhookAnswer(status, {"Content-Type": "application/json", **(headers or {})},
                         json.dumps(obj, separators=(",", ":")).encode("utf-8"))


def _error_answer(err: StepError) -> WebhookAnswer:
    headers = {}
    if err.retryable and err.retry_after_ms is not None:
        headers["Retry-After"] = str(max(0, -(-err.retry_after_ms // 1000)))
    return _json(err.status, err.to_json(), headers)


def _report(e: BaseException) -> None:
    if isinstance(e, WebhookVerificationError):
        log.warning("hookflow webhook: refused a delivery: %s", e)
    else:
        log.error("hookflow webhook: the handler failed", exc_info=e)


def handle_delivery(secret: Optional[Secret], step: StepHandler, headers: HeaderSource,
                    body: bytes, *, callback: Optional[CallbackHandler] = None,
                    tolerance_s: int = DEFAULT_TOLERANCE_S,
                    on_error: Callable[[BaseException], None] = _report) -> WebhookAnswer:
    """Handles one delivery, whatever the HTTP framework: verifies it (unless secret is
    None), tells a step from a callback (a step request has memo; a callback has not),
    runs the handler and answers. A step's answer
    is its outcome (200, or 202 for pending), a StepError's status, or 500 (transient)
    when the handler raises; a refused signature is 401. on_error is told of every
    refused delivery (a WebhookVerificationError) and every exception a handler raised
    (default: logged on the logger hookflow.webhook)."""
    if secret is not None:
        try:
            verify_signature(secret, headers, body, tolerance_s=tolerance_s)
        except WebhookVerificationError as e:
            on_error(e)
            return _json(401, {"error": {"message": str(e), "retryable": False}})
    try:
        doc = json.loads(body)
    except ValueError:
        return _json(400, {"error": {"message": "body is not JSON", "retryable": False}})
    if not isinstance(doc, dict):
        return _json(400, {"error": {"message": "body is not a JSON object", "retryable": False}})
    webhook_id = _header(headers, "webhook-id") or ""
    if "memo" not in doc:  # a step request always has memo; a callback never has
        if callback is None:
            return _json(404, {"error": {"message": "no callback handler here", "retryable": False}})
        try:
            callback(doc, CallbackContext(webhook_id))  # type: ignore[arg-type]
        except StepError as e:
            return _error_answer(e)
        except Exception as e:
            on_error(e)
            return _json(500, {"error": {"message": str(e), "retryable": True}})
        return _json(200, {})
    if not (isinstance(doc.get("memo"), dict) and isinstance(doc.get("step"), int)):
        return _json(400, {"error": {"message": "not a step request: memo or step missing",
                                     "retryable": False}})
    request: StepRequest = doc  # type: ignore[assignment]
    try:
        result = step(request, StepContext(request, webhook_id))
    except StepError as e:
        return _error_answer(e)
    except Exception as e:
        on_error(e)
        return _json(500, {"error": {"message": str(e) or type(e).__name__, "retryable": True}})
    if isinstance(result, StepError):
        return _error_answer(result)
    if not isinstance(result, dict) or result.get("outcome") not in _OUTCOMES:
        on_error(TypeError(f"step handler returned no outcome: {result!r}"))
        return _json(500, {"error": {"message": "the step handler returned no outcome",
                                     "retryable": True}})
    return _json(202 if result["outcome"] == "pending" else 200, result)


def _check_secret(secret: Optional[Secret]) -> None:
    if secret is None:
        return
    if secret == "" or (not isinstance(secret, str) and len(secret) == 0):
        raise ValueError("secret: required (None for an unsigned workflow)")
    for s in _secrets(secret):
        secret_key(s)


def http_handler(secret: Optional[Secret], step: StepHandler, *,
                 callback: Optional[CallbackHandler] = None,
                 tolerance_s: int = DEFAULT_TOLERANCE_S,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 on_error: Callable[[BaseException], None] = _report,
                 ) -> Type[BaseHTTPRequestHandler]:
    """A request handler class for http.server, answering POSTs on any path (the
    workflow's url and, with callback, its callback_url). Subclass it to add do_GET (a
    health check) or to log requests. secret may be None only deliberately (an
    unsigned workflow); "" raises."""
    _check_secret(secret)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, answer: WebhookAnswer) -> None:
            self.send_response(answer.status)
            for k, v in answer.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self.close_connection = True
                self._send(_json(411, {"error": {"message": "Content-Length required",
                                                 "retryable": False}}))
                return
            if int(length) > max_body_bytes:
                self.close_connection = True
                self._send(_json(413, {"error": {"message": f"body larger than {max_body_bytes} bytes",
                                                 "retryable": False}}))
                return
            body = self.rfile.read(int(length))
            self._send(handle_delivery(secret, step, self.headers, body, callback=callback,
                                       tolerance_s=tolerance_s, on_error=on_error))

        def log_message(self, format: str, *args: Any) -> None:  # quiet; subclass to log
            pass

    return Handler


WSGIEnviron = Dict[str, Any]
StartResponse = Callable[[str, List[Tuple[str, str]]], Any]
WSGIApp = Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]


def wsgi_app(secret: Optional[Secret], step: StepHandler, *,
             callback: Optional[CallbackHandler] = None,
             tolerance_s: int = DEFAULT_TOLERANCE_S,
             max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
             on_error: Callable[[BaseException], None] = _report) -> WSGIApp:
    """A WSGI application answering POSTs on any path (mount it where the workflow's url
    points); like http_handler otherwise."""
    _check_secret(secret)

    def app(environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        def send(answer: WebhookAnswer) -> List[bytes]:
            reason = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized",
                      404: "Not Found", 405: "Method Not Allowed", 411: "Length Required",
                      413: "Payload Too Large", 422: "Unprocessable Entity",
                      500: "Internal Server Error", 503: "Service Unavailable"}
            status = f"{answer.status} {reason.get(answer.status, 'Status')}"
            headers = list(answer.headers.items()) + [("Content-Length", str(len(answer.body)))]
            start_response(status, headers)
            return [answer.body]

        if environ.get("REQUEST_METHOD") != "POST":
            return send(_json(405, {"error": {"message": "POST only", "retryable": False}},
                              {"Allow": "POST"}))
        try:
            length = int(environ.get("CONTENT_LENGTH") or "")
        except ValueError:
            return send(_json(411, {"error": {"message": "Content-Length required",
                                              "retryable": False}}))
        if length > max_body_bytes:
            return send(_json(413, {"error": {"message": f"body larger than {max_body_bytes} bytes",
                                              "retryable": False}}))
        body = environ["wsgi.input"].read(length)
        headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items()
                   if k.startswith("HTTP_")}
        return send(handle_delivery(secret, step, headers, body, callback=callback,
                                    tolerance_s=tolerance_s, on_error=on_error))

    return app
