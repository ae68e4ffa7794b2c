"""A pg_auto_failover formation on loopback for the high-availability tests: a
monitor and two PostgreSQL data nodes (a primary and its synchronous standby),
each run by its own `pg_autoctl run` in the background, all as the harness's
unprivileged user when the tests run as root (pg_autoctl, like PostgreSQL,
refuses to run as root).

Everything is in one temp dir: the PGDATA of each node, a unix socket
directory (PG_REGRESS_SOCK_DIR: pg_autoctl passes it to postgres as -k, so no
server needs /var/run/postgresql), pg_autoctl's XDG config and state, and one
log per `pg_autoctl run`. Every port comes from harness.free_port(); every
server listens on 127.0.0.1 only. Waits are conditions with deadlines
(harness.wait_until).

The monitor's failure detection is tuned to react in seconds (MONITOR_SETTINGS;
README.md, "High availability", says what each setting does and what the
defaults give)."""

import json
import os
import shutil
import signal
import subprocess
import time

from harness import PG_BIN, as_user, free_port, give_to, pg_run_as, wait_until

PG_CTL = os.path.join(PG_BIN, "pg_ctl")
PG_AUTOCTL = os.environ.get("HOOKFLOW_TEST_PG_AUTOCTL", "/usr/bin/pg_autoctl")
APP_USER = "hookflow"  # the role hookflow connects as (a superuser, as in the integration tests)

# The monitor's settings (the pgautofailover extension's GUCs, in ms), set
# before the formation is built. Defaults in parentheses.
MONITOR_SETTINGS = {
    # How often the monitor checks every node (5000), how long one check may
    # take (5000), how many failed checks in a row make it "bad" (2) and the
    # pause between those retries (2000).
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 200,
    # A node whose keeper has not reported for this long and whose health
    # check fails is unhealthy: its standby is promoted (20000).
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    # How long the monitor waits for an unreachable primary to demote itself
    # before it lets the standby take writes (30000): it must be longer than
    # the keepers' network_partition_timeout (KEEPER_SETTINGS), after which a
    # keeper that lost the monitor and its standby stops its own primary.
    "pgautofailover.primary_demote_timeout": 3000,
    # No failover decision in the monitor's first seconds (10000).
    "pgautofailover.startup_grace_period": 1000,
}

# The keepers' settings (pg_autoctl config set, in seconds).
KEEPER_SETTINGS = {
    # A primary that reaches neither the monitor nor its standby for this
    # long demotes itself (20).
    "timeout.network_partition_timeout": 2,
}

# Appended to every data node's postgresql.conf (after pg_auto_failover's
# include, so these win): quick on a shared CI machine. fsync off only loses
# data in an operating-system crash, never in the process kills these tests
# do; synchronous replication stays as pg_auto_failover sets it.
NODE_CONF = """
# hookflow high-availability tests
fsync = off
max_connections = 200
shared_buffers = 64MB
log_min_messages = warning
log_line_prefix = '%m [%p] %d '
"""

# HOOKFLOW_HA_MANAGER_DEFAULTS=1 leaves pg_auto_failover's own defaults (to
# measure them; the README has the figures).
if os.environ.get("HOOKFLOW_HA_MANAGER_DEFAULTS") == "1":
    MONITOR_SETTINGS, KEEPER_SETTINGS = {}, {}

PRIMARY_STATES = ("primary", "wait_primary", "single")


class FormationError(RuntimeError):
    pass


class Node:
    def __init__(self, name, base_dir):
        self.name = name
        self.pgdata = os.path.join(base_dir, name)
        self.port = free_port()
        self.log_path = os.path.join(base_dir, "%s.log" % name)
        self.proc = None  # the `pg_autoctl run` of this node (its own process group)

    def postmaster_pid(self):
        """The pid in PGDATA/postmaster.pid, or None when there is none."""
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def __repr__(self):
        return "<%s :%d>" % (self.name, self.port)


class Formation:
    """The monitor and two data nodes. create() builds and starts them and
    returns once node1 is primary with node2 its synchronous standby."""

    def __init__(self, base_dir):
        self.base = base_dir
        self.run_as = pg_run_as()
        self.sock = os.path.join(base_dir, "sock")
        self.monitor = Node("monitor", base_dir)
        self.nodes = [Node("node1", base_dir), Node("node2", base_dir)]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self.env.update({
            "HOME": base_dir,
            "XDG_CONFIG_HOME": os.path.join(base_dir, "xdg-config"),
            "XDG_DATA_HOME": os.path.join(base_dir, "xdg-data"),
            "XDG_RUNTIME_DIR": os.path.join(base_dir, "xdg-run"),
            "PATH": PG_BIN + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
            "PG_CONFIG": os.path.join(PG_BIN, "pg_config"),
            "PG_REGRESS_SOCK_DIR": self.sock,  # pg_autoctl starts postgres with -k <this>
            "PGHOST": self.sock,                # and connects to it there
        })
        self.superuser = self.run_as or _current_user()

    # ---- commands ----

    def _cmd(self, argv, timeout=180, check=True):
        r = subprocess.run(as_user(self.run_as, argv), env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise FormationError("%s failed (exit %d):\n%s" % (" ".join(argv[:3]), r.returncode,
                                                              r.stdout[-6000:]))
        return r

    def psql(self, port, dbname, query, user=None, timeout=30):
        """Rows of `query` on the server at `port` (lists of strings)."""
        r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-h", "127.0.0.1", "-p", str(port), "-U", user or self.superuser, "-d", dbname,
                            "-c", query],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=self.env)
        if r.returncode != 0:
            raise FormationError("psql on :%d failed on %r: %s" % (port, query, r.stderr.strip()))
        return [line.split("\t") for line in r.stdout.splitlines()]

    def monitor_uri(self):
        return "postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable" % self.monitor.port

    # ---- building ----

    def create(self):
        for d in (self.base, self.sock, self.env["XDG_CONFIG_HOME"], self.env["XDG_DATA_HOME"],
                  self.env["XDG_RUNTIME_DIR"]):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.env["XDG_RUNTIME_DIR"], 0o700)
        give_to(self.run_as, self.base, self.sock, self.env["XDG_CONFIG_HOME"], self.env["XDG_DATA_HOME"],
                self.env["XDG_RUNTIME_DIR"])

        m = self.monitor
        self._cmd([PG_AUTOCTL, "create", "monitor", "--pgdata", m.pgdata, "--pgport", str(m.port),
                   "--pgctl", PG_CTL, "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                   "--auth", "trust", "--no-ssl"])
        with open(os.path.join(m.pgdata, "postgresql.conf"), "a") as f:
            f.write("\n# hookflow high-availability tests\n")
            for k, v in MONITOR_SETTINGS.items():
                f.write("%s = %d\n" % (k, v))
        self.start(m)
        wait_until(lambda: self._ready(m.port), timeout=60, interval=0.1, message="the monitor accepting connections")
        got = dict(self.psql(m.port, "pg_auto_failover",
                             "SELECT name, setting FROM pg_settings WHERE name LIKE 'pgautofailover.%'"))
        for k, v in MONITOR_SETTINGS.items():
            if got.get(k) != str(v):
                raise FormationError("monitor setting %s is %r, not %r" % (k, got.get(k), v))

        for i, n in enumerate(self.nodes):
            self._cmd([PG_AUTOCTL, "create", "postgres", "--pgdata", n.pgdata, "--pgport", str(n.port),
                       "--pgctl", PG_CTL, "--pghost", self.sock, "--listen", "127.0.0.1",
                       "--hostname", "127.0.0.1", "--name", n.name, "--monitor", self.monitor_uri(),
                       "--auth", "trust", "--no-ssl"])
            for k, v in KEEPER_SETTINGS.items():
                self._cmd([PG_AUTOCTL, "config", "set", "--pgdata", n.pgdata, k, str(v)])
            if i == 0:  # the standby's pg_basebackup copies it
                with open(os.path.join(n.pgdata, "postgresql.conf"), "a") as f:
                    f.write(NODE_CONF)
            self.start(n)
            if i == 0:
                wait_until(lambda: self.states().get("node1") == ("single", "single"), timeout=60,
                           interval=0.1, message=lambda: "node1 single: %r" % (self.states(),))
        self.wait_healthy(timeout=120)
        primary = self.primary()
        self.psql(primary.port, "postgres", "CREATE ROLE %s LOGIN SUPERUSER" % APP_USER)

    def start(self, node):
        """Starts `pg_autoctl run` for `node` in a process group of its own."""
        if node.proc is not None and node.proc.poll() is None:
            raise FormationError("%s is running already" % node.name)
        log = open(node.log_path, "ab")
        try:
            node.proc = subprocess.Popen(as_user(self.run_as, [PG_AUTOCTL, "run", "--pgdata", node.pgdata]),
                                         env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    # ---- state ----

    def states(self):
        """{node name: (reported state, goal state)} as the monitor has them."""
        try:
            rows = self.psql(self.monitor.port, "pg_auto_failover",
                             "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid")
        except (FormationError, subprocess.TimeoutExpired):
            return {}
        return {r[0]: (r[1], r[2]) for r in rows}

    def state_json(self):
        r = self._cmd([PG_AUTOCTL, "show", "state", "--monitor", self.monitor_uri(), "--json"], check=False)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return r.stdout

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def primary(self):
        """The node the monitor has as primary (reported and goal), or None."""
        for name, (rep, goal) in self.states().items():
            if rep == goal and rep in PRIMARY_STATES:
                return self.node(name)
        return None

    def standby_of(self, primary):
        return next(n for n in self.nodes if n is not primary)

    def sync_state(self, primary):
        """sync_state of the standby as the primary sees it ('quorum' or
        'sync' when synchronous), or None."""
        try:
            rows = self.psql(primary.port, "postgres", "SELECT sync_state FROM pg_stat_replication")
        except (FormationError, subprocess.TimeoutExpired):
            return None
        return rows[0][0] if rows else None

    def healthy(self):
        """The primary when the monitor has one primary and one secondary
        (both reported and assigned) and the primary replicates to the
        standby synchronously; else None."""
        st = self.states()
        if sorted(st.values()) != [("primary", "primary"), ("secondary", "secondary")]:
            return None
        p = self.primary()
        return p if p is not None and self.sync_state(p) in ("sync", "quorum") else None

    def wait_healthy(self, timeout=60):
        return wait_until(self.healthy, timeout=timeout, interval=0.2,
                          message=lambda: "primary + synchronous secondary: %r" % (self.states(),))

    def _ready(self, port):
        r = subprocess.run([os.path.join(PG_BIN, "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"])
        return r.returncode == 0

    # ---- for hookflow ----

    def url(self, dbname, connect_timeout=2):
        """The multi-host libpq URL hookflow connects with: both data nodes,
        the one that takes writes chosen at each connection."""
        hosts = ",".join("127.0.0.1:%d" % n.port for n in self.nodes)
        return "postgresql://%s@%s/%s?target_session_attrs=read-write&connect_timeout=%d" % (
            APP_USER, hosts, dbname, connect_timeout)

    def sql(self, dbname, query, timeout=120):
        """Rows of `query` on whichever node takes writes now."""
        r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-d", self.url(dbname), "-c", query],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=self.env)
        if r.returncode != 0:
            raise FormationError("psql failed on %r: %s" % (query, r.stderr.strip()))
        return [line.split("\t") for line in r.stdout.splitlines()]

    def writable(self):
        """The port of the node a read-write connection reaches now, or None."""
        try:
            rows = self.sql("postgres", "SELECT inet_server_port()", timeout=10)
        except (FormationError, subprocess.TimeoutExpired):
            return None
        return int(rows[0][0])

    # ---- faults and operations ----

    def kill_node(self, node):
        """SIGKILL of the node: its pg_autoctl (keeper and supervisor, so
        nothing restarts PostgreSQL) and its postmaster, at once. Returns
        the postmaster's pid."""
        pid = node.postmaster_pid()
        if pid is None:
            raise FormationError("%s has no postmaster.pid" % node.name)
        os.killpg(node.proc.pid, signal.SIGKILL)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it was in the group
        node.proc.wait(10)
        wait_until(lambda: not _alive(pid), timeout=10, message="postmaster %d gone" % pid)
        return pid

    def switchover(self, timeout=90):
        """`pg_autoctl perform switchover` (waits until the monitor reports it
        done). Returns its output."""
        return self._cmd([PG_AUTOCTL, "perform", "switchover", "--monitor", self.monitor_uri()],
                         timeout=timeout).stdout

    def log_tails(self, lines=60):
        out = []
        for n in [self.monitor] + self.nodes:
            try:
                with open(n.log_path, "rb") as f:
                    text = f.read().decode("utf-8", "replace").splitlines()
            except OSError:
                text = []
            out.append("---- %s (pg_autoctl run) ----\n%s" % (n.name, "\n".join(text[-lines:])))
        return "\n".join(out)

    def destroy(self, keep=False):
        """Stops every node (SIGTERM, then SIGKILL of its group and an
        immediate stop of a postmaster left over), then removes the temp dir
        unless `keep`."""
        for n in self.nodes + [self.monitor]:
            if n.proc is not None and n.proc.poll() is None:
                try:
                    os.killpg(n.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 20
        for n in self.nodes + [self.monitor]:
            if n.proc is None:
                continue
            try:
                n.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(n.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for n in self.nodes + [self.monitor]:
            pid = n.postmaster_pid()
            if pid is not None and _alive(pid):
                subprocess.run(as_user(self.run_as, [PG_CTL, "-D", n.pgdata, "-m", "immediate", "-w", "stop"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, timeout=60)
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by its parent) is gone for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _current_user():
    import pwd
    return pwd.getpwuid(os.geteuid()).pw_name
