#!/usr/bin/env bash
# What `make run` executes once build/hookflow is built: serve hookflow on
# HOOKFLOW_LISTEN (default 127.0.0.1:8080).
#
# With HOOKFLOW_DATABASE_URL set, it only execs `build/hookflow serve`.
#
# Without it, it runs an embedded PostgreSQL cluster kept in the repository:
#   .hookflow/pgdata         the cluster (initdb on first use: UTF8, trust for
#                            its owner only, on the unix socket and 127.0.0.1)
#   .hookflow/postgres.log   the server log
#   .hookflow/sock           the unix socket directory, or /tmp/hookflow-<user>-<hash>
#                            when that path is too long for a unix socket
# PostgreSQL listens on 127.0.0.1 only, on the first free port from 54329. The
# database `hookflow` is created if missing, HOOKFLOW_DATABASE_URL is exported and
# `build/hookflow serve` starts (it applies the migrations itself). The next run
# reuses the cluster.
#
# Ctrl-C, SIGTERM or SIGHUP: hookflow gets SIGTERM (it drains; a second signal
# kills it), the script waits for it, then stops PostgreSQL with `pg_ctl stop -m
# fast`. hookflow runs in a session of its own so that a Ctrl-C at the terminal
# reaches it once, through this script.
#
# As root: PostgreSQL refuses to run as root, so the cluster belongs to the system
# user `hookflow` (created when missing) and initdb/pg_ctl run through runuser.
# The service itself runs as the invoking user.
#
# Environment knobs besides HOOKFLOW_*:
#   HOOKFLOW_RUN_DRY=1   stop once the database is ready: print the URL and the
#                        "how to try it" block, stop PostgreSQL, exit 0 (no
#                        build/hookflow needed; used to test this script).
#   HOOKFLOW_BIN=path    the binary to serve (default build/hookflow).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
bin=${HOOKFLOW_BIN:-build/hookflow}
listen=${HOOKFLOW_LISTEN:-127.0.0.1:8080}

say() { printf 'run: %s\n' "$*" 2>/dev/null || true; } # never fails: the terminal may be gone
die() { printf 'run: %s\n' "$*" >&2; exit 1; }

how_to_try() {
	local base="http://${listen/#0.0.0.0:/127.0.0.1:}"
	local auth=""
	[ -n "${HOOKFLOW_API_TOKENS:-}" ] && auth=" -H \"Authorization: Bearer \$TOKEN\""
	cat <<EOF

How to try it (from another terminal; README.md "A first run" has the example
webhook, a small Python server answering on http://127.0.0.1:9000/steps):

  curl -X PUT $base/v1/workflows/demo$auth \\
       -H 'Content-Type: application/json' -d '{"url": "http://127.0.0.1:9000/steps"}'
  curl -X POST $base/v1/runs$auth \\
       -H 'Content-Type: application/json' \\
       -d '{"workflow": "demo", "run_id": "hello-1", "input": {"name": "world"}}'
  curl "$base/v1/runs/hello-1?wait_ms=10000"$auth
  curl $base/v1/runs/hello-1/steps$auth

Ctrl-C stops hookflow (it drains first)${1:+, then the embedded PostgreSQL}.

EOF
}

if [ -n "${HOOKFLOW_DATABASE_URL:-}" ]; then
	[ -x "$bin" ] || die "$bin is missing: build it with make (or use make run)"
	how_to_try
	exec "$bin" serve
fi

# --- The embedded PostgreSQL ------------------------------------------------

pgbin=/usr/lib/postgresql/15/bin
if [ ! -x "$pgbin/pg_ctl" ]; then
	pgbin=$(pg_config --bindir 2>/dev/null) || true
	if [ -z "$pgbin" ] || [ ! -x "$pgbin/pg_ctl" ]; then
		die "no PostgreSQL server binaries (pg_ctl) in /usr/lib/postgresql/15/bin or pg_config --bindir: run scripts/deps.sh"
	fi
fi
pg_major=$("$pgbin/pg_ctl" --version | awk '{ split($3, v, "."); print v[1] }')

state=$top/.hookflow
mkdir -p "$state"

# One `make run` per checkout at a time. A cluster found running while we hold the
# lock was left behind by a run that was killed: it is adopted, and stopped at exit.
exec 9>"$state/run.lock"
flock -n 9 || die "another make run is using $state (the lock $state/run.lock is held)"

# Who owns the cluster, and how to run PostgreSQL programs as that user.
if [ "$(id -u)" -eq 0 ]; then
	pguser=hookflow
	if ! getent passwd "$pguser" >/dev/null; then
		say "creating the system user $pguser to own the embedded PostgreSQL (it refuses to run as root)"
		useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "$pguser"
	fi
	as_pg() { (cd / && runuser -u "$pguser" -- "$@" 9>&-); }
	# The cluster's files must be reachable by $pguser. When the checkout is not
	# (a home directory of mode 0700, say), keep them outside it.
	pgroot=$state
	if ! as_pg test -x "$state"; then
		pgroot=/var/lib/hookflow/$(basename "$top")-$(printf '%s' "$top" | sha256sum | cut -c1-8)
		say "$pguser cannot reach $state: keeping the cluster in $pgroot"
		mkdir -p "$pgroot"
		chmod 755 "$pgroot"
	fi
else
	pguser=$(id -un)
	as_pg() { (cd / && "$@" 9>&-); }
	pgroot=$state
fi
pgdata=$pgroot/pgdata
pglog=$pgroot/postgres.log

# mkdir_private DIR: DIR exists, is a real directory of mode 0700 owned by $pguser.
mkdir_private() {
	[ -L "$1" ] && die "$1 is a symbolic link; remove it"
	[ -d "$1" ] || mkdir -m 700 "$1"
	[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$1"
	[ "$(stat -c %U "$1")" = "$pguser" ] || die "$1 belongs to $(stat -c %U "$1"), not $pguser"
	chmod 700 "$1"
}

# The unix socket path ($sockdir/.s.PGSQL.<port>) must fit in sun_path: 107 bytes,
# of which "/.s.PGSQL.NNNNN" takes 15.
sockdir=$pgroot/sock
if [ $((${#sockdir} + 15)) -gt 107 ]; then
	sockdir=/tmp/hookflow-$(id -un)-$(printf '%s' "$top" | sha256sum | cut -c1-12)
fi
mkdir_private "$sockdir"

# --- First use: initdb ---
if [ ! -f "$pgdata/PG_VERSION" ]; then
	[ -e "$pgdata" ] && die "$pgdata exists but is not a PostgreSQL cluster; remove it"
	say "creating the embedded PostgreSQL cluster in $pgdata"
	# initdb into a scratch directory moved into place at the end, so that an
	# interrupted first run leaves nothing half made.
	tmpdata=$pgdata.init
	rm -rf "$tmpdata"
	mkdir_private "$tmpdata"
	as_pg "$pgbin/initdb" --pgdata="$tmpdata" --username="$pguser" --auth=trust \
		--encoding=UTF8 --no-locale --no-instructions >"$pgroot/initdb.log" 2>&1 ||
		die "initdb failed; see $pgroot/initdb.log"
	cat >"$tmpdata/pg_hba.conf" <<EOF
# hookflow's embedded cluster (scripts/run.sh): its owner only, from this machine.
local all $pguser trust
host  all $pguser 127.0.0.1/32 trust
EOF
	printf "\n# hookflow: port, sockets, autovacuum and checkpoints, rewritten by scripts/run.sh on every start\ninclude_if_exists = 'hookflow.conf'\n" \
		>>"$tmpdata/postgresql.conf"
	[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$tmpdata/pg_hba.conf" "$tmpdata/postgresql.conf"
	mv "$tmpdata" "$pgdata"
fi
[ "$(cat "$pgdata/PG_VERSION")" = "$pg_major" ] ||
	die "$pgdata is a PostgreSQL $(cat "$pgdata/PG_VERSION") cluster but the binaries in $pgbin are $pg_major; remove $pgdata to start afresh"
if [ "$(id -u)" -eq 0 ] && [ "$(stat -c %U "$pgdata")" != "$pguser" ]; then
	chown -R "$pguser:" "$pgdata"
fi
[ "$(stat -c %U "$pgdata")" = "$pguser" ] || die "$pgdata belongs to $(stat -c %U "$pgdata"), not $pguser"

# --- Start (or adopt) the server; stop it on the way out ---
pg_running=0
stop_pg() {
	[ "$pg_running" = 1 ] || return 0
	say "stopping PostgreSQL"
	as_pg "$pgbin/pg_ctl" stop --pgdata="$pgdata" --mode=fast --wait >/dev/null ||
		say "pg_ctl stop failed; see $pglog"
	pg_running=0
}
trap stop_pg EXIT
# Until hookflow runs, a signal just ends the script (and the EXIT trap stops
# PostgreSQL if it started).
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if as_pg "$pgbin/pg_ctl" status --pgdata="$pgdata" >/dev/null 2>&1; then
	pg_running=1
	port=$(sed -n 4p "$pgdata/postmaster.pid")
	say "PostgreSQL left running by an earlier run was found on port $port: using it"
else
	port=54329
	while port_in_use "$port"; do
		port=$((port + 1))
		[ "$port" -le 54429 ] || die "no free TCP port on 127.0.0.1 in 54329..54429"
	done
	sq() { printf "'%s'" "${1//\'/\'\'}"; }
	cat >"$pgdata/hookflow.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = $(sq "$sockdir")
unix_socket_permissions = 0700
# README "Production PostgreSQL", "Autovacuum and checkpoints"
autovacuum_naptime = 10s
max_wal_size = 8GB
EOF
	[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$pgdata/hookflow.conf"
	[ -e "$pglog" ] || : >"$pglog"
	[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$pglog"
	say "starting PostgreSQL $pg_major on 127.0.0.1:$port (data $pgdata, log $pglog)"
	pg_running=1 # from here on, stop it on the way out even if the start fails half way
	as_pg "$pgbin/pg_ctl" start --pgdata="$pgdata" --log="$pglog" --wait --timeout=60 \
		--silent || {
		tail -n 20 "$pglog" >&2
		die "PostgreSQL did not start; see $pglog"
	}
fi

psql_pg() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$pguser" "$@"; }
if [ -z "$(psql_pg -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'hookflow'")" ]; then
	say "creating database hookflow"
	psql_pg -d postgres -c 'CREATE DATABASE hookflow' 9>&-
fi

export HOOKFLOW_DATABASE_URL="postgresql://$pguser@127.0.0.1:$port/hookflow"
say "database ready: HOOKFLOW_DATABASE_URL=$HOOKFLOW_DATABASE_URL"
say "  psql $HOOKFLOW_DATABASE_URL"

if [ "${HOOKFLOW_RUN_DRY:-}" = 1 ]; then
	how_to_try pg
	say "HOOKFLOW_RUN_DRY=1: not starting $bin"
	exit 0
fi

[ -x "$bin" ] || die "$bin is missing: build it with make (or use make run)"
how_to_try pg

# --- Serve, forwarding signals ---
svc=
signals=0
# shellcheck disable=SC2317 # called by the trap below
forward() {
	signals=$((signals + 1))
	[ -n "$svc" ] || return 0 # not started yet: handled right after the start
	if [ "$signals" -eq 1 ]; then
		kill -TERM "$svc" 2>/dev/null || true
		say "stopping hookflow (SIGTERM: it drains; signal again to kill it)"
	else
		kill -KILL "$svc" 2>/dev/null || true
		say "killing hookflow"
	fi
}
trap forward INT TERM HUP
setsid "$bin" serve 9>&- &
svc=$!
if [ "$signals" -gt 0 ]; then
	signals=0
	forward
fi

set +e
while :; do
	wait "$svc"
	rc=$?
	# A trap interrupts `wait` (status > 128) while hookflow may still be running.
	[ "$rc" -gt 128 ] && kill -0 "$svc" 2>/dev/null && continue
	break
done
set -e
trap - INT TERM HUP
say "hookflow exited with status $rc"
stop_pg
exit "$rc"
