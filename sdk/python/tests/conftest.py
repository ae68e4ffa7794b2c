"""What the tests share: the service under test (tests/sdk/run.sh starts it and sets
HF_BASE_URL, HF_TOKEN, HF_READ_TOKEN), unique names, and a webhook server built on
the SDK's own http.server adapter, which routes each step to the function registered
for its workflow and records every delivery."""
from __future__ import annotations

import base64
import os
import secrets
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hookflow import Client  # noqa: E402
from hookflow.types import CallbackRequest, StepRequest  # noqa: E402
from hookflow.webhook import (CallbackContext, Secret, StepContext, StepHandler,  # noqa: E402
                              StepResult, fail, http_handler)

T = TypeVar("T")

_TAG = secrets.token_hex(4)
_SEQ = [0]


def unique(prefix: str) -> str:
    """A name no other test (nor an earlier run against the same database) uses."""
    _SEQ[0] += 1
    return f"py-{prefix}-{_TAG}-{_SEQ[0]}"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run the tests with tests/sdk/run.sh (make sdk-test)", 2)
    return value


def client(token: Optional[str] = None) -> Client:
    return Client(env("HF_BASE_URL"), token=env("HF_TOKEN") if token is None else token)


def eventually(what: str, probe: Callable[[], Optional[T]], timeout: float = 20.0) -> T:
    """Calls probe every 50 ms until it answers something truthy; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Seen:
    def __init__(self, request: StepRequest, ctx: StepContext):
        self.request = request
        self.ctx = ctx
        self.answered: Optional[StepResult] = None


class Hooks:
    """The webhook: one ThreadingHTTPServer, the SDK's handler, one function per workflow."""

    def __init__(self, secret: Optional[Secret]):
        self.secret = secret
        self.steps: List[Seen] = []
        self.callbacks: List[CallbackRequest] = []
        self.routes: Dict[str, StepHandler] = {}
        self.cond = threading.Condition()
        handler = http_handler(secret, self._step, callback=self._callback, on_error=lambda e: None)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, workflow: str, fn: StepHandler) -> None:
        self.routes[workflow] = fn

    def _step(self, request: StepRequest, ctx: StepContext) -> StepResult:
        seen = Seen(request, ctx)
        with self.cond:
            self.steps.append(seen)
        fn = self.routes.get(request["workflow"])
        try:
            seen.answered = fn(request, ctx) if fn else fail("no route")
            return seen.answered
        finally:
            with self.cond:
                self.cond.notify_all()

    def _callback(self, request: CallbackRequest, ctx: CallbackContext) -> None:
        with self.cond:
            self.callbacks.append(request)
            self.cond.notify_all()

    def _wait(self, what: str, probe: Callable[[], Optional[T]], timeout: float = 20.0) -> T:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = probe()
                if value is not None:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
                self.cond.wait(left)

    def steps_of(self, run_id: str) -> List[Seen]:
        with self.cond:
            return [s for s in self.steps if s.request["run_id"] == run_id]

    def step_of(self, run_id: str, step: int, attempt: int = 1) -> Seen:
        return self._wait(f"step {step} attempt {attempt} of {run_id}", lambda: next(
            (s for s in self.steps if s.request["run_id"] == run_id and s.request["step"] == step
             and s.request["attempt"] == attempt and s.answered is not None), None))

    def callback_of(self, run_id: str) -> CallbackRequest:
        return self._wait(f"the callback of {run_id}", lambda: next(
            (c for c in self.callbacks if c["run_id"] == run_id), None))


@pytest.fixture(scope="session")
def api() -> Client:
    return client()


@pytest.fixture(scope="session")
def hooks() -> Any:
    h = Hooks(new_secret())
    yield h
    h.stop()
