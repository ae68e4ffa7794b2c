#!/usr/bin/env bash
# The OpenAPI contract of hookflow, tested against the running service
# (`make contract`, part of `make test`):
#
#   1. npm ci (pinned versions of package-lock.json)
#   2. redocly lint of openapi/openapi.yaml
#   3. redocly bundle (JSON for the validators) and openapi-typescript (the
#      client's types) into tests/contract/generated/
#   4. tsc: type-checks the scenario against the generated client, compiles it
#   5. static checks of the document (routes of handlers/routes.c, closed schemas)
#   6. a throwaway PostgreSQL, then build/hookflow serve three ways:
#        main    no API tokens: the full scenario through the generated client
#        auth    HOOKFLOW_API_TOKENS set: 401s, delivery tokens, a read token's 403s
#        dbdown  the same service with PostgreSQL stopped: 503s
#   7. coverage: every status documented for an operation was observed
#
# Environment:
#   HOOKFLOW_BIN               service binary (default build/hookflow)
#   HOOKFLOW_TEST_PG_BIN       PostgreSQL server binaries (default /usr/lib/postgresql/15/bin)
#   HF_CONTRACT_SKIP_NPM_CI=1  reuse tests/contract/node_modules as it is (local iteration)
#   HF_CONTRACT_KEEP=1         keep the temp dir (logs, observations) after the run
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${HOOKFLOW_BIN:-$root/build/hookflow}"
# shellcheck source=tests/lib/scratch_pg.sh
. "$root/tests/lib/scratch_pg.sh"
spec_yaml="$root/openapi/openapi.yaml"
gen="$here/generated"
started=$(date +%s)

say() { printf '== contract [%3d s]: %s\n' "$((SECONDS))" "$*"; }
die() { printf 'contract: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (Node 20 or later)"
command -v npm >/dev/null || die "npm is not installed"
[[ -x "$bin" ]] || die "service binary $bin missing: run make first"
[[ -x "$SCRATCH_PG_BIN/initdb" ]] || die "no PostgreSQL server binaries in $SCRATCH_PG_BIN (make deps)"

# ---- toolchain and document ------------------------------------------------

cd "$here"
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
# The lock file may name no download host but the configured registry's.
registry_host="$(npm config get registry | sed -E 's#^[a-z]+://([^/]+).*#\1#')"
other_hosts="$(grep -o '"resolved": *"[a-z+]*://[^/"]*' package-lock.json | sed -E 's#.*://##' |
	sort -u | grep -v -x -F "$registry_host" || true)"
[[ -z "$other_hosts" ]] || die "package-lock.json downloads from other hosts: $other_hosts"
if [[ "${HF_CONTRACT_SKIP_NPM_CI:-}" != 1 || ! -d node_modules ]]; then
	say "npm ci"
	npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
# Redocly prints a banner about Node 20's end of life on every call; keep the rest.
quiet_banner() { grep -v -e '[║╔╚]' -e '^\s*$' || true; }

say "redocly lint openapi/openapi.yaml"
npx --no-install redocly lint --config lint.redocly.yaml "$spec_yaml" 2>&1 | quiet_banner ||
	die "redocly lint failed"

rm -rf "$gen"
mkdir -p "$gen"
say "generate: bundled spec and TypeScript client types"
npx --no-install redocly bundle "$spec_yaml" --ext json -o "$gen/openapi.json" 2>&1 | quiet_banner ||
	die "redocly bundle failed"
if ! npx --no-install openapi-typescript "$spec_yaml" -o "$gen/schema.ts" --default-non-nullable false \
	>"$gen/openapi-typescript.log" 2>&1; then
	cat "$gen/openapi-typescript.log" >&2
	die "openapi-typescript failed"
fi
tail -n 1 "$gen/openapi-typescript.log"

say "tsc: type-check the scenario against the generated client"
npx --no-install tsc -p tsconfig.json || die "tsc failed"

# ---- the scenario's environment --------------------------------------------

tmp="$(mktemp -d /tmp/hookflow-contract.XXXXXX)"
chmod 755 "$tmp"
svc_pid=""

stop_service() {
	if [[ -n "$svc_pid" ]] && kill -0 "$svc_pid" 2>/dev/null; then
		kill -TERM "$svc_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$svc_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$svc_pid" 2>/dev/null || true
		wait "$svc_pid" 2>/dev/null || true
	fi
	svc_pid=""
}

cleanup() {
	stop_service
	scratch_pg_stop
	if [[ "${HF_CONTRACT_KEEP:-}" == 1 ]]; then
		echo "contract: kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export HF_SPEC_JSON="$gen/openapi.json" HF_SPEC_YAML="$spec_yaml" HF_ROUTES_C="$root/handlers/routes.c"
export HF_OBS_FILE="$tmp/observations.jsonl"
: >"$HF_OBS_FILE"

declare -a phase_names=() phase_results=()
failed=0
run_phase() { # name file
	local name="$1" file="$2"
	say "phase $name"
	if node --test --test-reporter=spec --test-timeout=120000 "$gen/dist/src/$file"; then
		phase_results+=("pass")
	else
		phase_results+=("FAIL")
		failed=1
	fi
	phase_names+=("$name")
}

run_phase static static.test.js

# ---- PostgreSQL --------------------------------------------------------------

say "start PostgreSQL (initdb in $tmp)"
scratch_pg_start "$tmp" || die "PostgreSQL did not start"
db_url=$SCRATCH_PG_URL

# ---- the service ---------------------------------------------------------------

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

start_service() { # name [KEY=VALUE...]
	local name="$1"
	shift
	local log="$tmp/hookflow-$name.log" port
	for _try in 1 2 3; do
		port="$(free_port)"
		env HOOKFLOW_DATABASE_URL="$db_url" HOOKFLOW_LISTEN="127.0.0.1:$port" \
			HOOKFLOW_SHUTDOWN_GRACE_MS=1000 HOOKFLOW_LOG_LEVEL=info "$@" \
			"$bin" serve >"$log" 2>&1 &
		svc_pid=$!
		local deadline=$((SECONDS + 30))
		while ((SECONDS < deadline)); do
			if ! kill -0 "$svc_pid" 2>/dev/null; then break; fi
			if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" 2>/dev/null)" == 200 ]]; then
				export HF_BASE_URL="http://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		if grep -q "cannot listen" "$log" 2>/dev/null; then
			stop_service
			continue # the port was taken meanwhile: another one
		fi
		tail -n 30 "$log" >&2
		die "hookflow ($name) did not become ready"
	done
	die "hookflow ($name): no free port"
}

token="contract-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

say "start hookflow without API tokens"
start_service main
run_phase main main.test.js
stop_service

read_token="contract-read-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

say "start hookflow with HOOKFLOW_API_TOKENS (an admin token and a read one)"
start_service auth HOOKFLOW_API_TOKENS="$token,read:$read_token"
export HF_API_TOKEN="$token" HF_READ_TOKEN="$read_token"
run_phase auth auth.test.js

say "stop PostgreSQL under the running service"
scratch_pg_stop
run_phase dbdown dbdown.test.js
stop_service

run_phase coverage coverage.test.js

# ---- summary -------------------------------------------------------------------

if [[ "$failed" -ne 0 ]]; then
	for f in "$tmp"/hookflow-*.log; do
		echo "---- last lines of $(basename "$f")"
		tail -n 15 "$f"
	done
fi
echo
echo "== contract summary ($(($(date +%s) - started)) s)"
passed=0
nfail=0
for i in "${!phase_names[@]}"; do
	printf '   %-9s %s\n' "${phase_names[$i]}" "${phase_results[$i]}"
	if [[ "${phase_results[$i]}" == pass ]]; then passed=$((passed + 1)); else nfail=$((nfail + 1)); fi
done
echo "contract: $passed passed, $nfail failed"
exit "$failed"
