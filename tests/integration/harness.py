"""Integration harness: a throwaway PostgreSQL, the real hookflow binary, real
webhook servers on loopback, and an HTTP client for the REST API.

Everything here uses the Python standard library only. Every wait is a
condition with a deadline (wait_until); nothing sleeps hoping for timing.
"""

import base64
import hashlib
import hmac
import http.server
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

PG_BIN = os.environ.get("HOOKFLOW_TEST_PG_BIN", "/usr/lib/postgresql/15/bin")
PG_SUPERUSER = "hookflow"
TERMINAL = ("succeeded", "failed", "cancelled")
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


# --------------------------------------------------------------------------
# Waiting
# --------------------------------------------------------------------------

class WaitTimeout(AssertionError):
    pass


def wait_until(predicate, timeout=10.0, interval=0.02, message=None):
    """Calls `predicate` until it returns a truthy value and returns that value.
    Raises WaitTimeout (an AssertionError) after `timeout` seconds, naming
    `message` (a string or a callable giving one) and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            what = message() if callable(message) else (message or getattr(predicate, "__name__", "condition"))
            raise WaitTimeout("timed out after %.1fs waiting for %s (last value: %r)" % (timeout, what, last))
        time.sleep(interval)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RefusedPort:
    """A port on which every connection is refused: the socket is bound (so no
    one else gets the port) but never listens, so the kernel answers RST."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def url(self, path="/steps"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def close(self):
        self.sock.close()


def iso_to_epoch(ts):
    """Parses an RFC 3339 UTC timestamp with milliseconds to epoch seconds."""
    import datetime
    assert TS_RE.match(ts), "not an RFC 3339 UTC timestamp with milliseconds: %r" % (ts,)
    dt = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def epoch_to_iso(t):
    import datetime
    dt = datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


# --------------------------------------------------------------------------
# Sockets a process holds
# --------------------------------------------------------------------------

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def _socket_inodes(pid):
    """The inodes of the sockets process `pid` has a descriptor for
    ("socket:[inode]" behind /proc/<pid>/fd/*)."""
    fd_dir = "/proc/%d/fd" % pid
    inodes = set()
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed between listdir and readlink
        m = re.match(r"^socket:\[(\d+)\]$", target)
        if m:
            inodes.add(m.group(1))
    return inodes


def _tcp_rows(pid):
    """(local, remote, state, inode) of every TCP socket of the network
    namespace of process `pid`, addresses as procfs writes them (hex)."""
    rows = []
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue  # no IPv6 in this kernel
        for line in lines:
            cols = line.split()
            rows.append((cols[1], cols[2], cols[3], cols[9]))
    return rows


def tcp_sockets_to(pid, remote_port):
    """The TCP sockets process `pid` holds open (has a descriptor for) whose
    remote end is port `remote_port`, as a list of (local "ip:port", state
    name). Read from procfs, no outside tool: the socket inodes behind
    /proc/<pid>/fd/* ("socket:[inode]") are matched against the inode column
    of /proc/<pid>/net/tcp and tcp6 (the process's network namespace). A
    socket the process has closed is not counted, whatever its TCP state
    (TIME_WAIT entries have inode 0 and belong to no one)."""
    inodes = _socket_inodes(pid)
    return [(_proc_addr(local), TCP_STATES.get(state, state))
            for local, remote, state, inode in _tcp_rows(pid)
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port]


def tcp_connections_between(pid, server_pids, remote_port):
    """The established TCP connections process `pid` holds to port
    `remote_port` whose other end a process of `server_pids` holds: a list of
    local "ip:port". The other end of a connection is the socket whose local
    and remote addresses are this one's the other way round; a connection to
    another server that happens to listen on the same port number (another
    address, or a port the kernel handed out again) is not counted."""
    mine = _socket_inodes(pid)
    theirs = set()
    for p in server_pids:
        try:
            theirs |= _socket_inodes(p)
        except FileNotFoundError:
            continue  # a backend that exited meanwhile
    rows = _tcp_rows(pid)
    owner = {(local, remote): inode for local, remote, _, inode in rows}
    return [_proc_addr(local) for local, remote, state, inode in rows
            if inode in mine and state == "01" and int(remote.rsplit(":", 1)[1], 16) == remote_port
            and owner.get((remote, local)) in theirs]


def _proc_addr(hex_addr):
    """'0100007F:1F90' (procfs, host byte order per 32-bit word) -> '127.0.0.1:8080'."""
    ip, port = hex_addr.rsplit(":", 1)
    raw = bytes.fromhex(ip)
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return "%s:%d" % (socket.inet_ntop(family, raw), int(port, 16))


# --------------------------------------------------------------------------
# Standard Webhooks signatures
# --------------------------------------------------------------------------

def new_secret(nbytes=32):
    return "whsec_" + base64.b64encode(os.urandom(nbytes)).decode()


def sign(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, b"%s.%s." % (msg_id.encode(), str(ts).encode()) + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify_signature(secret, headers, body):
    """True when headers carry a valid v1 signature of `body` (bytes) under
    `secret`. The header may carry several space-separated signatures."""
    msg_id = headers.get("webhook-id")
    ts = headers.get("webhook-timestamp")
    sig = headers.get("webhook-signature")
    if not (msg_id and ts and sig):
        return False
    expected = sign(secret, msg_id, ts, body)
    return any(hmac.compare_digest(expected, s) for s in sig.split())


# --------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------

def _ensure_system_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return pwd.getpwnam(name)


def pg_run_as():
    """The unprivileged user that PostgreSQL (and the tools that refuse root,
    such as pg_autoctl) run as when the tests run as root:
    HOOKFLOW_TEST_PG_USER, default hookflow-test, created when missing. None
    when the tests do not run as root (then they run as ourselves)."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("HOOKFLOW_TEST_PG_USER", "hookflow-test")
    _ensure_system_user(name)
    return name


def as_user(user, argv):
    """`argv` run as `user` (runuser) when it is not None, else as it is."""
    if user:
        return ["runuser", "-u", user, "--"] + list(argv)
    return list(argv)


def give_to(user, *paths):
    """chown of `paths` to `user` (a pg_run_as() value; None: nothing to do)."""
    if user:
        pw = pwd.getpwnam(user)
        for p in paths:
            os.chown(p, pw.pw_uid, pw.pw_gid)


class Postgres:
    """A throwaway PostgreSQL cluster in a temp dir, on a private port on
    127.0.0.1 and a unix socket in the temp dir. When run as root, the server
    runs as an unprivileged system user (HOOKFLOW_TEST_PG_USER, default
    hookflow-test, created when missing).

    With `ssl` (an object with .cert and .key, PEM file paths: see
    tls_certs.py) the server speaks TLS with that certificate and pg_hba
    accepts TCP connections over TLS only (plain ones are rejected); the unix
    socket stays open for the harness."""

    def __init__(self, base_dir, ssl=None):
        self.base_dir = base_dir
        self.ssl = ssl
        self.data_dir = os.path.join(base_dir, "pgdata")
        self.sock_dir = os.path.join(base_dir, "pgsock")
        self.log_path = os.path.join(base_dir, "postgres.log")
        self.port = free_port()
        self.host = "127.0.0.1"
        self.user = PG_SUPERUSER
        self.run_as = pg_run_as()
        self._db_seq = 0
        self._lock = threading.Lock()

    def _cmd(self, argv):
        return as_user(self.run_as, argv)

    def _run(self, argv, **kw):
        r = subprocess.run(self._cmd(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        if r.returncode != 0:
            raise RuntimeError("%s failed (exit %d):\n%s\n%s" % (argv[0], r.returncode, r.stdout, r.stderr))
        return r

    def init(self):
        os.makedirs(self.sock_dir, exist_ok=True)
        give_to(self.run_as, self.base_dir, self.sock_dir)
        self._run([os.path.join(PG_BIN, "initdb"), "-D", self.data_dir, "-U", self.user,
                   "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        with open(os.path.join(self.data_dir, "postgresql.conf"), "a") as f:
            f.write("\n# hookflow integration tests\n"
                    "listen_addresses = '127.0.0.1'\n"
                    "port = %d\n"
                    "unix_socket_directories = '%s'\n"
                    "fsync = off\n"
                    "synchronous_commit = off\n"
                    "full_page_writes = off\n"
                    "max_connections = 300\n"
                    "shared_buffers = 64MB\n"
                    "log_min_messages = warning\n"
                    "log_line_prefix = '%%m [%%p] %%d '\n" % (self.port, self.sock_dir))
            if self.ssl is not None:
                f.write("ssl = on\n"
                        "ssl_cert_file = 'server.crt'\n"
                        "ssl_key_file = 'server.key'\n")
        if self.ssl is not None:
            self.use_certificate(self.ssl)
            with open(os.path.join(self.data_dir, "pg_hba.conf"), "w") as f:
                f.write("# hookflow integration tests: TCP over TLS only\n"
                        "local all all trust\n"
                        "hostssl all all 127.0.0.1/32 trust\n"
                        "hostnossl all all 0.0.0.0/0 reject\n")
        self.start()

    def use_certificate(self, cert):
        """Installs `cert` (.cert, .key: PEM paths) as the server's
        certificate (readable by the server's user only, as PostgreSQL
        requires of the key). A running server takes it at its next start or
        reload()."""
        for src, name in ((cert.cert, "server.crt"), (cert.key, "server.key")):
            dst = os.path.join(self.data_dir, name)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o600)
            if self.run_as:
                pw = pwd.getpwnam(self.run_as)
                os.chown(dst, pw.pw_uid, pw.pw_gid)

    def reload(self):
        """pg_ctl reload: new connections see the configuration and
        certificate files as they are now."""
        self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data_dir, "reload"])

    def start(self):
        self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data_dir, "-l", self.log_path,
                   "-w", "-t", "60", "start"])
        wait_until(self.is_ready, timeout=30, interval=0.05, message="postgres accepting connections")

    def stop(self, mode="fast"):
        self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data_dir, "-m", mode, "-w", "-t", "60", "stop"])

    def restart(self, mode="fast"):
        """Stops (fast: terminates every session) and starts the server again on
        the same port. Chaos tests use it to cut every service connection."""
        self.stop(mode)
        self.start()

    def is_ready(self):
        r = subprocess.run([os.path.join(PG_BIN, "pg_isready"), "-h", self.host, "-p", str(self.port), "-q"])
        return r.returncode == 0

    def server_pids(self):
        """The postmaster's pid (postmaster.pid's first line) and its
        children's (its backends and helpers), read from procfs."""
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                postmaster = int(f.readline())
        except (FileNotFoundError, ValueError):
            return []
        pids = [postmaster]
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
            except OSError:
                continue  # gone meanwhile
            # pid (comm) state ppid ...: comm may hold spaces and parentheses
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(d))
        return pids

    def destroy(self):
        try:
            if os.path.exists(os.path.join(self.data_dir, "postmaster.pid")):
                self.stop("immediate")
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def url(self, dbname):
        return "postgresql://%s@%s:%d/%s" % (self.user, self.host, self.port, dbname)

    def psql(self, dbname, query, timeout=60):
        """Runs `query` with psql and returns rows as lists of strings (NULL is
        ''). Raises RuntimeError on an SQL error."""
        r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-At", "-F", "\t",
                            "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(self.port),
                            "-U", self.user, "-d", dbname, "-c", query],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("psql failed on %r: %s" % (query, r.stderr.strip()))
        return [line.split("\t") for line in r.stdout.splitlines()]

    def create_database(self, hint="t"):
        with self._lock:
            self._db_seq += 1
            seq = self._db_seq
        name = "%s_%d" % (re.sub(r"[^a-z0-9_]", "_", hint.lower())[:40], seq)
        self.psql("postgres", 'CREATE DATABASE "%s"' % name)
        return Database(self, name)

    def drop_database(self, name):
        self.psql("postgres", 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)


class Database:
    def __init__(self, pg, name):
        self.pg = pg
        self.name = name
        self.url = pg.url(name)

    def sql(self, query):
        """Rows of `query` as lists of strings (psql -At -F '\\t'; NULL is '')."""
        return self.pg.psql(self.name, query)

    def scalar(self, query):
        rows = self.sql(query)
        return rows[0][0] if rows else None

    def table_exists(self, table):
        return self.scalar("SELECT to_regclass('public.%s') IS NOT NULL" % table) == "t"

    def columns(self, table):
        return [r[0] for r in self.sql(
            "SELECT column_name FROM information_schema.columns WHERE table_schema='public' "
            "AND table_name='%s' ORDER BY ordinal_position" % table)]


PGBOUNCER_BIN = os.environ.get("HOOKFLOW_TEST_PGBOUNCER_BIN", "/usr/sbin/pgbouncer")


class PgBouncer:
    """PgBouncer (Debian's pgbouncer, 1.18) in transaction pooling mode in
    front of a harness Postgres: on a private port on 127.0.0.1, connecting to
    PostgreSQL over its loopback port, any database name passed through (a
    wildcard entry), auth_type trust (PostgreSQL trusts loopback too). When run
    as root it runs as the cluster's unprivileged user, as PostgreSQL does.

    The pool is small (`pool_size` server connections per database and user,
    default 4) so that hookflow's client connections really do share server
    sessions: that is what surfaces state left in one session and expected in
    the next. `admin(command)` runs a console command (SHOW POOLS, SHOW
    SERVERS, ...) on its admin database `pgbouncer`."""

    def __init__(self, pg, base_dir, pool_size=4):
        self.pg = pg
        self.base_dir = base_dir
        self.pool_size = pool_size
        self.port = free_port()
        self.host = "127.0.0.1"
        self.conf_path = os.path.join(base_dir, "pgbouncer.ini")
        self.log_path = os.path.join(base_dir, "pgbouncer.log")
        self.proc = None

    def start(self):
        if not os.access(PGBOUNCER_BIN, os.X_OK):
            raise RuntimeError("pgbouncer not found at %s (scripts/deps.sh installs Debian's pgbouncer; "
                               "HOOKFLOW_TEST_PGBOUNCER_BIN names another)" % PGBOUNCER_BIN)
        os.makedirs(self.base_dir, exist_ok=True)
        with open(os.path.join(self.base_dir, "userlist.txt"), "w") as f:
            f.write('"%s" ""\n' % self.pg.user)
        with open(self.conf_path, "w") as f:
            f.write("[databases]\n"
                    "* = host=%s port=%d\n"
                    "[pgbouncer]\n"
                    "listen_addr = %s\n"
                    "listen_port = %d\n"
                    "unix_socket_dir =\n"
                    "auth_type = trust\n"
                    "auth_file = %s\n"
                    "admin_users = %s\n"
                    "pool_mode = transaction\n"
                    "default_pool_size = %d\n"
                    "min_pool_size = 0\n"
                    "reserve_pool_size = 0\n"
                    "max_client_conn = 2000\n"
                    "logfile = %s\n"
                    "log_connections = 0\n"
                    "log_disconnections = 0\n"
                    % (self.pg.host, self.pg.port, self.host, self.port,
                       os.path.join(self.base_dir, "userlist.txt"), self.pg.user, self.pool_size,
                       self.log_path))
        kw = {}
        if self.pg.run_as:
            pw = pwd.getpwnam(self.pg.run_as)
            for name in os.listdir(self.base_dir):
                os.chown(os.path.join(self.base_dir, name), pw.pw_uid, pw.pw_gid)
            os.chown(self.base_dir, pw.pw_uid, pw.pw_gid)
            kw = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen([PGBOUNCER_BIN, self.conf_path], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", **kw)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("pgbouncer exited with %s; log:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                return self.admin("SHOW VERSION") is not None
            except RuntimeError:
                return False
        try:
            wait_until(ready, timeout=30, interval=0.05, message="pgbouncer accepting connections")
        except RuntimeError:
            # The port free_port() chose was taken before pgbouncer bound it
            # (tests run in parallel): another port, once.
            if getattr(self, "_rebound", False) or "Address already in use" not in self.log_tail():
                raise
            self._rebound = True
            self.port = free_port()
            return self.start()
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: immediate shutdown
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def url(self, dbname):
        return "postgresql://%s@%s:%d/%s" % (self.pg.user, self.host, self.port, dbname)

    def admin(self, command, timeout=30):
        """Rows of an admin console command, as dicts (column name -> string)."""
        r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-A", "-F", "\t", "-P", "footer=off",
                            "-h", self.host, "-p", str(self.port), "-U", self.pg.user,
                            "-d", "pgbouncer", "-c", command],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("pgbouncer %r failed: %s" % (command, r.stderr.strip()))
        lines = r.stdout.splitlines()
        if not lines:
            return []
        head = lines[0].split("\t")
        return [dict(zip(head, line.split("\t"))) for line in lines[1:]]

    def pool(self, dbname):
        """SHOW POOLS' row of database `dbname` (a dict of ints by column), or
        None when it has no pool yet."""
        for row in self.admin("SHOW POOLS"):
            if row.get("database") == dbname:
                return {k: (int(v) if v.isdigit() else v) for k, v in row.items()}
        return None

    def log_tail(self, lines=50):
        try:
            with open(self.log_path, "rb") as f:
                return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-lines:])
        except OSError:
            return ""


# --------------------------------------------------------------------------
# Step history: every step settled once
# --------------------------------------------------------------------------

SETTLING_RESULTS = ("continue", "succeed", "fail", "cancel")


def step_history_problems(runs, attempts):
    """Checks the attempt history of `runs` ({run_id: row with final_step and status},
    as read from the run table) in `attempts` (step_attempt rows with
    run_id, generation, step, attempt and result, in id order): each run has
    one generation (1) whose steps are 0..final_step without gaps; each
    step's attempts are numbered 1..k (a run cancelled before its final step
    was attempted has steps 0..final_step-1); at most one attempt of a step has a
    settling result (SETTLING_RESULTS: the step was settled once) and none
    comes after it; no (run, generation, step, attempt) row twice.

    Returns (hist, problems): hist[(run_id, generation)][step] is the list of
    that step's rows; problems maps "duplicate_attempts" to {(run, generation,
    step, attempt): rows} and "noncontiguous", "attempt_gaps",
    "settled_twice", "after_settle" to lists of what was found (empty when
    all is well). Runs without one generation are reported as noncontiguous
    and their steps are not checked further."""
    import collections
    hist = collections.defaultdict(lambda: collections.defaultdict(list))
    rows_per_attempt = collections.Counter()
    for a in attempts:
        hist[(a["run_id"], a["generation"])][a["step"]].append(a)
        rows_per_attempt[(a["run_id"], a["generation"], a["step"], a["attempt"])] += 1
    problems = {"duplicate_attempts": {k: n for k, n in rows_per_attempt.items() if n > 1},
                "noncontiguous": [], "attempt_gaps": [], "settled_twice": [], "after_settle": []}
    gens = collections.defaultdict(list)
    for (rid, g) in hist:
        gens[rid].append(g)
    for rid, r in runs.items():
        if sorted(gens.get(rid, [])) != [1]:
            problems["noncontiguous"].append((rid, "generations %r" % sorted(gens.get(rid, []))))
            continue
        steps = hist[(rid, 1)]
        final = r["final_step"] if r["final_step"] is not None else -1
        want = list(range(final + 1))
        # A run cancelled while its next step waited (queued, delayed, waiting
        # for a signal) ends on that step without an attempt of it.
        if sorted(steps) != want and not (r.get("status") == "cancelled" and sorted(steps) == want[:-1]):
            problems["noncontiguous"].append((rid, "steps %r, final_step %r" % (sorted(steps), r["final_step"])))
        for n, rows in sorted(steps.items()):
            nums = [a["attempt"] for a in rows]
            if sorted(nums) != list(range(1, len(nums) + 1)):
                problems["attempt_gaps"].append((rid, n, nums))
            settled = [a for a in rows if a["result"] in SETTLING_RESULTS]
            if len(settled) > 1:
                problems["settled_twice"].append((rid, n, [(a["attempt"], a["result"]) for a in settled]))
            if settled and any(a["attempt"] > settled[0]["attempt"] for a in rows):
                problems["after_settle"].append((rid, n, [(a["attempt"], a["result"]) for a in rows]))
    return hist, problems


def sql_quote(s):
    return "'" + str(s).replace("'", "''") + "'"


# --------------------------------------------------------------------------
# REST client
# --------------------------------------------------------------------------

class Response:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage: case-insensitive get()
        self.raw = raw
        self.text = raw.decode("utf-8", "replace")
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.text[:500])

    def json(self):
        return self.body

    @property
    def error_code(self):
        try:
            return self.body["error"]["code"]
        except (TypeError, KeyError):
            return None

    @property
    def error_message(self):
        try:
            return self.body["error"]["message"]
        except (TypeError, KeyError):
            return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


class Api:
    """JSON client for the hookflow REST API over urllib. Never raises on 4xx/5xx:
    every call returns a Response (status, headers, body parsed when JSON)."""

    def __init__(self, base_url, token=None, timeout=30):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    def with_token(self, token):
        return Api(self.base_url, token, self.timeout)

    def request(self, method, path, json_body=None, raw=None, headers=None, params=None,
                content_type="application/json", timeout=None):
        url = self.base_url + path
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        data = None
        hdrs = {}
        if json_body is not None:
            data = json.dumps(json_body).encode()
        elif raw is not None:
            data = raw if isinstance(raw, bytes) else raw.encode()
        if data is not None and content_type is not None:
            hdrs["Content-Type"] = content_type
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        hdrs.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with self._opener.open(req, timeout=timeout or self.timeout) as r:
                return Response(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            try:
                raw_body = e.read()
            except Exception:
                raw_body = b""
            return Response(e.code, e.headers, raw_body)

    def get(self, path, params=None, **kw):
        return self.request("GET", path, params=params, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, json_body=body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, json_body=body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # Conveniences for the tests ------------------------------------------------

    def put_workflow(self, name, url, **settings):
        body = {"url": url}
        body.setdefault("timeout_ms", 5000)
        body.setdefault("retry_backoff", {"base_ms": 50, "max_ms": 200})
        body.update(settings)
        r = self.put("/v1/workflows/" + name, body)
        assert r.status in (200, 201), "PUT workflow %s: %r" % (name, r)
        return r.body

    def submit(self, workflow, expect=201, **fields):
        body = {"workflow": workflow}
        body.update(fields)
        r = self.post("/v1/runs", body)
        if expect is not None:
            assert r.status == expect, "submit %r: %r" % (body, r)
        return r.body if expect is not None else r

    def run(self, run_id, **params):
        r = self.get("/v1/runs/" + urllib.parse.quote(run_id, safe=""), params=params or None)
        assert r.status == 200, "GET run %s: %r" % (run_id, r)
        return r.body

    def steps(self, run_id):
        """The whole attempt history of a run, following next_cursor."""
        out, params = [], None
        while True:
            r = self.get("/v1/runs/%s/steps" % urllib.parse.quote(run_id, safe=""), params=params)
            assert r.status == 200, "GET steps %s: %r" % (run_id, r)
            assert isinstance(r.body, dict) and isinstance(r.body.get("steps"), list), r
            out.extend(r.body["steps"])
            if not r.body.get("next_cursor"):
                return out
            params = {"cursor": r.body["next_cursor"]}

    def wait_terminal(self, run_id, timeout=20.0):
        """Long-polls GET /v1/runs/{id}?wait_ms until the run is terminal; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout("run %s not terminal after %.1fs: %r" % (run_id, timeout, self.run(run_id)))
            wait_ms = int(min(left, 5.0) * 1000)
            r = self.get("/v1/runs/" + urllib.parse.quote(run_id, safe=""), params={"wait_ms": wait_ms},
                         timeout=wait_ms / 1000.0 + 10)
            assert r.status == 200, "GET run %s: %r" % (run_id, r)
            if r.body.get("status") in TERMINAL:
                return r.body
            if r.status == 200 and wait_ms > 0:
                # The service answered before the run was terminal: either wait_ms
                # elapsed or long-poll is not honoured; poll a little either way.
                time.sleep(0.02)

    def wait_status(self, run_id, statuses, timeout=10.0):
        if isinstance(statuses, str):
            statuses = (statuses,)
        return wait_until(lambda: (lambda b: b if b["status"] in statuses else None)(self.run(run_id)),
                          timeout=timeout, message="run %s status in %s" % (run_id, statuses))

    def runs(self, **filters):
        """Every run of GET /v1/runs matching `filters` (workflow, status, ...),
        following next_cursor, 1000 a page."""
        out, params = [], dict(filters, limit=1000)
        while True:
            r = self.get("/v1/runs", params=params)
            assert r.status == 200, "GET /v1/runs %r: %r" % (params, r)
            out.extend(r.body["runs"])
            if not r.body.get("next_cursor"):
                return out
            params = dict(filters, limit=1000, cursor=r.body["next_cursor"])

    def metrics(self):
        """GET /metrics as {series with its labels: value}, e.g.
        {'hookflow_inflight_calls': 0.0, 'hookflow_runs{status="pending"}': 3.0}."""
        r = self.get("/metrics")
        assert r.status == 200, "GET /metrics: %r" % (r,)
        samples = {}
        for line in r.text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        return samples


def assert_error(resp, status, code, field=None):
    """Asserts an error response: `status`, body {"error": {"code", "message"}}
    with exactly those keys' presence, and the message naming `field`."""
    assert resp.status == status, "expected %d %s, got %r" % (status, code, resp)
    assert isinstance(resp.body, dict) and isinstance(resp.body.get("error"), dict), \
        "error body must be {\"error\": {...}}: %r" % (resp,)
    err = resp.body["error"]
    assert err.get("code") == code, "expected code %s: %r" % (code, resp)
    assert isinstance(err.get("message"), str) and err["message"], "error message missing: %r" % (resp,)
    if field is not None:
        assert field in err["message"], "error message should name %r: %r" % (field, err["message"])
    ct = resp.headers.get("Content-Type", "")
    assert ct.startswith("application/json"), "error content type %r" % ct


# --------------------------------------------------------------------------
# The service under test
# --------------------------------------------------------------------------

class ServiceError(RuntimeError):
    pass


class Service:
    """One `hookflow serve` process. Its stdout and stderr go to a log file."""

    def __init__(self, binary, db, log_path, env, port=None, bouncer=None):
        self.binary = binary
        self.db = db
        self.bouncer = bouncer  # a PgBouncer in front of the database, or None
        self.log_path = log_path
        self.auto_port = port is None  # free_port() chose it: another may be chosen
        self.port = port or free_port()
        self.env_overrides = dict(env)
        self.proc = None
        self.signalled = False  # the test signalled this process (stop, kill, send_signal)
        self.base_url = "http://127.0.0.1:%d" % self.port
        self.api = Api(self.base_url, token=self._first_token())
        self.exit_codes = []

    def _first_token(self):
        toks = self.env_overrides.get("HOOKFLOW_API_TOKENS")
        if toks:
            return toks.split(",")[0].strip()
        return None

    def environment(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HOOKFLOW_") and k.lower() not in
               ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update({
            "HOOKFLOW_DATABASE_URL": self.db.url,
            "HOOKFLOW_LISTEN": "127.0.0.1:%d" % self.port,
            "HOOKFLOW_LOG_LEVEL": "debug",
            "HOOKFLOW_PUBLIC_URL": self.base_url,
        })
        if self.bouncer is not None:
            # The statements through PgBouncer; LISTEN and migrations direct.
            env.update({
                "HOOKFLOW_DATABASE_URL": self.bouncer.url(self.db.name),
                "HOOKFLOW_LISTEN_DATABASE_URL": self.db.url,
                "HOOKFLOW_DATABASE_POOLER": "transaction",
            })
        for k, v in self.env_overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def start(self, wait_ready=True, timeout=30.0):
        if self.proc is not None and self.proc.poll() is None:
            raise ServiceError("already running")
        if not os.path.exists(self.binary):
            raise ServiceError("service binary %s does not exist (run `make`)" % self.binary)
        self.signalled = False
        log = open(self.log_path, "ab")
        self._log_start = log.tell()
        log.write(b"\n===== start %s (%s) =====\n" % (time.strftime("%H:%M:%S").encode(), self.binary.encode()))
        log.flush()
        try:
            self.proc = subprocess.Popen([self.binary, "serve"], env=self.environment(),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        if wait_ready:
            try:
                self.wait_ready(timeout)
            except ServiceError:
                # The port free_port() chose was taken before hookflow bound it
                # (tests run in parallel): another port, once.
                if not (self.auto_port and self._bind_failed()) or getattr(self, "_rebound", False):
                    raise
                self._rebound = True
                self.port = free_port()
                self.base_url = "http://127.0.0.1:%d" % self.port
                self.api = Api(self.base_url, token=self._first_token())
                return self.start(wait_ready, timeout)
        return self

    def _bind_failed(self):
        with open(self.log_path, "rb") as f:
            f.seek(getattr(self, "_log_start", 0))
            return b"cannot listen on" in f.read()

    def _listening(self):
        """Whether this start of the process logged that it listens: a /readyz
        answer before that comes from some other process that took the port
        between free_port() and the bind (tests run in parallel). A test that
        quiets the log below info cannot tell: it takes /readyz alone."""
        if self.env_overrides.get("HOOKFLOW_LOG_LEVEL") in ("warn", "error"):
            return True
        with open(self.log_path, "rb") as f:
            f.seek(getattr(self, "_log_start", 0))
            text = f.read()
            # the text line, or the JSON one (HOOKFLOW_LOG_FORMAT=json)
            return b" http listening " in text or b'"module":"http","msg":"listening"' in text

    def wait_ready(self, timeout=30.0):
        probe = Api(self.base_url, timeout=2)

        def ready():
            if self.proc.poll() is not None:
                raise ServiceError("hookflow exited with %s before becoming ready; log tail:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            if not self._listening():
                return False
            try:
                return probe.get("/readyz").status == 200
            except OSError:
                return False
        wait_until(ready, timeout=timeout, interval=0.05, message="GET /readyz == 200 on %s" % self.base_url)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid

    def send_signal(self, sig):
        self.signalled = True
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        """Waits for the process to exit; returns its exit code, or None on timeout."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self.exit_codes.append(code)
        return code

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Sends `sig` and waits up to `timeout` s; SIGKILLs it if it did not
        exit. Returns the exit code (negative: killed by that signal)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.send_signal(sig)
        code = self.wait_exit(timeout)
        if code is None:
            self.proc.kill()
            code = self.wait_exit(10)
            raise ServiceError("hookflow did not exit within %.1fs of signal %s; killed" % (timeout, sig))
        return code

    def kill(self):
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            self.signalled = True
            self.proc.kill()
            return self.wait_exit(10)
        return None

    def restart(self, sig=signal.SIGTERM, **env):
        """Stops the process (with `sig`; None leaves a dead one as it is) and
        starts it again on the same port, with `env` overrides merged in."""
        if sig is not None and self.running():
            self.stop(sig)
        self.env_overrides.update(env)
        return self.start()

    def state(self):
        """One line for failure reports: running, or how the process ended."""
        if self.proc is None:
            return "never started"
        code = self.proc.poll()
        if code is None:
            return "running (pid %d)" % self.proc.pid
        how = "killed by signal %d" % -code if code < 0 else "exit code %d" % code
        if self.signalled:
            return "stopped by the test: " + how
        return "EXITED ON ITS OWN (not signalled by the test): " + how

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, lines=200):
        return "\n".join(self.log_text().splitlines()[-lines:])


# --------------------------------------------------------------------------
# Webhook server
# --------------------------------------------------------------------------

class Reply:
    """What the webhook answers: status, headers, body (bytes, str, or a JSON
    value via json=), after an optional delay in seconds. `chunk` splits a long
    body into several writes."""

    def __init__(self, status=200, json_body=None, body=None, headers=None, delay=0.0):
        self.status = status
        self.headers = dict(headers or {})
        if json_body is not None:
            self.body = json.dumps(json_body).encode()
            self.headers.setdefault("Content-Type", "application/json")
        elif body is None:
            self.body = b""
        else:
            self.body = body if isinstance(body, bytes) else body.encode()
        self.delay = delay


class Hang:
    """Holds the request open without answering until the client disconnects
    (recorded in request.disconnected_at), `release` is set (then answers
    `then`, a Reply, default 200 continue-less empty JSON), or `max_s` passes."""

    def __init__(self, release=None, then=None, max_s=60.0):
        self.release = release
        self.then = then
        self.max_s = max_s


class Close:
    """Closes the connection without answering (after an optional delay)."""

    def __init__(self, delay=0.0):
        self.delay = delay


def cont(payload=None, delay_ms=None, kv=None, **extra):
    body = {"outcome": "continue", "payload": payload}
    if delay_ms is not None:
        body["delay_ms"] = delay_ms
    if kv is not None:
        body["kv"] = kv
    body.update(extra)
    return Reply(200, body)


def succeed(result=None, kv=None):
    body = {"outcome": "succeed", "result": result}
    if kv is not None:
        body["kv"] = kv
    return Reply(200, body)


def fail(reason):
    return Reply(200, {"outcome": "fail", "reason": reason})


def cancel(reason):
    return Reply(200, {"outcome": "cancel", "reason": reason})


def pending(timeout_ms=None, heartbeat_timeout_ms=None, status=202, **extra):
    """The asynchronous answer: the step stays pending until it is completed
    through POST /v1/runs/{id}/steps/{n}/complete (or times out)."""
    body = {"outcome": "pending"}
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    if heartbeat_timeout_ms is not None:
        body["heartbeat_timeout_ms"] = heartbeat_timeout_ms
    body.update(extra)
    return Reply(status, body)


class Request:
    """One request the webhook received."""

    def __init__(self, seq, method, path, headers, body, sock):
        self.seq = seq
        self.method = method
        self.path = path
        self.headers = headers  # dict with lower-case names
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None
        self.time = time.monotonic()
        self.wall = time.time()
        self.disconnected_at = None   # monotonic time the client was seen gone (Hang)
        self.answered_at = None
        self.disconnected = threading.Event()
        self._sock = sock
        self.peer_cert = None  # over https: the client's certificate (getpeercert()), if it sent one
        if isinstance(sock, ssl.SSLSocket):
            try:
                self.peer_cert = sock.getpeercert() or None
            except (ValueError, OSError):
                pass

    def field(self, name, default=None):
        return self.json.get(name, default) if isinstance(self.json, dict) else default

    @property
    def run_id(self):
        return self.field("run_id")

    @property
    def step(self):
        return self.field("step")

    @property
    def attempt(self):
        return self.field("attempt")

    def __repr__(self):
        return "<Request #%d %s %s run=%s step=%s attempt=%s>" % (
            self.seq, self.method, self.path, self.run_id, self.step, self.attempt)


def _peer_closed(sock):
    """True when the peer has closed `sock` (EOF or reset), without consuming data."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return False
        # The plain socket's recv: an https connection's SSLSocket refuses
        # flags, and a peek at its raw bytes sees the end all the same.
        data = socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        return data == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Webhook:
    """A threaded HTTP/1.1 server (keep-alive) on 127.0.0.1 whose behaviour the
    test programs per path with route(path, fn): fn(request) returns a Reply, a
    Hang, a Close, or None (then 404). Every request is recorded before its
    handler runs.

    With `tls` (a server-side ssl.SSLContext) it speaks https: each accepted
    connection's handshake runs on its own thread; `connections` counts the
    connections accepted and `tls_errors` records why handshakes failed."""

    def __init__(self, tls=None):
        self._lock = threading.Condition()
        self._requests = []
        self._routes = {}
        self.errors = []
        self.tls = tls
        self.connections = 0
        self.tls_errors = []
        self._shutdown = threading.Event()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "hookflow-test-webhook"
            sys_version = ""

            def log_message(self, fmt, *args):
                pass

            def setup(self):
                if hook.tls is not None:
                    self.request.settimeout(10)
                    try:
                        self.request.do_handshake()
                    except (ssl.SSLError, OSError) as e:
                        with hook._lock:
                            hook.tls_errors.append(str(e))
                            hook._lock.notify_all()
                        raise
                    self.request.settimeout(None)
                super().setup()

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                req = hook._record(self.command, self.path, headers, body, self.connection)
                try:
                    fn = hook._route_for(self.path)
                    action = fn(req) if fn else Reply(404, body=b"no route")
                except Exception as e:  # a test bug: record it, answer 599
                    hook.errors.append(e)
                    action = Reply(599, body=("handler raised %r" % (e,)).encode())
                if action is None:
                    action = Reply(404, body=b"no reply")
                self._act(req, action)

            def _act(self, req, action):
                if isinstance(action, Hang):
                    deadline = time.monotonic() + action.max_s
                    while time.monotonic() < deadline and not hook._shutdown.is_set():
                        if _peer_closed(self.connection):
                            req.disconnected_at = time.monotonic()
                            req.disconnected.set()
                            hook._notify()
                            self.close_connection = True
                            return
                        if action.release is not None and action.release.is_set():
                            return self._act(req, action.then or Reply(200, body=b""))
                        time.sleep(0.005)
                    self.close_connection = True
                    return
                if isinstance(action, Close):
                    if action.delay:
                        time.sleep(action.delay)
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if action.delay:
                    time.sleep(action.delay)
                try:
                    self.send_response(action.status)
                    for k, v in action.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(action.body)))
                    self.end_headers()
                    self.wfile.write(action.body)
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True
                req.answered_at = time.monotonic()

            do_POST = _serve
            do_GET = _serve
            do_PUT = _serve

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 1024  # the service opens many connections at once

            def handle_error(self, request, client_address):
                pass  # connection resets from an aborting client are expected

            def get_request(self):
                conn, addr = super().get_request()
                with hook._lock:
                    hook.connections += 1
                    hook._lock.notify_all()
                if hook.tls is not None:
                    # The handshake runs in the handler's thread (setup), not
                    # in the accepting one.
                    conn = hook.tls.wrap_socket(conn, server_side=True,
                                                do_handshake_on_connect=False)
                return conn, addr

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    # ---- programming ----

    def url(self, path="/steps", host="127.0.0.1"):
        return "%s://%s:%d%s" % ("https" if self.tls is not None else "http", host, self.port, path)

    def route(self, path, fn):
        """fn(request) -> Reply | Hang | Close | None for requests whose path
        (without query) equals `path`."""
        with self._lock:
            self._routes[path] = fn
        return fn

    def _route_for(self, path):
        with self._lock:
            return self._routes.get(path.split("?", 1)[0])

    # ---- recording ----

    def _record(self, method, path, headers, body, sock):
        with self._lock:
            req = Request(len(self._requests) + 1, method, path, headers, body, sock)
            self._requests.append(req)
            self._lock.notify_all()
            return req

    def _notify(self):
        with self._lock:
            self._lock.notify_all()

    def requests(self, path=None, run_id=None, step=None):
        with self._lock:
            out = list(self._requests)
        if path is not None:
            out = [r for r in out if r.path.split("?", 1)[0] == path]
        if run_id is not None:
            out = [r for r in out if r.run_id == run_id]
        if step is not None:
            out = [r for r in out if r.step == step]
        return out

    def wait_for(self, predicate, timeout=10.0, message=None):
        """Waits until predicate(list of all requests) is truthy; returns it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                v = predicate(list(self._requests))
                if v:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout("webhook: timed out after %.1fs waiting for %s; requests: %r"
                                      % (timeout, message or "condition", self._requests[-20:]))
                self._lock.wait(min(left, 0.1))

    def wait_requests(self, n, path=None, run_id=None, step=None, timeout=10.0):
        """Waits until at least `n` requests match; returns the matching ones."""
        def pred(_):
            got = self.requests(path=path, run_id=run_id, step=step)
            return got if len(got) >= n else None
        return self.wait_for(pred, timeout=timeout,
                             message="%d requests (path=%s run=%s step=%s)" % (n, path, run_id, step))

    def close(self):
        self._shutdown.set()
        self.server.shutdown()
        self.server.server_close()


class StepScript:
    """A step handler driven by a per-step table: steps[n] is a Reply (or a
    callable request -> Reply) for step n. Calls for unlisted steps get 500."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, req):
        s = self.steps.get(req.step) if isinstance(self.steps, dict) else None
        if s is None:
            return Reply(500, body=b"unexpected step")
        return s(req) if callable(s) else s
