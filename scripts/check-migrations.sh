#!/usr/bin/env bash
# Fails when a migration file that shipped in a release has changed (README,
# "Versions and upgrades"). A shipped migration is never edited: a schema
# change is a new numbered migration.
#
#   scripts/check-migrations.sh          (run by `make lint`)
#
# It reads two files kept in the repository:
#   migrations/RELEASES        "<version> <full commit hash>" per release
#   migrations/SHIPPED.sha256  the SHA-256 of every file a release shipped
#                              (sha256sum format, "# release <version>" lines
#                              say which release shipped the files below them)
# and checks:
#   1. every file listed in SHIPPED.sha256 exists and matches its sum;
#   2. when the git history holds a release commit (git cat-file -e
#      <commit>^{commit}), every migrations/*.sql file of that commit is
#      byte-identical in the work tree, and SHIPPED.sha256 records its sum.
#      When the history is missing (an exported tree, a shallow clone) it says
#      so and relies on 1.
# Prints every difference, naming the file and the release, and exits 1 when
# there is one (2 when RELEASES or SHIPPED.sha256 itself is malformed).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"

releases=migrations/RELEASES
sums=migrations/SHIPPED.sha256
me=check-migrations

bad=0
complain() {
	echo "$me: $*" >&2
	bad=1
}
die() {
	echo "$me: $*" >&2
	exit 2
}
advice="a shipped migration is never edited: restore it and put the change in a new numbered migration"

sha256_of() { sha256sum <"$1" | cut -d' ' -f1; }

[ -f "$releases" ] || die "$releases is missing"
[ -f "$sums" ] || die "$sums is missing"

# ---- the release list -------------------------------------------------------
declare -a rel_version=() rel_commit=()
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
	lineno=$((lineno + 1))
	case "$line" in '#'* | '') continue ;; esac
	if ! [[ "$line" =~ ^([0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*)\ ([0-9a-f]{40})$ ]]; then
		die "$releases line $lineno: want \"<version> <40-hex commit>\", got \"$line\""
	fi
	for v in "${rel_version[@]}"; do
		[ "$v" = "${BASH_REMATCH[1]}" ] && die "$releases line $lineno: release $v is listed twice"
	done
	rel_version+=("${BASH_REMATCH[1]}")
	rel_commit+=("${BASH_REMATCH[2]}")
done <"$releases"
[ ${#rel_version[@]} -gt 0 ] || die "$releases lists no release"

# ---- 1. the recorded sums ---------------------------------------------------
declare -A sum_of=() release_of=()
current=""
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
	lineno=$((lineno + 1))
	if [[ "$line" =~ ^#\ release\ ([^[:space:]]+)$ ]]; then
		current=${BASH_REMATCH[1]}
		continue
	fi
	case "$line" in '#'* | '') continue ;; esac
	if ! [[ "$line" =~ ^([0-9a-f]{64})\ \ (migrations/[^[:space:]]+)$ ]]; then
		die "$sums line $lineno: want \"<sha256>  migrations/<file>\", got \"$line\""
	fi
	[ -n "$current" ] || die "$sums line $lineno: no \"# release <version>\" line above it"
	file=${BASH_REMATCH[2]}
	[ -z "${sum_of[$file]+x}" ] || die "$sums line $lineno: $file is listed twice"
	sum_of[$file]=${BASH_REMATCH[1]}
	release_of[$file]=$current
done <"$sums"
[ ${#sum_of[@]} -gt 0 ] || die "$sums records no sum"

while IFS= read -r file; do
	[ -n "$file" ] || continue
	rel=${release_of[$file]}
	if [ ! -f "$file" ]; then
		complain "$file (shipped in release $rel) is missing from the work tree; $advice"
		continue
	fi
	have=$(sha256_of "$file")
	if [ "$have" != "${sum_of[$file]}" ]; then
		complain "$file (shipped in release $rel) has changed: its SHA-256 is $have," \
			"$sums records ${sum_of[$file]}; $advice"
	fi
done < <(printf '%s\n' "${!sum_of[@]}" | sort)

# ---- 2. the release commits -------------------------------------------------
have_git=0
# Only a work tree whose root is this tree: release commits name paths from it.
if command -v git >/dev/null 2>&1 &&
	[ "$(git rev-parse --show-toplevel 2>/dev/null || true)" = "$root" ]; then
	have_git=1
fi
checked=0
for i in "${!rel_version[@]}"; do
	v=${rel_version[$i]}
	c=${rel_commit[$i]}
	if [ "$have_git" = 0 ] || ! git cat-file -e "$c^{commit}" 2>/dev/null; then
		echo "$me: release $v ($c) is not in the git history here;" \
			"relying on the sums in $sums"
		continue
	fi
	checked=$((checked + 1))
	while IFS= read -r file; do
		case "$file" in *.sql) ;; *) continue ;; esac
		shipped_blob=$(git rev-parse "$c:$file")
		if [ ! -f "$file" ]; then
			complain "$file (shipped in release $v, commit $c) is missing from the work tree; $advice"
		elif [ "$(git hash-object --no-filters -- "$file")" != "$shipped_blob" ]; then
			complain "$file differs from the file release $v shipped (commit $c):" \
				"see git diff $c -- $file; $advice"
		fi
		shipped_sum=$(git cat-file blob "$shipped_blob" | sha256sum | cut -d' ' -f1)
		if [ -z "${sum_of[$file]+x}" ]; then
			complain "$file (shipped in release $v, commit $c) has no sum in $sums:" \
				"add \"$shipped_sum  $file\" under \"# release $v\""
		elif [ "${sum_of[$file]}" != "$shipped_sum" ]; then
			complain "$sums records ${sum_of[$file]} for $file, but release $v" \
				"(commit $c) shipped $shipped_sum; the recorded sum is wrong"
		fi
	done < <(git ls-tree -r --name-only "$c" -- migrations/)
done

if [ "$bad" = 0 ]; then
	echo "$me: ${#sum_of[@]} shipped migration file(s) unchanged" \
		"(${#rel_version[@]} release(s), $checked compared with their git commit)"
fi
exit "$bad"
