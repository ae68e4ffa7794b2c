#!/usr/bin/env bash
# Writes the SDKs' generated code from openapi/openapi.yaml (`make sdk`):
#
#   sdk/typescript/src/generated/openapi.ts     openapi-typescript (pinned in
#                                               sdk/typescript/package-lock.json)
#   sdk/typescript/src/generated/types.ts       sdk/generate.py: schema aliases
#   sdk/typescript/src/generated/operations.ts  sdk/generate.py: one method per operation
#   sdk/python/hookflow/_generated.py           sdk/generate.py: TypedDicts, methods
#
# --check (`make sdk-check`, part of `make sdk-test`) writes them into a temp dir
# instead and fails, showing the difference, when the committed files are not
# what the spec gives: change openapi/openapi.yaml, then run `make sdk`.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ts=$top/sdk/typescript
spec=$top/openapi/openapi.yaml
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
check=0
[ "${1:-}" = --check ] && check=1

die() { printf 'sdk/generate.sh: %s\n' "$*" >&2; exit 1; }
command -v npm >/dev/null || die "npm is needed (Node 20 or later)"
"$py" -c 'import yaml' 2>/dev/null || die "PyYAML is needed (python3-yaml; make deps)"

# openapi-typescript as pinned: install when missing or older than the lock file.
if [ ! -x "$ts/node_modules/.bin/openapi-typescript" ] ||
	[ "$ts/package-lock.json" -nt "$ts/node_modules/.package-lock.json" ]; then
	(cd "$ts" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

if [ "$check" = 1 ]; then
	out=$(mktemp -d /tmp/hookflow-sdk-gen.XXXXXX)
	trap 'rm -rf "$out"' EXIT
	mkdir -p "$out/ts" "$out/py"
	out_ts=$out/ts
	out_py=$out/py/_generated.py
else
	out_ts=$ts/src/generated
	out_py=$top/sdk/python/hookflow/_generated.py
	mkdir -p "$out_ts"
fi

if ! (cd "$ts" && node_modules/.bin/openapi-typescript "$spec" -o "$out_ts/openapi.ts" \
	--default-non-nullable false >"$out_ts/.log" 2>&1); then
	cat "$out_ts/.log" >&2
	die "openapi-typescript failed"
fi
rm -f "$out_ts/.log"
"$py" "$top/sdk/generate.py" "$spec" "$out_ts" "$out_py"

if [ "$check" = 0 ]; then
	echo "sdk: wrote sdk/typescript/src/generated/{openapi,types,operations}.ts and sdk/python/hookflow/_generated.py"
	exit 0
fi
stale=0
for f in openapi.ts types.ts operations.ts; do
	diff -u "$ts/src/generated/$f" "$out_ts/$f" >"$out/diff" 2>&1 || {
		stale=1
		echo "sdk: sdk/typescript/src/generated/$f is out of date:" >&2
		head -n 40 "$out/diff" >&2
	}
done
diff -u "$top/sdk/python/hookflow/_generated.py" "$out_py" >"$out/diff" 2>&1 || {
	stale=1
	echo "sdk: sdk/python/hookflow/_generated.py is out of date:" >&2
	head -n 40 "$out/diff" >&2
}
[ "$stale" = 0 ] || die "the generated SDK code is not what openapi/openapi.yaml gives: run make sdk"
echo "sdk-check: the generated SDK code matches openapi/openapi.yaml"
