"""Helpers shared by the issue-4 tests (groups, rerun, dead letters, bulk
cancel) and the issue-6 bad-input test. Standard library only; every wait is
a condition with a deadline."""

import hashlib
import socket
import time
import urllib.parse

from harness import TERMINAL, WaitTimeout, wait_until

# Tables whose row counts must not move when a request is refused.
STATE_TABLES = ("workflow", "run", "kv", "signal_buffer", "memo")


def member_run_id(group_id, key):
    """A group member's run id: lowercase hex SHA-256 of "<group_id>/<key>"."""
    return hashlib.sha256(("%s/%s" % (group_id, key)).encode()).hexdigest()


def q(s):
    return urllib.parse.quote(s, safe="")


def put_group(api, group_id, workflow, members, **fields):
    body = {"workflow": workflow, "members": members}
    body.update(fields)
    return api.put("/v1/groups/" + q(group_id), body)


def get_group(api, group_id, **params):
    timeout = None
    if "wait_ms" in params:
        timeout = params["wait_ms"] / 1000.0 + 10
    return api.get("/v1/groups/" + q(group_id), params=params or None, timeout=timeout)


def counts(body):
    """The count fields of a group answer."""
    return {k: body[k] for k in ("total", "pending", "running", "succeeded", "failed", "cancelled")}


def group_members(api, group_id, limit=1000):
    """Every member of the group, walking the cursor."""
    out = []
    cursor = None
    while True:
        params = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        r = get_group(api, group_id, **params)
        assert r.status == 200, r
        out.extend(r.body["members"])
        cursor = r.body.get("next_cursor")
        if not cursor:
            return out


def wait_group_terminal(api, group_id, timeout=30.0):
    """Long-polls GET /v1/groups/{id}?wait_ms until no member is pending or
    running; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout("group %s not terminal after %.1fs: %r"
                              % (group_id, timeout, get_group(api, group_id)))
        r = get_group(api, group_id, wait_ms=int(min(left, 5.0) * 1000))
        assert r.status == 200, r
        if r.body["pending"] == 0 and r.body["running"] == 0:
            return r.body


def wait_runs_terminal(api, run_ids, timeout=30.0):
    return {rid: api.wait_terminal(rid, timeout=timeout) for rid in run_ids}


def table_counts(sql, tables=STATE_TABLES):
    return {t: int(sql("SELECT count(*) FROM %s" % t)[0][0]) for t in tables}


def list_pages(api, path, key, **params):
    """The pages of list `path` (items under `key`) for query `params`,
    walking next_cursor to the end: a list of lists of items."""
    pages = []
    cursor = None
    while True:
        p = dict(params)
        if cursor:
            p["cursor"] = cursor
        r = api.get(path, params=p)
        assert r.status == 200, r
        pages.append(r.body[key])
        cursor = r.body.get("next_cursor")
        if not cursor:
            return pages
        assert len(pages) < 10000, "%s: paging does not end" % path


def dead_letter_list(api, **params):
    """Every dead letter matching `params` (workflow, kind), walking the cursor."""
    return [d for page in list_pages(api, "/v1/dead-letters", "dead_letters", **params) for d in page]


def is_terminal(run):
    return run["status"] in TERMINAL


# --------------------------------------------------------------------------
# Raw HTTP over a socket, for requests urllib cannot make
# --------------------------------------------------------------------------

class RawResponse:
    def __init__(self, status, headers, body, closed):
        self.status = status
        self.headers = headers
        self.body = body
        self.closed = closed  # the server closed the connection (EOF seen)

    def json(self):
        import json
        return json.loads(self.body)

    def __repr__(self):
        return "<RawResponse %s %r>" % (self.status, self.body[:300])


def raw_request(port, data, timeout=30.0, send_chunks=None):
    """Sends `data` (bytes) on a new connection to 127.0.0.1:`port` (or the
    pieces of `send_chunks`), then reads one HTTP/1.1 response. Returns a
    RawResponse; status is None when the server closed (or reset) without
    answering."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            if send_chunks is not None:
                for piece in send_chunks:
                    s.sendall(piece)
            else:
                s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        return read_response(s, timeout)
    finally:
        s.close()


def read_response(s, timeout=30.0):
    s.settimeout(timeout)
    buf = b""
    closed = False
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            buf += chunk
    except ConnectionResetError:
        closed = True
    if b"\r\n\r\n" not in buf:
        return RawResponse(None, {}, buf, closed)
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    length = headers.get("content-length")
    body = rest
    try:
        if length is not None:
            while len(body) < int(length):
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                body += chunk
            body = body[:int(length)]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while not body.endswith(b"0\r\n\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                body += chunk
            body = _dechunk(body)
    except ConnectionResetError:
        closed = True
    return RawResponse(status, headers, body, closed)


def _dechunk(data):
    out = b""
    while data:
        line, data = data.split(b"\r\n", 1)
        n = int(line.split(b";")[0], 16)
        if n == 0:
            break
        out += data[:n]
        data = data[n + 2:]
    return out


def http_bytes(method, path, body=None, headers=None, chunked=False, content_type="application/json",
               port=None):
    """The bytes of one HTTP/1.1 request (Connection: close) to the service
    on 127.0.0.1:`port` (without API tokens it answers only its own host)."""
    host = "127.0.0.1" if port is None else "127.0.0.1:%d" % port
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: " + host, "Connection: close"]
    hdrs = dict(headers or {})
    if body is not None:
        if content_type:
            hdrs.setdefault("Content-Type", content_type)
        if chunked:
            hdrs["Transfer-Encoding"] = "chunked"
        else:
            hdrs["Content-Length"] = str(len(body))
    for k, v in hdrs.items():
        lines.append("%s: %s" % (k, v))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is None:
        return head
    if chunked:
        out = head
        step = 16384
        for i in range(0, len(body), step):
            piece = body[i:i + step]
            out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        return out + b"0\r\n\r\n"
    return head + body


def wait_closed(sock, timeout):
    """Waits up to `timeout` s for the peer to close `sock` (reading and
    discarding whatever it sends). Returns the seconds it took, or None."""
    t0 = time.monotonic()
    sock.settimeout(0.5)
    while time.monotonic() - t0 < timeout:
        try:
            chunk = sock.recv(65536)
            if not chunk:
                return time.monotonic() - t0
        except socket.timeout:
            continue
        except OSError:
            return time.monotonic() - t0
    return None


__all__ = ["member_run_id", "q", "put_group", "get_group", "counts", "group_members",
           "wait_group_terminal", "wait_runs_terminal", "table_counts", "dead_letter_list",
           "raw_request", "read_response", "http_bytes", "wait_closed", "wait_until",
           "STATE_TABLES", "is_terminal"]
