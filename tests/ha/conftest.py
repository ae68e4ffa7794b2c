"""pytest fixtures for the high-availability tests (tests/ha): a pg_auto_failover
formation (autofailover.Formation: a monitor, a primary and its synchronous
standby on loopback), a fresh hookflow database on it per test, the real
hookflow binary on the formation's multi-host URL, and a webhook server. The
pieces are the integration harness's (tests/integration/harness.py)."""

import os
import re
import shutil
import signal
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from autofailover import Formation  # noqa: E402
from harness import Service, Webhook  # noqa: E402

LOG_TAIL_LINES = int(os.environ.get("HOOKFLOW_TEST_LOG_LINES", "150"))


def pytest_configure(config):
    config._hookflow_failed = False


@pytest.fixture(scope="session")
def hookflow_bin():
    return os.path.abspath(os.environ.get("HOOKFLOW_BIN") or os.path.join(REPO, "build", "hookflow"))


@pytest.fixture(scope="session")
def log_dir(request):
    path = tempfile.mkdtemp(prefix="hookflow-ha-logs-")
    yield path
    if request.config._hookflow_failed or os.environ.get("HOOKFLOW_TEST_KEEP"):
        sys.stderr.write("\nhookflow HA test logs kept in %s\n" % path)
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def formation(request, log_dir):
    """The session's pg_auto_failover formation, in log_dir/formation: its
    PGDATA (with PostgreSQL's logs) and pg_autoctl's logs go with the log
    dir, which is kept when a test fails."""
    os.chmod(log_dir, 0o711)  # the formation's user must reach its own dir inside
    f = Formation(os.path.join(log_dir, "formation"))
    request.config._hookflow_formation = f
    try:
        f.create()
        yield f
    finally:
        f.destroy(keep=True)


class HaDatabase(harness.Database):
    """harness.Database on the formation: sql() goes to whichever node takes
    writes, `url` is the multi-host URL."""

    def __init__(self, formation, name):
        self.pg = None
        self.formation = formation
        self.name = name
        self.url = formation.url(name)

    def sql(self, query):
        return self.formation.sql(self.name, query)


@pytest.fixture
def db(formation, request):
    """A fresh database on the formation, once it is healthy (a primary and
    a synchronous standby)."""
    primary = formation.wait_healthy(timeout=120)
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]
    formation.psql(primary.port, "postgres", 'CREATE DATABASE "%s" OWNER %s' % (name, "hookflow"))
    yield HaDatabase(formation, name)


class Services:
    """hookflow instances on this test's database; every one still running
    is stopped with SIGTERM when the test ends."""

    def __init__(self, binary, db, log_dir, test_name, item):
        self.binary = binary
        self.db = db
        self.log_dir = log_dir
        self.test_name = re.sub(r"[^A-Za-z0-9_.-]", "_", test_name)[:120]
        self.instances = []
        item._hookflow_services = self.instances

    def start(self, **env):
        n = len(self.instances) + 1
        log = os.path.join(self.log_dir, "%s.hookflow-%d.log" % (self.test_name, n))
        svc = Service(self.binary, self.db, log, env)
        self.instances.append(svc)
        return svc.start()

    def stop_all(self):
        for svc in self.instances:
            if svc.running():
                svc.stop(signal.SIGTERM, timeout=30)


@pytest.fixture
def services(hookflow_bin, db, log_dir, request):
    factory = Services(hookflow_bin, db, log_dir, request.node.name, request.node)
    yield factory
    factory.stop_all()


@pytest.fixture
def webhook():
    server = Webhook()
    yield server
    server.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        item.config._hookflow_failed = True
        for svc in getattr(item, "_hookflow_services", []):
            rep.sections.append(("hookflow log %s [%s] (last %d lines; full: %s)" % (
                os.path.basename(svc.log_path), svc.state(), LOG_TAIL_LINES, svc.log_path),
                svc.log_tail(LOG_TAIL_LINES)))
        f = getattr(item.config, "_hookflow_formation", None)
        if f is not None:
            rep.sections.append(("pg_auto_failover (state: %r)" % (f.states(),), f.log_tails(40)))
