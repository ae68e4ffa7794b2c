#!/usr/bin/env python3
"""hookflow example webhook (Python 3, standard library only).

The workflow "order" in three steps:

  step 0  quote the order: "expensive" work (half a second of hashing), kept in
          the run's memo so that a redelivery of the step (a retry, a crash, an
          expired lease) reuses the quote instead of paying for it again
  step 1  ask for an approval: continue, waiting for the signal
          "approval:<run_id>" (WEBHOOK_APPROVAL_TIMEOUT_MS, default 10 minutes)
  step 2  the signal arrived: succeed with the quote and the approval; the wait
          timed out: fail the run

Every request must carry a valid Standard Webhooks signature (the workflow's
secret, WEBHOOK_SECRET="whsec_<base64 key>"): a bad or missing signature is a
401, and so is a webhook-timestamp more than 5 minutes away from now. The
terminal callback (POST /done, when the workflow has a callback_url) is checked
the same way and printed.

An input with "fail_first_attempt": true answers 503 on attempt 1 of step 0
after the quote was memoized, to show the retry finding it in the memo.

Environment: WEBHOOK_SECRET (required), WEBHOOK_HOST (default 127.0.0.1),
WEBHOOK_PORT (default 9000), WEBHOOK_APPROVAL_TIMEOUT_MS (default 600000).
"""
import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_S = 5 * 60


def log(msg):
    print(msg, flush=True)


def secret_key(secret):
    """The HMAC key: the base64-decoded part of the secret after "whsec_"."""
    if not secret.startswith("whsec_"):
        raise ValueError("WEBHOOK_SECRET must start with whsec_")
    return base64.b64decode(secret[len("whsec_"):], validate=True)


def verify(key, headers, body):
    """None when the Standard Webhooks headers sign this body, else the reason."""
    msg_id = headers.get("webhook-id")
    stamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not stamp or not signatures:
        return "missing webhook-id, webhook-timestamp or webhook-signature"
    try:
        ts = int(stamp)
    except ValueError:
        return "bad webhook-timestamp"
    if abs(time.time() - ts) > TOLERANCE_S:
        return "webhook-timestamp too far from now"
    signed = msg_id.encode() + b"." + stamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    # Several signatures may be sent, space separated, each "v1,<base64>".
    for sig in signatures.split():
        version, _, value = sig.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return None
    return "no matching signature"


class Memo:
    """The run's memo: {memo.url}/memo/{key}, authorised by the delivery token."""

    def __init__(self, memo):
        self.base = memo["url"].rstrip("/") + "/memo/"
        self.auth = "Bearer " + memo["token"]

    def _call(self, method, key, value=None):
        data = None if value is None else json.dumps({"value": value}).encode()
        req = urllib.request.Request(self.base + urllib.parse.quote(key, safe=""),
                                     data=data, method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def get(self, key):
        try:
            return True, self._call("GET", key)["value"]
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False, None
            raise

    def put(self, key, value):
        self._call("PUT", key, value)


def expensive_quote(order):
    """Stands for slow or costly work: an external API, a big computation."""
    digest = json.dumps(order, sort_keys=True).encode()
    deadline = time.monotonic() + 0.5
    rounds = 0
    while time.monotonic() < deadline:
        digest = hashlib.sha256(digest).digest()
        rounds += 1
    items = order.get("items", [])
    total = sum(int(i.get("qty", 1)) * int(i.get("price_cents", 0)) for i in items)
    return {"total_cents": total, "reference": digest.hex()[:16], "rounds": rounds}


def run_step(call):
    """One step: (HTTP status, answer)."""
    run_id, step, payload = call["run_id"], call["step"], call["payload"]
    memo = Memo(call["memo"])

    if step == 0:
        found, quote = memo.get("quote")
        if found:
            log(f"run {run_id} step 0 attempt {call['attempt']}: quote found in the memo")
        else:
            quote = expensive_quote(payload)
            memo.put("quote", quote)
            log(f"run {run_id} step 0 attempt {call['attempt']}: quote computed and memoized")
        if payload.get("fail_first_attempt") and call["attempt"] == 1:
            log(f"run {run_id} step 0: failing attempt 1 on purpose (503, retried)")
            return 503, {"error": {"message": "simulated outage", "retryable": True}}
        return 200, {"outcome": "continue",
                     "payload": {"order": payload, "quote": quote, "quote_reused": found}}

    if step == 1:
        key = f"approval:{run_id}"
        timeout_ms = int(os.environ.get("WEBHOOK_APPROVAL_TIMEOUT_MS", "600000"))
        log(f"run {run_id} step 1: waiting for the signal {key}")
        return 200, {"outcome": "continue", "payload": payload,
                     "wait_for_signal": {"correlation_key": key, "timeout_ms": timeout_ms}}

    if step == 2:
        received = call.get("signal") or {}
        if received.get("status") != "delivered":
            log(f"run {run_id} step 2: no approval in time")
            return 200, {"outcome": "fail", "reason": "approval timed out"}
        log(f"run {run_id} step 2: approved, done")
        return 200, {"outcome": "succeed",
                     "result": {**payload, "approval": received.get("payload")}}

    return 200, {"outcome": "fail", "reason": f"unexpected step {step}"}


class Handler(BaseHTTPRequestHandler):
    key = b""

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        # A liveness probe for docker compose and scripts.
        self.reply(200, {"ok": True})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        problem = verify(self.key, self.headers, body)
        if problem:
            log(f"rejected {self.path}: {problem}")
            self.reply(401, {"error": {"message": problem, "retryable": False}})
            return
        try:
            call = json.loads(body)
        except ValueError:
            self.reply(400, {"error": {"message": "body is not JSON", "retryable": False}})
            return
        if self.path.startswith("/done"):
            log(f"callback: run {call.get('run_id')} {call.get('status')}: "
                f"{json.dumps(call.get('result'))} error={call.get('error')}")
            self.reply(200, {"ok": True})
            return
        try:
            status, answer = run_step(call)
        except Exception as e:  # a memo call failed, say: retry the step later
            log(f"run {call.get('run_id')} step {call.get('step')}: {e!r}")
            status, answer = 503, {"error": {"message": str(e), "retryable": True}}
        self.reply(status, answer)

    def log_message(self, fmt, *args):  # quiet access log
        pass


def main():
    secret = os.environ.get("WEBHOOK_SECRET", "")
    if not secret:
        sys.exit("webhook.py: set WEBHOOK_SECRET to the workflow's secret (whsec_...)")
    try:
        Handler.key = secret_key(secret)
    except ValueError as e:
        sys.exit(f"webhook.py: WEBHOOK_SECRET: {e}")
    host = os.environ.get("WEBHOOK_HOST", "127.0.0.1")
    port = int(os.environ.get("WEBHOOK_PORT", "9000"))
    server = ThreadingHTTPServer((host, port), Handler)
    # SIGTERM (docker stop) ends it like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log(f"webhook listening on http://{host}:{port}/steps (callbacks on /done)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
