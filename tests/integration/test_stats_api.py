"""The figures the dashboard draws (openapi/openapi.yaml: getWorkflowStats,
getStatsSeries, listRunCallbacks): a workflow's runs by status, its step
attempts' error rate and duration percentiles over the last hour; sixty
points of throughput, latency and errors; a run's callback deliveries. All
computed from hookflow's own tables: the step and run figures from
step_stats, which every settlement adds to (exact counts; percentiles read
from duration buckets, within 9%: migrations/0011_step_stats.sql)."""

import threading
import time

from harness import TS_RE, Reply, assert_error, cont, succeed, wait_until

ERRORS = ("transient_error", "permanent_error", "lease_expired")
# A percentile is the middle (on the log scale) of the duration bucket it
# falls in, four buckets per doubling: at least 2^(-1/8) of the true value.
BUCKET_LOW = 2 ** (-1 / 8)


def _stats(api, name):
    r = api.get("/v1/workflows/%s/stats" % name)
    assert r.status == 200, r
    return r.body


def _series(api, **params):
    r = api.get("/v1/stats/series", params=params or None)
    assert r.status == 200, r
    return r.body


def _setup(api, webhook):
    """Workflow "slow": 4 runs of 2 steps, each attempt taking >= 120 ms, one
    failing once with a 503 (retried) and one failing for good with a 400;
    one run scheduled an hour ahead. Workflow "quick": 3 runs of 1 step."""
    calls = {}
    lock = threading.Lock()

    def slow(req):
        time.sleep(0.12)  # the webhook's own work: what the percentiles measure
        with lock:
            n = calls[(req.run_id, req.step)] = calls.get((req.run_id, req.step), 0) + 1
        if req.run_id == "s-retry" and req.step == 1 and n == 1:
            return Reply(503, body=b"busy")
        if req.run_id == "s-bad" and req.step == 1:
            return Reply(400, body=b"bad order")
        return cont({"at": 1}) if req.step == 0 else succeed({"ok": True})

    webhook.route("/slow", slow)
    webhook.route("/quick", lambda req: succeed(None))
    api.put_workflow("slow", webhook.url("/slow"), max_attempts=3)
    api.put_workflow("quick", webhook.url("/quick"))
    slow_runs = ["s-1", "s-2", "s-retry", "s-bad"]
    for rid in slow_runs:
        api.submit("slow", run_id=rid)
    api.submit("slow", run_id="s-later", delay_ms=3600000)
    for i in range(3):
        api.submit("quick", run_id="q-%d" % i)
    for rid in slow_runs + ["q-0", "q-1", "q-2"]:
        api.wait_terminal(rid)
    return slow_runs


def test_workflow_stats_count_runs_by_status_and_measure_its_own_attempts(api, webhook):
    _setup(api, webhook)
    s = _stats(api, "slow")
    assert s["workflow"] == "slow" and s["paused"] is False and s["window_minutes"] == 60
    assert TS_RE.match(s["from"]) and TS_RE.match(s["to"]) and s["from"] < s["to"]
    assert s["active"] == {"pending": 0, "scheduled": 1, "waiting": 0, "running": 0,
                           "cancelling": 0}, s
    assert s["last_hour"] == {"succeeded": 3, "failed": 1, "cancelled": 0}, s
    assert s["active_capped"] is False
    # s-1, s-2: 2 attempts; s-retry: 3 (one 503); s-bad: 2 (the last a 400)
    steps = s["steps"]
    assert steps["attempts"] == 9 and steps["errors"] == 2, steps
    assert abs(steps["error_rate"] - 2 / 9) < 0.0001, steps
    assert BUCKET_LOW * 120 <= steps["p50_ms"] <= steps["p95_ms"], steps

    q = _stats(api, "quick")
    assert q["steps"]["attempts"] == 3 and q["steps"]["errors"] == 0 and q["steps"]["error_rate"] == 0
    assert q["last_hour"]["succeeded"] == 3 and sum(q["active"].values()) == 0
    assert q["steps"]["p95_ms"] < 120, "the other workflow's slow attempts are counted: %r" % q

    assert api.post("/v1/workflows/quick/pause").status == 200
    assert _stats(api, "quick")["paused"] is True


def test_workflow_stats_of_a_quiet_workflow_have_no_percentiles(api, webhook):
    api.put_workflow("idle", webhook.url("/nowhere"))
    s = _stats(api, "idle")
    assert s["steps"] == {"attempts": 0, "errors": 0, "error_rate": None, "p50_ms": None,
                          "p95_ms": None}, s
    assert sum(s["last_hour"].values()) == 0


def test_workflow_stats_of_an_unknown_or_malformed_name(api):
    assert_error(api.get("/v1/workflows/nope/stats"), 404, "not_found", "nope")
    assert_error(api.get("/v1/workflows/%s/stats" % ("x" * 300)), 400, "invalid_argument", "name")


def test_series_has_sixty_points_that_add_up_to_what_ran(api, webhook):
    _setup(api, webhook)
    all_ = _series(api)
    assert all_["minutes"] == 60 and all_["bucket_seconds"] == 60 and all_["workflow"] is None
    pts = all_["points"]
    assert len(pts) == 60
    assert all(TS_RE.match(p["at"]) for p in pts)
    assert [p["at"] for p in pts] == sorted(p["at"] for p in pts)
    assert pts[0]["at"] == all_["from"] and all_["from"] < all_["to"]

    def total(points, f):
        return sum(f(p) for p in points)

    assert total(pts, lambda p: p["steps"]["attempts"]) == 12
    assert total(pts, lambda p: p["steps"]["errors"]) == 2
    assert total(pts, lambda p: p["runs"]["succeeded"]) == 6
    assert total(pts, lambda p: p["runs"]["failed"]) == 1
    busy = [p for p in pts if p["steps"]["attempts"]]
    assert busy and all(p["steps"]["p50_ms"] is not None for p in busy)
    assert all(p["steps"]["p50_ms"] is None and p["steps"]["error_rate"] is None
               for p in pts if not p["steps"]["attempts"])

    slow = _series(api, workflow="slow", minutes=120)
    assert slow["workflow"] == "slow" and slow["minutes"] == 120 and slow["bucket_seconds"] == 120
    assert len(slow["points"]) == 60
    assert total(slow["points"], lambda p: p["steps"]["attempts"]) == 9
    assert total(slow["points"], lambda p: p["runs"]["succeeded"]) == 3
    assert min(p["steps"]["p50_ms"] for p in slow["points"] if p["steps"]["attempts"]) >= BUCKET_LOW * 120

    wide = _series(api, minutes=1440)
    assert wide["bucket_seconds"] == 1440 and len(wide["points"]) == 60
    assert total(wide["points"], lambda p: p["steps"]["attempts"]) == 12


def test_series_rejects_each_bad_parameter_by_name(api):
    for minutes in ("4", "30", "59", "90", "1441", "1500", "sixty", "-5", "60.5"):
        assert_error(api.get("/v1/stats/series", params={"minutes": minutes}), 400,
                     "invalid_argument", "minutes")
    assert_error(api.get("/v1/stats/series", params={"workflow": "bad name!"}), 400,
                 "invalid_argument", "workflow")
    # a workflow that does not exist has nothing to draw, not an error
    s = _series(api, workflow="ghost")
    assert sum(p["steps"]["attempts"] for p in s["points"]) == 0


def test_figures_stay_exact_however_many_attempts(api, webhook, sql):
    """Every settlement adds to step_stats: 1,500 runs (more than any sample
    would hold) are all counted, in the workflow's figures and in the
    series."""
    webhook.route("/quick", lambda req: succeed(None))
    api.put_workflow("bulk", webhook.url("/quick"))
    n = 1500
    for i in range(0, n, 100):
        r = api.put("/v1/groups/bulk-%d" % i, {"workflow": "bulk", "members": [
            {"key": "m%d" % j} for j in range(i, i + 100)]})
        assert r.status == 201, r
    wait_until(lambda: int(sql("SELECT count(*) FROM run WHERE workflow = 'bulk'"
                               " AND status = 'succeeded'")[0][0]) == n,
               timeout=120, interval=0.2, message="the bulk runs to succeed")
    s = _stats(api, "bulk")
    assert s["steps"]["attempts"] == n and s["last_hour"]["succeeded"] == n, s
    series = _series(api, workflow="bulk")
    assert sum(p["steps"]["attempts"] for p in series["points"]) == n
    assert sum(p["runs"]["succeeded"] for p in series["points"]) == n


def test_the_sweep_folds_each_sessions_rows_and_keeps_the_sums(api, webhook, sql):
    """Each database session adds to rows of its own (no settlement waits on
    another's); the retention sweep folds the rows of minutes that are over
    into one row per minute and bucket, and the figures do not change."""
    api.put_workflow("folded", webhook.url("/nowhere"))
    sql("INSERT INTO step_stats (minute, workflow, shard, bucket, attempts, errors, succeeded)"
        " SELECT date_trunc('minute', now()) - interval '10 minutes', 'folded', shard, b, 5, 1, 0"
        " FROM generate_series(101, 104) shard, generate_series(20, 22) b"
        " UNION ALL SELECT date_trunc('minute', now()) - interval '10 minutes', 'folded', shard,"
        " -1, 0, 0, 2 FROM generate_series(101, 104) shard")
    before = _stats(api, "folded")
    assert before["steps"]["attempts"] == 60 and before["steps"]["errors"] == 12, before
    assert before["last_hour"]["succeeded"] == 8, before
    # bucket 21 holds the median: [2^5, 2^5.25) ms, reported as 2^(20.5/4)
    assert before["steps"]["p50_ms"] == round(2 ** (20.5 / 4), 1), before
    wait_until(lambda: int(sql("SELECT count(*) FROM step_stats WHERE workflow = 'folded'"
                               " AND shard <> 0")[0][0]) == 0,
               timeout=30, interval=0.2, message="the sweep to fold the rows")
    rows = sql("SELECT bucket, attempts, errors, succeeded FROM step_stats"
               " WHERE workflow = 'folded' ORDER BY bucket")
    assert [tuple(int(x) for x in r) for r in rows] == [(-1, 0, 0, 8), (20, 20, 4, 0), (21, 20, 4, 0),
                                        (22, 20, 4, 0)], rows
    after = _stats(api, "folded")
    assert after["steps"] == before["steps"] and after["last_hour"] == before["last_hour"], after


def test_run_callbacks_show_each_delivery_state(api, webhook):
    tries = {"n": 0}

    def flaky(req):
        tries["n"] += 1
        return Reply(500, body=b"callback store down") if tries["n"] == 1 else Reply(200, body=b"")

    webhook.route("/steps", lambda req: succeed({"ok": 1}))
    webhook.route("/cb", flaky)
    webhook.route("/cb-dead", lambda req: Reply(404, body=b"no such hook"))
    api.put_workflow("cbs", webhook.url("/steps"), retry_backoff={"base_ms": 50, "max_ms": 100},
                     max_attempts=3)
    api.submit("cbs", run_id="cb-ok", callback_url=webhook.url("/cb"))
    api.submit("cbs", run_id="cb-dead", callback_url=webhook.url("/cb-dead"))
    api.submit("cbs", run_id="cb-none")
    for rid in ("cb-ok", "cb-dead", "cb-none"):
        api.wait_terminal(rid)

    def cbs(rid, status):
        r = api.get("/v1/runs/%s/callbacks" % rid)
        assert r.status == 200, r
        c = r.body["callbacks"]
        return c if c and c[0]["status"] == status else None

    ok = wait_until(lambda: cbs("cb-ok", "done"), timeout=20, message="cb-ok delivered")
    assert len(ok) == 1 and ok[0]["generation"] == 1 and ok[0]["attempts"] == 2, ok
    assert ok[0]["url"] == webhook.url("/cb") and ok[0]["next_attempt_at"] is None
    # the last attempt's HTTP status; the last error met on the way, kept
    assert ok[0]["last_http_status"] == 200, ok
    assert ok[0]["last_error"] == "HTTP 500: callback store down", ok
    assert TS_RE.match(ok[0]["finished_at"]) and TS_RE.match(ok[0]["created_at"])
    dead = wait_until(lambda: cbs("cb-dead", "dead"), timeout=20, message="cb-dead dead")
    assert dead[0]["last_http_status"] == 404 and dead[0]["finished_at"] is not None, dead
    r = api.get("/v1/runs/cb-none/callbacks")
    assert r.status == 200 and r.body == {"run_id": "cb-none", "callbacks": []}, r
    assert_error(api.get("/v1/runs/ghost/callbacks"), 404, "not_found", "ghost")
    assert_error(api.get("/v1/runs/bad%20id/callbacks"), 400, "invalid_argument", "run_id")
