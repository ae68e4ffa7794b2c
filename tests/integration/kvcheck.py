"""Reading application KV and dead letters for assertions: through the REST
endpoints when they exist (tags kv and dead-letters of openapi/openapi.yaml),
else straight from the database (tables `kv` and `dead_letter`)."""

import json
import urllib.parse

import pytest

from harness import sql_quote

_MISSING = object()


def kv_get(api, db, key):
    """The JSON value stored under `key`, or None when absent. Skips the test
    (with a reason) when neither the kv table nor GET /v1/kv/{key} exists."""
    if db.table_exists("kv"):
        v = db.scalar("SELECT value::text FROM kv WHERE key = %s" % sql_quote(key))
        return None if v is None else json.loads(v)
    r = api.get("/v1/kv/" + urllib.parse.quote(key, safe=""))
    if r.status == 200 and isinstance(r.body, dict) and "value" in r.body:
        return r.body["value"]
    pytest.skip("KV storage not available yet (no kv table, GET /v1/kv/{key} -> %d): "
                "KV endpoints come in a later issue" % r.status)


def dead_letters(api, db, run_id):
    """Dead letters of `run_id` as dicts with kind, step, attempts, last_error,
    last_http_status. From GET /v1/dead-letters when that endpoint exists
    (answers 200 with {"dead_letters": [...]}), else from the dead_letter table."""
    r = api.get("/v1/dead-letters", params={"limit": 1000})
    if r.status == 200 and isinstance(r.body, dict) and isinstance(r.body.get("dead_letters"), list):
        return [d for d in r.body["dead_letters"] if d.get("run_id") == run_id]
    assert r.status == 404, "GET /v1/dead-letters answered neither a list nor 404: %r" % (r,)
    assert db.table_exists("dead_letter"), "no dead-letter endpoint and no dead_letter table"
    rows = db.sql("SELECT kind, coalesce(step::text, ''), attempts, coalesce(last_error, ''), "
                  "coalesce(last_http_status::text, '') FROM dead_letter WHERE run_id = %s ORDER BY created_at"
                  % sql_quote(run_id))
    out = []
    for kind, step, attempts, err, status in rows:
        out.append({"kind": kind, "step": int(step) if step else None, "attempts": int(attempts),
                    "last_error": err or None, "last_http_status": int(status) if status else None})
    return out


def step_dead_letters(api, db, run_id):
    return [d for d in dead_letters(api, db, run_id) if d.get("kind") == "step"]


def callback_dead_letters(api, db, run_id):
    return [d for d in dead_letters(api, db, run_id) if d.get("kind") == "callback"]
