"""Size does not cost (issue 13, item 4): on a database that keeps many
finished runs and their history, every statement hookflow sends while it
serves finds its rows through an index. The statements are the real ones:
PostgreSQL's auto_explain logs the plan of every statement hookflow's
sessions execute, the statements inside the engine's functions too, with the
rows each plan node read, while a real hookflow runs steps (claims,
settlements, delays, retries, waits, callbacks, cancels, the scheduler's
promote / reap / next-due, the retention sweep) and answers the API's reads
(GET /v1/runs with each filter and a page cursor, a run, its steps,
/metrics). The test then reads those plans from the server log.

A plan node of run, step_attempt, callback, run_key or run_listing passes
when it is not a Seq Scan and reads at most SCAN_BOUND rows (the rows it
returned plus those its filter removed): a scan that walks an index over the
whole table (a list filtered on a status few runs have, a sort of every row)
reads thousands. The kept runs are written by tests/bench/kept_runs.sql, the
same rows the size benchmark (tests/bench/scenario_size.sh) keeps, at a tenth
of its size."""

import json
import os
import re
import subprocess
import threading
import urllib.parse

from harness import PG_BIN, Reply, StepScript, cont, succeed, wait_until
from helpers_issue3 import send_signal, wait_signal

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEPT_SQL = os.path.join(REPO, "tests", "bench", "kept_runs.sql")
KEPT_RUNS = 20000          # x STEPS history rows, a few seconds to write
STEPS = 10
HOT_TABLES = ("run", "step_attempt", "callback", "run_key", "run_listing")
# What a statement's node may read of a hot table: a page of a list (101
# rows) or a batch of claims or settlements reads a few hundred; a walk over
# the kept runs reads KEPT_RUNS.
SCAN_BOUND = KEPT_RUNS // 20
REPEAT = 8                 # each read more than 5 times: the plan cache may
                           # switch a prepared statement to a generic plan
PAGES = 15                 # pages of each list, following next_cursor
KEYS = 20                  # concurrency keys of the kept runs (half have one)


def _migrate(hookflow_bin, db):
    r = subprocess.run([hookflow_bin, "migrate"], env={"HOOKFLOW_DATABASE_URL": db.url},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def _keep_runs(db, runs, steps):
    pg = db.pg
    r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                        "-v", "runs=%d" % runs, "-v", "steps=%d" % steps, "-v", "prefix=kept",
                        "-h", pg.host, "-p", str(pg.port), "-U", pg.user, "-d", db.name,
                        "-f", KEPT_SQL], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    db.sql("VACUUM ANALYZE")


def _key_kept_runs(db):
    """Half the kept runs get a flow-control key, one of KEYS ("cust-<n>",
    so a key has KEPT_RUNS / 2 / KEYS runs, spread over the 30 days and the
    workflows); the other half have none, as runs submitted without one."""
    db.sql("UPDATE run SET concurrency_key = 'cust-' || (substr(run_id, 6)::integer / 2 %% %d)"
           " WHERE run_id LIKE 'kept-%%' AND substr(run_id, 6)::integer %% 2 = 0" % KEYS)
    # and their rows in run_key, as hf_submit writes them (migrations/0012)
    db.sql("INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active)"
           " SELECT run_id, workflow, concurrency_key, created_at,"
           " status NOT IN ('succeeded', 'failed', 'cancelled') FROM run"
           " WHERE run_id LIKE 'kept-%' AND concurrency_key IS NOT NULL")
    db.sql("VACUUM ANALYZE run, run_key")


def _explain_every_statement(db):
    """Every new session of this database logs the plan of each statement it
    runs, nested ones included, with the rows each node read."""
    db.sql("ALTER DATABASE \"%s\" SET session_preload_libraries = 'auto_explain';"
           "ALTER DATABASE \"%s\" SET auto_explain.log_min_duration = 0;"
           "ALTER DATABASE \"%s\" SET auto_explain.log_nested_statements = on;"
           "ALTER DATABASE \"%s\" SET auto_explain.log_analyze = on;"
           "ALTER DATABASE \"%s\" SET auto_explain.log_timing = off;"
           "ALTER DATABASE \"%s\" SET auto_explain.log_format = 'json';" % ((db.name,) * 6))


# harness.Postgres logs with log_line_prefix '%m [%p] %d '
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[\d+\] ", re.M)
_PLAN_HEAD = re.compile(r"^\S+ \S+ \S+ \[\d+\] (\S+) LOG:  duration: [0-9.]+ ms  plan:$")


def _logged_plans(log_path, offset, dbname):
    """The plans auto_explain logged for `dbname` after `offset` in the server
    log: a list of (query text, plan)."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    starts = [m.start() for m in _RECORD.finditer(text)] + [len(text)]
    plans = []
    for a, b in zip(starts, starts[1:]):
        rec = text[a:b]
        head, _, rest = rec.partition("\n")
        m = _PLAN_HEAD.match(head)
        if m is None or m.group(1) != dbname:
            continue
        doc = json.loads(rest)
        plans.append((doc["Query Text"], doc["Plan"]))
    return plans


def _nodes(plan):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _problems(query, plan):
    """What is wrong with one plan: Seq Scans of the hot tables, and nodes
    reading more than SCAN_BOUND of their rows."""
    out = []
    for n in _nodes(plan):
        rel = n.get("Relation Name")
        if rel not in HOT_TABLES:
            continue
        loops = n.get("Actual Loops", 1)
        read = (n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
                + n.get("Rows Removed by Index Recheck", 0)) * loops
        what = "%s on %s%s" % (n["Node Type"], rel,
                                " using " + n["Index Name"] if "Index Name" in n else "")
        if n["Node Type"] == "Seq Scan":
            out.append("%s (read %d rows)" % (what, read))
        elif read > SCAN_BOUND:
            out.append("%s read %d rows (index: %s, filter: %s)" % (
                what, read, n.get("Index Cond") or n.get("Recheck Cond"), n.get("Filter")))
    return ["%s\n    in: %s" % (p, " ".join(query.split())[:400]) for p in out]


def _get(api, path):
    r = api.get(path)
    assert r.status == 200, "GET %s: %r" % (path, r)
    return r.body


def _traffic(api, webhook):
    """Runs that take every path of the engine, on top of the kept runs."""
    calls = {}
    lock = threading.Lock()

    def step(req):
        kind = req.run_id.split("-")[1]
        with lock:
            n = calls[(req.run_id, req.step)] = calls.get((req.run_id, req.step), 0) + 1
        if kind == "plain":
            return cont({"at": req.step}) if req.step < 4 else succeed({"done": True})
        if kind == "delay":
            return cont(None, delay_ms=150) if req.step == 0 else succeed(None)
        if kind == "retry":
            return Reply(503, body=b"busy") if n == 1 else succeed(None)
        if kind == "wait":
            return wait_signal("size-" + req.run_id, 60000) if req.step == 0 else succeed(None)
        if kind == "timeout":
            return wait_signal("size-" + req.run_id, 150) if req.step == 0 else succeed(None)
        if kind == "fail":
            return Reply(200, {"outcome": "fail", "reason": "no"})
        return Reply(500, body=b"unknown kind")

    webhook.route("/steps", step)
    webhook.route("/done", lambda req: Reply(200, body=b""))
    api.put_workflow("live", webhook.url("/steps"), callback_url=webhook.url("/done"),
                     retry_backoff={"base_ms": 50, "max_ms": 100}, max_attempts=3)
    ids = {}
    for n, kind in enumerate(("plain", "plain", "plain", "delay", "retry", "wait", "timeout", "fail")):
        key = {"concurrency_key": "live-key"} if n % 2 == 0 else {}
        rid = api.submit("live", run_id="live-%s-%d" % (kind, n), **key)["run_id"]
        ids.setdefault(kind, []).append(rid)
    waiting = ids["wait"][0]
    api.wait_status(waiting, "waiting", timeout=20)
    assert send_signal(api, "size-" + waiting, {"paid": True}).status == 200
    for rids in ids.values():
        for rid in rids:
            api.wait_terminal(rid, timeout=30)
    # every callback delivered
    wait_until(lambda: len(webhook.requests("/done")) >= sum(len(v) for v in ids.values()),
               timeout=20, message="a callback for every live run")
    # a queued run cancelled, a finished one rerun, a bulk cancel
    later = api.submit("live", run_id="live-plain-later", delay_ms=600000)["run_id"]
    assert api.post("/v1/runs/%s/cancel" % later).status == 200
    rerun = ids["plain"][0]
    r = api.post("/v1/runs/%s/rerun" % rerun, {})
    assert r.status == 201, r
    api.wait_terminal(rerun, timeout=30)
    api.submit("live", run_id="live-plain-bulk", delay_ms=600000)
    r = api.post("/v1/runs:cancel", {"workflow": "live", "status": ["scheduled"]})
    assert r.status == 200, r
    return ids


def _reads(api):
    """The API's reads of runs, each REPEAT times."""
    kept_id = "kept-%07d" % (KEPT_RUNS // 2)
    window = _get(api, "/v1/runs/" + kept_id)["created_at"]
    key_wf = _get(api, "/v1/runs?limit=1&concurrency_key=cust-3")["runs"][0]["workflow"]
    lists = [
        "/v1/runs?limit=100",
        "/v1/runs?limit=100&workflow=kept1",
        "/v1/runs?limit=100&status=succeeded",
        "/v1/runs?limit=100&status=succeeded,failed",
        "/v1/runs?limit=100&status=failed",
        "/v1/runs?limit=100&status=cancelled",
        "/v1/runs?limit=100&status=pending,scheduled,waiting,running,cancelling",
        "/v1/runs?limit=100&workflow=kept1&status=succeeded",
        "/v1/runs?limit=100&workflow=kept2&status=failed",
        "/v1/runs?limit=100&workflow=live",
        "/v1/runs?limit=100&workflow=live&status=running",
        "/v1/runs?limit=100&group_id=kept-g10",
        "/v1/runs?limit=100&concurrency_key=cust-3",
        "/v1/runs?limit=100&concurrency_key=cust-3&workflow=" + key_wf,
        "/v1/runs?limit=100&concurrency_key=cust-3&status=succeeded",
        "/v1/runs?limit=100&concurrency_key=live-key",
        "/v1/runs?limit=100&created_before=" + urllib.parse.quote(window),
        "/v1/runs?limit=100&created_after=" + urllib.parse.quote(window),
    ]
    for path in lists:
        page = None
        for _ in range(REPEAT):
            page = _get(api, path)
        if "live" not in path and "pending" not in path:
            assert page["runs"], "%s found nothing: kept runs match it" % path
        # page on, from each page's cursor: a page deep in the list costs
        # what the first one does
        for _ in range(PAGES):
            if not page.get("next_cursor"):
                break
            page = _get(api, path + "&cursor=" + urllib.parse.quote(page["next_cursor"]))
    for rid in (kept_id, "kept-%07d" % 1, "kept-%07d" % KEPT_RUNS):
        for _ in range(REPEAT):
            _get(api, "/v1/runs/" + rid)
            _get(api, "/v1/runs/%s/steps" % rid)
            page = _get(api, "/v1/runs/%s/steps?limit=3" % rid)
            _get(api, "/v1/runs/%s/steps?limit=3&cursor=%s" % (rid, urllib.parse.quote(page["next_cursor"])))
    # the dashboard's figures (db/series.c): a busy kept workflow, the live
    # one, the charts of every workflow and of one, a run's callbacks
    for _ in range(REPEAT):
        for path in ("/v1/workflows/kept0/stats", "/v1/workflows/live/stats",
                     "/v1/stats/series", "/v1/stats/series?minutes=1440&workflow=live",
                     "/v1/stats/series?minutes=60&workflow=kept1",
                     "/v1/runs/%s/callbacks" % kept_id, "/v1/runs/live-plain-0/callbacks"):
            _get(api, path)
    for _ in range(REPEAT):
        assert api.get("/metrics").status == 200
        assert api.get("/readyz").status == 200


def test_with_many_runs_kept_every_statement_hookflow_sends_reads_through_an_index(
        hookflow_bin, db, pg, services, webhook):
    _migrate(hookflow_bin, db)
    _keep_runs(db, KEPT_RUNS, STEPS)
    _key_kept_runs(db)
    assert db.scalar("SELECT count(*) FROM step_attempt") == str(KEPT_RUNS * STEPS + KEPT_RUNS * 2 // 100)
    _explain_every_statement(db)
    offset = os.path.getsize(pg.log_path)
    # Retention on, far longer than the kept runs' age: its sweep runs every
    # second and deletes nothing.
    svc = services.start(HOOKFLOW_RETENTION_MS=str(365 * 24 * 3600 * 1000))
    _traffic(svc.api, webhook)
    _reads(svc.api)
    # what the sweep does to a run past its window (none of these is): its
    # rows deleted with it, the list's found through run_listing_all
    db.sql("SELECT hf_delete_runs(ARRAY['kept-0000007', 'kept-0000008'])")
    svc.stop()

    plans = _logged_plans(pg.log_path, offset, db.name)
    assert db.scalar("SELECT count(*) FROM run_listing WHERE run_id LIKE 'kept-000000_'") == "7"
    seen = " ".join(q for q, _ in plans)
    covered = (
        # the dispatcher's cycle and the scheduler (service/listener.c)
        "hf_claim", "hf_settle_steps", "hf_settle_callbacks", "hf_promote", "hf_next_due",
        "hf_reap", "hf_sweep",
        # the API's writes this test makes
        "hf_signal", "hf_cancel_run", "hf_rerun", "hf_cancel_many",
        # the API's reads (db/run.c) and /metrics (db/stats.c)
        "FROM run r WHERE ($1::text IS NULL", "FROM run_key k JOIN run r",
        "FROM run_listing l JOIN run r", "DELETE FROM run_listing l",
        "FROM step_attempt a WHERE a.run_id = $1",
        "FROM run r WHERE r.run_id = $1", "count(*) FROM run",
        # the dashboard's figures (db/series.c)
        "FROM step_stats s WHERE s.workflow = $1", "FROM step_stats s WHERE s.minute",
        "FROM callback WHERE run_id = $1")
    for what in covered:
        assert what in seen, "no plan logged for a statement with %r (%d plans logged)" % (
            what, len(plans))
    problems = []
    for query, plan in plans:
        for p in _problems(query, plan):
            if p not in problems:
                problems.append(p)
    assert not problems, "%d plans read a hot table without an index or read most of it:\n%s" % (
        len(problems), "\n".join(problems[:20]))
