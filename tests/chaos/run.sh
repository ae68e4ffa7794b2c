#!/usr/bin/env bash
# hookflow's chaos test (tests/chaos/chaos.py): runs of 5 steps under load while
# the service is SIGKILLed and restarted, PostgreSQL is restarted under it and
# the webhook answers 500s, hangs and connection resets; then checks that every
# run ended exactly once, as the webhook decided, with its callback.
#
#   tests/chaos/run.sh short   200 runs, 1 SIGKILL, 1 PostgreSQL restart (~1-2 min; make test)
#   tests/chaos/run.sh long    1,000 runs, 3 SIGKILLs, 1 PostgreSQL restart (make chaos)
#
# Environment: HOOKFLOW_BIN (default build/hookflow), CHAOS_SEED, CHAOS_RUNS,
# CHAOS_KEEP=1 (keep logs on success), CHAOS_LOG_LEVEL, HOOKFLOW_TEST_PG_BIN
# (default /usr/lib/postgresql/15/bin), HOOKFLOW_TEST_PG_USER (PostgreSQL's
# user when run as root; default hookflow-test, created when missing).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

mode="${1:-short}"
case "$mode" in
short | long) ;;
*)
	echo "usage: $0 short|long" >&2
	exit 2
	;;
esac

py=/usr/bin/python3
export HOOKFLOW_BIN="${HOOKFLOW_BIN:-$root/build/hookflow}"
export HOOKFLOW_TEST_PG_BIN="${HOOKFLOW_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}"
export PYTHONDONTWRITEBYTECODE=1

die() {
	echo "chaos: $*" >&2
	exit 1
}
[[ -x "$py" ]] || die "$py not found (apt-get install python3)"
[[ -x "$HOOKFLOW_TEST_PG_BIN/initdb" ]] || die "no PostgreSQL server binaries in $HOOKFLOW_TEST_PG_BIN"
[[ -x "$HOOKFLOW_BIN" ]] || die "service binary $HOOKFLOW_BIN missing: run make first"

# PostgreSQL refuses to run as root: the harness runs it as an unprivileged user.
if [[ "$(id -u)" -eq 0 ]]; then
	export HOOKFLOW_TEST_PG_USER="${HOOKFLOW_TEST_PG_USER:-hookflow-test}"
	if ! id -u "$HOOKFLOW_TEST_PG_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$HOOKFLOW_TEST_PG_USER"
	fi
fi

# ASan: leaks and errors fail the service's exit code, which the test checks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

exec "$py" tests/chaos/chaos.py --mode "$mode"
