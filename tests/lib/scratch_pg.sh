# shellcheck shell=bash
# tests/lib/scratch_pg.sh: the throwaway PostgreSQL of the suites that start
# their own (tests/contract, tests/e2e, tests/sdk). Source it, then:
#
#   scratch_pg_start DIR  initdb into DIR/pgdata and start the cluster,
#                         reachable only through its socket in DIR/sock, on a
#                         free port, durability off (a test's data), log in
#                         DIR/postgres.log; create database hookflow. Sets
#                         SCRATCH_PG_USER, SCRATCH_PG_SOCK, SCRATCH_PG_PORT
#                         and SCRATCH_PG_URL (a libpq URL of that database).
#                         DIR must be traversable by the cluster's owner.
#   scratch_pg_stop       stops it (fast) if scratch_pg_start started it;
#                         from an EXIT trap too, and more than once.
#   scratch_pg_as CMD...  runs CMD as the cluster's owner.
#   scratch_free_port     prints a free TCP port of 127.0.0.1 (for the
#                         suite's own servers too).
#
# HOOKFLOW_TEST_PG_BIN names the server binaries (SCRATCH_PG_BIN; default
# /usr/lib/postgresql/15/bin). PostgreSQL refuses to run as root: as root,
# the cluster belongs to the system user hookflow (created if missing) and
# its commands run through runuser. A failure returns non-zero with the
# reason on stderr.

SCRATCH_PG_BIN=${HOOKFLOW_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}
SCRATCH_PG_USER=$(id -un)
SCRATCH_PG_SOCK=
SCRATCH_PG_PORT=
SCRATCH_PG_URL=
scratch_pg_dir=

scratch_pg_as() {
	if [[ "$(id -u)" -eq 0 ]]; then
		(cd / && runuser -u "$SCRATCH_PG_USER" -- "$@")
	else
		"$@"
	fi
}

# A TCP port nobody listens on, at random in 20000..32767: below the kernel's
# ephemeral range (32768..60999 on Debian), where an outgoing connection of
# any process could hold the port by the time its server binds it.
scratch_free_port() {
	local p _
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 12768))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

scratch_pg_start() {
	local dir=$1
	if [[ ! -x "$SCRATCH_PG_BIN/initdb" ]]; then
		echo "no PostgreSQL server binaries in $SCRATCH_PG_BIN (make deps)" >&2
		return 1
	fi
	if [[ "$(id -u)" -eq 0 ]]; then
		SCRATCH_PG_USER=hookflow
		command -v runuser >/dev/null || {
			echo "runuser (util-linux) is needed when running as root" >&2
			return 1
		}
		getent passwd "$SCRATCH_PG_USER" >/dev/null ||
			useradd --system --no-create-home --user-group --shell /usr/sbin/nologin \
				"$SCRATCH_PG_USER" || return 1
	fi
	SCRATCH_PG_SOCK=$dir/sock
	mkdir -m 700 "$dir/pgdata" "$SCRATCH_PG_SOCK" || return 1
	: >"$dir/postgres.log"
	if [[ "$(id -u)" -eq 0 ]]; then
		chown "$SCRATCH_PG_USER:" "$dir/pgdata" "$SCRATCH_PG_SOCK" "$dir/postgres.log" || return 1
	fi
	scratch_pg_as "$SCRATCH_PG_BIN/initdb" -D "$dir/pgdata" -U "$SCRATCH_PG_USER" --auth=trust \
		--encoding=UTF8 --no-locale --no-sync --no-instructions >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		echo "initdb failed" >&2
		return 1
	}
	SCRATCH_PG_PORT=$(scratch_free_port) || {
		echo "no free port for PostgreSQL" >&2
		return 1
	}
	cat >>"$dir/pgdata/postgresql.conf" <<CONF

# tests/lib/scratch_pg.sh: a throwaway cluster, reachable only through its socket
listen_addresses = ''
port = $SCRATCH_PG_PORT
unix_socket_directories = '$SCRATCH_PG_SOCK'
unix_socket_permissions = 0700
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
CONF
	scratch_pg_dir=$dir
	scratch_pg_as "$SCRATCH_PG_BIN/pg_ctl" start -D "$dir/pgdata" -l "$dir/postgres.log" -w -t 60 \
		-s || {
		tail -n 20 "$dir/postgres.log" >&2
		echo "PostgreSQL did not start" >&2
		return 1
	}
	scratch_pg_as "$SCRATCH_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SCRATCH_PG_SOCK" \
		-p "$SCRATCH_PG_PORT" -U "$SCRATCH_PG_USER" -d postgres -c 'CREATE DATABASE hookflow' \
		>/dev/null || return 1
	# shellcheck disable=SC2034 # read by the script that sources this file
	SCRATCH_PG_URL="postgresql://$SCRATCH_PG_USER@/hookflow?host=$SCRATCH_PG_SOCK&port=$SCRATCH_PG_PORT"
}

scratch_pg_stop() {
	[[ -n "$scratch_pg_dir" ]] || return 0
	scratch_pg_as "$SCRATCH_PG_BIN/pg_ctl" stop -D "$scratch_pg_dir/pgdata" -m fast -w \
		>/dev/null 2>&1 || true
	scratch_pg_dir=
}
