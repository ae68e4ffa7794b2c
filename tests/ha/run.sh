#!/usr/bin/env bash
# hookflow's high-availability tests (tests/ha): a pg_auto_failover formation on
# loopback (a monitor, a primary and its synchronous standby), two hookflow
# instances on its multi-host URL, several hundred runs in flight, then a
# failover (the primary node SIGKILLed) and a planned switchover. `make ha-test`.
#
# Environment: HOOKFLOW_BIN (default build/hookflow; make ha-test uses the ASan
# build), HOOKFLOW_HA_RUNS (runs in flight, default 300), HOOKFLOW_TEST_KEEP=1
# (keep the logs on success), HOOKFLOW_HA_MANAGER_DEFAULTS=1 (pg_auto_failover's
# own timings instead of the faster ones of tests/ha/autofailover.py), HOOKFLOW_TEST_PG_BIN (default
# /usr/lib/postgresql/15/bin), HOOKFLOW_TEST_PG_USER (the user PostgreSQL and
# pg_autoctl run as when run as root; default hookflow-test, created when
# missing). Extra arguments go to pytest (e.g. -k switchover).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

py=/usr/bin/python3
export HOOKFLOW_BIN="${HOOKFLOW_BIN:-$root/build/hookflow}"
export HOOKFLOW_TEST_PG_BIN="${HOOKFLOW_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}"
export PYTHONDONTWRITEBYTECODE=1

die() {
	echo "ha-test: $*" >&2
	exit 1
}
[[ -x "$py" ]] || die "$py not found (apt-get install python3)"
"$py" -c 'import pytest' 2>/dev/null || die "pytest missing for $py (apt-get install python3-pytest)"
[[ -x "$HOOKFLOW_TEST_PG_BIN/initdb" ]] || die "no PostgreSQL server binaries in $HOOKFLOW_TEST_PG_BIN"
command -v pg_autoctl >/dev/null ||
	die "pg_autoctl not found (apt-get install pg-auto-failover-cli postgresql-15-auto-failover)"
[[ -f /usr/share/postgresql/15/extension/pgautofailover.control ]] ||
	die "the pgautofailover extension is missing (apt-get install postgresql-15-auto-failover)"
[[ -x "$HOOKFLOW_BIN" ]] || die "service binary $HOOKFLOW_BIN missing: run make first"

# pg_autoctl and PostgreSQL refuse to run as root: the tests run them as an
# unprivileged user (tests/integration/harness.py, pg_run_as).
if [[ "$(id -u)" -eq 0 ]]; then
	export HOOKFLOW_TEST_PG_USER="${HOOKFLOW_TEST_PG_USER:-hookflow-test}"
	if ! id -u "$HOOKFLOW_TEST_PG_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$HOOKFLOW_TEST_PG_USER"
	fi
	command -v runuser >/dev/null || die "runuser (util-linux) is needed when running as root"
fi

# ASan: leaks and errors fail the service's exit code, which the tests check.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

exec "$py" -m pytest -q -s -p no:cacheprovider tests/ha "$@"
