"""hookflow behind PgBouncer in transaction pooling mode (README "PgBouncer"):
with HOOKFLOW_DATABASE_POOLER=transaction its statements go unnamed through
PgBouncer, so that any server session may serve any transaction, while LISTEN
and the migrations use the direct HOOKFLOW_LISTEN_DATABASE_URL. The rest of
the suite runs through PgBouncer too with HOOKFLOW_TEST_PGBOUNCER=1 (`make
integration-pgbouncer`)."""

import concurrent.futures
import threading
import urllib.parse

from harness import StepScript, cont, succeed, tcp_sockets_to, wait_until
from otel_collector import Collector

STEPS = 3


def three_steps(webhook):
    webhook.route("/steps", StepScript({
        0: lambda r: cont({"i": r.json["payload"]["i"]}),
        1: lambda r: cont({"i": r.json["payload"]["i"]}),
        2: lambda r: succeed({"i": r.json["payload"]["i"], "done": True}),
    }))


def established(pid, port):
    return [local for local, state in tcp_sockets_to(pid, port) if state == "ESTABLISHED"]


def backends(db):
    """Client sessions of PostgreSQL on the test's database, but the test's own
    (autovacuum's workers are not clients; each db.sql is a psql session of
    its own, and the one before may still be exiting when the next asks)."""
    return int(db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                         " AND backend_type = 'client backend' AND application_name <> 'psql'"))


def test_two_instances_share_a_few_server_sessions_through_pgbouncer(services, db, webhook, new_bouncer, pg):
    """Many concurrent API calls and the dispatching of two instances, every
    statement through a PgBouncer whose pool holds 2 server sessions: every run
    succeeds, hookflow holds many more client connections than PostgreSQL has
    sessions (so each server session served the transactions of many client
    connections), and each instance's only direct connection is its LISTEN."""
    bouncer = new_bouncer(pool_size=2)
    env = dict(HOOKFLOW_WORKERS="2", HOOKFLOW_DB_POOL="8", HOOKFLOW_HTTP_THREADS="8")
    a = services.start(bouncer=bouncer, **env)
    b = services.start(bouncer=bouncer, **env)
    three_steps(webhook)
    a.api.put_workflow("wf", webhook.url(), max_attempts=3, timeout_ms=20000)

    runs = 120
    lock = threading.Lock()
    errors = []

    def calls(i):
        """A submission, then reads and KV writes, on alternating instances."""
        api = (a if i % 2 == 0 else b).api
        other = (b if i % 2 == 0 else a).api
        rid = "pgb-%03d" % i
        answers = [
            api.post("/v1/runs", {"workflow": "wf", "run_id": rid, "input": {"i": i}}),
            other.get("/v1/runs/" + rid),
            api.put("/v1/kv/" + urllib.parse.quote("pgb/%d" % i, safe=""), {"value": {"i": i}}),
            other.get("/v1/runs", params={"workflow": "wf", "limit": 5}),
            other.get("/v1/runs/%s/steps" % rid),
        ]
        bad = [r for r, ok in zip(answers, (201, 200, 200, 200, 200)) if r.status != ok]
        if bad:
            with lock:
                errors.append((rid, bad))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(calls, range(runs)))
    assert not errors, errors[:5]

    def all_succeeded():
        counts = {s: int(n) for s, n in db.sql("SELECT status, count(*) FROM run GROUP BY status")}
        assert counts.get("failed", 0) == 0 and counts.get("cancelled", 0) == 0, counts
        return counts.get("succeeded", 0) == runs
    wait_until(all_succeeded, timeout=120, interval=0.2,
               message=lambda: "all %d runs succeeded: %s" % (runs, db.sql(
                   "SELECT status, count(*) FROM run GROUP BY status")))
    for i in (0, 1, runs - 1):
        run = a.api.run("pgb-%03d" % i)
        assert run["result"] == {"i": i, "done": True} and run["final_step"] == STEPS - 1, run
    assert db.scalar("SELECT count(*) FROM kv") == str(runs)

    # Sharing happened: PgBouncer held at most its 2 server sessions for the
    # test's database while hookflow's instances held many client
    # connections to it (SHOW POOLS: cl_active counts idle clients too).
    pool = bouncer.pool(db.name)
    assert pool is not None, bouncer.admin("SHOW POOLS")
    clients = pool["cl_active"] + pool["cl_waiting"]
    servers = sum(pool[k] for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
    shown = [s for s in bouncer.admin("SHOW SERVERS") if s["database"] == db.name]
    assert servers <= 2 and len(shown) <= 2, (pool, shown)
    via_bouncer = [len(established(svc.pid, bouncer.port)) for svc in (a, b)]
    assert clients == sum(via_bouncer), (pool, via_bouncer)
    # Each instance: 2 workers, the submitter, the /metrics snapshot, the
    # listener's statements, and the API pool's connections opened under load.
    assert all(n >= 5 for n in via_bouncer) and clients >= 3 * servers, (pool, via_bouncer)

    # Direct to PostgreSQL: only the LISTEN connection of each instance (the
    # migrations' connection was closed after start-up), a session on the
    # test's database.
    direct = [established(svc.pid, pg.port) for svc in (a, b)]
    assert [len(d) for d in direct] == [1, 1], direct
    ports = ",".join(d[0].rsplit(":", 1)[1] for d in direct)
    assert db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     " AND client_port IN (%s)" % ports) == "2", direct
    # PostgreSQL sees the 2 LISTEN sessions and at most the pool's 2.
    assert backends(db) <= 4, db.sql("SELECT pid, backend_type, state, left(query, 60)"
                                     " FROM pg_stat_activity WHERE datname = current_database()")


def test_without_the_pooler_setting_named_statements_break_through_pgbouncer(services, db, webhook, new_bouncer):
    """The setting is what makes it work: through a 1-session PgBouncer pool in
    transaction mode, hookflow preparing named statements per client
    connection collides with itself (the one server session already has the
    statement another connection prepared: 42P05, or lacks the one this
    connection prepared elsewhere: 26000). The same instance with
    HOOKFLOW_DATABASE_POOLER=transaction runs its runs to the end with no such
    error."""
    bouncer = new_bouncer(pool_size=1)
    plain = services.new(bouncer=None, HOOKFLOW_DATABASE_URL=bouncer.url(db.name),
                         HOOKFLOW_LISTEN_DATABASE_URL=db.url, HOOKFLOW_WORKERS="2")
    plain.start(wait_ready=False)
    collided = ("sqlstate=42P05", "sqlstate=26000")
    wait_until(lambda: any(c in plain.log_text() for c in collided), timeout=30,
               message="a named statement colliding through PgBouncer in the log")
    plain.stop()

    three_steps(webhook)
    pooled = services.start(bouncer=bouncer, HOOKFLOW_WORKERS="2")
    pooled.api.put_workflow("wf", webhook.url(), max_attempts=1, timeout_ms=20000)
    rids = ["named-%d" % i for i in range(20)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: pooled.api.submit("wf", run_id=rids[i], input={"i": i}), range(len(rids))))
    for i, rid in enumerate(rids):
        run = pooled.api.wait_terminal(rid, timeout=60)
        assert run["status"] == "succeeded" and run["result"] == {"i": i, "done": True}, run
    log = pooled.log_text()
    assert not any(c in log for c in collided), [line for line in log.splitlines()
                                                 if any(c in line for c in collided)][:5]
    pool = bouncer.pool(db.name)
    assert sum(pool[k] for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")) <= 1, pool


def test_spans_reported_by_the_engine_reach_an_instance_behind_pgbouncer(services, db, webhook, new_bouncer):
    """The run span comes from the database (the transaction that ends a run
    reports it to a session that asked for spans). Behind a transaction pooler
    the asking must travel with the client connection, not stay on the server
    session it was made on: after PgBouncer has replaced every server session
    (RECONNECT), the sessions now serving the instance were never asked by a
    connect of its own, and the run spans must still come, one per run."""
    collector = Collector()
    try:
        bouncer = new_bouncer(pool_size=2)
        hf = services.start(bouncer=bouncer, HOOKFLOW_OTLP_ENDPOINT=collector.url, HOOKFLOW_WORKERS="2")
        three_steps(webhook)
        hf.api.put_workflow("wf", webhook.url(), max_attempts=1, timeout_ms=20000)
        hf.api.submit("wf", run_id="before", input={"i": 0})
        assert hf.api.wait_terminal("before", timeout=60)["status"] == "succeeded"
        def server_pids():
            return {row["remote_pid"] for row in bouncer.admin("SHOW SERVERS") if row["database"] == db.name}
        old = server_pids()
        assert old
        bouncer.admin("RECONNECT %s" % db.name)
        # RECONNECT closes each server session once its client has released it.
        wait_until(lambda: not (server_pids() & old) and not db.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE pid IN (%s)" % ",".join(old)) != "0",
            timeout=30, interval=0.1, message="PgBouncer's server sessions replaced")
        rids = ["after-%d" % i for i in range(6)]
        for i, rid in enumerate(rids):
            hf.api.submit("wf", run_id=rid, input={"i": i})
        for rid in rids:
            assert hf.api.wait_terminal(rid, timeout=60)["status"] == "succeeded"

        def run_spans():
            got = {s["attributes"]["hookflow.run_id"] for s in collector.spans() if s["name"] == "run"}
            return got if got >= set(rids) | {"before"} else None
        wait_until(run_spans, timeout=20, interval=0.2, message="a run span for each run at the collector")
    finally:
        collector.close()
