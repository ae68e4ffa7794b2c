"""Helpers for the issue-3 tests (signals, memo, KV, step-output replay,
retention): percent-encoded key paths, signal and KV calls, outcome bodies
that wait for a signal, a held row lock in a psql session, and log waits."""

import os
import re
import subprocess
import time
import urllib.parse

import harness
from harness import Api, Reply, sql_quote, wait_until


def qkey(key):
    """A key as one percent-encoded path segment ('/' as %2F, UTF-8 bytes)."""
    if isinstance(key, bytes):
        return urllib.parse.quote_from_bytes(key, safe="")
    return urllib.parse.quote(key, safe="")


# ---- signals -----------------------------------------------------------------

def send_signal(api, key, payload=None, body=True):
    """POST /v1/signals/{key} {"payload": payload}; body=False sends none."""
    if body:
        return api.post("/v1/signals/" + qkey(key), {"payload": payload})
    return api.post("/v1/signals/" + qkey(key))


def signal_outcome(api, key, payload=None):
    r = send_signal(api, key, payload)
    assert r.status == 200, "POST /v1/signals/%s: %r" % (key, r)
    assert isinstance(r.body, dict) and set(r.body) == {"outcome"}, r
    return r.body["outcome"]


def clear_signal(api, key):
    r = api.delete("/v1/signals/" + qkey(key))
    assert r.status == 200, "DELETE /v1/signals/%s: %r" % (key, r)
    assert isinstance(r.body, dict) and set(r.body) == {"removed"}, r
    assert isinstance(r.body["removed"], bool), r
    return r.body["removed"]


def wait_signal(key, timeout_ms, payload=None, kv=None):
    """A continue outcome that waits for a signal on `key`."""
    body = {"outcome": "continue", "payload": payload,
            "wait_for_signal": {"correlation_key": key, "timeout_ms": timeout_ms}}
    if kv is not None:
        body["kv"] = kv
    return Reply(200, body)


# ---- KV ----------------------------------------------------------------------

def kv_item(api, key):
    """The KV item under `key` ({"key", "value", "updated_at"}) or None on 404."""
    r = api.get("/v1/kv/" + qkey(key))
    if r.status == 404:
        assert r.error_code == "not_found", r
        return None
    assert r.status == 200, "GET /v1/kv/%s: %r" % (key, r)
    return r.body


def kv_value(api, key, missing=None):
    item = kv_item(api, key)
    return missing if item is None else item["value"]


def kv_put(api, key, value):
    r = api.put("/v1/kv/" + qkey(key), {"value": value})
    assert r.status == 200, "PUT /v1/kv/%s: %r" % (key, r)
    return r.body


# ---- memo --------------------------------------------------------------------

def memo_path(run_id, key, step=None):
    if step is None:
        return "/v1/runs/%s/memo/%s" % (run_id, qkey(key))
    return "/v1/runs/%s/steps/%d/memo/%s" % (run_id, step, qkey(key))


def delivery_api(base_url, req):
    """An Api client authenticated with the delivery token of step request `req`."""
    return Api(base_url, token=req.json["memo"]["token"])


# ---- logs --------------------------------------------------------------------

def wait_log(svc, pattern, timeout=10.0, start=0):
    """Waits until the service log (from character `start`) matches `pattern`
    (a regex); returns the match."""
    rx = re.compile(pattern)

    def found():
        return rx.search(svc.log_text()[start:])
    return wait_until(found, timeout=timeout, interval=0.05, message="log line /%s/" % pattern)


# ---- a row lock held by another session ---------------------------------------

class RowLock:
    """A psql session holding `SELECT ... FOR UPDATE` in an open transaction,
    so the service's settlement of that row blocks until release(). Used to
    stop a settlement from committing after the webhook answered."""

    def __init__(self, db, query):
        self.db = db
        self.app = "hf-rowlock-%d-%d" % (os.getpid(), int(time.monotonic() * 1e6))
        pg = db.pg
        env = dict(os.environ, PGAPPNAME=self.app)
        self.proc = subprocess.Popen(
            [os.path.join(harness.PG_BIN, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
             "-h", pg.host, "-p", str(pg.port), "-U", pg.user, "-d", db.name],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.proc.stdin.write("BEGIN;\n%s;\n" % query)
        self.proc.stdin.flush()
        wait_until(lambda: self._idle_in_transaction(), timeout=10, interval=0.02,
                   message="psql session holding the row lock")

    def _idle_in_transaction(self):
        if self.proc.poll() is not None:
            raise AssertionError("psql lock session exited: %s" % self.proc.stderr.read())
        return self.db.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND state = 'idle in transaction'" % sql_quote(self.app)) == "1"

    def blocked_backends(self):
        """How many other sessions of this database wait for a lock."""
        return int(self.db.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND application_name <> %s" % sql_quote(self.app)))

    def release(self, terminate_others=True):
        """Ends the transaction. With terminate_others, first terminates every
        other session of the database, so a statement a killed service left
        waiting on the lock can never commit once the lock goes."""
        if self.proc.poll() is None:
            if terminate_others:
                self.proc.stdin.write(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid();\n")
            self.proc.stdin.write("ROLLBACK;\n\\q\n")
            self.proc.stdin.flush()
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
