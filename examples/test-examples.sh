#!/usr/bin/env bash
# End-to-end check of the example webhooks (examples/python, examples/node):
# starts a throwaway PostgreSQL, build/hookflow (with an API token) and each
# example in turn, and walks through what their READMEs show:
#
#   register the workflow (signed, with a callback), submit a run whose step 0
#   fails its first attempt after memoizing its quote, see the run wait for its
#   signal, send the signal, long-poll the run to `succeeded` and check that the
#   retry reused the memoized quote, that the callback arrived, and that the
#   webhook refuses unsigned, wrongly signed and stale requests with 401;
#   then `hookflow check-webhook` passes every item of its conformance check.
#
# Exit status 0 when every example passed. Needs build/hookflow (make), the
# PostgreSQL 15 server binaries, python3, node (skipped with a message when
# missing) and curl. As root, PostgreSQL runs as the system user `hookflow`
# (created when missing), like scripts/run.sh. The examples use the SDKs: the
# Python one imports sdk/python, the node one needs sdk/typescript built and
# linked (npm ci there and in examples/node, tsc), which this script does.
#
# Environment: HOOKFLOW_BIN (default build/hookflow), HOOKFLOW_TEST_PG_BIN
# (default /usr/lib/postgresql/15/bin), EXAMPLES (default "python node"),
# KEEP_LOGS=1 keeps the temp dir with every log.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
bin=${HOOKFLOW_BIN:-$top/build/hookflow}
pgbin=${HOOKFLOW_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}
examples=${EXAMPLES:-python node}
# Debian's interpreter when there is one: a pyenv shim on PATH costs a second a call.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

say() { printf 'test-examples: %s\n' "$*"; }
die() { printf 'test-examples: FAIL: %s\n' "$*" >&2; exit 1; }

[ -x "$bin" ] || die "$bin is missing: run make first"
[ -x "$pgbin/initdb" ] || die "no PostgreSQL server binaries in $pgbin (scripts/deps.sh)"
command -v curl >/dev/null || die "curl is missing"

tmp=$(mktemp -d /tmp/hookflow-examples.XXXXXX)
chmod 755 "$tmp"
pids=()
pg_started=0

if [ "$(id -u)" -eq 0 ]; then
	pguser=hookflow
	getent passwd "$pguser" >/dev/null ||
		useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "$pguser"
	as_pg() { (cd / && runuser -u "$pguser" -- "$@"); }
else
	pguser=$(id -un)
	as_pg() { (cd / && "$@"); }
fi

cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ "$pg_started" = 1 ]; then
		as_pg "$pgbin/pg_ctl" stop -D "$tmp/pgdata" -m fast -w >/dev/null 2>&1 || true
	fi
	if [ "$rc" -ne 0 ] || [ "${KEEP_LOGS:-}" = 1 ]; then
		for f in "$tmp"/*.log; do
			[ -f "$f" ] || continue
			echo "---- $f (last 30 lines)" >&2
			tail -n 30 "$f" >&2
		done
	fi
	if [ "${KEEP_LOGS:-}" = 1 ]; then say "logs kept in $tmp"; else rm -rf "$tmp"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
	"$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# json FILE EXPR: evaluates the Python expression EXPR on the JSON in FILE (as j).
json() { "$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

wait_http() { # URL SECONDS: until URL answers 2xx
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# --- PostgreSQL ---
pgport=$(free_port)
mkdir -m 700 "$tmp/pgdata" "$tmp/sock"
[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$tmp/pgdata" "$tmp/sock"
as_pg "$pgbin/initdb" -D "$tmp/pgdata" -U "$pguser" --auth=trust --encoding=UTF8 --no-locale \
	>"$tmp/initdb.log" 2>&1 || die "initdb failed"
touch "$tmp/postgres.log"
[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$tmp/postgres.log"
pg_started=1
as_pg "$pgbin/pg_ctl" start -D "$tmp/pgdata" -l "$tmp/postgres.log" -w -t 60 -s \
	-o "-c listen_addresses=127.0.0.1 -p $pgport -k $tmp/sock -c fsync=off" ||
	die "PostgreSQL did not start"
"$pgbin/psql" -X -q -h 127.0.0.1 -p "$pgport" -U "$pguser" -d postgres -c 'CREATE DATABASE hookflow'

# --- hookflow ---
hfport=$(free_port)
token=examples-test-token-$RANDOM$RANDOM
base=http://127.0.0.1:$hfport
HOOKFLOW_DATABASE_URL="postgresql://$pguser@127.0.0.1:$pgport/hookflow" \
	HOOKFLOW_LISTEN=127.0.0.1:$hfport HOOKFLOW_API_TOKENS=$token \
	"$bin" serve >"$tmp/hookflow.log" 2>&1 &
pids+=($!)
wait_http "$base/readyz" 30 || die "hookflow not ready on $base"
say "hookflow ready on $base, PostgreSQL on 127.0.0.1:$pgport"

api() { # METHOD PATH [BODY]: the answer in $tmp/out.json, the status in $status
	local args=(-sS -o "$tmp/out.json" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $token")
	[ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' -d "$3")
	status=$(curl "${args[@]}" "$base$2")
}

# sign SECRET ID TIMESTAMP BODY: the webhook-signature header value.
sign() {
	"$py" - "$@" <<'EOF'
import base64, hashlib, hmac, sys
secret, msg_id, ts, body = sys.argv[1:5]
key = base64.b64decode(secret[len("whsec_"):])
mac = hmac.new(key, f"{msg_id}.{ts}.{body}".encode(), hashlib.sha256).digest()
print("v1," + base64.b64encode(mac).decode())
EOF
}

# The node example requires @hookflow/sdk: built into sdk/typescript/dist, and linked
# into examples/node/node_modules by its file: dependency (scripts/node-sdk.sh).
build_node_sdk() {
	"$top/scripts/node-sdk.sh" || die "the node SDK could not be built"
	say "node: @hookflow/sdk built and linked"
}

passed=0 failed=0 skipped=0

check_example() { # NAME
	local name=$1 cmd
	case $name in
	python) cmd=("$py" "$top/examples/python/webhook.py") ;;
	node)
		if ! command -v node >/dev/null; then
			say "node: SKIPPED (no node on PATH)"
			skipped=$((skipped + 1))
			return 0
		fi
		build_node_sdk
		cmd=(node "$top/examples/node/webhook.js")
		;;
	*) die "unknown example $name" ;;
	esac

	local whport secret wf run log
	whport=$(free_port)
	secret=whsec_$(head -c 24 /dev/urandom | base64)
	wf=order-$name
	run=order-$name-$RANDOM
	log=$tmp/webhook-$name.log
	WEBHOOK_SECRET=$secret WEBHOOK_PORT=$whport WEBHOOK_APPROVAL_TIMEOUT_MS=60000 \
		"${cmd[@]}" >"$log" 2>&1 &
	local whpid=$!
	pids+=("$whpid")
	wait_http "http://127.0.0.1:$whport/" 15 || die "$name: the webhook did not start"

	# Signatures: unsigned, wrong and stale requests are refused; a good one is not.
	local now body sig code
	now=$(date +%s)
	body='{"run_id":"x","status":"succeeded"}'
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		-d "$body" "http://127.0.0.1:$whport/done")
	[ "$code" = 401 ] || die "$name: an unsigned request answered $code, not 401"
	sig=$(sign "whsec_$(head -c 24 /dev/urandom | base64)" msg_1 "$now" "$body")
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'webhook-id: msg_1' -H "webhook-timestamp: $now" -H "webhook-signature: $sig" \
		-d "$body" "http://127.0.0.1:$whport/done")
	[ "$code" = 401 ] || die "$name: a wrongly signed request answered $code, not 401"
	sig=$(sign "$secret" msg_1 $((now - 600)) "$body")
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'webhook-id: msg_1' -H "webhook-timestamp: $((now - 600))" \
		-H "webhook-signature: $sig" -d "$body" "http://127.0.0.1:$whport/done")
	[ "$code" = 401 ] || die "$name: a 10-minute-old timestamp answered $code, not 401"
	sig=$(sign "$secret" msg_1 "$now" "$body")
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'webhook-id: msg_1' -H "webhook-timestamp: $now" \
		-H "webhook-signature: v1,bm90IGl0 $sig" -d "$body" "http://127.0.0.1:$whport/done")
	[ "$code" = 200 ] || die "$name: a well signed request answered $code, not 200"

	# The walk-through.
	api PUT "/v1/workflows/$wf" "{\"url\": \"http://127.0.0.1:$whport/steps\",
		\"callback_url\": \"http://127.0.0.1:$whport/done\", \"secret\": \"$secret\",
		\"retry_backoff\": {\"base_ms\": 200, \"max_ms\": 1000}}"
	[ "$status" = 201 ] || die "$name: PUT workflow answered $status: $(cat "$tmp/out.json")"
	api POST /v1/runs "{\"workflow\": \"$wf\", \"run_id\": \"$run\",
		\"input\": {\"customer\": \"ada\", \"items\": [{\"sku\": \"book\", \"qty\": 2, \"price_cents\": 1250}],
		\"fail_first_attempt\": true}}"
	[ "$status" = 201 ] || die "$name: POST run answered $status: $(cat "$tmp/out.json")"

	local i st=""
	for ((i = 0; i < 150; i++)); do
		api GET "/v1/runs/$run"
		st=$(json "$tmp/out.json" 'j["status"]')
		[ "$st" = waiting ] && break
		case $st in succeeded | failed | cancelled) die "$name: run ended $st before its signal: $(cat "$tmp/out.json")" ;; esac
		sleep 0.2
	done
	[ "$st" = waiting ] || die "$name: run not waiting after 30 s (status $st)"
	[ "$(json "$tmp/out.json" 'j["waiting"]["correlation_key"]')" = "approval:$run" ] ||
		die "$name: waiting on the wrong key: $(cat "$tmp/out.json")"

	api POST "/v1/signals/approval:$run" '{"payload": {"approved_by": "grace"}}'
	[ "$status" = 200 ] && [ "$(json "$tmp/out.json" 'j["outcome"]')" = delivered ] ||
		die "$name: signal answered $status: $(cat "$tmp/out.json")"

	api GET "/v1/runs/$run?wait_ms=20000"
	[ "$(json "$tmp/out.json" 'j["status"]')" = succeeded ] ||
		die "$name: run did not succeed: $(cat "$tmp/out.json")"
	local r='j["result"]'
	[ "$(json "$tmp/out.json" "${r}['approval']['approved_by']")" = grace ] &&
		[ "$(json "$tmp/out.json" "${r}['quote']['total_cents']")" = 2500 ] &&
		[ "$(json "$tmp/out.json" "${r}['quote_reused']")" = True ] &&
		[ "$(json "$tmp/out.json" "${r}['order']['customer']")" = ada ] ||
		die "$name: unexpected result: $(cat "$tmp/out.json")"

	api GET "/v1/runs/$run/steps"
	[ "$(json "$tmp/out.json" '[(s["step"], s["attempt"], s["result"]) for s in j["steps"]]')" = \
		"[(0, 1, 'transient_error'), (0, 2, 'continue'), (1, 1, 'continue'), (2, 1, 'succeed')]" ] ||
		die "$name: unexpected step history: $(cat "$tmp/out.json")"
	[ "$(grep -c 'quote computed' "$log")" = 1 ] && [ "$(grep -c 'quote found in the memo' "$log")" = 1 ] ||
		die "$name: the quote was not computed exactly once"

	for ((i = 0; i < 50; i++)); do
		grep -q "callback: run $run succeeded" "$log" && break
		sleep 0.2
	done
	grep -q "callback: run $run succeeded" "$log" || die "$name: no terminal callback received"

	# The conformance check (README "Checking a webhook"): every item passes.
	# Step 9 is one the example does not know: it answers fail.
	"$bin" check-webhook "http://127.0.0.1:$whport/steps" --secret "$secret" --error-step 9 \
		>"$tmp/check-$name.log" 2>&1 ||
		die "$name: hookflow check-webhook failed: $(cat "$tmp/check-$name.log")"
	grep -q '^10 passed, 0 failed, 0 skipped$' "$tmp/check-$name.log" ||
		die "$name: check-webhook did not pass every item: $(cat "$tmp/check-$name.log")"

	kill -TERM "$whpid"
	wait "$whpid" 2>/dev/null || true
	say "$name: PASSED (signatures, memo across a retry, signal, callback, check-webhook)"
	passed=$((passed + 1))
}

for ex in $examples; do
	check_example "$ex"
done
say "$passed passed, $failed failed, $skipped skipped"
