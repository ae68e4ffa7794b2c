#!/usr/bin/env bash
# Proves scripts/check-migrations.sh (run by `make lint` with this test): it
# passes on the shipped migrations as they are, and fails, naming the file and
# the release, when a shipped migration is edited or removed, both from the
# recorded sums alone (a tree without git history) and from the release
# commit (a git repository, even when the recorded sum was "fixed" to match
# the edit). Each case runs on a copy of the repository's migrations/ and of
# the script in a temporary directory; the repository is never touched.
#
#   tests/release/test_check_migrations.sh [-v]    (-v: list every case)
set -euo pipefail
verbose=0
[ "${1:-}" = -v ] && verbose=1

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# No git repository above the temporary trees may stand in for their own.
export GIT_CEILING_DIRECTORIES=$tmp
git_q() { git -c user.name=hookflow-test -c user.email=test@hookflow.invalid \
	-c commit.gpgsign=false -c init.defaultBranch=main "$@"; }

failures=0 cases=0
pass() {
	cases=$((cases + 1))
	[ "$verbose" = 0 ] || echo "ok   $1"
}
fail() {
	cases=$((cases + 1)) failures=$((failures + 1))
	echo "FAIL $1" >&2
	sed 's/^/     | /' "$tmp/out" >&2
}

# A copy of the repository's release files (the release list, the recorded
# sums and the shipped migrations they list, not the migrations written since)
# and of the script, in a new directory $1.
copy_tree() {
	mkdir -p "$1/scripts" "$1/migrations"
	cp "$root/migrations/RELEASES" "$root/migrations/SHIPPED.sha256" "$1/migrations/"
	local f
	for f in $(grep -E '^[0-9a-f]{64}  ' "$root/migrations/SHIPPED.sha256" | sed 's/^[0-9a-f]*  //'); do
		cp "$root/$f" "$1/$f"
	done
	cp "$root/scripts/check-migrations.sh" "$1/scripts/"
}

# run <tree>: runs the check there, output in $tmp/out, exit code in $rc.
run() {
	rc=0
	"$1/scripts/check-migrations.sh" >"$tmp/out" 2>&1 || rc=$?
}

# expect_fail <name> <text the output must contain>...
expect_fail() {
	local name=$1 want
	shift
	if [ "$rc" -eq 0 ]; then
		fail "$name: exited 0, want a failure"
		return
	fi
	for want in "$@"; do
		if ! grep -qF -- "$want" "$tmp/out"; then
			fail "$name: output does not mention \"$want\""
			return
		fi
	done
	pass "$name"
}

expect_pass() {
	local name=$1 want
	shift
	if [ "$rc" -ne 0 ]; then
		fail "$name: exited $rc, want 0"
		return
	fi
	for want in "$@"; do
		if ! grep -qF -- "$want" "$tmp/out"; then
			fail "$name: output does not mention \"$want\""
			return
		fi
	done
	pass "$name"
}

# The first shipped file and its release, as the repository records them.
shipped=$(grep -E '^[0-9a-f]{64}  ' "$root/migrations/SHIPPED.sha256" | head -n1 | sed 's/^[0-9a-f]*  //')
release=$(grep -E '^[0-9]' "$root/migrations/RELEASES" | head -n1 | cut -d' ' -f1)
[ -n "$shipped" ] && [ -n "$release" ] || {
	echo "test_check_migrations: no shipped file or release recorded in $root/migrations" >&2
	exit 1
}

# ---- without git history: the recorded sums -----------------------------------
t=$tmp/plain-unchanged
copy_tree "$t"
run "$t"
expect_pass "no history, unchanged: passes and says it relies on the sums" \
	"release $release" "is not in the git history here" "shipped migration file(s) unchanged"

t=$tmp/plain-edited
copy_tree "$t"
printf -- '-- an innocent-looking comment\n' >>"$t/$shipped"
run "$t"
expect_fail "no history, a shipped file edited: fails naming the file and the release" \
	"$shipped (shipped in release $release) has changed"

t=$tmp/plain-one-byte
copy_tree "$t"
# Same length, one byte different: the first byte replaced.
first=$(head -c1 "$t/$shipped")
if [ "$first" = x ]; then other=y; else other=x; fi
{ printf '%s' "$other"; tail -c +2 "$root/$shipped"; } >"$t/$shipped.new"
mv "$t/$shipped.new" "$t/$shipped"
run "$t"
expect_fail "no history, one byte of a shipped file changed: fails" \
	"$shipped (shipped in release $release) has changed"

t=$tmp/plain-removed
copy_tree "$t"
rm "$t/$shipped"
run "$t"
expect_fail "no history, a shipped file removed: fails" \
	"$shipped (shipped in release $release) is missing from the work tree"

t=$tmp/plain-new-migration
copy_tree "$t"
printf 'CREATE TABLE later (x int);\n' >"$t/migrations/9999_later.sql"
run "$t"
expect_pass "no history, a new migration added: passes"

t=$tmp/plain-bad-releases
copy_tree "$t"
printf '0.2.0 not-a-commit\n' >>"$t/migrations/RELEASES"
run "$t"
[ "$rc" -eq 2 ] && grep -qF "migrations/RELEASES line" "$tmp/out" &&
	pass "a malformed RELEASES line: exit 2 naming the line" ||
	fail "a malformed RELEASES line: want exit 2 naming the line, got $rc"

# ---- with git history: the release commit -------------------------------------
if ! command -v git >/dev/null 2>&1; then
	echo "test_check_migrations: git is not installed (scripts/deps.sh installs it)" >&2
	exit 1
fi

# A repository whose first commit is a release holding the repository's
# shipped migrations; RELEASES names that commit as release $release.
make_repo() {
	copy_tree "$1"
	git_q -C "$1" init -q
	git_q -C "$1" add -A
	git_q -C "$1" commit -q -m "release $release"
	local c
	c=$(git -C "$1" rev-parse HEAD)
	sed -i -E "s/^$release [0-9a-f]{40}\$/$release $c/" "$1/migrations/RELEASES"
	grep -q "^$release $c\$" "$1/migrations/RELEASES"
	git_q -C "$1" commit -q -am "list release $release"
	echo "$c"
}

t=$tmp/git-unchanged
c=$(make_repo "$t")
run "$t"
expect_pass "history, unchanged: passes comparing with the release commit" \
	"1 compared with their git commit"
if grep -qF "is not in the git history" "$tmp/out"; then
	fail "history, unchanged: claims the release commit is missing"
fi

t=$tmp/git-edited
c=$(make_repo "$t")
printf -- '-- an innocent-looking comment\n' >>"$t/$shipped"
run "$t"
expect_fail "history, a shipped file edited (not committed): fails naming file, release, commit" \
	"$shipped differs from the file release $release shipped (commit $c)"

t=$tmp/git-edited-sum-fixed
c=$(make_repo "$t")
printf -- '-- an innocent-looking comment\n' >>"$t/$shipped"
new=$(sha256sum <"$t/$shipped" | cut -d' ' -f1)
sed -i -E "s#^[0-9a-f]{64}  $shipped\$#$new  $shipped#" "$t/migrations/SHIPPED.sha256"
git_q -C "$t" commit -q -am "edit a shipped migration and its recorded sum"
run "$t"
expect_fail "history, a shipped file edited and committed with its sum updated: fails" \
	"$shipped differs from the file release $release shipped (commit $c)" \
	"the recorded sum is wrong"

t=$tmp/git-unrecorded
c=$(make_repo "$t")
sed -i -E "\\#  $shipped\$#d" "$t/migrations/SHIPPED.sha256"
# Another recorded file keeps the sum file from being empty.
: >"$t/migrations/other.sql"
echo "$(sha256sum <"$t/migrations/other.sql" | cut -d' ' -f1)  migrations/other.sql" \
	>>"$t/migrations/SHIPPED.sha256"
run "$t"
expect_fail "history, a shipped file with no recorded sum: fails" \
	"$shipped (shipped in release $release, commit $c) has no sum in migrations/SHIPPED.sha256"

t=$tmp/git-new-migration
c=$(make_repo "$t")
printf 'CREATE TABLE later (x int);\n' >"$t/migrations/9999_later.sql"
git_q -C "$t" add -A
git_q -C "$t" commit -q -m "a new migration"
run "$t"
expect_pass "history, a new migration after the release: passes"

echo "test_check_migrations: $((cases - failures))/$cases cases passed"
[ "$failures" -eq 0 ]
