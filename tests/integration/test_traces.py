"""Traces (issue 18; README "Traces").

Trace context, with the real binary and webhook servers:
- POST /v1/runs continues a valid W3C traceparent (its tracestate passed on)
  and starts a trace of its own without one, or when the header is not valid
  (never an error); the run's trace_id is on its JSON.
- Every step call and callback carries traceparent 00-<run's trace>-<span>-01,
  a span per attempt derived from (trace, run, generation, step, attempt):
  retries differ, a redelivery of the same attempt does not.
- Child runs join their parent's trace under the span of the step attempt that
  started them; group members share the request's trace.
- JSON logs carry trace_id and span_id next to run_id, step and attempt.

Spans, end to end (tests/otel: pinned OpenTelemetry packages, installed by
scripts/integration.sh): hookflow exports to a test collector that decodes
every request with @opentelemetry/otlp-transformer's generated protobuf
definitions; the example webhook (examples/node/webhook.js), instrumented with
the OpenTelemetry Node SDK by preloading tests/otel/preload.js, exports to the
same collector. Its server spans must be children of hookflow's step spans.
A slow or unreachable collector drops spans (counted in /metrics) and never
holds a run back."""

import base64
import hashlib
import json
import os
import re
import subprocess
import urllib.request

import pytest

from harness import (Reply, StepScript, cont, free_port, sql_quote, succeed, wait_until)
from otel_collector import OTEL_DIR, Collector, node as _node, stop

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(REPO, "examples", "node", "webhook.js")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TP_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def derive(key):
    """base/trace.c's trace_derive: the first 8 bytes of SHA-256(key) in hex."""
    s = hashlib.sha256(key.encode()).hexdigest()[:16]
    return "0000000000000001" if s == "0" * 16 else s


def attempt_span(trace, run_id, generation, step, attempt):
    return derive("%s/%s/%d/%d/%d" % (trace, run_id, generation, step, attempt))


def traceparent(req):
    m = TP_RE.match(req.headers.get("traceparent", ""))
    assert m, "no valid traceparent on %r: %r" % (req, req.headers.get("traceparent"))
    return m.group(1), m.group(2)


def submit(api, headers=None, **fields):
    body = {"workflow": "wf"}
    body.update(fields)
    r = api.post("/v1/runs", body, headers=headers)
    assert r.status == 201, r
    return r.body


# ---- trace context ------------------------------------------------------------


def test_without_traceparent_a_run_starts_its_trace_and_every_attempt_has_its_span(api, webhook):
    attempts = {}

    def serve(req):
        attempts[req.step] = attempts.get(req.step, 0) + 1
        if req.step == 0 and attempts[0] == 1:
            return Reply(503, body=b"busy")  # retried: a second attempt of step 0
        return cont({"n": req.step}) if req.step < 2 else succeed("done")
    webhook.route("/steps", serve)
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    run = submit(api)
    assert re.match(r"^[0-9a-f]{32}$", run["trace_id"]) and run["trace_id"] != "0" * 32
    assert api.wait_terminal(run["run_id"])["status"] == "succeeded"

    reqs = webhook.requests(path="/steps", run_id=run["run_id"])
    assert [(r.step, r.attempt) for r in reqs] == [(0, 1), (0, 2), (1, 1), (2, 1)]
    spans = []
    for r in reqs:
        trace, span = traceparent(r)
        assert trace == run["trace_id"], "every call is in the run's trace"
        assert span == attempt_span(trace, run["run_id"], 1, r.step, r.attempt)
        spans.append(span)
    assert len(set(spans)) == 4, "a span per attempt, the retry's its own: %s" % spans
    assert "tracestate" not in reqs[0].headers
    # the run's JSON says the same in GET and in the list
    assert api.run(run["run_id"])["trace_id"] == run["trace_id"]
    listed = api.get("/v1/runs", params={"workflow": "wf"}).body["runs"]
    assert [x["trace_id"] for x in listed] == [run["trace_id"]]


def test_a_valid_traceparent_is_continued_and_its_tracestate_passed_on(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    run = submit(api, headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN),
                               "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"})
    assert run["trace_id"] == TRACE
    api.wait_terminal(run["run_id"])
    (req,) = webhook.requests(path="/steps", run_id=run["run_id"])
    trace, span = traceparent(req)
    assert trace == TRACE and span != CALLER_SPAN, "a span of hookflow's own, in the caller's trace"
    assert req.headers["tracestate"] == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def test_the_run_remembers_the_callers_span_and_tracestate(api, webhook, sql):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    run = submit(api, headers={"traceparent": "00-%s-%s-00" % (TRACE, CALLER_SPAN),
                               "tracestate": "k=v"})
    row = sql("SELECT hf_trace_hex(trace_id), parent_span_id, tracestate FROM run "
              "WHERE run_id = %s" % sql_quote(run["run_id"]))
    assert row == [[TRACE, CALLER_SPAN, "k=v"]]


@pytest.mark.parametrize("header", [
    "00-%s-%s-01-extra" % (TRACE, CALLER_SPAN),          # version 00 is exactly 55 characters
    "00-%s-%s-01" % (TRACE.upper(), CALLER_SPAN),        # upper-case hex
    "00-%s-%s-01" % ("0" * 32, CALLER_SPAN),             # all-zero trace id
    "00-%s-%s-01" % (TRACE, "0" * 16),                   # all-zero parent id
    "ff-%s-%s-01" % (TRACE, CALLER_SPAN),                # version ff
    "not a traceparent",
])
def test_an_invalid_traceparent_is_ignored_and_a_trace_started(api, webhook, header):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    run = submit(api, headers={"traceparent": header, "tracestate": "congo=t61rcWkgMzE"})
    assert run["trace_id"] != TRACE and re.match(r"^[0-9a-f]{32}$", run["trace_id"])
    api.wait_terminal(run["run_id"])
    (req,) = webhook.requests(path="/steps", run_id=run["run_id"])
    assert traceparent(req)[0] == run["trace_id"]
    assert "tracestate" not in req.headers, "no tracestate without a valid traceparent"


def test_an_invalid_tracestate_is_dropped_and_the_traceparent_kept(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    run = submit(api, headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN),
                               "tracestate": "Bad Key=1"})
    assert run["trace_id"] == TRACE
    api.wait_terminal(run["run_id"])
    (req,) = webhook.requests(path="/steps", run_id=run["run_id"])
    assert "tracestate" not in req.headers


def test_a_duplicate_submission_keeps_the_first_trace(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    first = submit(api, run_id="same", headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN)})
    again = api.post("/v1/runs", {"workflow": "wf", "run_id": "same"})
    assert again.status == 200 and again.body["trace_id"] == first["trace_id"] == TRACE


def test_callbacks_carry_the_runs_trace_with_a_span_per_delivery(api, webhook):
    deliveries = []

    def cb(req):
        deliveries.append(req)
        return Reply(500 if len(deliveries) == 1 else 200, body=b"")
    webhook.route("/cb", cb)
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url(), callback_url=webhook.url("/cb"), max_attempts=3)
    run = submit(api)
    api.wait_terminal(run["run_id"])
    webhook.wait_requests(2, path="/cb", run_id=run["run_id"], timeout=15)
    spans = []
    for n, req in enumerate(deliveries[:2], start=1):
        trace, span = traceparent(req)
        assert trace == run["trace_id"]
        assert span == derive("%s/%s/1/callback/%d" % (trace, run["run_id"], n))
        spans.append(span)
    assert spans[0] != spans[1]


def test_child_runs_join_the_parents_trace_under_the_step_attempt_that_started_them(
        api, webhook, sql):
    def parent(req):
        if req.step == 0:
            return Reply(200, {"outcome": "continue", "payload": None,
                               "children": [{"key": "a", "workflow": "kid", "input": 1},
                                            {"key": "b", "workflow": "kid", "input": 2}]})
        return succeed("all done")
    webhook.route("/steps", parent)
    webhook.route("/kid", lambda req: succeed(req.field("payload")))
    api.put_workflow("wf", webhook.url())
    api.put_workflow("kid", webhook.url("/kid"))
    run = submit(api, headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN),
                               "tracestate": "k=v"})
    assert api.wait_terminal(run["run_id"])["status"] == "succeeded"
    (step0,) = webhook.requests(path="/steps", run_id=run["run_id"], step=0)
    _, parent_span = traceparent(step0)
    rows = sql("SELECT run_id, hf_trace_hex(trace_id), parent_span_id, tracestate FROM run "
               "WHERE parent_run_id = %s ORDER BY child_key" % sql_quote(run["run_id"]))
    assert len(rows) == 2
    for rid, trace, pspan, state in rows:
        # the engine's hf_attempt_span agrees with the dispatcher's
        assert (trace, pspan, state) == (TRACE, parent_span, "k=v")
        assert api.run(rid)["trace_id"] == TRACE
        (kreq,) = webhook.requests(path="/kid", run_id=rid)
        assert traceparent(kreq)[0] == TRACE
        assert kreq.headers.get("tracestate") == "k=v"


def test_group_members_share_the_requests_trace(api, webhook, sql):
    webhook.route("/steps", lambda req: succeed(1))
    api.put_workflow("wf", webhook.url())
    body = {"workflow": "wf", "members": [{"key": "a", "input": 1}, {"key": "b", "input": 2}]}
    r = api.put("/v1/groups/g1", body,
                headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN)})
    assert r.status == 201, r
    rows = sql("SELECT hf_trace_hex(trace_id), parent_span_id, "
               "hf_run_span(trace_id, run_id, generation) FROM run WHERE group_id = 'g1'")
    assert len(rows) == 2
    assert all(t == TRACE and p == CALLER_SPAN for t, p, _ in rows)
    assert rows[0][2] != rows[1][2], "each member has its own run span"
    # without a traceparent: one new trace for the request's members
    r = api.put("/v1/groups/g2", body)
    assert r.status == 201, r
    rows = sql("SELECT DISTINCT hf_trace_hex(trace_id) FROM run WHERE group_id = 'g2'")
    assert len(rows) == 1 and rows[0][0] != TRACE


def test_each_fire_of_a_schedule_starts_a_trace(api, webhook):
    webhook.route("/steps", StepScript({0: succeed(1)}))
    api.put_workflow("wf", webhook.url())
    r = api.put("/v1/schedules/nightly", {"workflow": "wf", "cron": "0 0 1 1 *",
                                          "overlap": "allow_all"},
                headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN)})
    assert r.status == 201, r
    traces = set()
    for _ in range(2):
        t = api.post("/v1/schedules/nightly/trigger")
        assert t.status == 200 and t.body["outcome"] == "started", t
        run = api.wait_terminal(t.body["run_id"])
        assert re.match(r"^[0-9a-f]{32}$", run["trace_id"])
        (req,) = webhook.requests(path="/steps", run_id=run["run_id"])
        assert traceparent(req)[0] == run["trace_id"]
        traces.add(run["trace_id"])
    assert len(traces) == 2 and TRACE not in traces, "a trace per fire, not the PUT's"


@pytest.mark.service_env(HOOKFLOW_LOG_FORMAT="json")
def test_json_logs_carry_trace_and_span_ids_next_to_the_run(api, webhook, service):
    webhook.route("/steps", StepScript({0: cont(1), 1: succeed(2)}))
    api.put_workflow("wf", webhook.url())
    run = submit(api)
    api.wait_terminal(run["run_id"])

    def call_lines():
        out = []
        for line in service.log_text().splitlines():
            if not line.startswith("{"):
                continue
            o = json.loads(line)
            if o.get("msg") == "call done" and o.get("run_id") == run["run_id"]:
                out.append(o)
        return out if len(out) == 2 else None
    lines = wait_until(call_lines, timeout=10, message="two 'call done' lines")
    for o in lines:
        step, attempt = int(o["step"]), int(o["attempt"])
        assert o["trace_id"] == run["trace_id"]
        assert o["span_id"] == attempt_span(run["trace_id"], run["run_id"], 1, step, attempt)
    assert sorted(int(o["step"]) for o in lines) == [0, 1]


# ---- spans, end to end with the OpenTelemetry Node SDK -------------------------


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


class ExampleWebhook:
    """examples/node/webhook.js under the OpenTelemetry Node SDK (preloaded)."""

    def __init__(self, collector, log_path):
        self.secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
        self.port = free_port()
        env = dict(os.environ, WEBHOOK_SECRET=self.secret, WEBHOOK_PORT=str(self.port),
                   WEBHOOK_HOST="127.0.0.1", OTEL_SERVICE_NAME="example-webhook",
                   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector.url + "/v1/traces")
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [_node(), "--require", os.path.join(OTEL_DIR, "preload.js"), EXAMPLE],
            cwd=OTEL_DIR, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = "http://127.0.0.1:%d" % self.port

        def up():
            try:
                urllib.request.urlopen(self.url + "/", timeout=2).read()
                return True
            except OSError:
                assert self.proc.poll() is None, "the example webhook exited"
                return False
        wait_until(up, timeout=20, message="the example webhook to listen")

    def close(self):
        stop(self.proc)
        self.log.close()


def _by(spans, **want):
    return [s for s in spans if all(s.get(k) == v for k, v in want.items())]


def test_spans_of_hookflow_and_of_an_instrumented_webhook_form_one_trace(
        services, collector, log_dir, request):
    hf = services.start(HOOKFLOW_OTLP_ENDPOINT=collector.url)
    api = hf.api
    hook = ExampleWebhook(collector, os.path.join(log_dir, request.node.name + ".webhook.log"))
    try:
        api.put_workflow("order", hook.url + "/steps", secret=hook.secret,
                         callback_url=hook.url + "/done", max_attempts=3,
                         retry_backoff={"base_ms": 50, "max_ms": 200})
        # one run in the caller's trace, whose step 0 fails its first attempt
        r = api.post("/v1/runs", {"workflow": "order", "run_id": "traced",
                                  "input": {"items": [{"qty": 1, "price_cents": 100}],
                                            "fail_first_attempt": True}},
                     headers={"traceparent": "00-%s-%s-01" % (TRACE, CALLER_SPAN)})
        assert r.status == 201, r
        # one run without: a trace of its own
        r = api.post("/v1/runs", {"workflow": "order", "run_id": "untraced",
                                  "input": {"items": []}})
        assert r.status == 201, r
        untraced_trace = r.body["trace_id"]
        for rid in ("traced", "untraced"):
            api.wait_status(rid, ["waiting"], timeout=30)
            s = api.post("/v1/signals/approval:" + rid, {"payload": {"by": "test"}})
            assert s.status == 200 and s.body["outcome"] == "delivered", s
        for rid in ("traced", "untraced"):
            assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"

        def complete():
            spans = collector.spans()
            hookflow = _by(spans, service="hookflow")
            calls = {s["span_id"] for s in hookflow if s["name"] in ("step", "callback")}
            served = [w for w in _by(spans, service="example-webhook", kind=2)  # SERVER
                      if w["parent_span_id"] in calls]
            # "traced": 4 step calls (a retry) and its callback; "untraced": 3 and 1
            if (len(_by(hookflow, name="run")) < 2 or len(_by(hookflow, name="wait")) < 2
                    or len(_by(hookflow, name="settle")) < 9 or len(served) < 9):
                return None
            return spans
        spans = wait_until(complete, timeout=30, interval=0.2,
                           message="hookflow's and the webhook's spans at the collector")
    finally:
        hook.close()

    for req in collector.requests():
        assert req["error"] is None, "an export request did not decode: %r" % req
    hf_reqs = [r for r in collector.requests() if r["user_agent"].startswith("hookflow/")]
    assert hf_reqs and all(r["content_type"] == "application/x-protobuf" for r in hf_reqs)

    hookflow = _by(spans, service="hookflow")
    assert all(s["instance"] for s in hookflow), "service.instance.id on the resource"
    (run,) = _by(hookflow, name="run", trace_id=TRACE)
    assert run["parent_span_id"] == CALLER_SPAN, "the run span is a child of the caller's"
    assert run["span_id"] == derive("%s/traced/1/run" % TRACE), "the engine's hf_run_span"
    assert run["attributes"]["hookflow.run_id"] == "traced"
    assert run["attributes"]["hookflow.workflow"] == "order"
    assert run["attributes"]["hookflow.outcome"] == "succeeded"
    assert int(run["end_ns"]) > int(run["start_ns"])

    steps = sorted(_by(hookflow, name="step", trace_id=TRACE),
                   key=lambda s: (s["attributes"]["hookflow.step"],
                                  s["attributes"]["hookflow.attempt"]))
    assert [(s["attributes"]["hookflow.step"], s["attributes"]["hookflow.attempt"])
            for s in steps] == [(0, 1), (0, 2), (1, 1), (2, 1)]
    assert len({s["span_id"] for s in steps}) == 4, "retries have distinct span ids"
    for s in steps:
        a = s["attributes"]
        assert s["kind"] == 3 and s["parent_span_id"] == run["span_id"], s
        assert a["hookflow.run_id"] == "traced" and a["hookflow.workflow"] == "order"
        assert s["span_id"] == attempt_span(TRACE, "traced", 1, a["hookflow.step"],
                                            a["hookflow.attempt"])
    failed, retried = steps[0], steps[1]
    assert failed["attributes"]["http.response.status_code"] == 503
    assert failed["attributes"]["error.type"] == "503"
    assert failed["attributes"]["hookflow.outcome"] == "transient_error"
    assert failed["status"]["code"] == 2
    assert retried["attributes"]["http.response.status_code"] == 200
    assert retried["attributes"]["hookflow.outcome"] == "continue"
    assert "error.type" not in retried["attributes"]
    assert steps[3]["attributes"]["hookflow.outcome"] == "succeed"

    # the webhook's server spans continue hookflow's: one per step call
    webhook = _by(spans, service="example-webhook", kind=2)
    for s in steps:
        kids = [w for w in webhook if w["parent_span_id"] == s["span_id"]]
        assert len(kids) == 1, "one server span under step span %s: %r" % (s["span_id"], kids)
        assert kids[0]["trace_id"] == TRACE

    # each attempt's settlement, and the wait for the approval
    (cb,) = _by(hookflow, name="callback", trace_id=TRACE)
    settles = _by(hookflow, name="settle", trace_id=TRACE)
    assert sorted(s["parent_span_id"] for s in settles) == sorted(
        [s["span_id"] for s in steps] + [cb["span_id"]]), "a settlement under each call"
    assert all(s["kind"] == 1 for s in settles)
    (wait,) = _by(hookflow, name="wait", trace_id=TRACE)
    assert wait["parent_span_id"] == run["span_id"]
    assert wait["attributes"]["hookflow.wait"] == "signal"
    assert wait["attributes"]["hookflow.signal.status"] == "delivered"
    assert wait["attributes"]["hookflow.step"] == 2

    # the callback, and the webhook's span for it
    assert cb["kind"] == 3 and cb["parent_span_id"] == run["span_id"]
    assert cb["attributes"]["http.response.status_code"] == 200
    assert [w for w in webhook if w["parent_span_id"] == cb["span_id"]], "no webhook span for /done"

    # the run without a traceparent: a root span, its steps under it
    (root,) = _by(hookflow, name="run", trace_id=untraced_trace)
    assert root["parent_span_id"] == ""
    usteps = _by(hookflow, name="step", trace_id=untraced_trace)
    assert len(usteps) == 3 and all(s["parent_span_id"] == root["span_id"] for s in usteps)
    for s in usteps:
        assert [w for w in webhook if w["parent_span_id"] == s["span_id"]]

    samples = hf.api.metrics()
    assert samples["hookflow_spans_exported_total"] >= len(hookflow)
    assert samples['hookflow_spans_dropped_total{reason="queue_full"}'] == 0


def test_wait_spans_and_a_reruns_run_span(services, collector, webhook):
    hf = services.start(HOOKFLOW_OTLP_ENDPOINT=collector.url)
    api = hf.api

    def parent(req):
        if req.step == 0:
            return cont({"n": 0}, delay_ms=400)
        if req.step == 1:
            return Reply(200, {"outcome": "continue", "payload": None,
                               "children": [{"key": "a", "workflow": "kid", "input": 1}]})
        return succeed("done")
    webhook.route("/steps", parent)
    webhook.route("/kid", lambda req: succeed(req.field("payload")))
    api.put_workflow("wf", webhook.url())
    api.put_workflow("kid", webhook.url("/kid"))
    run = submit(api, run_id="waits")
    assert api.wait_terminal("waits")["status"] == "succeeded"
    r = api.post("/v1/runs/waits/rerun", {"from_step": 2})
    assert r.status == 201, r
    assert api.wait_terminal("waits")["status"] == "succeeded"
    trace = run["trace_id"]

    def spans():
        got = [s for s in collector.spans() if s["trace_id"] == trace]
        runs = [s for s in got if s["name"] == "run" and s["attributes"]["hookflow.run_id"] == "waits"]
        waits = _by(got, name="wait")
        return got if len(runs) == 2 and len(waits) == 2 else None
    got = wait_until(spans, timeout=15, interval=0.2, message="the run's spans at the collector")
    runs = sorted((s for s in got if s["name"] == "run"
                   and s["attributes"]["hookflow.run_id"] == "waits"),
                  key=lambda s: s["attributes"]["hookflow.generation"])
    # a rerun is another run span of the same trace, its id derived per generation
    assert [s["attributes"]["hookflow.generation"] for s in runs] == [1, 2]
    assert [s["span_id"] for s in runs] == [derive("%s/waits/%d/run" % (trace, g)) for g in (1, 2)]
    assert int(runs[1]["start_ns"]) >= int(runs[0]["end_ns"])
    waits = {s["attributes"]["hookflow.wait"]: s for s in _by(got, name="wait")}
    assert set(waits) == {"delay", "children"}
    delay, children = waits["delay"], waits["children"]
    assert delay["attributes"]["hookflow.step"] == 1 and children["attributes"]["hookflow.step"] == 2
    assert delay["parent_span_id"] == children["parent_span_id"] == runs[0]["span_id"]
    # the delay's span lasts the delay: from the settlement of step 0 to when step 1 came due
    lasted_ms = (int(delay["end_ns"]) - int(delay["start_ns"])) / 1e6
    assert 390 <= lasted_ms < 5000, lasted_ms
    steps = [s for s in _by(got, name="step") if s["attributes"]["hookflow.run_id"] == "waits"]
    (step0,) = [s for s in steps if s["attributes"]["hookflow.step"] == 0]
    assert int(delay["start_ns"]) >= int(step0["start_ns"])
    # the child's run span hangs under the parent step's attempt that started it
    (step1,) = [s for s in steps if s["attributes"]["hookflow.step"] == 1]
    (kid,) = [s for s in got if s["name"] == "run" and s["attributes"]["hookflow.workflow"] == "kid"]
    assert kid["parent_span_id"] == step1["span_id"]
    assert int(children["end_ns"]) >= int(kid["end_ns"]) - 5_000_000  # ms precision


def _steps_webhook(webhook):
    webhook.route("/steps", StepScript({0: cont(1), 1: cont(2), 2: succeed(3)}))


def test_a_slow_collector_drops_spans_but_never_holds_a_run_back(services, webhook):
    slow = Collector(delay_ms=60000)  # answers nothing for a minute
    try:
        hf = services.start(HOOKFLOW_OTLP_ENDPOINT=slow.url, HOOKFLOW_OTLP_QUEUE="16",
                            HOOKFLOW_OTLP_TIMEOUT_MS="60000")
        _steps_webhook(webhook)
        hf.api.put_workflow("wf", webhook.url())
        ids = [hf.api.submit("wf")["run_id"] for _ in range(30)]
        for rid in ids:
            assert hf.api.wait_terminal(rid, timeout=30)["status"] == "succeeded"

        def dropped():
            n = hf.api.metrics()['hookflow_spans_dropped_total{reason="queue_full"}']
            return n if n > 0 else None
        # 30 runs make about 30 x (1 run + 3 steps + 3 settles) spans: the
        # first batch is held by the collector, the queue of 16 overflows.
        assert wait_until(dropped, timeout=10, message="spans dropped and counted") > 0
        assert webhook.requests(path="/steps") and len(webhook.requests(path="/steps")) == 90
    finally:
        slow.release()
        slow.close()


def test_an_unreachable_collector_drops_spans_after_bounded_retries(services, webhook,
                                                                     refused_port):
    hf = services.start(HOOKFLOW_OTLP_ENDPOINT="http://127.0.0.1:%d" % refused_port.port)
    _steps_webhook(webhook)
    hf.api.put_workflow("wf", webhook.url())
    rid = hf.api.submit("wf")["run_id"]
    assert hf.api.wait_terminal(rid)["status"] == "succeeded"

    def failed():
        n = hf.api.metrics()['hookflow_spans_dropped_total{reason="export_failed"}']
        return n if n > 0 else None
    # a batch leaves within a second, then three tries 0.5 s and 1 s apart
    assert wait_until(failed, timeout=15, message="a failed export counted") >= 7
    assert hf.api.metrics()["hookflow_spans_exported_total"] == 0
