#!/usr/bin/env bash
# Runs the integration suite (tests/integration) against the real service
# binary, a throwaway PostgreSQL and real webhook servers on loopback.
#
#   scripts/integration.sh [pytest args...]      e.g. -k cancel -x
#
# Environment:
#   HOOKFLOW_BIN            service binary (default build/hookflow)
#   HOOKFLOW_TEST_ARGS      extra pytest arguments (split on white space)
#   HOOKFLOW_TEST_PG_BIN    PostgreSQL server binaries (default /usr/lib/postgresql/15/bin)
#   HOOKFLOW_TEST_PG_USER   unprivileged user for PostgreSQL when run as root
#                           (default hookflow-test; created when missing)
#   HOOKFLOW_TEST_LOG_DIR   keep every service log there (default: a temp dir,
#                           kept and printed only when a test fails)
#   HOOKFLOW_TEST_PGBOUNCER=1  every instance goes through a PgBouncer in
#                           transaction pooling mode (`make integration-pgbouncer`);
#                           HOOKFLOW_TEST_PGBOUNCER_POOL: its server connections
#                           per database (default 4); HOOKFLOW_TEST_PGBOUNCER_BIN
#                           (default /usr/sbin/pgbouncer)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Debian's interpreter and its python3-pytest: the pyenv python3 on PATH has no pytest.
py=/usr/bin/python3

export HOOKFLOW_BIN="${HOOKFLOW_BIN:-$root/build/hookflow}"
export HOOKFLOW_TEST_PG_BIN="${HOOKFLOW_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}"

die() { echo "integration.sh: $*" >&2; exit 1; }

[[ -x "$py" ]] || die "$py not found (apt-get install python3)"
"$py" -c 'import pytest' 2>/dev/null || die "pytest missing for $py (apt-get install python3-pytest)"
[[ -x "$HOOKFLOW_TEST_PG_BIN/initdb" ]] || die "no PostgreSQL server binaries in $HOOKFLOW_TEST_PG_BIN"
[[ -x "$HOOKFLOW_BIN" ]] || die "service binary $HOOKFLOW_BIN missing: run make first"
[[ -x "${HOOKFLOW_TEST_PGBOUNCER_BIN:-/usr/sbin/pgbouncer}" ]] ||
	die "no pgbouncer at ${HOOKFLOW_TEST_PGBOUNCER_BIN:-/usr/sbin/pgbouncer} (scripts/deps.sh installs Debian's pgbouncer)"

# PostgreSQL refuses to run as root: the harness runs initdb/pg_ctl as an
# unprivileged user (runuser -u), which must exist.
if [[ "$(id -u)" -eq 0 ]]; then
	export HOOKFLOW_TEST_PG_USER="${HOOKFLOW_TEST_PG_USER:-hookflow-test}"
	if ! id -u "$HOOKFLOW_TEST_PG_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$HOOKFLOW_TEST_PG_USER"
	fi
	command -v runuser >/dev/null || die "runuser (util-linux) is needed when running as root"
fi

# Some tests verify signatures with the Standard Webhooks project's own
# library (npm standardwebhooks, tests/integration/node), and the trace tests
# decode OTLP with the OpenTelemetry project's definitions and instrument the
# example webhook with its Node SDK (tests/otel): install the pinned versions
# of each package-lock.json when they are missing or the lock changed.
command -v node >/dev/null || die "node is not installed (Node 20 or later; scripts/deps.sh)"
command -v npm >/dev/null || die "npm is not installed (scripts/deps.sh)"
for node_dir in "$root/tests/integration/node" "$root/tests/otel"; do
	if [[ ! -f "$node_dir/node_modules/.package-lock.json" ||
		"$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]]; then
		echo "integration.sh: npm ci in ${node_dir#"$root"/}" >&2
		(cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
			die "npm ci failed in $node_dir"
	fi
done
# test_traces runs examples/node/webhook.js, which needs @hookflow/sdk built.
"$root/scripts/node-sdk.sh" || die "the node SDK could not be built (scripts/node-sdk.sh)"

extra=()
if [[ -n "${HOOKFLOW_TEST_ARGS:-}" ]]; then
	read -r -a extra <<<"$HOOKFLOW_TEST_ARGS"
fi

export PYTHONDONTWRITEBYTECODE=1

# With Debian's python3-pytest-xdist the suite runs in HOOKFLOW_TEST_JOBS
# processes (default 3; each has its own PostgreSQL cluster), then the tests
# marked `serial` (load- or time-sensitive) run alone. pytest's exit code 5
# ("no tests collected", e.g. when -k selects nothing in one part) is not a
# failure. -rs: the summary names every skipped test with its reason, so
# that a log says what was not run and why.
jobs="${HOOKFLOW_TEST_JOBS:-3}"
run() {
	local rc=0
	"$py" -m pytest -q -rs -p no:cacheprovider tests/integration "$@" || rc=$?
	[[ $rc -eq 5 ]] && rc=0
	return $rc
}
if [[ "$jobs" -gt 1 ]] && "$py" -c 'import xdist' 2>/dev/null; then
	rc=0
	run -n "$jobs" -m "not serial" "${extra[@]}" "$@" || rc=$?
	run -m serial "${extra[@]}" "$@" || rc=$?
	exit $rc
fi
run "${extra[@]}" "$@"
