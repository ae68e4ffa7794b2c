"""The schema and the engine against the binary (README, "Versions and
upgrades"): `hookflow version`, the engine reloaded whenever what the database
actually holds differs from the binary's (a function replaced or added by hand
included), `hookflow migrate --check` and /readyz saying what differs, a binary
refusing a database that a newer hookflow upgraded, and transactions that
PostgreSQL aborts as busy (serialization failure, deadlock) retried without
losing the connection or failing a batch."""

import json
import os
import re
import subprocess

import harness
from harness import StepScript, cont, succeed, wait_until


def run_cli(hookflow_bin, db, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKFLOW_")}
    env["HOOKFLOW_DATABASE_URL"] = db.url
    return subprocess.run([hookflow_bin] + list(args), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)


def function_def(db, signature):
    return db.scalar("SELECT pg_get_functiondef('%s'::regprocedure)" % signature)


def test_version_prints_the_version_the_schema_and_the_engine(hookflow_bin):
    out = subprocess.run([hookflow_bin, "version"], stdout=subprocess.PIPE, check=True).stdout.decode()
    m = re.fullmatch(r"hookflow (\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?) \(schema (\d{4}_[a-z_]+), "
                     r"engine ([0-9a-f]{12})\)\n", out)
    assert m, out
    newest = sorted(f for f in os.listdir(os.path.join(os.path.dirname(__file__), "..", "..",
                                                       "migrations")) if f.endswith(".sql"))[-1]
    assert m.group(2) + ".sql" == newest, (out, newest)


def test_migrate_check_on_an_empty_database_lists_every_migration_and_fails(hookflow_bin, db):
    r = run_cli(hookflow_bin, db, "migrate", "--check")
    assert r.returncode == 1, r
    out = r.stdout.decode()
    assert "migration 0001_init: not applied" in out, out
    assert "schema behind" in r.stderr.decode(), r.stderr
    # --check changes nothing.
    assert db.scalar("SELECT to_regclass('schema_migrations') IS NULL") == "t"


def test_migrate_applies_schema_and_engine_then_check_is_current(hookflow_bin, db):
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode == 0, r.stderr
    log = r.stdout.decode() + r.stderr.decode()
    assert "engine loaded" in log, log
    r = run_cli(hookflow_bin, db, "migrate", "--check")
    assert r.returncode == 0, r
    assert r.stdout.decode().startswith("current: schema "), r.stdout
    # A second migrate has nothing to do.
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode == 0 and "engine loaded" not in r.stdout.decode() + r.stderr.decode(), r


def test_a_function_replaced_by_hand_is_noticed_and_reloaded_at_start(services, db, hookflow_bin,
                                                                      webhook):
    svc = services.start()
    original = function_def(db, "hf_queue_state(timestamptz)")
    # A hand edit that would quietly change the engine's behaviour, and a
    # stray function in the engine's namespace.
    db.sql("CREATE OR REPLACE FUNCTION hf_queue_state(due timestamptz) RETURNS text "
           "LANGUAGE sql STABLE AS $$ SELECT 'scheduled' $$")
    db.sql("CREATE FUNCTION hf_stray() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$")

    # /readyz reads a snapshot of the database at most about a second old
    r = wait_until(lambda: (lambda x: x if x.status == 503 else None)(svc.api.get("/readyz")),
                   timeout=10, message="/readyz 503 after the hand edit")
    assert r.error_code == "unavailable"
    assert "engine differs" in r.error_message, r.error_message

    r = run_cli(hookflow_bin, db, "migrate", "--check")
    assert r.returncode == 1, r
    out = r.stdout.decode()
    assert "engine: function hf_queue_state(timestamp with time zone) changed" in out, out
    assert "engine: function hf_stray() not part of the loaded engine" in out, out

    # A restart loads the binary's engine again: the edit is undone, the stray
    # function dropped, and runs behave as the binary says.
    svc.restart()
    assert function_def(db, "hf_queue_state(timestamptz)") == original
    assert db.scalar("SELECT count(*) FROM pg_proc WHERE proname = 'hf_stray'") == "0"
    assert "loading the engine" in svc.log_text()
    assert svc.api.get("/readyz").status == 200
    webhook.route("/steps", StepScript({0: cont({"a": 1}), 1: succeed("done")}))
    svc.api.put_workflow("wf", webhook.url())
    run = svc.api.submit("wf", input=None)
    assert svc.api.wait_terminal(run["run_id"])["status"] == "succeeded"


def test_a_binary_refuses_a_database_with_a_migration_it_does_not_know(services, db, hookflow_bin):
    svc = services.start()
    svc.stop()
    db.sql("INSERT INTO schema_migrations (version) VALUES ('9999_from_the_future')")
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode != 0, r
    log = r.stdout.decode() + r.stderr.decode()
    assert "database upgraded by a newer hookflow" in log and "9999_from_the_future" in log, log
    r = run_cli(hookflow_bin, db, "migrate", "--check")
    assert r.returncode == 1
    assert "migration 9999_from_the_future: applied by a newer hookflow" in r.stdout.decode()

    again = services.new()
    again.start(wait_ready=False)
    code = again.wait_exit(30)
    assert code not in (None, 0), again.log_tail()
    assert "database upgraded by a newer hookflow" in again.log_text()
    # Nothing was changed by the refusing binary.
    assert db.scalar("SELECT count(*) FROM schema_migrations WHERE version = '9999_from_the_future'") == "1"


def test_a_binary_refuses_an_engine_loaded_by_a_newer_version(services, db, hookflow_bin):
    svc = services.start()
    svc.stop()
    db.sql("UPDATE hf_engine SET hookflow_version = '99.0.0'")
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode != 0, r
    assert "engine was loaded by hookflow 99.0.0" in r.stdout.decode() + r.stderr.decode(), r


def test_a_running_instance_stops_claiming_when_a_newer_hookflow_upgrades_the_database(
        services, db, webhook):
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    svc = services.start()
    svc.api.put_workflow("wf", webhook.url())
    first = svc.api.submit("wf", input=1)
    assert svc.api.wait_terminal(first["run_id"])["status"] == "succeeded"

    # What a newer binary's start-up leaves behind: its engine record, then
    # the notification every instance hears.
    db.sql("UPDATE hf_engine SET hookflow_version = '99.0.0'; NOTIFY hookflow_engine")
    wait_until(lambda: "claiming stopped" in svc.log_text(), timeout=10,
               message="the instance to stop claiming")
    r = wait_until(lambda: (lambda x: x if x.status == 503 else None)(svc.api.get("/readyz")),
                   timeout=10, message="/readyz 503 after the upgrade")
    assert "newer hookflow" in r.error_message, r

    calls = len(webhook.requests())
    ignored = svc.log_text().count("wake ignored")
    late = svc.api.submit("wf", input=2)
    # The submission's wake-up reached the dispatcher, which did not claim.
    wait_until(lambda: svc.log_text().count("wake ignored") > ignored, timeout=10,
               message="the dispatcher to ignore the wake-up of the new run")
    assert svc.api.run(late["run_id"])["status"] == "pending"
    assert len(webhook.requests()) == calls


BUSY_TRIGGER = """
CREATE SEQUENCE test_busy_seq;
CREATE FUNCTION test_busy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('test_busy_seq') <= %(times)d THEN
        RAISE EXCEPTION 'injected by the test' USING ERRCODE = '%(sqlstate)s';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_busy BEFORE INSERT ON %(table)s FOR EACH ROW EXECUTE FUNCTION test_busy();
"""


def test_a_settlement_aborted_as_a_serialization_failure_is_retried_on_the_same_connection(
        service, db, webhook):
    webhook.route("/steps", StepScript({0: cont({"n": 1}), 1: succeed("done")}))
    service.api.put_workflow("wf", webhook.url())
    # The first two history rows written abort their transaction with 40001.
    db.sql(BUSY_TRIGGER % {"times": 2, "sqlstate": "40001", "table": "step_attempt"})
    run = service.api.submit("wf", input=None)
    done = service.api.wait_terminal(run["run_id"])
    assert done["status"] == "succeeded", done
    # Settled once each, as if nothing had happened.
    steps = service.api.steps(run["run_id"])
    assert [(s["step"], s["attempt"], s["result"]) for s in steps] == [(0, 1, "continue"),
                                                                       (1, 1, "succeed")]
    log = service.log_text()
    assert "busy, running the statement again stmt=jobs_cycle sqlstate=40001" in log, log
    # Two aborted attempts, then the two history rows written.
    assert db.scalar("SELECT last_value FROM test_busy_seq") == "4"
    # Retried inside the statement's own transaction: the dispatcher neither
    # reconnected nor gave up on the cycle.
    assert "connection lost" not in log, log
    assert "database unavailable" not in log, log
    assert "cycle failed" not in log, log


def test_a_batch_of_submissions_aborted_as_a_deadlock_is_retried_not_failed(service, db, webhook):
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    service.api.put_workflow("wf", webhook.url())
    db.sql(BUSY_TRIGGER % {"times": 2, "sqlstate": "40P01", "table": "run"})
    # Several at once, so that the submitter commits them together.
    import threading
    results = []

    def submit(i):
        r = service.api.post("/v1/runs", {"workflow": "wf", "run_id": "busy-%d" % i, "input": i})
        results.append(r.status)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [201] * 8, results
    for i in range(8):
        assert service.api.wait_terminal("busy-%d" % i)["status"] == "succeeded"
    log = service.log_text()
    assert "busy, running the statement again stmt=run_submit_many sqlstate=40P01" in log, log
    assert "connection lost" not in log and "database unavailable" not in log, log


def test_migrations_and_their_engine_commit_together_or_not_at_all(hookflow_bin, db):
    """The migrations an upgrade applies and the engine that goes with them
    are one transaction (db/migrate.c): an instance of the release before
    never runs its engine on the new schema. Here the engine cannot load (a
    view of the database's own depends on an hf_ function, which the load
    refuses to drop): migrate fails, and none of the migrations stays applied.
    Once the view is gone, migrate applies them all and the engine."""
    db.sql("CREATE FUNCTION hf_site_local() RETURNS integer LANGUAGE sql AS 'SELECT 1';"
           " CREATE VIEW site_view AS SELECT hf_site_local() AS one")
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode != 0, r
    assert "other objects depend on it" in r.stderr.decode(), r
    assert db.scalar("SELECT to_regclass('run') IS NULL") == "t", "a migration stayed applied"
    assert db.scalar("SELECT count(*) FROM schema_migrations") == "0"
    db.sql("DROP VIEW site_view; DROP FUNCTION hf_site_local()")
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode == 0, r.stderr
    assert db.scalar("SELECT to_regclass('run_key') IS NOT NULL") == "t"
    assert run_cli(hookflow_bin, db, "migrate", "--check").returncode == 0


def _migrated_with_workflow(hookflow_bin, db, max_attempts, priority):
    """The schema and engine, and workflow 'w' (written directly: no service)."""
    r = run_cli(hookflow_bin, db, "migrate")
    assert r.returncode == 0, r.stderr
    db.sql("INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
           "backoff_max_ms) VALUES ('w', 'http://127.0.0.1:9/', 1000, %d, %d, 10, 10)"
           % (max_attempts, priority))


def test_a_lease_begins_when_the_claim_runs_not_when_its_transaction_began(hookflow_bin, db):
    """hf_cycle settles before it claims, in one transaction that may wait
    for rows meanwhile; a claim stamped with now() (the transaction's start)
    gave an attempt a start before its run was created (the dashboard's
    timeline drew it there) and a lease that, counted from the transaction's
    start, ended early by as long as the transaction had been open."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=3, priority=0)
    pg = db.pg
    claimer = subprocess.Popen(
        [os.path.join(harness.PG_BIN, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
         "-h", pg.host, "-p", str(pg.port), "-U", pg.user, "-d", db.name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The claimer's transaction begins (now() is fixed from here) ...
        claimer.stdin.write("BEGIN;\nSELECT 'began';\n")
        claimer.stdin.flush()
        assert claimer.stdout.readline().strip() == "began"
        # ... then a run is created and committed, and then the claim runs.
        db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
               "max_attempts, seq) VALUES ('late', 'w', 'pending', 'j-late', '\\x00', 0, 3, 1)")
        claimer.stdin.write(
            "SELECT count(*) FROM hf_claim('test-owner', 10, 60000) WHERE kind = 'step';\n"
            "SELECT claimed_at >= created_at, claimed_at > now(),"
            " lease_expires_at - claimed_at = interval '60 s' FROM run WHERE run_id = 'late';\n"
            "COMMIT;\n")
        claimer.stdin.flush()
        assert claimer.stdout.readline().strip() == "1"
        assert claimer.stdout.readline().strip() == "t|t|t"
    finally:
        claimer.stdin.close()
        claimer.wait(10)
    # What the history and the run's page show as the attempt's start.
    assert db.scalar("SELECT claimed_at >= created_at FROM run WHERE run_id = 'late'") == "t"


def test_a_claim_takes_one_lanes_runs_oldest_first_and_visits_the_lanes_when_more_wait(
        hookflow_bin, db):
    """hf_claim's common case under load: every pending run in one lane that
    no flow control holds back. The claim takes the lane's oldest runs (seq
    order, not run id order) up to its limit, beyond the 32 of the quick
    path, and keeps the cursor (no 'lane' row). A run of a second lane, or a
    limit on the one lane, sends the claim through the lane visit again."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=3, priority=0)
    claim = ("SELECT string_agg(CASE kind WHEN 'lane' THEN 'lane' ELSE run_id END, ' ' "
             "ORDER BY kind = 'lane', run_id) FROM hf_claim('test-owner', %d, 60000)")
    # 40 runs, the later run ids queued first
    db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
           "max_attempts, seq) SELECT 'r' || lpad(g::text, 2, '0'), 'w', 'pending', 'j' || g, "
           "'\\x00', 0, 3, 100 - g FROM generate_series(1, 40) g")
    assert db.scalar(claim % 5) == "r36 r37 r38 r39 r40"
    assert db.scalar(claim % 33) == " ".join("r%02d" % g for g in range(3, 36))
    # a second lane, queued last: the visit shares the batch between the two
    # and says where it stopped
    db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
           "max_attempts, seq, concurrency_key) VALUES ('k1', 'w', 'pending', 'jk1', '\\x00', "
           "0, 3, 1000, 'k')")
    assert db.scalar(claim % 2) == "k1 r02 lane"
    # one lane again, now capped: visited, and the cap holds
    db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
           "max_attempts, seq) VALUES ('r41', 'w', 'pending', 'j41', '\\x00', 0, 3, 2000)")
    db.sql("UPDATE workflow SET max_concurrency = 1")
    assert db.scalar(claim % 5) == "r01 lane"
    assert db.scalar(claim % 5) == "lane"


def test_the_one_lane_claim_asks_flow_control_inline(hookflow_bin, db):
    """hf_claim's one-lane case asks hf_lane_free whether flow control holds
    the lane back. Given its workflow's row as a subquery's value, the
    function was not inlined, and its body was planned again at every claim
    (0.072 of an idle claim's 0.19 ms, BENCHMARKS.md): it is inlined now, no
    call of it counted. What it answers is the same: a free lane's run is
    taken, a paused workflow's is held back."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=3, priority=0)

    def claim(run_id, workflow):
        db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
               "max_attempts, seq) VALUES ('%s', '%s', 'pending', 'j-%s', '\\x00', 0, 3, "
               "nextval('hf_seq'))" % (run_id, workflow, run_id))
        rows = db.sql("SET track_functions = 'all'; "
                      "SELECT coalesce(string_agg(kind || ':' || run_id, ' '), '') "
                      "FROM hf_claim('test-owner', 5, 60000); "
                      "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
                      "WHERE funcname = 'hf_lane_free'")
        return rows[0][0], int(rows[1][0])

    assert claim("a", "w") == ("step:a", 0)
    db.sql("UPDATE workflow SET paused = true")
    assert claim("held", "w") == ("", 0)
    assert db.scalar("SELECT status FROM run WHERE run_id = 'held'") == "pending"


def test_the_lane_visit_goes_on_from_the_cursor_passes_over_full_keys_and_keeps_its_bounds(
        hookflow_bin, db):
    """The lane visit (hf_claim_lanes; README "Flow control") of lanes that
    only a key limit holds back, one run each: it goes on after the cursor's
    lane, passes over a key at its limit (visited, nothing taken), stops at
    the lane that fills the batch, crosses into the next workflow, wraps and
    ends its lap with the cursor's lane, and visits at most 4 x limit + 16
    lanes. Lanes of one workflow are visited a buffer at a time; each bound
    is checked where it cuts such a run of lanes."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=3, priority=0)
    db.sql("UPDATE workflow SET key_concurrency = 1; "
           "INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
           "backoff_max_ms, key_concurrency) SELECT 'x', url, timeout_ms, max_attempts, priority, "
           "backoff_base_ms, backoff_max_ms, 1 FROM workflow WHERE name = 'w'")

    def pending(workflow, keys):
        db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
               "max_attempts, seq, concurrency_key) SELECT '%s-' || k, '%s', 'pending', "
               "'j%s-' || k, '\\x00', 0, 3, nextval('hf_seq'), k FROM unnest('{%s}'::text[]) k"
               % (workflow, workflow, workflow, ",".join(keys)))

    def held(workflow, keys):
        """a run of each key holding its slot: the key is at its limit"""
        db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
               "max_attempts, attempt, concurrency_key, holds_key_slot, lease_owner, claim_token, "
               "lease_expires_at) SELECT '%s-held-' || k, '%s', 'running', 'j%s-held-' || k, "
               "'\\x00', 0, 3, 1, k, true, 'other', 1, now() + interval '1 hour' "
               "FROM unnest('{%s}'::text[]) k" % (workflow, workflow, workflow, ",".join(keys)))

    def claim(limit, workflow, key):
        """the runs taken, in run id order, and the lane the claim stopped at"""
        rows = db.sql("SELECT kind, run_id, workflow, concurrency_key FROM hf_claim('test-owner', "
                      "%d, 60000, '{\"priority\": 0, \"workflow\": \"%s\", \"key\": \"%s\"}')"
                      % (limit, workflow, key))
        taken = sorted(r[1] for r in rows if r[0] == "step")
        lanes = ["%s/%s" % (r[2], r[3]) for r in rows if r[0] == "lane"]
        return taken, lanes

    keys = ["k%02d" % g for g in range(1, 31)]
    pending("w", keys)
    pending("x", keys[:3])
    held("w", ["k07"])
    # from the cursor on; k07 at its limit is passed over; k09 fills the batch
    assert claim(3, "w", "k05") == (["w-k06", "w-k08", "w-k09"], ["w/k09"])
    # on into the next workflow's lanes
    assert claim(3, "w", "k29") == (["w-k30", "x-k01", "x-k02"], ["x/k02"])
    # the rest of the lap: after x/k02, wrapped, up to the cursor's lane (gone:
    # its run was taken), so the last lane visited is w/k29 (w/k06, w/k08,
    # w/k09 and w/k30 were taken above, w/k07 is at its limit)
    assert claim(100, "x", "k02") == (
        sorted(["x-k03"] + ["w-k%02d" % g for g in range(1, 30) if g not in (6, 7, 8, 9)]),
        ["w/k29"])
    # a lap that ends at the cursor's own lane, mid-workflow
    pending("w", ["k40", "k41", "k42"])
    assert claim(100, "w", "k41") == (["w-k40", "w-k41", "w-k42"], ["w/k41"])

    # a deep lane: the walk of the next entries ends inside it, and the lanes
    # after it are found from there (an index probe each)
    db.sql("DELETE FROM run")
    db.sql("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
           "max_attempts, seq, concurrency_key) SELECT 'w-deep-' || lpad(g::text, 3, '0'), 'w', "
           "'pending', 'jdeep' || g, '\\x00', 0, 3, nextval('hf_seq'), 'k01' "
           "FROM generate_series(1, 200) g")
    pending("w", ["k02", "k03", "k04"])
    assert claim(3, "x", "k99") == (["w-deep-001", "w-k02", "w-k03"], ["w/k03"])

    # at most 4 x 1 + 16 = 20 lanes visited by a claim of one run
    db.sql("DELETE FROM run")
    pending("w", keys)
    held("w", keys[:25])
    assert claim(1, "x", "k99") == ([], ["w/k20"])
    assert claim(1, "w", "k20") == (["w-k26"], ["w/k26"])
    # the same bound inside a buffer of lanes visited at once: 4 x 64 + 16 =
    # 272 lanes, and only k001, k260 and k290 may run
    db.sql("DELETE FROM run")
    keys = ["k%03d" % g for g in range(1, 301)]
    pending("w", keys)
    held("w", [k for k in keys if k not in ("k001", "k260", "k290")])
    assert claim(64, "x", "k99") == (["w-k001", "w-k260"], ["w/k272"])
    # on from there: k273 to k300, then wrapped (k001 taken) k002 to k245
    assert claim(64, "w", "k272") == (["w-k290"], ["w/k245"])


def test_a_batch_of_plain_submissions_is_inserted_at_once_with_each_items_outcome(hookflow_bin, db):
    """hf_submit_many inserts a batch of plain runs (no kv effects, each run
    id once; keyed ones: the test after this one) with one statement: each
    item gets the outcome that hf_submit gives it, in order, and the runs are
    what hf_submit makes."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=4, priority=7)

    def submit(items):
        return db.sql("SELECT outcome, run_json::jsonb->>'run_id', run_json::jsonb->>'status', rid, wf "
                      "FROM hf_submit_many('%s'::jsonb)" % json.dumps(items).replace("'", "''"))

    first = submit([{"run_id": "c", "workflow": "w", "input": 3, "input_hash": "03"},
                    {"run_id": "d", "workflow": "w", "input": 4, "input_hash": "04"}])
    assert first == [["created", "c", "pending", "c", "w"], ["created", "d", "pending", "d", "w"]]
    second = submit([
        {"run_id": "a", "workflow": "w", "input": {"x": 1}, "input_hash": "01",
         "headers": {"h": "v"}, "priority": 2, "callback_url": "http://127.0.0.1:9/cb"},
        {"run_id": "b", "workflow": "w", "input": 2, "input_hash": "02", "delay_ms": 60000,
         "trace": {"trace_id": "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "parent_span_id": "00f067aa0ba902b7",
                   "tracestate": "k=v"}},
        {"run_id": "c", "workflow": "w", "input": 3, "input_hash": "03"},
        {"run_id": "d", "workflow": "w", "input": 5, "input_hash": "05"},
        {"run_id": "e", "workflow": "none", "input": 6, "input_hash": "06"},
    ])
    assert second == [["created", "a", "pending", "a", "w"],
                      ["created", "b", "scheduled", "b", "w"],
                      ["duplicate", "c", "pending", "c", "w"],
                      ["input_mismatch", "", "", "d", "w"],
                      ["workflow_not_found", "", "", "e", "none"]], second
    rows = {row[0]: row[1:] for row in db.sql(
        "SELECT run_id, status, seq IS NOT NULL, priority, max_attempts, headers::text, callback_url, "
        "input::text, next_at > now() + interval '50 s', waited_since IS NOT NULL, "
        "trace_id::text, parent_span_id, tracestate, depth FROM run ORDER BY run_id")}
    assert rows["a"] == ["pending", "t", "2", "4", '{"h": "v"}', "http://127.0.0.1:9/cb", '{"x": 1}',
                         "f", "f", rows["a"][9], "", "", "0"], rows["a"]
    assert rows["b"] == ["scheduled", "f", "7", "4", "{}", "", "2", "t", "t",
                         "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "00f067aa0ba902b7", "k=v", "0"], rows["b"]
    assert rows["d"][6] == "4", "the mismatching submission changed the run"
    assert "e" not in rows
    # Each run got its own id and trace.
    assert len({row[0] for row in db.sql("SELECT job_id FROM run")}) == 4
    # and its place in the lists (migrations/0015), once
    assert db.sql("SELECT l.run_id, l.workflow = r.workflow AND l.created_at = r.created_at "
                  "FROM run_listing l LEFT JOIN run r USING (run_id) ORDER BY 1") == \
        [["a", "t"], ["b", "t"], ["c", "t"], ["d", "t"]]
    assert rows["a"][9] != rows["c"][9]


def test_a_submission_of_one_run_goes_through_hf_submit_and_writes_what_a_batch_writes(
        hookflow_bin, db):
    """A batch of one run (a client's POST of one run, when nothing else is
    queued) is submitted by hf_submit, whose one-row insert costs less than
    the batch's statement (BENCHMARKS.md, "Issue 13: what the soak spends its
    CPU on"); a batch of two takes the batch's statement. Each outcome, and
    the run and list row written, are the ones the same item gets in a
    batch."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=4, priority=7)

    def submit(items):
        rows = db.sql("SET track_functions = 'pl'; "
                      "SELECT outcome, run_json::jsonb->>'run_id', run_json::jsonb->>'status', rid, wf "
                      "FROM hf_submit_many('%s'::jsonb); "
                      "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
                      "WHERE funcname = 'hf_submit'" % json.dumps(items).replace("'", "''"))
        return rows[:-1], int(rows[-1][0])

    def item(rid, **kw):
        it = {"run_id": rid, "workflow": "w", "input": {"x": 1}, "input_hash": "01",
              "headers": {"h": "v"}, "priority": 2, "callback_url": "http://127.0.0.1:9/cb",
              "trace": {"trace_id": "4bf92f35-77b3-4da6-a3ce-929d0e0e4736",
                        "parent_span_id": "00f067aa0ba902b7", "tracestate": "k=v"}}
        it.update(kw)
        return it

    assert submit([item("one")]) == ([["created", "one", "pending", "one", "w"]], 1)
    assert submit([item("b1"), item("b2")]) == (
        [["created", "b1", "pending", "b1", "w"], ["created", "b2", "pending", "b2", "w"]], 0)
    assert submit([item("late", delay_ms=60000, headers=None, priority=None)]) == (
        [["created", "late", "scheduled", "late", "w"]], 1)
    assert submit([item("b3", delay_ms=60000, headers=None, priority=None), item("b4")])[0][0] == \
        ["created", "b3", "scheduled", "b3", "w"]
    assert submit([item("one")]) == ([["duplicate", "one", "pending", "one", "w"]], 1)
    assert submit([item("one", input=2, input_hash="02")]) == ([["input_mismatch", "", "", "one", "w"]], 1)
    assert submit([item("gone", workflow="none")]) == ([["workflow_not_found", "", "", "gone", "none"]], 1)

    rows = {row[0]: row[1:] for row in db.sql(
        "SELECT r.run_id, status, seq IS NOT NULL, priority, max_attempts, headers::text, callback_url, "
        "input::text, next_at > now() + interval '50 s', waited_since IS NOT NULL, "
        "trace_id::text, parent_span_id, tracestate, depth, l.created_at = r.created_at "
        "FROM run r LEFT JOIN run_listing l USING (run_id) ORDER BY 1")}
    assert rows["one"] == rows["b1"] == [
        "pending", "t", "2", "4", '{"h": "v"}', "http://127.0.0.1:9/cb", '{"x": 1}', "f", "f",
        "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "00f067aa0ba902b7", "k=v", "0", "t"], rows["one"]
    assert rows["late"] == rows["b3"], (rows["late"], rows["b3"])
    assert rows["late"][:5] == ["scheduled", "f", "7", "4", "null"], rows["late"]
    assert "gone" not in rows


def test_a_batch_with_keys_of_queue_workflows_is_inserted_at_once_and_others_one_by_one(
        hookflow_bin, db):
    """A batch whose keyed runs are all of workflows with key_mode queue is
    inserted at once too: each run carries its key and has its run_key row,
    as hf_submit writes them (the key_modes skip, cancel_active and debounce
    find a key's active runs through it). A batch with a key of a workflow
    in another mode goes through hf_submit, which decides it: skipped."""
    _migrated_with_workflow(hookflow_bin, db, max_attempts=4, priority=7)
    db.sql("INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
           "backoff_max_ms, key_mode) SELECT 's', url, timeout_ms, max_attempts, priority, "
           "backoff_base_ms, backoff_max_ms, 'skip' FROM workflow WHERE name = 'w'")

    def submit(items):
        return db.sql("SELECT outcome, run_json::jsonb->>'run_id', "
                      "coalesce(run_json::jsonb->>'concurrency_key', '-') "
                      "FROM hf_submit_many('%s'::jsonb)" % json.dumps(items).replace("'", "''"))

    assert submit([{"run_id": "a", "workflow": "w", "input": 1, "input_hash": "01",
                    "concurrency_key": "k1"},
                   {"run_id": "b", "workflow": "w", "input": 2, "input_hash": "02"},
                   {"run_id": "c", "workflow": "w", "input": 3, "input_hash": "03",
                    "concurrency_key": "k1", "delay_ms": 60000},
                   {"run_id": "a0", "workflow": "none", "input": 4, "input_hash": "04",
                    "concurrency_key": "k1"}]) == \
        [["created", "a", "k1"], ["created", "b", "-"], ["created", "c", "k1"],
         ["workflow_not_found", "", "-"]]
    assert db.sql("SELECT k.run_id, k.workflow, k.concurrency_key, k.active, "
                  "k.created_at = r.created_at FROM run_key k JOIN run r USING (run_id) "
                  "ORDER BY 1") == [["a", "w", "k1", "t", "t"], ["c", "w", "k1", "t", "t"]]
    # a duplicate in a keyed batch writes nothing more
    assert submit([{"run_id": "a", "workflow": "w", "input": 1, "input_hash": "01",
                    "concurrency_key": "k1"}]) == [["duplicate", "a", "k1"]]
    assert db.scalar("SELECT count(*) FROM run_key") == "2"
    # key_mode skip: the second run of the key is skipped, answered with the first
    assert submit([{"run_id": "d", "workflow": "s", "input": 5, "input_hash": "05",
                    "concurrency_key": "k2"},
                   {"run_id": "e", "workflow": "s", "input": 6, "input_hash": "06",
                    "concurrency_key": "k2"}]) == [["created", "d", "k2"], ["skipped", "d", "k2"]]
    assert db.scalar("SELECT string_agg(run_id, ' ' ORDER BY run_id) FROM run") == "a b c d"
