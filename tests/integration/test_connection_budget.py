"""The PostgreSQL connections an instance opens are known (issue 17, item 5):
/readyz reports the budget by holder and the API pool's state, the instance
never holds more connections than that budget, and start-up warns when the
server's max_connections cannot fit it."""

import threading

from harness import Reply, tcp_connections_between, tcp_sockets_to, wait_until


def budget_of(api):
    r = api.get("/readyz")
    assert r.status == 200, r
    return r.json()["database"]


def sessions(svc, pg):
    """The connections the instance holds to the cluster's server processes
    (not whatever else answers on a port of that number)."""
    return tcp_connections_between(svc.pid, pg.server_pids(), pg.port)


def test_readyz_reports_the_budget_and_the_pool(services):
    svc = services.start(HOOKFLOW_WORKERS="3", HOOKFLOW_DB_POOL="2")
    db = budget_of(svc.api)
    assert db["connections"] == {"workers": 3, "submitter": 1, "listener": 2, "snapshot": 1,
                                 "api_pool": 2, "total": 9}
    pool = db["api_pool"]
    assert pool["size"] == 2
    assert 0 <= pool["open"] <= 2 and 0 <= pool["in_use"] <= 2
    assert pool["waiting"] >= 0 and pool["acquire_timeouts"] == 0


def test_an_instance_holds_at_most_its_budget(services, pg, webhook):
    """Under API load (more concurrent requests than pooled connections) and
    dispatching, the instance's sockets to PostgreSQL never exceed the budget
    /readyz states, and reach it once every holder has opened its own."""
    svc = services.start(HOOKFLOW_WORKERS="3", HOOKFLOW_DB_POOL="2")
    total = budget_of(svc.api)["connections"]["total"]
    assert total == 9
    webhook.route("/steps", lambda req: Reply(200, json_body={"outcome": "succeed", "output": {}}))
    svc.api.put_workflow("budget", webhook.url("/steps"))

    stop = threading.Event()
    seen = []
    other = []

    def load():
        while not stop.is_set():
            svc.api.submit("budget")
            svc.api.get("/v1/runs", params={"limit": "5"})

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        def at_budget():
            n = len(sessions(svc, pg))
            seen.append(n)
            if n > total:  # what else held that port number, for the message
                other.append(tcp_sockets_to(svc.pid, pg.port))
            return n == total and budget_of(svc.api)["api_pool"]["open"] == 2
        wait_until(at_budget, timeout=30, interval=0.05,
                   message=lambda: "%d connections (the last seen: %r)" % (total, seen[-5:]))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert max(seen) <= total, (seen, other[:2])
    assert len(sessions(svc, pg)) <= total


def test_startup_says_whether_max_connections_fits(services):
    """The test cluster has max_connections = 300: 64 workers and a pool of 256
    (324 in all) cannot fit; the defaults can."""
    small = services.start()
    wait_until(lambda: "database connections" in small.log_text(), timeout=10,
               message="the start-up line on connections")
    assert "max_connections cannot fit" not in small.log_text()

    big = services.start(HOOKFLOW_WORKERS="64", HOOKFLOW_DB_POOL="256")
    log = wait_until(lambda: "max_connections cannot fit" in big.log_text() and big.log_text(),
                     timeout=10, message="the max_connections warning")
    line = next(l for l in log.splitlines() if "max_connections cannot fit" in l)
    assert "needed=324" in line and "max_connections=300" in line, line
    assert budget_of(big.api)["connections"]["total"] == 324


def test_startup_warns_when_autovacuum_visits_seldom(services, pg):
    """The test cluster keeps PostgreSQL's autovacuum_naptime (1min): each step
    leaves two dead versions of its run row, so hookflow says at start-up
    that autovacuum should come more often (README "Autovacuum and checkpoints")."""
    assert pg.psql("postgres", "SHOW autovacuum_naptime") == [["1min"]]
    svc = services.start()
    log = wait_until(lambda: "autovacuum visits too seldom" in svc.log_text() and svc.log_text(),
                     timeout=10, message="the autovacuum warning")
    line = next(l for l in log.splitlines() if "autovacuum visits too seldom" in l)
    assert "autovacuum=on" in line and "autovacuum_naptime_s=60" in line, line
    assert "recommended_max_s=15" in line, line
