#!/usr/bin/env bash
# payload_floor.sh: what a payload's size costs PostgreSQL alone, beside item 3
# of issue 13 (BENCHMARKS.md). On a throwaway cluster with the bench's
# settings, pgbench (32 clients, like the bench's pgbench) runs transactions
# that each read one stored payload and store it again, the data work of a
# step (its claim reads the payload, its settlement stores the next), in a json
# column compressed with lz4, as step_attempt.output is. The payloads are
# incompressible text inside a JSON string, letters and digits as loadgen's
# are. For each size, alternately, FLOOR_REPEAT rounds (3) of FLOOR_SECONDS
# (15); prints the median TPS, its ratio to the first size's, and the WAL
# bytes a transaction.
#
#   tests/bench/payload_floor.sh            sizes 100 10240 102400
#   FLOOR_SIZES="100 10240" tests/bench/payload_floor.sh
set -euo pipefail
shopt -s inherit_errexit

me=floor
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

read -ra sizes <<<"${FLOOR_SIZES:-100 10240 102400}"
repeat=${FLOOR_REPEAT:-3}
secs=${FLOOR_SECONDS:-15}
rows=200

[[ -x "$pgbin/initdb" ]] || die "no PostgreSQL server binaries in $pgbin"
bench_workdir
bench_start_cluster
db=floor
psql_db postgres -c "CREATE DATABASE $db" >/dev/null

say "filling $rows payloads of each size"
for b in "${sizes[@]}"; do
	psql_db "$db" <<SQL
CREATE TABLE src_$b (id integer PRIMARY KEY, v json COMPRESSION lz4);
INSERT INTO src_$b
SELECT i, to_json((SELECT string_agg(substr('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
					   1 + floor(random() * 62)::int, 1), '')
		   FROM generate_series(1, $b - 2) WHERE i > 0))
FROM generate_series(1, $rows) i;
CREATE TABLE sink_$b (id bigserial PRIMARY KEY, v json COMPRESSION lz4);
SQL
	cat >"$work/step_$b.sql" <<SQL
\set id random(1, $rows)
INSERT INTO sink_$b (v) SELECT v FROM src_$b WHERE id = :id;
SQL
done
psql_db "$db" -c VACUUM >/dev/null

declare -A tps wal
for ((k = 1; k <= repeat; k++)); do
	for b in "${sizes[@]}"; do
		checkpoint
		lsn0=$(psql_db postgres -c "SELECT pg_current_wal_lsn()")
		"$pgbin/pgbench" -n -c 32 -j 2 -T "$secs" -f "$work/step_$b.sql" -d "$(conninfo "$db")" \
			>"$work/pgbench_$b.out" 2>>"$work/pgbench.log" || die "pgbench failed (see $work/pgbench.log)"
		lsn1=$(psql_db postgres -c "SELECT pg_current_wal_lsn()")
		t=$(awk '/^tps = / { printf "%d", $3 }' "$work/pgbench_$b.out")
		n=$(awk '/number of transactions actually processed/ { print $NF }' "$work/pgbench_$b.out")
		w=$(psql_db postgres -c "SELECT (pg_wal_lsn_diff('$lsn1', '$lsn0') / greatest($n, 1))::bigint")
		tps[${b}_$k]=$t wal[${b}_$k]=$w
		say "round $k, $b B: $t tps, $w WAL bytes a transaction"
	done
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "PostgreSQL alone: read one payload and store it again (json, lz4), pgbench -c 32, medians of $repeat rounds of ${secs}s"
printf '%8s %8s %8s %12s   %s\n' bytes tps ratio wal_b/tx 'all rounds: tps'
first=
for b in "${sizes[@]}"; do
	t=() w=()
	for ((k = 1; k <= repeat; k++)); do
		t+=("${tps[${b}_$k]}")
		w+=("${wal[${b}_$k]}")
	done
	m=$(median "${t[@]}")
	first=${first:-$m}
	printf '%8s %8s %8s %12s   %s\n' "$b" "$m" \
		"$(awk -v a="$m" -v b="$first" 'BEGIN { printf "%.3fx", (b > 0 ? a / b : 0) }')" \
		"$(median "${w[@]}")" "$(IFS=,; echo "${t[*]}")"
done
