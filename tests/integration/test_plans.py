"""The hot functions plan their statements once per session (generic plans,
migrations/0001_init.sql): a plan made while the run table was tiny must not
scan the whole table once it has grown. Found by the bench: hf_claim's
UPDATE ... WHERE run_id = ANY (candidates), planned on a new database, was a
sequential scan of every run ever kept, at every claim, for the life of the
connection."""
import json
import subprocess

OLD_RUNS = 40000


def _migrate(hookflow_bin, db):
    r = subprocess.run([hookflow_bin, "migrate"], env={"HOOKFLOW_DATABASE_URL": db.url},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def _pending(first, last):
    return ("INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, "
            "max_attempts, seq) SELECT 'r' || g, 'w', 'pending', 'j' || g, '\\x00', 0, 3, g "
            "FROM generate_series(%d, %d) g;" % (first, last))


def test_a_claim_planned_on_an_empty_table_still_uses_the_indexes_once_it_has_grown(
        hookflow_bin, db):
    _migrate(hookflow_bin, db)
    # One session (one psql -c): the claim's plans are made while the table
    # holds one run, then the table grows by OLD_RUNS finished runs and the
    # same session claims again.
    rows = db.sql(
        "INSERT INTO workflow (name, url, timeout_ms, max_attempts, priority, backoff_base_ms, "
        "backoff_max_ms) VALUES ('w', 'http://127.0.0.1:9/', 1000, 3, 0, 10, 10);"
        + _pending(1, 1)
        + "SELECT count(*) FROM hf_claim('test-owner', 10, 60000) WHERE kind = 'step';"
        + "INSERT INTO run (run_id, workflow, status, job_id, input_hash, priority, max_attempts, "
          "input) SELECT 'old' || g, 'w', 'succeeded', 'o' || g, '\\x00', 0, 3, "
          "jsonb_build_object('pad', repeat('x', 200)) FROM generate_series(1, %d) g;" % OLD_RUNS
        + _pending(2, 6)
        + "SELECT pg_relation_size('run') / 8192;"
        + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM hf_claim('test-owner', 10, 60000);")
    first_claimed, pages, plan_text = rows[0][0], int(rows[1][0]), "\n".join(r[0] for r in rows[2:])
    assert first_claimed == "1"
    plan = json.loads(plan_text)[0]["Plan"]
    assert plan["Actual Rows"] == 6, plan  # 5 steps and the lane the claim stopped at
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    # A scan of the table would read every page at least once; through the
    # indexes a claim of 5 runs reads a few dozen.
    assert pages > 1000, "the table should be large enough to tell (%d pages)" % pages
    assert blocks < 200, "claiming 5 runs touched %d blocks of a %d-page table" % (blocks, pages)
