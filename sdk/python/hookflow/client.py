"""The client of hookflow's REST API over urllib (standard library only).

One method per operation (generated into hookflow/_generated.py from
openapi/openapi.yaml): path parameters first, then the JSON body when the
operation takes one (a dict shaped as in the API), then the query parameters as
keyword arguments. It answers the decoded JSON (typed with the TypedDicts of
hookflow.types), the text of the text endpoints, or None for a 204; an error
answer raises HookflowError.
"""
from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Union

from ._generated import Group, Operations, Run

__all__ = ["Client", "HookflowError", "TERMINAL_STATUSES"]

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
MAX_WAIT_MS = 300000  # the API's longest wait_ms
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})

_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]-]*): ")


class HookflowError(Exception):
    """An error answer of the API, or no answer at all.

    status      the HTTP status; 0 when no answer came
    code        the API's code (invalid_argument, not_found, input_mismatch, ...);
                timeout or network_error without an answer
    message     the API's message (it names the field that is wrong)
    field       the field an invalid_argument message names ("workflow: required"
                names "workflow"); else None
    request_id  the answer's X-Request-Id
    body        the decoded error body, or the text of one that was not JSON
    """

    def __init__(self, status: int, code: str, message: str, *,
                 request_id: Optional[str] = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.body = body
        m = _FIELD.match(message) if code == "invalid_argument" else None
        self.field: Optional[str] = m.group(1) if m else None

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.status} {self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return (f"HookflowError(status={self.status!r}, code={self.code!r}, "
                f"message={self.message!r}, field={self.field!r})")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The API never redirects; a redirect (a proxy's) is answered as it is."""

    def redirect_request(self, req: Any, fp: Any, code: Any, msg: Any, headers: Any,
                         newurl: Any) -> None:
        return None


class Client(Operations):
    """A client of one hookflow service.

        client = Client("http://127.0.0.1:8080", token=os.environ.get("HOOKFLOW_TOKEN"))
        run = client.submit_run({"workflow": "orders", "input": {"order": 42}})
        run = client.wait_for_run(run["run_id"], timeout_s=60)

    base_url  the service (default http://127.0.0.1:8080)
    token     an API token, sent as Authorization: Bearer (None: no header)
    timeout   seconds one call may take (a long-poll gets its wait_ms on top)
    headers   headers sent with every call
    """

    def __init__(self, base_url: str = DEFAULT_BASE_URL, *, token: Optional[str] = None,
                 timeout: float = 30.0, headers: Optional[Mapping[str, str]] = None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.headers: Dict[str, str] = dict(headers or {})
        self._opener = urllib.request.build_opener(_NoRedirect())

    # ---- helpers -------------------------------------------------------------------

    def wait_for_run(self, run_id: str, *, timeout_s: float = 60.0) -> Run:
        """Waits for a run to end, long-polling GET /v1/runs/{run_id}?wait_ms= (at
        most 5 minutes a call) until it is terminal or timeout_s has passed; answers
        the run as it stands then (check its status)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = int(max(0.0, min(deadline - time.monotonic(), MAX_WAIT_MS / 1000)) * 1000)
            run = self.get_run(run_id, wait_ms=left)
            if run["status"] in TERMINAL_STATUSES or time.monotonic() >= deadline:
                return run

    def wait_for_group(self, group_id: str, *, timeout_s: float = 60.0) -> Group:
        """Waits for every member of a group to end (GET /v1/groups/{id}?wait_ms=), at
        most timeout_s; answers the group (its first page of members) as it stands."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = int(max(0.0, min(deadline - time.monotonic(), MAX_WAIT_MS / 1000)) * 1000)
            group = self.get_group(group_id, wait_ms=left)
            if group["pending"] + group["running"] == 0 or time.monotonic() >= deadline:
                return group

    def paginate(self, list_method: Callable[..., Mapping[str, Any]], key: str,
                 *args: Any, **kwargs: Any) -> Iterator[Any]:
        """Every item of a paged list, following next_cursor to the end:

            for run in client.paginate(client.list_runs, "runs", workflow="orders"):
                ...
        """
        cursor: Optional[str] = None
        while True:
            page = list_method(*args, **kwargs, cursor=cursor)
            yield from page[key]
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    def url(self, path: str, path_params: Optional[Mapping[str, Union[str, int]]] = None,
            query: Optional[Mapping[str, Any]] = None) -> str:
        """The URL of an operation: path parameters percent-encoded, query appended."""
        params = path_params or {}

        def one(m: "re.Match[str]") -> str:
            value = params.get(m.group(1))
            if value is None or value == "":
                raise ValueError(f"{m.group(1)}: required")
            return urllib.parse.quote(str(value), safe="")

        out = self.base_url + re.sub(r"\{([^}]+)\}", one, path)
        pairs = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        return out + ("?" + urllib.parse.urlencode(pairs) if pairs else "")

    # ---- transport -----------------------------------------------------------------

    def _call(self, method: str, path: str, *,
              path_params: Optional[Mapping[str, Union[str, int]]] = None,
              query: Optional[Mapping[str, Any]] = None, body: Any = None,
              answer: str = "json", token: Optional[str] = None) -> Any:
        url = self.url(path, path_params, query)
        headers = {"Accept": "application/json" if answer == "json" else "*/*", **self.headers}
        bearer = token if token is not None else self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        wait_ms = (query or {}).get("wait_ms") or 0
        timeout = self.timeout + wait_ms / 1000
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
                request_id = resp.headers.get("X-Request-Id")
        except urllib.error.HTTPError as e:
            raw = e.read()
            raise _error_of(e.code, raw, e.headers.get("X-Request-Id")) from None
        except (socket.timeout, TimeoutError) as e:
            raise HookflowError(0, "timeout", f"{method} {path}: no answer within {timeout:g} s") from e
        except urllib.error.URLError as e:
            if isinstance(e.reason, (socket.timeout, TimeoutError)):
                raise HookflowError(0, "timeout",
                                    f"{method} {path}: no answer within {timeout:g} s") from e
            raise HookflowError(0, "network_error", f"{method} {path}: {e.reason}") from e
        except OSError as e:  # a reset while reading the answer
            raise HookflowError(0, "network_error", f"{method} {path}: {e}") from e
        if not 200 <= status <= 299:
            raise _error_of(status, raw, request_id)
        if answer == "none":
            return None
        text = raw.decode("utf-8")
        if answer == "text":
            return text
        if text == "":
            return None
        try:
            return json.loads(text)
        except ValueError:
            raise HookflowError(status, "invalid_answer", f"{method} {path}: the answer is not JSON",
                                request_id=request_id, body=text) from None


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _error_of(status: int, raw: bytes, request_id: Optional[str]) -> HookflowError:
    text = raw.decode("utf-8", errors="replace")
    body: Any = text
    try:
        body = json.loads(text)
    except ValueError:
        pass  # a proxy's page, say: keep the text
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str) and isinstance(err.get("message"), str):
        return HookflowError(status, err["code"], err["message"], request_id=request_id, body=body)
    snippet = text if len(text) <= 200 else text[:200] + "..."
    return HookflowError(status, f"http_{status}", f"HTTP {status}: {snippet}",
                         request_id=request_id, body=body)
