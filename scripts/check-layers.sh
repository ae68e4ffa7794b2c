#!/usr/bin/env bash
# Checks that the arrows between the source folders point one way (README,
# "Source map"): cmd -> handlers -> service -> db -> base. A file may include
# headers of its own folder and of the folders below it, never above; libpq
# stays inside db/ and libmicrohttpd inside service/http.c. Prints every
# include that breaks a rule and exits 1 when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

# The folders from the bottom up; each may include itself and those before it.
layers=(base db service handlers cmd)

rank() {
	local i
	for i in "${!layers[@]}"; do
		[ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }
	done
	echo -1
}

bad=0
complain() {
	echo "check-layers: $1" >&2
	bad=1
}

for dir in "${layers[@]}"; do
	own=$(rank "$dir")
	for f in "$dir"/*.[ch]; do
		[ -e "$f" ] || continue
		while IFS= read -r line; do
			inc=${line#*\"}
			inc=${inc%\"*}
			top=${inc%%/*}
			r=$(rank "$top")
			if [ "$r" -lt 0 ]; then
				complain "$f includes \"$inc\", which is in no layer"
			elif [ "$r" -gt "$own" ]; then
				complain "$f ($dir) includes \"$inc\" ($top is above $dir)"
			fi
			if [ "$inc" = db/internal.h ] && [ "$dir" != db ]; then
				complain "$f includes db/internal.h, which is private to db/"
			fi
		done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f" || true)
		if [ "$dir" != db ] && grep -qE '#[[:space:]]*include[[:space:]]+<libpq-fe\.h>' "$f"; then
			complain "$f includes libpq-fe.h: only db/ talks to PostgreSQL"
		fi
		if [ "$f" != service/http.c ] && grep -qE '#[[:space:]]*include[[:space:]]+<microhttpd\.h>' "$f"; then
			complain "$f includes microhttpd.h: only service/http.c talks to libmicrohttpd"
		fi
	done
done
[ "$bad" = 0 ] && echo "check-layers: every include points down (${layers[*]})"
exit "$bad"
