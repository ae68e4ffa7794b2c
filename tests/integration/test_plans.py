"""The hot functions plan their statements once per session (generic plans,
migrations/0001_init.sql): a plan made while the run table was tiny must not
scan the whole table once it has grown. Found by the bench: hf_claim's
UPDATE ... WHERE run_id = ANY (candidates), planned on a new database, was a
sequential scan of every run ever kept, at every claim, for the life of the
connection."""
import glob
import json
import os
import re
import subprocess

import pytest

from harness import PG_BIN, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

OLD_RUNS = 40000


def _migrate(hookflow_bin, db):
    r = subprocess.run([hookflow_bin, "migrate"], env={"HOOKFLOW_DATABASE_URL": db.url},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


# Workflow 'w', as the claim and the settlement read it (no service runs here).
WORKFLOW = ("INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, "
            "backoff_base_ms, backoff_max_ms) VALUES ('w', 'http://127.0.0.1:9/', 1000, 3, 0, "
            "10, 10);")


def _pending(first, last, key=None):
    """Pending runs r<first>..r<last> of workflow 'w', in the lane of key (no
    key: the workflow's runs without one; run ids k<n> for a key)."""
    return ("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
            "max_attempts, seq, concurrency_key) SELECT '%s' || g, 'w', 'pending', 'j%s' || g, "
            "'\\x00', 0, 3, g, %s FROM generate_series(%d, %d) g;"
            % ("k" if key else "r", "k" if key else "", "'%s'" % key if key else "NULL",
               first, last))


def test_a_claim_planned_on_an_empty_table_still_uses_the_indexes_once_it_has_grown(
        hookflow_bin, db):
    _migrate(hookflow_bin, db)
    # One session (one psql -c): the claim's plans are made while the table
    # holds three runs in two lanes (the lanes visited for one, then the two
    # left taken at once) and then one run in one lane (that lane's runs
    # taken): the claim's three paths. Then the table grows by OLD_RUNS
    # finished runs and the same session claims again on each path.
    rows = db.sql(
        WORKFLOW
        + _pending(1, 2) + _pending(1, 1, key="k")
        + "SELECT count(*) FROM hf_claim('test-owner', 1, 60000) WHERE kind = 'step';"
        + "SELECT count(*) FROM hf_claim('test-owner', 10, 60000) WHERE kind = 'step';"
        + _pending(3, 3)
        + "SELECT count(*) FROM hf_claim('test-owner', 10, 60000) WHERE kind = 'step';"
        + "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
          "input) SELECT 'old' || g, 'w', 'succeeded', 'o' || g, '\\x00', 0, 3, "
          "jsonb_build_object('pad', repeat('x', 200)) FROM generate_series(1, %d) g;" % OLD_RUNS
        + _pending(4, 8)
        + "SELECT pg_relation_size('run') / 8192;"
        # one lane: its runs, FIFO
        + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 10, 60000);"
        # two lanes, fewer pending than the claim takes: all of them at once
        + _pending(9, 10) + _pending(2, 2, key="k")
        + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 10, 60000);"
        # two lanes, more pending than it takes: the lanes visited
        + _pending(11, 15) + _pending(3, 4, key="k")
        + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 3, 60000);")
    assert [r[0] for r in rows[:3]] == ["1", "2", "1"], rows[:3]
    pages = int(rows[3][0])
    plans = [doc[0]["Plan"] for doc in _json_documents("\n".join(r[0] for r in rows[4:]))]
    assert len(plans) == 3, rows[4:]
    # 5 steps and 3 steps (the cursor stays); then 3 steps and the lane the
    # claim stopped at
    assert [p["Actual Rows"] for p in plans] == [5, 3, 4], plans
    assert pages > 1000, "the table should be large enough to tell (%d pages)" % pages
    for plan, what in zip(plans, ("the 5 runs of one lane", "all 3 pending runs",
                                  "3 runs through the lanes")):
        blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
        # A scan of the table would read every page at least once; through
        # the indexes a claim of a few runs reads a few dozen.
        assert blocks < 200, "claiming %s touched %d blocks of a %d-page table" % (what, blocks, pages)


def test_a_claim_of_one_lane_reads_as_much_with_a_backlog_of_forty_thousand_as_of_a_thousand(
        hookflow_bin, db):
    """The one-lane path of hf_claim checks that nothing pending sorts before
    the lane with probes that end at the lane's first entry. Written as one
    row comparison, the check read every pending entry: a claim of 256 from a
    backlog of 60,000 spent 3 ms on it, and the soak's peak halved. A claim of
    10 runs now touches about as many blocks whatever the backlog."""
    _migrate(hookflow_bin, db)
    claim = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 10, 60000);"
    # (each ANALYZE makes the session plan the claim's statements again: a
    # claim after it, not measured, does that)
    planned = "SELECT count(*) FROM hf_claim('test-owner', 10, 60000);"
    rows = db.sql(WORKFLOW + _pending(1, 1000) + "ANALYZE run;" + planned + claim
                  + _pending(1001, 40000) + "ANALYZE run;" + planned + claim)
    counts = [i for i, r in enumerate(rows) if r[0] == "10"]
    assert len(counts) == 2 and counts[0] == 0, rows
    plans = [doc[0]["Plan"] for doc in
             _json_documents("\n".join(r[0] for r in rows[1:counts[1]] + rows[counts[1] + 1:]))]
    assert [p["Actual Rows"] for p in plans] == [10, 10], plans
    small, large = (p["Shared Hit Blocks"] + p["Shared Read Blocks"] for p in plans)
    assert large - small < 50, "a claim of 10 read %d blocks with 1,000 pending, %d with 40,000" % (
        small, large)


def _running(first, last):
    return ("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
            "max_attempts, attempt, input, claim_token, lease_owner, claimed_at, "
            "lease_expires_at) SELECT 'r' || g, 'w', 'running', 'j' || g, '\\x00', 0, 3, 1, "
            "'{}', g, 'test-owner', now(), now() + interval '1 hour' "
            "FROM generate_series(%d, %d) g;" % (first, last))


def _settle(results):
    return "[%s]" % ", ".join(
        '{"run_id": "r%d", "claim_token": %d, "result": "%s", "payload": {}}' % (i, i, res)
        for i, res in results)


def test_a_settlement_planned_on_an_empty_table_still_uses_the_indexes_once_it_has_grown(
        hookflow_bin, db):
    """The same for hf_settle_steps: its statement joins the batch's items to
    their runs. Planned while the table held two runs, it hashed the whole
    table (through run_pkey: enable_seqscan is off) at every settlement of
    the session until an ANALYZE made PostgreSQL plan it again: at idle a
    tenth of a step's database time on a table of 80 runs (BENCHMARKS.md,
    "Issue 13: the settlement's plan")."""
    _migrate(hookflow_bin, db)
    rows = db.sql(
        WORKFLOW
        + _running(1, 2)
        + "SELECT count(*) FROM hf_settle_steps('%s') WHERE outcome = 'pending';"
        % _settle([(1, "continue")])
        + "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
          "input) SELECT 'old' || g, 'w', 'succeeded', 'o' || g, '\\x00', 0, 3, "
          "jsonb_build_object('pad', repeat('x', 200)) FROM generate_series(1, %d) g;" % OLD_RUNS
        + _running(3, 6)
        + "SELECT pg_relation_size('run') / 8192;"
        # a step that goes on, one that ends, one that is retried, one that fails
        + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_settle_steps('%s');"
        % _settle([(3, "continue"), (4, "succeed"), (5, "transient_error"),
                   (6, "permanent_error")])
        + "SELECT string_agg(run_id || ':' || status, ' ' ORDER BY run_id) FROM run "
          "WHERE run_id IN ('r3', 'r4', 'r5', 'r6');")
    assert rows[0][0] == "1", rows[:2]
    pages = int(rows[1][0])
    plan = _json_documents("\n".join(r[0] for r in rows[2:-1]))[0][0]["Plan"]
    assert rows[-1][0] == "r3:pending r4:succeeded r5:pending r6:failed", rows[-1]
    assert pages > 1000, "the table should be large enough to tell (%d pages)" % pages
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    # Hashing the table read every page of run_pkey and of the table (18,790
    # block reads); a probe per item, with each new row version's entries in
    # run's indexes, the history rows, the dead letter and the figures, reads
    # under 300.
    assert blocks < 1000, "settling 4 steps touched %d blocks of a %d-page table" % (
        blocks, pages)

# migrations/0016_analyze.sql: what ANALYZE reads of the churning tables.
UNSAMPLED = {
    "run": {"job_id", "input", "input_hash", "payload", "signal", "headers", "callback_url",
            "claim_token", "claimed_at", "result", "error", "error_kind", "final_step",
            "group_key", "updated_at", "cancel_reason", "heartbeat_timeout_ms", "heartbeat",
            "heartbeat_at", "last_heartbeat", "wait_keys", "depth", "wait_children", "children",
            "trace_id", "parent_span_id", "tracestate", "span_started_at", "waited_since"},
    "step_attempt": {"job_id", "payload", "signal", "started_at", "http_status", "error",
                     "heartbeat", "heartbeat_at", "output"},
    "callback": {"body"},
}


def test_analyze_leaves_out_the_payloads_of_the_churning_tables(
        hookflow_bin, db):
    """Under a steady load autovacuum analyzed run at every visit, each time
    sorting a sample of every column, jsonb payloads included: 0.3 s of a
    core every 10 s, which slowed the dispatcher's cycles threefold while it
    ran (BENCHMARKS.md, "Issue 13: the soak's ten-second beat: ANALYZE").
    After the migration ANALYZE keeps no statistics of the columns no
    statement selects rows by and keeps them of every column an index or a
    filter names."""
    _migrate(hookflow_bin, db)
    db.sql(WORKFLOW
           + "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
             "max_attempts, input, result, finished_at, seq) SELECT 'r' || g, 'w', "
             "'succeeded', 'j' || g, '\\x00', 0, 3, jsonb_build_object('n', g), "
             "jsonb_build_object('r', g), now(), g FROM generate_series(1, 2000) g;"
           + "INSERT INTO step_attempt (run_id, generation, step, attempt, job_id, payload, "
             "started_at, result, http_status, output) SELECT 'r' || g, 0, 0, 1, 'j' || g, "
             "jsonb_build_object('p', g), now(), 'succeed', 200, json_build_object('o', g) "
             "FROM generate_series(1, 2000) g;"
           + "INSERT INTO callback (id, run_id, generation, workflow, url, body, status, "
             "max_attempts, priority, seq) SELECT 'c' || g, 'r' || g, 0, 'w', "
             "'http://127.0.0.1:9/', jsonb_build_object('b', g), 'done', 3, 0, g "
             "FROM generate_series(1, 2000) g;"
           + "ANALYZE run, step_attempt, callback;")
    for table, unsampled in UNSAMPLED.items():
        columns = set(db.columns(table))
        assert unsampled <= columns, unsampled - columns
        stats = {r[0] for r in db.sql("SELECT attname FROM pg_stats WHERE schemaname = "
                                      "'public' AND tablename = '%s'" % table)}
        assert stats == columns - unsampled, (table, stats ^ (columns - unsampled))
        # every column an index names (its key, expression or predicate) is sampled
        indexed = set()
        for (definition,) in db.sql("SELECT pg_get_indexdef(indexrelid) FROM pg_index "
                                    "WHERE indrelid = '%s'::regclass" % table):
            indexed |= {c for c in columns if re.search(r"\b%s\b" % c, definition)}
        assert not indexed & unsampled, (table, indexed & unsampled)
    assert {"status", "workflow", "created_at", "finished_at", "next_at", "lease_expires_at",
            "concurrency_key", "parent_run_id", "seq"} <= {
        r[0] for r in db.sql("SELECT attname FROM pg_stats WHERE tablename = 'run'")}


# Engine functions the service calls that run without jit = off: they
# compute a value from values the caller's statement read (a SET would cost
# each row of a list, and stop PostgreSQL inlining the SQL ones).
NO_JIT_SETTING = {
    "hf_ts", "hf_ms", "hf_us", "hf_from_us", "hf_stats_bucket_ms",  # times and numbers
    "hf_run_text", "hf_workflow_json", "hf_schedule_json",  # a row as JSON
    "hf_step_payload",  # a step's payload: its own fields or one probe of step_attempt's key
}


def test_every_engine_function_the_service_calls_runs_without_jit(hookflow_bin, db):
    """After an ANALYZE of run under a steady load, a claim's statement was
    estimated above jit_above_cost and compiled at every call, 8 to 10 ms
    each, until the next ANALYZE: the soak stalled (BENCHMARKS.md, "The
    soak's stalls: JIT"). Every engine function db/*.c calls sets jit = off,
    which holds for all it calls, or is one of NO_JIT_SETTING."""
    _migrate(hookflow_bin, db)
    called = set()
    for path in glob.glob(os.path.join(REPO, "db", "*.c")):
        with open(path) as f:
            called |= set(re.findall(r"\b(hf_[a-z_]+)\(", f.read()))
    assert {"hf_cycle", "hf_submit_many", "hf_sweep", "hf_renew"} <= called, sorted(called)
    rows = db.sql("SELECT p.proname, l.lanname, coalesce(array_to_string(p.proconfig, ','), '') "
                  "FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
                  "WHERE p.proname LIKE 'hf\\_%'")
    funcs = {}
    for name, lang, config in rows:
        funcs.setdefault(name, []).append((lang, config))
    missing = sorted(n for n in called - NO_JIT_SETTING
                     if n not in funcs or any("jit=off" not in c for _, c in funcs[n]))
    assert missing == [], "called by the service without jit = off: %s" % missing
    for name in NO_JIT_SETTING:
        assert name in called, "%s is no longer called from db/*.c: drop it from the list" % name


def test_a_claim_and_a_settlement_compile_nothing_where_jit_would(hookflow_bin, db):
    """The same, watched: with jit_above_cost at 0 a session compiles every
    statement it plans; auto_explain shows the statements the claim (its
    three paths) and a settlement run inside the engine, and none is
    compiled."""
    _migrate(hookflow_bin, db)
    db.sql(WORKFLOW + _pending(1, 5) + _pending(1, 2, key="k") + _running(6, 7))
    if db.scalar("SELECT pg_jit_available()") != "t":
        pytest.skip("this PostgreSQL has no JIT (llvmjit): nothing to compile")
    session = ["LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
               "SET auto_explain.log_nested_statements = on",
               "SET auto_explain.log_level = notice", "SET jit_above_cost = 0",
               # the control: a statement of the session's own is compiled
               "SELECT count(*) FROM run WHERE status = 'pending'",
               # 7 pending in two lanes, 3 taken: the lanes visited; then
               # the 4 left at once; then one lane's runs
               "SELECT count(*) FROM hf_claim('test-owner', 3, 60000)",
               "SELECT count(*) FROM hf_claim('test-owner', 10, 60000)",
               _pending(20, 21),
               "SELECT count(*) FROM hf_claim('test-owner', 10, 60000)",
               "SELECT count(*) FROM hf_settle_steps('%s')"
               % _settle([(6, "continue"), (7, "succeed")])]
    # (the notices, auto_explain's plans, go to stderr; with the context line
    # that tells the engine's statements from the session's own)
    r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                        "-v", "SHOW_CONTEXT=always", "-d", db.url]
                       + [a for q in session for a in ("-c", q)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["7", "4", "4", "2", "2"], r.stdout
    plans = r.stderr.split("NOTICE:  duration:")[1:]
    assert "JIT:" in plans[0] and "status = 'pending'" in plans[0], plans[:1]
    nested = [p for p in plans if "PL/pgSQL function" in p]
    assert len(nested) >= 10, "expected the engine's statements in the log: %s" % plans
    compiled = [p for p in nested if "JIT:" in p]
    assert compiled == [], "compiled inside the engine: %s" % compiled


def _json_documents(text):
    """The JSON documents written one after another in text."""
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text):
            doc, i = dec.raw_decode(text, i)
            out.append(doc)
    return out


KEYS = 10000


def test_a_claim_among_ten_thousand_keys_reads_a_bounded_part_of_the_queue(hookflow_bin, db):
    """key_concurrency with 10,000 keys (issue 14): each key has a call in
    flight and more runs queued. A claim passes over a key at its limit with
    one index probe, and visits at most 4 x limit + 16 lanes, so it reads a
    bounded number of blocks however many keys wait."""
    _migrate(hookflow_bin, db)
    rows = db.sql(
        "INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
        "backoff_max_ms, key_concurrency) VALUES ('w', 'http://127.0.0.1:9/', 1000, 3, 0, 10, "
        "10, 1);"
        # every key holds its one slot (a run of it in flight)...
        "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
        "concurrency_key, holds_key_slot) SELECT 'h' || g, 'w', 'running', 'hj' || g, '\\x00', "
        "0, 3, 'key' || lpad(g::text, 5, '0'), true FROM generate_series(1, %d) g;"
        # ...and has thirty runs queued (but for the first three)
        "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
        "seq, concurrency_key) SELECT 'r' || g || '-' || k, 'w', 'pending', 'j' || g || '-' || k, "
        "'\\x00', 0, 3, g * 100 + k, 'key' || lpad(g::text, 5, '0') FROM generate_series(1, %d) g, "
        "generate_series(1, 30) k;"
        "UPDATE run SET status = 'succeeded', holds_key_slot = false "
        "WHERE run_id IN ('h1', 'h2', 'h3');"
        "ANALYZE run;"
        # From the start, the three keys with a free slot get one run each
        # (and the session has compiled the claim).
        "SELECT count(*) FROM hf_claim('test-owner', 10, 60000, NULL) WHERE kind = 'step';"
        "SELECT pg_relation_size('run') / 8192;"
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 10, 60000, "
        "'{\"priority\": 0, \"workflow\": \"w\", \"key\": \"key05000\"}');"
        % (KEYS, KEYS))
    assert rows[0][0] == "3", rows[:3]
    pages = int(rows[1][0])
    plan = json.loads("\n".join(r[0] for r in rows[2:]))[0]["Plan"]
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    # Now every key is at its limit: the claim passes over 4 x 10 + 16 of
    # them, about 11 blocks each (the lane's probe in a batch of 11, its
    # key's lock and its runs holding a slot), and takes nothing: its one row is the lane where
    # it stopped. A scan would read every page of the table.
    assert plan["Actual Rows"] == 1, plan
    assert pages > 4000, "the table should be large enough to tell (%d pages)" % pages
    assert blocks < 1000, "a claim among %d keys touched %d blocks of a %d-page table" % (
        KEYS, blocks, pages)


ENDED_KEYED = 40000


def _run_key_reads(db):
    """idx_scan of run_key's two indexes and seq_scan of run_key, as the
    statistics show them (every session's counts flushed)."""
    rows = db.sql("SELECT indexrelname, idx_scan FROM pg_stat_user_indexes "
                  "WHERE relname = 'run_key' UNION ALL "
                  "SELECT 'seq_scan', seq_scan FROM pg_stat_user_tables WHERE relname = 'run_key'")
    return {name: int(n) for name, n in rows}


def test_a_keys_active_runs_and_its_list_are_read_through_run_key_among_its_ended_runs(
        hookflow_bin, db, services):
    """key_mode's lookup of a key's active runs (hf_key_active: skip,
    cancel_active, debounce) and GET /v1/runs?concurrency_key= read the keyed
    runs' own table through its indexes (migrations/0012_run_key.sql:
    run_key_active, run_key_list), not the run table's, and do not read the
    key's ended runs: with 40,000 of them kept, a submission that its key's
    one active run makes skip reads a few blocks, and so does a page of the
    key's list."""
    _migrate(hookflow_bin, db)
    # 40,000 ended runs of key 'hot' with their run_key rows (as the
    # migration's backfill writes them), then one active run of it, submitted.
    db.sql(
        "INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
        "backoff_max_ms, key_mode) VALUES ('w', 'http://127.0.0.1:9/', 1000, 3, 0, 10, 10, "
        "'skip');"
        "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
        "concurrency_key, created_at, finished_at) SELECT 'old' || g, 'w', 'succeeded', 'o' || g, "
        "'\\x00', 0, 3, 'hot', now() - interval '1 day' + g * interval '1 ms', now() "
        "FROM generate_series(1, %d) g;"
        "INSERT INTO run_key (run_id, workflow, concurrency_key, created_at, active) "
        "SELECT run_id, workflow, concurrency_key, created_at, false FROM run;"
        "SELECT hf_submit('live', 'w', '1', '\\x01', NULL, NULL, NULL, now() + interval '1 hour', "
        "NULL, NULL, NULL, NULL, 'hot');" % ENDED_KEYED)
    db.sql("VACUUM ANALYZE run")
    db.sql("VACUUM ANALYZE run_key")
    assert db.sql("SELECT active, count(*) FROM run_key GROUP BY 1 ORDER BY 1") == [
        ["f", str(ENDED_KEYED)], ["t", "1"]]
    before = _run_key_reads(db)

    # skip: the new submission finds the live run and writes nothing (once
    # to compile the function in the session, then measured)
    submit = ("SELECT hf_submit('new', 'w', '2', '\\x02', NULL, NULL, NULL, NULL, NULL, NULL, "
              "NULL, NULL, 'hot');")
    rows = db.sql(submit + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + submit)
    assert rows[0] == ["skipped"], rows[:2]
    plan = json.loads("\n".join(r[0] for r in rows[1:]))[0]["Plan"]
    assert db.scalar("SELECT count(*) FROM run WHERE run_id = 'new'") == "0"
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    pages = int(db.scalar("SELECT pg_relation_size('run_key') / 8192"))
    assert pages > 200, "run_key should be large enough to tell (%d pages)" % pages
    assert blocks < 100, "a skip among %d ended runs of its key touched %d blocks" % (
        ENDED_KEYED, blocks)

    # the list of the key, newest first, a page deep
    svc = services.start()
    page = svc.api.get("/v1/runs", params={"concurrency_key": "hot", "limit": "10"})
    assert page.status == 200, page
    assert [r["run_id"] for r in page.body["runs"]] == (
        ["live"] + ["old%d" % g for g in range(ENDED_KEYED, ENDED_KEYED - 9, -1)])
    nxt = svc.api.get("/v1/runs", params={"concurrency_key": "hot", "limit": "10",
                                          "cursor": page.body["next_cursor"]})
    assert [r["run_id"] for r in nxt.body["runs"]] == [
        "old%d" % g for g in range(ENDED_KEYED - 9, ENDED_KEYED - 19, -1)]
    svc.stop()

    # the statistics: each lookup read its index of run_key, none read
    # the table in full (the counts of the sessions that ended are flushed)
    wait_until(lambda: _run_key_reads(db)["run_key_list"] >= before["run_key_list"] + 2,
               timeout=15, message="the list's reads of run_key_list counted")
    after = _run_key_reads(db)
    assert after["run_key_active"] >= before["run_key_active"] + 2, (before, after)
    assert after["seq_scan"] == before["seq_scan"], (before, after)
