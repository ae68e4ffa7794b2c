"""Issue 12, item 10: small leaks closed.

/readyz and 5xx answers never carry PostgreSQL's own error text (it names
the host, port, user and database: it goes to the log); the dashboard is
served with a Content-Security-Policy allowing exactly its own inline script
and style blocks, frame-ancestors 'none', X-Content-Type-Options: nosniff and
a Referrer-Policy; docker/compose.yaml has no fallback API token."""

import base64
import hashlib
import os
import re
import shutil
import subprocess

import pytest

from harness import Api, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _block_hash(page, tag):
    m = re.search(rb"<%s>(.*?)</%s>" % (tag, tag), page, re.S)
    assert m, "no <%s> block in the page" % tag.decode()
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()


def test_the_dashboard_is_served_with_a_strict_content_security_policy(api):
    r = api.get("/")
    assert r.status == 200, r
    with open(os.path.join(REPO, "dashboard", "index.html"), "rb") as f:
        page = f.read()
    assert r.raw == page
    csp = r.headers.get("Content-Security-Policy") or ""
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
    assert directives.get("default-src") == "'none'", csp
    assert directives.get("script-src") == _block_hash(page, b"script"), csp
    assert directives.get("style-src") == _block_hash(page, b"style"), csp
    assert directives.get("connect-src") == "'self'", csp
    assert directives.get("frame-ancestors") == "'none'", csp
    assert directives.get("base-uri") == "'none'" and directives.get("form-action") == "'none'", csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp
    assert r.headers.get("X-Content-Type-Options") == "nosniff"
    assert r.headers.get("Referrer-Policy") == "no-referrer"
    assert r.headers.get("X-Frame-Options") == "DENY"
    # the policy can hold: one script and one style block, nothing else inline
    assert len(re.findall(rb"<script", page)) == 1 and len(re.findall(rb"<style", page)) == 1
    assert not re.search(rb"\sstyle\s*=|\son[a-z]+\s*=", page), "an inline style or handler attribute"
    # every other answer is nosniff too
    for path in ("/v1/workflows", "/healthz", "/metrics", "/v1/no-such-thing"):
        assert api.get(path).headers.get("X-Content-Type-Options") == "nosniff", path


PG_WORDS = ("FATAL", "connection to server", "not currently accepting", "port ", "127.0.0.1")


def _no_pg_text(r, pg, db):
    msg = r.text
    for w in PG_WORDS + (str(pg.port), db.name, '"%s"' % pg.user):
        assert w not in msg, "the answer carries PostgreSQL's text (%r): %s" % (w, msg)


def test_database_errors_reach_the_log_not_the_client(service, api, pg, db):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    # the database refuses every new connection and drops the service's
    pg.psql("postgres", 'ALTER DATABASE "%s" ALLOW_CONNECTIONS false' % db.name)
    try:
        pg.psql("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = '%s' AND pid <> pg_backend_pid()" % db.name)
        probe = Api(service.base_url, timeout=10)

        def unavailable(path):
            r = probe.get(path)
            return r if r.status == 503 else None

        for path in ("/readyz", "/v1/workflows/wf", "/v1/runs"):
            r = wait_until(lambda: unavailable(path), timeout=30, message="503 from " + path)
            assert r.body["error"]["code"] == "unavailable", r
            _no_pg_text(r, pg, db)
        # (the snapshot of /readyz and /metrics is at most about a second old)
        wait_until(lambda: re.search(r"^hookflow_up 0$", probe.get("/metrics").text, re.M), timeout=15,
                   message="hookflow_up 0")
        r = probe.get("/readyz")
        assert r.status == 503, r
        _no_pg_text(r, pg, db)
        # the operator still finds PostgreSQL's own words in the log
        wait_until(lambda: "not currently accepting connections" in service.log_text(), timeout=10,
                   message="PostgreSQL's error in the service log")
    finally:
        pg.psql("postgres", 'ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db.name)
    wait_until(lambda: Api(service.base_url, timeout=10).get("/readyz").status == 200, timeout=30,
               message="/readyz 200 once connections are allowed again")
    assert api.get("/v1/workflows/wf").status == 200


def _compose_value(text, name):
    m = re.search(r"^\s+%s:\s*(.+)$" % re.escape(name), text, re.M)
    assert m, "%s not set in docker/compose.yaml" % name
    return m.group(1).strip().strip('"')


def test_compose_has_no_fallback_api_token():
    with open(os.path.join(REPO, "docker", "compose.yaml")) as f:
        text = f.read()
    v = _compose_value(text, "HOOKFLOW_API_TOKENS")
    m = re.fullmatch(r"\$\{HOOKFLOW_API_TOKEN:\?(.+)\}", v)
    assert m, "HOOKFLOW_API_TOKENS must be ${HOOKFLOW_API_TOKEN:?<how to make one>}, is %r" % v
    assert "openssl rand" in m.group(1), "the message does not say how to make a token: %r" % m.group(1)


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")),
                    reason="no docker-compose or docker on this machine to resolve the file")
def test_compose_refuses_to_start_without_a_token():
    """`config` resolves the file the way `up` does, without an engine."""
    if shutil.which("docker-compose"):
        cmd = ["docker-compose"]
    else:
        if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
            pytest.skip("docker has no compose plugin and docker-compose is missing")
        cmd = ["docker", "compose"]
    env = {k: v for k, v in os.environ.items() if k != "HOOKFLOW_API_TOKEN"}
    docker_dir = os.path.join(REPO, "docker")
    r = subprocess.run(cmd + ["-f", "compose.yaml", "config"], cwd=docker_dir, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, "compose resolved the file without HOOKFLOW_API_TOKEN"
    assert "HOOKFLOW_API_TOKEN" in r.stderr and "openssl rand" in r.stderr, r.stderr[-1000:]
    env["HOOKFLOW_API_TOKEN"] = "tok-compose-0123456789abcdef"
    r = subprocess.run(cmd + ["-f", "compose.yaml", "config"], cwd=docker_dir, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1000:]
    assert "tok-compose-0123456789abcdef" in r.stdout
