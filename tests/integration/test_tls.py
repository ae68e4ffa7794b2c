"""Issue 17, parts 3 and 4: TLS to PostgreSQL and to webhooks.

PostgreSQL: a cluster of its own that speaks TLS only (plain TCP connections
are rejected by pg_hba), with a CA and server certificates the test makes with
openssl. hookflow connects with sslmode=verify-full; a certificate for another
host, an unknown CA or a missing sslrootcert file stop start-up at once with
a message naming the problem; losing a verifiable certificate at run time
makes /readyz not ready while the log names the problem, and the service
recovers with the certificate.

Webhooks: a real https server (Python's ssl module) on loopback under a test
CA: trusted through HOOKFLOW_CA_FILE, untrusted (a transient error naming the
certificate problem, retried), a server that requires a client certificate
(HOOKFLOW_CLIENT_CERT / HOOKFLOW_CLIENT_KEY), the egress policy unchanged, and
bad TLS configuration refused at start-up naming the variable."""

import os
import shutil
import ssl
import subprocess
import tempfile

import pytest

import harness
from conftest import Services
from harness import Database, Postgres, Reply, StepScript, Webhook, cont, succeed, wait_until
from tls_certs import CA

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command makes the test certificates")


@pytest.fixture(scope="module")
def certs():
    """Test CAs and certificates, in a directory removed at the end."""
    d = tempfile.mkdtemp(prefix="hookflow-it-tls-")
    os.chmod(d, 0o755)  # PostgreSQL's user reads nothing here; hookflow reads the CA

    class Certs:
        pass

    c = Certs()
    c.dir = d
    c.ca = CA(d, "test-ca")
    c.other_ca = CA(d, "other-ca")
    c.server = c.ca.issue("server", dns=["localhost"], ips=["127.0.0.1"])
    c.wrong_host = c.ca.issue("wrong-host", dns=["wrong.example"])
    c.client_ca = CA(d, "client-ca")
    c.client = c.client_ca.issue("hookflow-client", client=True)
    yield c
    shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------
# PostgreSQL over TLS
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_pg(certs):
    """A PostgreSQL cluster of this module that accepts TCP over TLS only."""
    base = tempfile.mkdtemp(prefix="hookflow-it-pgtls-")
    server = Postgres(base, ssl=certs.server)
    try:
        server.init()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def tls_db(tls_pg, request):
    if not tls_pg.is_ready():
        tls_pg.start()
    database = tls_pg.create_database(request.node.name)
    yield database
    if not tls_pg.is_ready():
        tls_pg.start()
    tls_pg.drop_database(database.name)


@pytest.fixture
def tls_services(hookflow_bin, tls_db, log_dir, request):
    """hookflow instances on the TLS cluster's database."""
    factory = Services(hookflow_bin, tls_db, log_dir, request.node.name, request.node)
    yield factory
    factory.stop_all()


def tls_url(pg, db, rootcert, host="localhost", sslmode="verify-full"):
    return "postgresql://%s@%s:%d/%s?sslmode=%s&sslrootcert=%s" % (
        pg.user, host, pg.port, db.name, sslmode, rootcert)


class installed_certificate:
    """Within the block, the cluster serves `cert`; the good one again after
    (both take effect for new connections at the reload, or at a restart)."""

    def __init__(self, pg, cert, good, restart=False):
        self.pg, self.cert, self.good, self.restart = pg, cert, good, restart

    def _apply(self, cert):
        self.pg.use_certificate(cert)
        if self.restart:
            self.pg.restart()
        else:
            self.pg.reload()

    def __enter__(self):
        self._apply(self.cert)

    def __exit__(self, *exc):
        self._apply(self.good)


def psql_status(pg, conninfo):
    """Exit code and stderr of psql running one query with `conninfo`."""
    r = subprocess.run([os.path.join(harness.PG_BIN, "psql"), "-X", "-At", "-c", "SELECT 1", conninfo],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    return r.returncode, r.stderr


def run_one(api, webhook, name):
    webhook.route("/steps", StepScript({0: cont({"n": 1}), 1: succeed({"ok": True})}))
    api.put_workflow(name, webhook.url(), max_attempts=3)
    # A connection the database cut (its restart) answers one 503 before it
    # is opened again: a client tries again, as the API says.
    wait_until(lambda: api.submit(name, expect=None, run_id=name + "-1", input={"x": 1}).status in (200, 201),
               timeout=30, message="submitting " + name)
    end = api.wait_terminal(name + "-1", timeout=30)
    assert end["status"] == "succeeded", end
    assert end["result"] == {"ok": True}, end


def test_database_over_tls_with_verify_full_serves_runs(tls_pg, tls_db, tls_services, certs, webhook):
    # The cluster refuses plain TCP: what hookflow does below goes over TLS.
    code, err = psql_status(tls_pg, "postgresql://%s@127.0.0.1:%d/%s?sslmode=disable"
                            % (tls_pg.user, tls_pg.port, tls_db.name))
    assert code != 0 and "no encryption" in err, err

    svc = tls_services.start(HOOKFLOW_DATABASE_URL=tls_url(tls_pg, tls_db, certs.ca.cert))
    run_one(svc.api, webhook, "over-tls")
    # Every connection hookflow holds to its database is encrypted (pg_stat_ssl).
    rows = tls_db.sql("SELECT s.ssl, s.version FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) "
                      "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()")
    assert rows, "hookflow holds no connection to its database"
    assert all(r[0] == "t" and r[1].startswith("TLS") for r in rows), rows
    assert "TLS to the database refused" not in svc.log_text()


@pytest.mark.parametrize("case", ["wrong_host", "untrusted", "missing_rootcert"])
def test_start_up_stops_at_once_naming_a_refused_certificate(tls_pg, tls_db, tls_services, certs, case):
    url = tls_url(tls_pg, tls_db, certs.ca.cert)
    expected = {
        "wrong_host": 'server certificate for "wrong.example" does not match host name "localhost"',
        "untrusted": "certificate verify failed",
        "missing_rootcert": 'root certificate file "%s" does not exist' % os.path.join(certs.dir, "none.crt"),
    }[case]
    if case == "untrusted":
        url = tls_url(tls_pg, tls_db, certs.other_ca.cert)
    elif case == "missing_rootcert":
        url = tls_url(tls_pg, tls_db, os.path.join(certs.dir, "none.crt"))

    svc = tls_services.new(HOOKFLOW_DATABASE_URL=url)
    with installed_certificate(tls_pg, certs.wrong_host if case == "wrong_host" else certs.server,
                               certs.server):
        svc.start(wait_ready=False)
        # At once: no minute of retries for a database that will never verify.
        code = svc.wait_exit(timeout=20)
    log = svc.log_text()
    assert code == 1, "hookflow did not stop (exit %r); log:\n%s" % (code, log)
    assert "error main cannot prepare the database" in log, log
    assert "TLS to the database refused" in log and expected in log, log
    assert "retrying" not in log, log
    assert "AddressSanitizer" not in log and "runtime error" not in log, log


def test_migrate_check_names_a_refused_certificate(tls_pg, tls_db, hookflow_bin, certs):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKFLOW_")}
    env["HOOKFLOW_DATABASE_URL"] = tls_url(tls_pg, tls_db, certs.other_ca.cert)
    r = subprocess.run([hookflow_bin, "migrate", "--check"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1, r
    assert "hookflow: TLS to the database refused" in r.stderr and "certificate verify failed" in r.stderr, r.stderr


def test_a_certificate_lost_at_run_time_makes_readyz_not_ready_until_it_is_back(
        tls_pg, tls_db, tls_services, certs, webhook):
    svc = tls_services.start(HOOKFLOW_DATABASE_URL=tls_url(tls_pg, tls_db, certs.ca.cert))
    run_one(svc.api, webhook, "before")
    probe = harness.Api(svc.base_url, timeout=10)
    # The server comes back with a certificate for another host: every
    # connection is cut and none can be opened again.
    with installed_certificate(tls_pg, certs.wrong_host, certs.server, restart=True):
        seen = []

        def not_ready():
            r = probe.get("/readyz")
            seen.append(r)
            return r.status == 503 and r.error_message == "database unavailable"
        wait_until(not_ready, timeout=30, message=lambda: "/readyz 503 database unavailable: %r" % seen[-1:])
        # The answers carry hookflow's words, never PostgreSQL's text...
        assert all(r.status in (200, 503) and "wrong.example" not in r.text for r in seen), seen
        # ...the log names the certificate problem.
        wait_until(lambda: 'cannot connect error="connection to server at "localhost" (127.0.0.1), port %d '
                           'failed: server certificate for "wrong.example" does not match host name '
                           '"localhost""' % tls_pg.port in svc.log_text(),
                   timeout=30, message="the log naming the certificate")
        assert svc.running(), svc.state()
    # The good certificate is back: ready again, and runs go on.
    wait_until(lambda: probe.get("/readyz").status == 200, timeout=30, message="/readyz 200")
    run_one(svc.api, webhook, "after")
    assert svc.running(), svc.state()


# --------------------------------------------------------------------------
# Webhooks over TLS
# --------------------------------------------------------------------------

def server_context(cert, client_ca=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert.cert, cert.key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca.cert)
    return ctx


@pytest.fixture
def https_webhook(certs):
    """An https webhook on 127.0.0.1 with a certificate of the test CA
    (for localhost and 127.0.0.1)."""
    server = Webhook(tls=server_context(certs.server))
    yield server
    server.close()
    if server.errors:
        raise AssertionError("webhook handler raised: %r" % (server.errors,))


@pytest.fixture
def mtls_webhook(certs):
    """An https webhook that requires a client certificate of the client CA."""
    server = Webhook(tls=server_context(certs.server, client_ca=certs.client_ca))
    yield server
    server.close()
    if server.errors:
        raise AssertionError("webhook handler raised: %r" % (server.errors,))


def test_an_https_webhook_under_hookflow_ca_file_is_trusted_for_steps_and_callbacks(
        services, certs, https_webhook):
    # Two workers: the CA's certificates are shared by their threads.
    svc = services.start(HOOKFLOW_CA_FILE=certs.ca.cert, HOOKFLOW_WORKERS=2)
    api = svc.api
    https_webhook.route("/steps", StepScript({0: cont({"n": 1}), 1: succeed({"ok": True})}))
    https_webhook.route("/done", lambda req: Reply(200, body=b""))
    assert https_webhook.url().startswith("https://127.0.0.1:")
    api.put_workflow("trusted", https_webhook.url(), max_attempts=2)
    ids = ["trusted-%d" % i for i in range(6)]
    for rid in ids:
        api.submit("trusted", run_id=rid, callback_url=https_webhook.url("/done"))
    for rid in ids:
        end = api.wait_terminal(rid, timeout=30)
        assert end["status"] == "succeeded" and end["result"] == {"ok": True}, end
        assert [(s["step"], s["attempt"], s["result"]) for s in api.steps(rid)] == [
            (0, 1, "continue"), (1, 1, "succeed")]
    # The terminal callbacks went over the same verified TLS.
    cbs = https_webhook.wait_requests(len(ids), path="/done", timeout=20)
    assert sorted(cb.json["run_id"] for cb in cbs) == ids, cbs
    assert all(cb.json["status"] == "succeeded" for cb in cbs), cbs
    assert https_webhook.tls_errors == []
    assert "webhook TLS ca_file=%s client_cert=none" % certs.ca.cert in svc.log_text()


def test_an_untrusted_certificate_is_a_transient_error_naming_the_problem(services, https_webhook):
    api = services.start().api  # no HOOKFLOW_CA_FILE: the test CA is nobody's
    https_webhook.route("/steps", StepScript({0: succeed("never")}))
    api.put_workflow("untrusted", https_webhook.url(), max_attempts=2)
    api.submit("untrusted", run_id="untrusted-1")
    end = api.wait_terminal("untrusted-1", timeout=30)
    assert end["status"] == "failed" and end["error_kind"] == "transient", end
    steps = api.steps("untrusted-1")
    # Retried as a transient error, each attempt naming the certificate problem.
    assert [(s["attempt"], s["result"]) for s in steps] == [(1, "transient_error"), (2, "transient_error")], steps
    for s in steps:
        assert s["error"] == ("connection failed: SSL certificate problem: unable to get local issuer "
                              "certificate"), s
    assert https_webhook.requests() == [], "a request reached the webhook over an unverified connection"
    # The server saw each handshake given up by the client.
    wait_until(lambda: len(https_webhook.tls_errors) >= 2, timeout=10, message="2 failed handshakes")


def test_a_ca_file_adds_to_the_system_store_without_replacing_it(services, certs, hookflow_bin, https_webhook):
    """The webhook's CA stands in the system's bundle (a private mount
    namespace binds a bundle holding it over the system's file, for hookflow
    only); HOOKFLOW_CA_FILE names another CA. The call still verifies: the
    file was added to the system's store, not put in its place."""
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    probe = subprocess.run(["curl-config", "--ca"], stdout=subprocess.PIPE, text=True) \
        if shutil.which("curl-config") else None
    if probe is None or probe.stdout.strip() != bundle or not os.path.exists(bundle):
        pytest.skip("libcurl's default CA bundle is not %s (curl-config --ca)" % bundle)
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "mount", "--bind", certs.ca.cert, bundle],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        pytest.skip("a private mount namespace (unshare -m, mount --bind) needs privileges this run lacks")
    wrapper = os.path.join(certs.dir, "hookflow-with-test-system-ca")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\n# hookflow with the test CA as the system bundle (in its own mount namespace)\n'
                'exec unshare -m sh -c \'mount --bind "$0" %s && exec "$1" "$2"\' "%s" "%s" "$@"\n'
                % (bundle, certs.ca.cert, hookflow_bin))
    os.chmod(wrapper, 0o755)
    api = services.start(binary=wrapper, HOOKFLOW_CA_FILE=certs.other_ca.cert).api
    https_webhook.route("/steps", StepScript({0: succeed({"system": True})}))
    api.put_workflow("system-ca", https_webhook.url(), max_attempts=1)
    api.submit("system-ca", run_id="system-ca-1")
    end = api.wait_terminal("system-ca-1", timeout=30)
    assert end["status"] == "succeeded" and end["result"] == {"system": True}, end


def test_a_server_requiring_a_client_certificate(services, certs, mtls_webhook):
    mtls_webhook.route("/steps", StepScript({0: succeed({"mtls": True})}))

    # Without a client certificate: the server refuses the handshake; a
    # transient error that names the TLS problem, retried. (libcurl's own
    # text depends on how fast the server cuts the connection: "tlsv13 alert
    # certificate required", or only a reset; hookflow's says what happened.)
    api = services.start(HOOKFLOW_CA_FILE=certs.ca.cert).api
    api.put_workflow("mtls", mtls_webhook.url(), max_attempts=2)
    api.submit("mtls", run_id="no-client-cert")
    end = api.wait_terminal("no-client-cert", timeout=30)
    assert end["status"] == "failed" and end["error_kind"] == "transient", end
    steps = api.steps("no-client-cert")
    assert [(s["attempt"], s["result"]) for s in steps] == [(1, "transient_error"), (2, "transient_error")], steps
    for s in steps:
        assert s["error"].startswith("connection failed: TLS: the server asked for a client certificate, "
                                     "none was sent (HOOKFLOW_CLIENT_CERT is not set): "), s
    assert mtls_webhook.requests() == []
    wait_until(lambda: any("PEER_DID_NOT_RETURN_A_CERTIFICATE" in e for e in mtls_webhook.tls_errors),
               timeout=10, message="the server refusing a handshake without a certificate")
    services.stop_all()

    # With HOOKFLOW_CLIENT_CERT / HOOKFLOW_CLIENT_KEY: the call goes through,
    # and the server saw hookflow's certificate.
    api = services.start(HOOKFLOW_CA_FILE=certs.ca.cert, HOOKFLOW_CLIENT_CERT=certs.client.cert,
                         HOOKFLOW_CLIENT_KEY=certs.client.key).api
    api.submit("mtls", run_id="with-client-cert")
    end = api.wait_terminal("with-client-cert", timeout=30)
    assert end["status"] == "succeeded" and end["result"] == {"mtls": True}, end
    (req,) = mtls_webhook.requests(run_id="with-client-cert")
    assert req.peer_cert is not None, req
    assert dict(x[0] for x in req.peer_cert["subject"])["commonName"] == "hookflow-client", req.peer_cert


def test_the_egress_policy_applies_to_https_webhooks_unchanged(services, certs, https_webhook):
    api = services.start(HOOKFLOW_CA_FILE=certs.ca.cert, HOOKFLOW_URL_DENY="127.0.0.0/8,::1/128").api
    https_webhook.route("/steps", StepScript({0: succeed("never")}))
    # "localhost" passes registration (a name); its address is refused when
    # the call connects, before any TLS: a permanent error.
    api.put_workflow("deny-tls", https_webhook.url(host="localhost"), max_attempts=3)
    api.submit("deny-tls", run_id="denied-tls")
    end = api.wait_terminal("denied-tls", timeout=20)
    assert end["status"] == "failed" and end["error_kind"] == "permanent", end
    assert "refused" in end["error"] and "HOOKFLOW_URL_DENY" in end["error"], end
    assert https_webhook.connections == 0, "hookflow connected to a denied address"
    # A literal denied address is refused at registration, https or not.
    r = api.put("/v1/workflows/deny-literal", {"url": https_webhook.url()})
    harness.assert_error(r, 400, "invalid_argument", "url")


@pytest.mark.parametrize("env,message", [
    ({"HOOKFLOW_CA_FILE": "/nonexistent/ca.pem"},
     "HOOKFLOW_CA_FILE: cannot read /nonexistent/ca.pem: No such file or directory"),
    ({"HOOKFLOW_CA_FILE": "{server.key}"}, "HOOKFLOW_CA_FILE: {server.key} holds no PEM certificate"),
    ({"HOOKFLOW_CLIENT_CERT": "{client.cert}"},
     "HOOKFLOW_CLIENT_KEY: required with HOOKFLOW_CLIENT_CERT"),
    ({"HOOKFLOW_CLIENT_KEY": "{client.key}"},
     "HOOKFLOW_CLIENT_CERT: required with HOOKFLOW_CLIENT_KEY"),
    ({"HOOKFLOW_CLIENT_CERT": "{client.key}", "HOOKFLOW_CLIENT_KEY": "{client.key}"},
     "HOOKFLOW_CLIENT_CERT: {client.key} holds no PEM certificate"),
    ({"HOOKFLOW_CLIENT_CERT": "{client.cert}", "HOOKFLOW_CLIENT_KEY": "{server.key}"},
     "HOOKFLOW_CLIENT_KEY: the key in {server.key} is not the key of HOOKFLOW_CLIENT_CERT's certificate"),
])
def test_bad_tls_configuration_stops_start_up_naming_the_variable(hookflow_bin, certs, env, message):
    files = {"server.key": certs.server.key, "client.cert": certs.client.cert, "client.key": certs.client.key}

    def fill(s):
        for k, v in files.items():
            s = s.replace("{%s}" % k, v)
        return s
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKFLOW_")}
    run_env["HOOKFLOW_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/none"
    run_env.update({k: fill(v) for k, v in env.items()})
    r = subprocess.run([hookflow_bin, "serve"], env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr.startswith("hookflow: " + fill(message)), r.stderr
