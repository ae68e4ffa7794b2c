#!/usr/bin/env bash
# tests/e2e/run.sh (make e2e): the dashboard served at GET / by build/hookflow,
# end to end in headless Chromium.
#
#   1. Installs what is missing: Debian's chromium (apt-get update only when the
#      package lists do not know it or the install fails), and playwright-core,
#      pinned exactly in package.json / package-lock.json, with `npm ci` (never
#      `npx playwright install`: the browser is Debian's /usr/bin/chromium).
#   2. Starts a throwaway PostgreSQL 15 (initdb into a temporary directory, unix
#      socket only, in that directory, on a private port; as root it runs as the
#      system user `hookflow`, created when missing).
#   3. Starts build/hookflow serve twice on the same database, on free loopback
#      ports: one with HOOKFLOW_API_TOKENS (an admin token and a read-only one),
#      one without tokens; waits for /readyz on both.
#   4. Runs e2e.mjs: a small webhook (webhook.mjs), workflows and runs submitted
#      over the API, then the dashboard driven by playwright-core; each check is
#      asserted through the page and through the API.
#   5. Cleans everything up (trap), whatever happened.
#
# Prints one line per check and ends with "e2e: N passed, M failed"; exits non-zero
# on any failure. Screenshots in build/e2e: dashboard.png (the run list),
# run.png (one run's details and step history), pending.png (a pending step and
# its heartbeat), children.png (a parent waiting for its children), child.png (a
# child and its parent), waiting-keys.png and woken.png (a wait on two keys, and
# the key that woke it), schedules.png, schedule.png, schedule-paused.png and
# schedule-read.png (the Schedules page, a cron schedule's next fire times, a
# paused schedule with a triggered run, the same page for a read token),
# run-schedule.png (a run started by a schedule), charts.png (throughput, latency
# and errors), workflow.png and workflow-read.png (a workflow's settings, runs by
# status, step figures and charts; the same for a read token), timeline.png (a
# run's attempts as bars, one attempt's payload and answer), callbacks.png (a
# refused callback's deliveries), run-signal.png (a signal sent from the run
# page, the wait drawn), run-read.png (a waiting run for a read token), and the
# other pages' (token, signals, dead-letters, workflows, endpoints).
#
# Knobs: HOOKFLOW_BIN (default build/hookflow), E2E_KEEP=1 keeps the temporary
# directory (logs, database) for a look after a failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top"

bin=${HOOKFLOW_BIN:-$top/build/hookflow}
browser=/usr/bin/chromium
out=$top/build/e2e
# shellcheck source=tests/lib/scratch_pg.sh
. "$top/tests/lib/scratch_pg.sh"

say() { printf 'e2e: %s\n' "$*"; }
die() { printf 'e2e: %s\n' "$*" >&2; exit 1; }

[ -x "$bin" ] || die "$bin is missing: build it with make (make e2e does)"
[ -x "$SCRATCH_PG_BIN/initdb" ] || die "no PostgreSQL 15 server binaries in $SCRATCH_PG_BIN: run scripts/deps.sh"
for tool in node npm curl; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is needed and missing"
done

# --- 1. installs (not part of the timing) -------------------------------------

if [ ! -x "$browser" ]; then
	[ "$(id -u)" -eq 0 ] ||
		die "$browser is missing; as root: apt-get update && apt-get install -y --no-install-recommends chromium"
	install_chromium() {
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
	}
	say "installing Debian's chromium"
	if ! apt-cache show chromium >/dev/null 2>&1; then
		apt-get update -q
	fi
	install_chromium || { apt-get update -q && install_chromium; }
	[ -x "$browser" ] || die "the chromium package did not provide $browser"
fi

pinned=$(node -p 'require(process.argv[1]).dependencies["playwright-core"]' "$here/package.json")
installed=$(node -p 'try { require(process.argv[1]).version } catch (e) { "" }' \
	"$here/node_modules/playwright-core/package.json")
if [ "$installed" != "$pinned" ]; then
	say "npm ci (playwright-core $pinned)"
	(cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

# --- cleanup --------------------------------------------------------------------

t0_ms=$(date +%s%3N)
tmp=
svc=
svc_open=

# Stops a hookflow started here (SIGTERM, then SIGKILL after 15 s).
stop_hookflow() {
	local pid=$1
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		local deadline=$((SECONDS + 15))
		while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	stop_hookflow "$svc"
	stop_hookflow "$svc_open"
	scratch_pg_stop
	if [ -n "$tmp" ] && [ -d "$tmp" ]; then
		if [ "$rc" -ne 0 ]; then
			if [ -s "$tmp/hookflow.log" ]; then
				echo "e2e: last lines of the hookflow log:" >&2
				tail -n 30 "$tmp/hookflow.log" >&2 || true
			fi
			if [ -s "$tmp/postgres.log" ]; then
				echo "e2e: last lines of the PostgreSQL log:" >&2
				tail -n 10 "$tmp/postgres.log" >&2 || true
			fi
		fi
		if [ "${E2E_KEEP:-}" = 1 ]; then
			echo "e2e: kept $tmp" >&2
		else
			rm -rf "$tmp"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

tmp=$(mktemp -d /tmp/hookflow-e2e.XXXXXX)
chmod 755 "$tmp"

# --- 2. PostgreSQL ------------------------------------------------------------------

scratch_pg_start "$tmp" || die "PostgreSQL did not start"
say "PostgreSQL on $SCRATCH_PG_SOCK port $SCRATCH_PG_PORT"

# --- 3. hookflow ---------------------------------------------------------------------

# Two instances on the same database: one with API tokens (an admin token and
# a read-only one), and one without tokens, where only its own loopback host
# and origin are served.
db_url=$SCRATCH_PG_URL
port=$(scratch_free_port) || die "no free port for hookflow"
token="e2e-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
read_token="e2e-read-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
base="http://127.0.0.1:$port"
HOOKFLOW_DATABASE_URL="$db_url" \
	HOOKFLOW_LISTEN="127.0.0.1:$port" \
	HOOKFLOW_API_TOKENS="$token,read:$read_token" \
	HOOKFLOW_PUBLIC_URL="$base" \
	HOOKFLOW_LOG_LEVEL=info \
	"$bin" serve >"$tmp/hookflow.log" 2>&1 &
svc=$!
open_port=$(scratch_free_port) || die "no free port for the second hookflow"
while [ "$open_port" = "$port" ]; do open_port=$(scratch_free_port) || die "no free port"; done
HOOKFLOW_DATABASE_URL="$db_url" \
	HOOKFLOW_LISTEN="127.0.0.1:$open_port" \
	HOOKFLOW_LOG_LEVEL=info \
	"$bin" serve >"$tmp/hookflow-open.log" 2>&1 &
svc_open=$!

wait_ready() { # pid url
	local deadline=$((SECONDS + 30))
	until curl -fsS -o /dev/null --max-time 2 "$2/readyz" 2>/dev/null; do
		kill -0 "$1" 2>/dev/null || die "hookflow exited during start-up ($2)"
		[ "$SECONDS" -lt "$deadline" ] || die "hookflow not ready on $2 within 30 s"
		sleep 0.1
	done
}
wait_ready "$svc" "$base"
wait_ready "$svc_open" "http://127.0.0.1:$open_port"
say "hookflow ready on $base (API tokens on) and on port $open_port (no tokens)"

# --- 4. the browser checks ---------------------------------------------------------------

mkdir -p "$out" "$tmp/profile"
set +e
E2E_T0_MS=$t0_ms E2E_BASE_URL=$base E2E_TOKEN=$token E2E_READ_TOKEN=$read_token \
	E2E_OPEN_PORT=$open_port E2E_CHROMIUM=$browser E2E_PROFILE=$tmp/profile \
	E2E_OUT=$out E2E_DASHBOARD=$top/dashboard/index.html \
	node "$here/e2e.mjs"
rc=$?
set -e
for pid in "$svc" "$svc_open"; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "e2e: a hookflow died during the checks" >&2
		rc=1
	fi
done
exit "$rc"
