"""pytest fixtures for the hookflow integration suite: a session-wide throwaway
PostgreSQL, a fresh database per test, the real service binary, programmable
webhook servers and a REST client. See harness.py for the pieces."""

import os
import re
import shutil
import signal
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import PgBouncer, Postgres, RefusedPort, Service, Webhook  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOG_TAIL_LINES = int(os.environ.get("HOOKFLOW_TEST_LOG_LINES", "300"))
# HOOKFLOW_TEST_PGBOUNCER=1: every instance the `services` fixture starts goes
# through one PgBouncer in transaction pooling mode (README "PgBouncer"), with
# HOOKFLOW_TEST_PGBOUNCER_POOL server connections per database (default 4).
THROUGH_PGBOUNCER = os.environ.get("HOOKFLOW_TEST_PGBOUNCER") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "service_env(**env): HOOKFLOW_* overrides for the `service` fixture")
    config.addinivalue_line("markers", "serial: load- or time-sensitive; run alone, after the parallel part")
    config._hookflow_failed = False


@pytest.fixture(scope="session")
def hookflow_bin():
    return os.path.abspath(os.environ.get("HOOKFLOW_BIN") or os.path.join(REPO, "build", "hookflow"))


@pytest.fixture(scope="session")
def log_dir(request):
    path = os.environ.get("HOOKFLOW_TEST_LOG_DIR")
    if path:
        os.makedirs(path, exist_ok=True)
        yield path
        return
    path = tempfile.mkdtemp(prefix="hookflow-it-logs-")
    yield path
    if request.config._hookflow_failed or os.environ.get("HOOKFLOW_TEST_KEEP"):
        sys.stderr.write("\nhookflow integration logs kept in %s\n" % path)
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg():
    """The session's PostgreSQL cluster (harness.Postgres): url(db), psql(),
    stop(), start(), restart()."""
    base = tempfile.mkdtemp(prefix="hookflow-it-pg-")
    server = Postgres(base)
    try:
        server.init()
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def session_bouncer(pg):
    """With HOOKFLOW_TEST_PGBOUNCER=1, the session's PgBouncer (harness.PgBouncer,
    transaction mode) in front of `pg`; else None."""
    if not THROUGH_PGBOUNCER:
        yield None
        return
    base = tempfile.mkdtemp(prefix="hookflow-it-pgbouncer-")
    bouncer = PgBouncer(pg, base, pool_size=int(os.environ.get("HOOKFLOW_TEST_PGBOUNCER_POOL", "4")))
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def new_bouncer(pg):
    """new_bouncer(pool_size) -> a started PgBouncer of this test's own in front
    of `pg` (transaction mode), stopped when the test ends."""
    made = []

    def make(pool_size=4):
        base = tempfile.mkdtemp(prefix="hookflow-it-pgbouncer-")
        bouncer = PgBouncer(pg, base, pool_size=pool_size)
        made.append(bouncer)
        return bouncer.start()
    yield make
    for bouncer in made:
        bouncer.stop()
        shutil.rmtree(bouncer.base_dir, ignore_errors=True)


@pytest.fixture
def db(pg, request):
    """A fresh database for this test (harness.Database: url, sql(), scalar())."""
    if not pg.is_ready():  # a chaos test left it down: bring it back
        pg.start()
    database = pg.create_database(request.node.name)
    yield database
    if not pg.is_ready():
        pg.start()
    pg.drop_database(database.name)


@pytest.fixture
def sql(db):
    """sql(query) -> rows (lists of strings) in this test's database."""
    return db.sql


class Services:
    """Factory of hookflow instances on this test's database. Every instance is
    stopped (SIGTERM, then SIGKILL) when the test ends."""

    def __init__(self, binary, db, log_dir, test_name, item, bouncer=None):
        self.binary = binary
        self.db = db
        self.log_dir = log_dir
        self.bouncer = bouncer  # the session's PgBouncer (HOOKFLOW_TEST_PGBOUNCER=1) or None
        self.test_name = re.sub(r"[^A-Za-z0-9_.-]", "_", test_name)[:120]
        self.instances = []
        item._hookflow_services = self.instances

    def new(self, binary=None, port=None, bouncer=False, **env):
        """A Service not started yet (start() it). `binary` runs another build
        than the one under test (an earlier release, for the upgrade tests);
        `port` listens where an earlier instance did; `bouncer` (a
        harness.PgBouncer, or None for a direct connection) replaces the
        session's choice (HOOKFLOW_TEST_PGBOUNCER)."""
        n = len(self.instances) + 1
        log = os.path.join(self.log_dir, "%s.hookflow-%d.log" % (self.test_name, n))
        if os.path.exists(log):
            os.unlink(log)
        svc = Service(binary or self.binary, self.db, log, env, port=port,
                      bouncer=self.bouncer if bouncer is False else bouncer)
        self.instances.append(svc)
        return svc

    def start(self, binary=None, port=None, bouncer=False, **env):
        """Starts an instance with HOOKFLOW_* overrides and waits for /readyz 200."""
        return self.new(binary=binary, port=port, bouncer=bouncer, **env).start()

    def stop_all(self):
        """SIGTERMs every running instance. An instance that does not exit within
        its shutdown grace (+5 s) is killed and reported as an error."""
        problems = []
        for svc in self.instances:
            if svc.running():
                grace = int(svc.env_overrides.get("HOOKFLOW_SHUTDOWN_GRACE_MS") or 10000) / 1000.0
                try:
                    svc.stop(signal.SIGTERM, timeout=grace + 5)
                except harness.ServiceError as e:
                    problems.append("%s: %s" % (os.path.basename(svc.log_path), e))
        if problems:
            raise AssertionError("at teardown: " + "; ".join(problems))


@pytest.fixture
def services(hookflow_bin, db, log_dir, request, session_bouncer, new_bouncer):
    # new_bouncer is set up first so that it is torn down last: a test's
    # PgBouncer outlives the instances behind it.
    factory = Services(hookflow_bin, db, log_dir, request.node.name, request.node,
                       bouncer=session_bouncer)
    yield factory
    factory.stop_all()


@pytest.fixture
def service(services, request):
    """One running instance; @pytest.mark.service_env(HOOKFLOW_X="...") sets overrides."""
    marker = request.node.get_closest_marker("service_env")
    env = dict(marker.kwargs) if marker else {}
    return services.start(**env)


@pytest.fixture
def api(service):
    """harness.Api bound to the `service` instance (with its first API token, if any)."""
    return service.api


@pytest.fixture
def webhook():
    """A programmable webhook server (harness.Webhook)."""
    server = Webhook()
    yield server
    server.close()
    if server.errors:
        raise AssertionError("webhook handler raised: %r" % (server.errors,))


@pytest.fixture
def refused_port():
    """A port on 127.0.0.1 where connections are refused (harness.RefusedPort)."""
    p = RefusedPort()
    yield p
    p.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        item.config._hookflow_failed = True
        for svc in getattr(item, "_hookflow_services", []):
            tail = svc.log_tail(LOG_TAIL_LINES)
            rep.sections.append(("hookflow log %s [%s] (last %d lines; full: %s)" % (
                os.path.basename(svc.log_path), svc.state(), LOG_TAIL_LINES, svc.log_path), tail))
        for bouncer in {id(s.bouncer): s.bouncer for s in getattr(item, "_hookflow_services", [])
                        if s.bouncer is not None}.values():
            rep.sections.append(("pgbouncer log (last 50 lines; full: %s)" % bouncer.log_path,
                                 bouncer.log_tail(50)))
