#!/usr/bin/python3
"""A stand-in for `hookflow serve` used only by test_harness.py to check the
Service wrapper: answers /readyz on HOOKFLOW_LISTEN (503 for the first few
probes), logs to stderr, exits 0 on SIGTERM."""

import http.server
import os
import signal
import sys
import threading

host, port = os.environ["HOOKFLOW_LISTEN"].rsplit(":", 1)
probes = {"n": 0}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        probes["n"] += 1
        status = 200 if (self.path != "/readyz" or probes["n"] > 3) else 503
        body = os.environ.get("HOOKFLOW_LOG_LEVEL", "").encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


srv = http.server.ThreadingHTTPServer((host, int(port)), H)
# The same words as hookflow's own line: the harness waits for them.
sys.stderr.write("fake hookflow: info http listening port=%s db=%s argv=%s\n"
                 % (port, os.environ.get("HOOKFLOW_DATABASE_URL"), sys.argv[1:]))
sys.stderr.flush()


def term(*_):
    sys.stderr.write("fake hookflow: SIGTERM\n")
    sys.stderr.flush()
    threading.Thread(target=srv.shutdown).start()


signal.signal(signal.SIGTERM, term)
srv.serve_forever(poll_interval=0.05)
sys.exit(0)
