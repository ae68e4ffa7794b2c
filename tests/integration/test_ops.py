"""Operations (README, "Operating it"; openapi/openapi.yaml, tag operations)
and the X-Request-Id convention (openapi/openapi.yaml, info.description)."""

import os
import re
import signal
import socket
import time

from harness import Api, StepScript, cont, free_port, succeed, wait_until


def test_healthz_answers_200(api):
    r = api.get("/healthz")
    assert r.status == 200, r


def test_readyz_answers_200_when_database_reachable_and_schema_current(api):
    r = api.get("/readyz")
    assert r.status == 200, r


def test_metrics_is_prometheus_text_with_hookflow_series(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    api.put_workflow("wf", webhook.url())
    run = api.submit("wf", input=1)
    api.wait_terminal(run["run_id"])

    r = api.get("/metrics")
    assert r.status == 200, r
    assert r.headers.get("Content-Type", "").startswith("text/plain"), r.headers.get("Content-Type")
    samples = [ln for ln in r.text.splitlines() if ln and not ln.startswith("#")]
    assert any(ln.startswith("hookflow_") for ln in samples), r.text[:2000]
    sample_re = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfaN]+( \d+)?$')
    bad = [ln for ln in samples if not sample_re.match(ln)]
    assert not bad, "lines that are not Prometheus samples: %r" % bad[:10]
    # /metrics lists a webhook latency histogram: one that has seen the call above.
    histograms = re.findall(r"^# TYPE (hookflow_\S+) histogram$", r.text, re.M)
    assert histograms, "no hookflow_ histogram in /metrics"
    counts = [float(ln.split()[-1]) for h in histograms for ln in samples if ln.startswith(h + "_count")]
    assert counts and max(counts) >= 1, "histogram counts %r after one webhook call" % counts


def test_openapi_yaml_is_served(api):
    r = api.get("/openapi.yaml")
    assert r.status == 200, r
    assert "openapi:" in r.text and "/v1/runs" in r.text


def test_request_id_is_echoed_when_sent(api):
    r = api.get("/v1/workflows", headers={"X-Request-Id": "it-req-12345"})
    assert r.headers.get("X-Request-Id") == "it-req-12345"
    r = api.get("/v1/workflows/nope", headers={"X-Request-Id": "it-req-404"})
    assert r.status == 404
    assert r.headers.get("X-Request-Id") == "it-req-404"


def test_request_id_is_generated_when_absent(api):
    a = api.get("/v1/workflows").headers.get("X-Request-Id")
    b = api.get("/healthz").headers.get("X-Request-Id")
    assert a and b and a != b


def test_unknown_route_is_404_with_error_body(api):
    r = api.get("/v1/no-such-thing")
    assert r.status == 404, r
    assert r.error_code == "not_found", r


def test_readyz_is_503_while_database_is_down_and_recovers(service, pg):
    probe = Api(service.base_url, timeout=5)

    def readyz_status():
        try:
            return probe.get("/readyz").status
        except OSError:
            return None

    pg.stop()
    try:
        wait_until(lambda: readyz_status() == 503, timeout=20, interval=0.1, message="/readyz 503 with postgres down")
        assert probe.get("/healthz").status == 200, "healthz is process liveness only"
    finally:
        pg.start()
    wait_until(lambda: readyz_status() == 200, timeout=30, interval=0.1, message="/readyz 200 after postgres is back")


def test_bad_configuration_exits_naming_the_variable(services):
    svc = services.new(HOOKFLOW_LEASE_MS="soon")
    svc.start(wait_ready=False)
    code = svc.wait_exit(15)
    assert code is not None and code != 0, "hookflow started with HOOKFLOW_LEASE_MS=soon"
    assert "HOOKFLOW_LEASE_MS" in svc.log_text()


def test_sigterm_while_the_database_is_down_stops_the_start_up(services, refused_port):
    """Start-up waits up to a minute for the database; a SIGTERM meanwhile
    (docker stop) ends it at once, cleanly."""
    svc = services.new(HOOKFLOW_DATABASE_URL="postgresql://x@127.0.0.1:%d/x" % refused_port.port)
    svc.start(wait_ready=False)
    wait_until(lambda: "database not reachable yet" in svc.log_text(), timeout=15,
               message="the first retry")
    svc.send_signal(signal.SIGTERM)
    assert svc.wait_exit(5) == 0, svc.log_tail()
    assert "stopped while waiting for the database" in svc.log_text()


def test_a_start_up_that_fails_after_its_threads_started_stops_them(services):
    """The API's port is taken: by then the dispatcher, listener, submitter
    and snapshot threads have started. hookflow stops them as at a shutdown
    and frees what it holds (the sanitizer build reports any leak at exit)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        svc = services.new(HOOKFLOW_LISTEN="127.0.0.1:%d" % port)
        svc.start(wait_ready=False)
        code = svc.wait_exit(30)
    log = svc.log_text()
    assert code == 1, "exit %r; log:\n%s" % (code, log)
    assert "dispatcher started" in log and "cannot listen on" in log, log
    assert "start-up failed" in log and "hookflow serving" not in log, log
    marks = ("AddressSanitizer", "LeakSanitizer", "runtime error:")
    assert not any(m in log for m in marks), log


def test_its_own_submissions_and_endings_reach_it_without_a_notify(services, webhook):
    """A submission wakes this instance's dispatcher, and a settlement that
    ends a run answers this instance's long-polls, directly: with its
    listener deaf to hookflow_wake and hookflow_done (a test fault) and the
    safety poll ten minutes away, runs still start at once and their
    long-polls answer as they end, long before the wait is over."""
    svc = services.start(HOOKFLOW_TEST_FAULT="deaf_to_wake_and_done", HOOKFLOW_POLL_MS="600000")
    webhook.route("/steps", lambda req: cont({"n": 1}) if req.step == 0 else succeed({"ok": True}))
    svc.api.put_workflow("direct", webhook.url("/steps"))
    for _ in range(3):
        t0 = time.monotonic()
        rid = svc.api.submit("direct", input={})["run_id"]
        r = svc.api.get("/v1/runs/%s" % rid, params={"wait_ms": "30000"})
        waited = time.monotonic() - t0
        assert r.status == 200 and r.body["status"] == "succeeded", r
        # Without the direct wakes the run would not start before the poll
        # (10 min), and its long-poll would answer only when the wait ran out.
        assert waited < 15, "answered after %.1f s of a 30 s wait" % waited


def _serving_line(svc):
    lines = [l for l in svc.log_text().splitlines() if "hookflow serving" in l]
    assert lines, "no start-up line in the log"
    return lines[0]


def test_workers_default_to_half_the_cpus_it_may_run_on(services):
    # README, "Workers": one worker's I/O thread drives thousands of calls;
    # more than half the CPUs only split the database batches further.
    want = max(1, len(os.sched_getaffinity(0)) // 2)
    svc = services.start()
    assert re.search(r"\bworkers=%d\b" % want, _serving_line(svc)), _serving_line(svc)
    other = services.start(HOOKFLOW_WORKERS="3")
    assert re.search(r"\bworkers=3\b", _serving_line(other)), _serving_line(other)


def test_refuses_non_loopback_listen_without_tokens(services):
    svc = services.new(HOOKFLOW_LISTEN="0.0.0.0:%d" % free_port())
    svc.start(wait_ready=False)
    code = svc.wait_exit(15)
    assert code is not None and code != 0, "hookflow listened on 0.0.0.0 without API tokens"
    assert "HOOKFLOW_API_TOKENS" in svc.log_text() or "HOOKFLOW_LISTEN" in svc.log_text()
