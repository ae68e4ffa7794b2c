"""/metrics carries every series openapi/openapi.yaml (GET /metrics) lists, in
Prometheus text format: runs by status, steps dispatched, outcomes and errors
by class, the webhook latency histogram, jobs by state, leases expired, dead
letters, in-flight calls, the schedules' fire times and the spans exported
and dropped."""
import re

from harness import Reply, StepScript, succeed, wait_until

SERIES = [
    "hookflow_runs",                      # active runs by status
    "hookflow_steps_dispatched_total",
    "hookflow_step_results_total",        # outcomes and errors by class
    "hookflow_webhook_duration_seconds",  # latency histogram
    "hookflow_jobs",                      # jobs by kind and state
    "hookflow_leases_expired_total",
    "hookflow_dead_letters",
    "hookflow_inflight_calls",
    "hookflow_schedule_fires_total",      # schedules' fire times handled here
    "hookflow_schedule_skips_total",
    "hookflow_schedule_misses_total",
    "hookflow_spans_exported_total",      # traces (0 without HOOKFLOW_OTLP_ENDPOINT)
    "hookflow_spans_dropped_total",
]


def test_metrics_lists_every_series_of_spec_section_10(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    webhook.route("/bad", lambda req: Reply(400, body="no"))
    api.put_workflow("m-ok", webhook.url())
    api.put_workflow("m-bad", webhook.url("/bad"))
    api.submit("m-ok", run_id="m1")
    api.submit("m-bad", run_id="m2")
    api.wait_terminal("m1")
    api.wait_terminal("m2")
    def scrape():
        text = api.get("/metrics").text
        samples = {}
        for ln in text.splitlines():
            if ln and not ln.startswith("#"):
                key, value = ln.rsplit(" ", 1)
                samples[key] = float(value)
        return text, samples

    # The database gauges come from a snapshot at most about a second old
    # (issue 12): the dead letter shows once it is refreshed.
    text, samples = wait_until(lambda: (lambda t: t if t[1].get('hookflow_dead_letters{kind="step"}', 0) >= 1
                                        else None)(scrape()),
                               timeout=10, message="the dead letter in /metrics")
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for name in SERIES:
        assert name in types, "series %s missing from /metrics" % name
    assert types["hookflow_webhook_duration_seconds"] == "histogram"
    assert samples['hookflow_step_results_total{result="succeed"}'] >= 1
    assert samples['hookflow_step_results_total{result="permanent_error"}'] >= 1
    assert samples['hookflow_dead_letters{kind="step"}'] >= 1
    for status in ("pending", "scheduled", "waiting", "running", "cancelling"):
        assert 'hookflow_runs{status="%s"}' % status in samples
