#!/usr/bin/env bash
# The SDKs (sdk/typescript, sdk/python) against the running service (`make sdk-test`,
# part of `make test`):
#
#   1. npm ci (sdk/typescript/package-lock.json)
#   2. sdk/generate.sh --check: the committed generated code is what the spec gives;
#      tsc: the SDK into dist/, its tests into build/test/
#   3. a throwaway PostgreSQL and build/hookflow serve with an admin and a read token
#   4. node --test: the TypeScript SDK's tests (sdk/typescript/test), then pytest: the
#      Python SDK's (sdk/python/tests), each against that service, with webhooks
#      built on the SDKs' own handlers
#
# Environment: HOOKFLOW_BIN (default build/hookflow), HOOKFLOW_TEST_PG_BIN (default
# /usr/lib/postgresql/15/bin), SDK_TESTS (default "typescript python"),
# HF_SDK_SKIP_NPM_CI=1 reuses sdk/typescript/node_modules as it is, KEEP_LOGS=1
# keeps the temp dir. As root, PostgreSQL runs as the system user `hookflow`.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
bin=${HOOKFLOW_BIN:-$top/build/hookflow}
# shellcheck source=tests/lib/scratch_pg.sh
. "$top/tests/lib/scratch_pg.sh"
suites=${SDK_TESTS:-typescript python}
ts=$top/sdk/typescript
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
t0=$(date +%s)

say() { printf '== sdk [%3ds]: %s\n' "$(($(date +%s) - t0))" "$*"; }
die() { printf 'sdk: FAIL: %s\n' "$*" >&2; exit 1; }

[ -x "$bin" ] || die "$bin is missing: run make first"
[ -x "$SCRATCH_PG_BIN/initdb" ] || die "no PostgreSQL server binaries in $SCRATCH_PG_BIN (make deps)"
{ command -v node && command -v npm; } >/dev/null || die "node and npm are needed (Node 20 or later)"
"$py" -c 'import pytest' 2>/dev/null || die "pytest is needed (python3-pytest)"

# ---- generated code and builds ---------------------------------------------------

cd "$ts"
if [ "${HF_SDK_SKIP_NPM_CI:-}" != 1 ] || [ ! -d node_modules ]; then
	say "npm ci (sdk/typescript)"
	npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
cd "$top"
say "sdk/generate.sh --check"
sdk/generate.sh --check

cd "$ts"
say "tsc: the SDK (dist/) and its tests (build/test/)"
rm -rf dist build
npx --no-install tsc -p tsconfig.json
npx --no-install tsc -p tsconfig.test.json
cd "$top"

# ---- PostgreSQL and hookflow ------------------------------------------------------

tmp=$(mktemp -d /tmp/hookflow-sdk.XXXXXX)
chmod 755 "$tmp"
svc_pid=""

cleanup() {
	local rc=$?
	if [ -n "$svc_pid" ] && kill -0 "$svc_pid" 2>/dev/null; then
		kill -TERM "$svc_pid" 2>/dev/null || true
		wait "$svc_pid" 2>/dev/null || true
	fi
	scratch_pg_stop
	if [ "$rc" -ne 0 ] && [ -f "$tmp/hookflow.log" ]; then
		echo "---- last lines of hookflow.log" >&2
		tail -n 40 "$tmp/hookflow.log" >&2
	fi
	if [ "${KEEP_LOGS:-}" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scratch_pg_start "$tmp" || die "PostgreSQL did not start"

token=sdk-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
read_token=sdk-read-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
for _try in 1 2 3; do
	hfport=$(scratch_free_port)
	HOOKFLOW_DATABASE_URL="$SCRATCH_PG_URL" \
		HOOKFLOW_LISTEN=127.0.0.1:$hfport HOOKFLOW_API_TOKENS="$token,read:$read_token" \
		HOOKFLOW_SHUTDOWN_GRACE_MS=1000 HOOKFLOW_LOG_LEVEL=info \
		"$bin" serve >"$tmp/hookflow.log" 2>&1 &
	svc_pid=$!
	ready=0
	for _i in $(seq 1 300); do
		kill -0 "$svc_pid" 2>/dev/null || break
		if curl -fsS -o /dev/null "http://127.0.0.1:$hfport/readyz" 2>/dev/null; then ready=1; break; fi
		sleep 0.1
	done
	[ "$ready" = 1 ] && break
	if grep -q "cannot listen" "$tmp/hookflow.log"; then continue; fi # the port was taken meanwhile
	die "hookflow did not become ready"
done
[ "$ready" = 1 ] || die "hookflow: no free port"
export HF_BASE_URL=http://127.0.0.1:$hfport HF_TOKEN=$token HF_READ_TOKEN=$read_token
say "hookflow ready on $HF_BASE_URL"

# ---- the suites ---------------------------------------------------------------------

declare -a names=() results=()
failed=0
for suite in $suites; do
	say "$suite"
	case $suite in
	typescript)
		(cd "$ts" && node --test --test-reporter=spec --test-timeout=120000 build/test/) && r=pass || r=FAIL
		;;
	python)
		(cd "$top/sdk/python" && "$py" -m pytest -q -p no:cacheprovider tests) && r=pass || r=FAIL
		;;
	*) die "unknown suite $suite" ;;
	esac
	[ "$r" = pass ] || failed=1
	names+=("$suite")
	results+=("$r")
done

echo
echo "== sdk summary ($(($(date +%s) - t0)) s)"
passed=0 nfail=0
for i in "${!names[@]}"; do
	printf '   %-11s %s\n' "${names[$i]}" "${results[$i]}"
	if [ "${results[$i]}" = pass ]; then passed=$((passed + 1)); else nfail=$((nfail + 1)); fi
done
echo "sdk: $passed passed, $nfail failed"
exit "$failed"
