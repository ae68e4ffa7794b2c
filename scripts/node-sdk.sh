#!/usr/bin/env bash
# Builds @hookflow/sdk (sdk/typescript, into its dist/) and links it into
# examples/node/node_modules through the example's file: dependency: what the
# node example webhook needs to run. Used by examples/test-examples.sh and by
# scripts/integration.sh (test_traces runs the example under the OpenTelemetry
# Node SDK). npm ci runs only when a package-lock.json is newer than what is
# installed; tsc runs every time (a second or two).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
sdk=$top/sdk/typescript
log=$(mktemp)
trap 'rm -f "$log"' EXIT
die() {
	echo "node-sdk.sh: $*" >&2
	exit 1
}
needs_ci() { # DIR
	[[ ! -f "$1/node_modules/.package-lock.json" || "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]]
}
if needs_ci "$sdk" || [[ ! -x "$sdk/node_modules/.bin/tsc" ]]; then
	(cd "$sdk" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 ||
		die "npm ci in sdk/typescript failed: $(tail -n 20 "$log")"
fi
(cd "$sdk" && npx --no-install tsc -p tsconfig.json) >"$log" 2>&1 ||
	die "building sdk/typescript failed: $(tail -n 20 "$log")"
if needs_ci "$top/examples/node" || [[ ! -e "$top/examples/node/node_modules/@hookflow/sdk" ]]; then
	(cd "$top/examples/node" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 ||
		die "npm ci in examples/node failed: $(tail -n 20 "$log")"
fi
