"""The OpenTelemetry test collector (tests/otel/collector.js, an OTLP/HTTP
receiver that decodes what it gets with @opentelemetry/otlp-transformer), run
on a port of its own: what test_traces.py and test_pgbouncer.py export spans
to."""

import json
import os
import shutil
import subprocess
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OTEL_DIR = os.path.join(REPO, "tests", "otel")


def stop(proc):
    """Terminates `proc`, killing it when it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def node():
    """The node binary, once the OpenTelemetry packages are installed."""
    exe = shutil.which("node")
    assert exe, "node is not installed (scripts/deps.sh)"
    pkg = os.path.join(OTEL_DIR, "node_modules", "@opentelemetry", "otlp-transformer",
                       "package.json")
    assert os.path.exists(pkg), (
        "the OpenTelemetry packages are not installed in %s: run the suite with "
        "scripts/integration.sh (it runs npm ci there)" % OTEL_DIR)
    return exe


class Collector:
    """tests/otel/collector.js on a port of its own."""

    def __init__(self, delay_ms=0):
        env = dict(os.environ, COLLECTOR_PORT="0", COLLECTOR_DELAY_MS=str(delay_ms))
        self.proc = subprocess.Popen([node(), os.path.join(OTEL_DIR, "collector.js")],
                                     cwd=OTEL_DIR, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening "), "collector did not start: %r" % line
        self.port = int(line.split()[1])
        self.url = "http://127.0.0.1:%d" % self.port

    def _get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def spans(self):
        return self._get("/spans")

    def requests(self):
        return self._get("/requests")

    def release(self):
        urllib.request.urlopen(urllib.request.Request(self.url + "/release", data=b"",
                                                      method="POST"), timeout=10).read()

    def close(self):
        stop(self.proc)
