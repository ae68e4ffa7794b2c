#!/usr/bin/env python3
"""hookflow example webhook (Python 3, with the hookflow SDK of sdk/python).

The workflow "order" in three steps:

  step 0  quote the order: "expensive" work (half a second of hashing), kept in
          the run's memo so that a redelivery of the step (a retry, a crash, an
          expired lease) reuses the quote instead of paying for it again
  step 1  ask for an approval: continue, waiting for the signal
          "approval:<run_id>" (WEBHOOK_APPROVAL_TIMEOUT_MS, default 10 minutes)
  step 2  the signal arrived: succeed with the quote and the approval; the wait
          timed out: fail the run

The SDK's handler checks every request's Standard Webhooks signature with the
workflow's secret (WEBHOOK_SECRET="whsec_<base64 key>"): a bad or missing
signature is a 401, and so is a webhook-timestamp more than 5 minutes away from
now. The terminal callback (the workflow's callback_url, POST /done) is checked
the same way and printed.

An input with "fail_first_attempt": true answers 503 on attempt 1 of step 0
after the quote was memoized, to show the retry finding it in the memo.

The SDK is the hookflow package: installed (pip install sdk/python), on
PYTHONPATH, or else taken from this repository's sdk/python.

Environment: WEBHOOK_SECRET (required), WEBHOOK_HOST (default 127.0.0.1),
WEBHOOK_PORT (default 9000), WEBHOOK_APPROVAL_TIMEOUT_MS (default 600000).
"""
import hashlib
import json
import os
import signal
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

try:
    import hookflow
except ImportError:  # not installed: the SDK of this repository (../../sdk/python)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "sdk" / "python"))
    try:
        import hookflow
    except ImportError:
        sys.exit("webhook.py: no hookflow SDK: pip install sdk/python, set PYTHONPATH to "
                 "sdk/python, or run it from a checkout of hookflow")

from hookflow.webhook import (WebhookVerificationError, continue_with, fail, http_handler,
                              succeed, transient_error, wait_for_signal)


def log(msg):
    print(msg, flush=True)


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


def step(call, ctx):
    """One step: the request (run_id, step, attempt, payload, signal, ...) and its
    context (the run's memo, reached with the delivery token hookflow sent)."""
    run_id, payload = call["run_id"], call["payload"]

    if call["step"] == 0:
        found, quote = ctx.memo.get("quote")
        if found:
            log(f"run {run_id} step 0 attempt {call['attempt']}: quote found in the memo")
        else:
            quote = expensive_quote(payload)
            ctx.memo.put("quote", quote)
            log(f"run {run_id} step 0 attempt {call['attempt']}: quote computed and memoized")
        if payload.get("fail_first_attempt") and call["attempt"] == 1:
            log(f"run {run_id} step 0: failing attempt 1 on purpose (503, retried)")
            return transient_error("simulated outage")
        return continue_with({"order": payload, "quote": quote, "quote_reused": found})

    if call["step"] == 1:
        key = f"approval:{run_id}"
        timeout_ms = int(os.environ.get("WEBHOOK_APPROVAL_TIMEOUT_MS", "600000"))
        log(f"run {run_id} step 1: waiting for the signal {key}")
        return wait_for_signal(key, timeout_ms=timeout_ms, payload=payload)

    if call["step"] == 2:
        received = call.get("signal") or {}
        if received.get("status") != "delivered":
            log(f"run {run_id} step 2: no approval in time")
            return fail("approval timed out")
        log(f"run {run_id} step 2: approved, done")
        return succeed({**payload, "approval": received.get("payload")})

    return fail(f"unexpected step {call['step']}")


def callback(done, ctx):
    """The terminal callback: a delivery without memo (every step request has one)."""
    log(f"callback: run {done.get('run_id')} {done.get('status')}: "
        f"{json.dumps(done.get('result'))} error={done.get('error')}")


def on_error(e):
    """Refused deliveries and failed steps (a memo call that failed, say: the handler
    answers 500, and hookflow retries the step later)."""
    log(f"rejected: {e}" if isinstance(e, WebhookVerificationError) else f"error: {e!r}")


def main():
    secret = os.environ.get("WEBHOOK_SECRET", "")
    if not secret:
        sys.exit("webhook.py: set WEBHOOK_SECRET to the workflow's secret (whsec_...)")
    try:
        base = http_handler(secret, step, callback=callback, on_error=on_error)
    except ValueError as e:
        sys.exit(f"webhook.py: WEBHOOK_SECRET: {e}")

    class Handler(base):
        def do_GET(self):
            # A liveness probe for docker compose and scripts.
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    host = os.environ.get("WEBHOOK_HOST", "127.0.0.1")
    port = int(os.environ.get("WEBHOOK_PORT", "9000"))
    server = ThreadingHTTPServer((host, port), Handler)
    # SIGTERM (docker stop) ends it like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log(f"webhook listening on http://{host}:{port}/steps (callbacks on /done), "
        f"hookflow SDK {hookflow.__version__}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
