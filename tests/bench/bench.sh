#!/usr/bin/env bash
# hookflow's benchmark: `make bench` (full) and `make bench-smoke` (BENCH_SCALE=smoke).
#
# It builds hookflow and the bench tools (tests/bench/webhook.c, loadgen.c, into
# build/bench/), makes a throwaway PostgreSQL cluster with durable defaults
# (fsync=on, synchronous_commit=on) in a temp dir, starts one C webhook, and
# runs each scenario on a fresh database with a fresh hookflow:
#
#   1. RUNS1 runs of 1 step submitted as fast as possible: runs/s
#   2. RUNS10 runs of 10 steps: step transitions/s (settled attempts / elapsed)
#   3. idle latency, submission to terminal (POST then ?wait_ms long-poll), one
#      run at a time, 1-step and 10-step: p50, p99
#   4. INFLIGHT 1-step runs, all due at one moment, against a webhook answering
#      after DELAY_MS, with HOOKFLOW_MAX_INFLIGHT above it: hookflow's peak RSS
#      (VmHWM), how many calls the webhook held at once, all finish;
#      4b. the same with each call held HOLD_MS, so that all are in flight at once
#   5. pgbench on the same cluster: one-row UPDATE per transaction, 32 clients
#   6. scenario 2 with two hookflow instances on one database, alternated with
#      the same on one instance (SCALE_REPEAT times each): the medians' ratio
#
# After every scenario it checks in SQL that all runs exist and succeeded, that
# no (run_id, generation, step, attempt) appears twice in step_attempt and that
# no step was settled with an outcome twice. It prints one table: figure,
# target, ratio to pgbench, PASS/FAIL. Missed performance targets are reported
# but do not fail; a correctness failure exits 1.
#
# Environment:
#   BENCH_SCALE=full|smoke   full (default) or the quick smoke version (50 runs of
#                            1 and 3 steps, 200 in flight, short pgbench, no
#                            performance verdicts; under 30 s on an idle machine)
#   BENCH_SWEEP=1            also run the cost sweeps (runs, steps, payload size,
#                            in-flight calls, runs kept) recorded in BENCHMARKS.md
#   BENCH_SIZE=1             only the size scenario (runs kept: tests/bench/scenario_size.sh)
#   BENCH_PG_STATEMENTS=1    load pg_stat_statements and write the top statements
#                            of the 10-step scenario to $BENCH_OUT/pg_stat_statements.txt
#   BENCH_KEEP=1             keep the temp dir (logs, cluster) for inspection
#   BENCH_OUT=DIR            where results.txt/results.env go (build/bench)
#   BENCH_HTTP_THREADS, BENCH_DB_POOL, BENCH_WORKERS   passed to hookflow as
#                            HOOKFLOW_HTTP_THREADS/DB_POOL/WORKERS when set
#   BENCH_PG_BIN             PostgreSQL binaries (/usr/lib/postgresql/15/bin)
#   BENCH_COMPARE=BINARY     instead of the scenarios above: scenario 2 with
#                            BINARY (an earlier build) and with this build,
#                            alternately BENCH_COMPARE_REPEAT times (5), then
#                            the medians of both: transitions/s and CPU per step
#   BENCH_NICE=N             run everything at nice N (e.g. -5 as root) so that other
#                            work on a shared machine skews the figures less; the
#                            table says so
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

scale=${BENCH_SCALE:-full}
pgbin=${BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
out=${BENCH_OUT:-$root/build/bench}
bin=$root/build/hookflow
tools=$root/build/bench

case "$scale" in
full)
	RUNS1=2000 RUNS10=2000 STEPS=10 LAT_N=200 LAT_STEPS=10 INFLIGHT=10000 DELAY_MS=2000 HOLD_MS=30000
	PGBENCH_T=15 PGBENCH_SCALE=10 PGBENCH_INIT=dtgvp SUBMIT_CONNS=64 RUN_TIMEOUT=300 DUE_MAX_MS=60000
	SCALE_REPEAT=5
	;;
smoke)
	RUNS1=50 RUNS10=50 STEPS=3 LAT_N=10 LAT_STEPS=3 INFLIGHT=200 DELAY_MS=500 HOLD_MS=0
	PGBENCH_T=2 PGBENCH_SCALE=1 PGBENCH_INIT=dtGp SUBMIT_CONNS=16 RUN_TIMEOUT=20 DUE_MAX_MS=2000
	SCALE_REPEAT=1
	;;
*)
	echo "bench: BENCH_SCALE must be full or smoke" >&2
	exit 2
	;;
esac

t0_ms=$(date +%s%3N)
say() { printf 'bench: [%5.1fs] %s\n' "$((($(date +%s%3N) - t0_ms) / 100))e-1" "$*" >&2; }
die() {
	printf 'bench: FAIL: %s\n' "$*" >&2
	exit 1
}
now_ms() { date +%s%3N; }

# ---- build -------------------------------------------------------------------

if [[ -n "${BENCH_NICE:-}" ]]; then
	renice -n "$BENCH_NICE" -p $$ >/dev/null || die "renice $BENCH_NICE failed"
fi

say "building hookflow and the bench tools"
make --no-print-directory -s all >&2
mkdir -p "$tools" "$out"
ccflags=(-O2 -g -std=c11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes
	-Wmissing-prototypes -Wvla)
gcc "${ccflags[@]}" -pthread -o "$tools/webhook" tests/bench/webhook.c
# shellcheck disable=SC2046 # pkg-config output is meant to split
gcc "${ccflags[@]}" $(pkg-config --cflags libpq) -o "$tools/loadgen" tests/bench/loadgen.c \
	$(pkg-config --libs libpq)

[[ -x "$pgbin/initdb" ]] || die "no PostgreSQL server binaries in $pgbin (scripts/deps.sh installs postgresql-15)"

# ---- processes and clean-up --------------------------------------------------

work=$(mktemp -d /tmp/hookflow-bench.XXXXXX)
chmod 755 "$work"
pids=()     # every background process we started
pg_up=0

if [[ "$(id -u)" -eq 0 ]]; then
	pguser=hookflow
	if ! id -u "$pguser" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$pguser"
	fi
	as_pg() { (cd / && runuser -u "$pguser" -- "$@"); }
else
	pguser=$(id -un)
	as_pg() { (cd / && "$@"); }
fi

# stop_pid PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL. Returns 0 if
# it exited by itself within the time.
stop_pid() {
	local pid=$1 secs=$2 deadline
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$(($(now_ms) + secs * 1000))
	while kill -0 "$pid" 2>/dev/null; do
		if (($(now_ms) > deadline)); then
			kill -KILL "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			return 1
		fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null || true
	return 0
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do
		stop_pid "$pid" 5 || true
	done
	if [[ "$pg_up" = 1 ]]; then
		as_pg "$pgbin/pg_ctl" stop -D "$work/pgdata" -m immediate -w >/dev/null 2>&1 || true
	fi
	if [[ "${BENCH_KEEP:-}" = 1 || $rc -ne 0 ]]; then
		say "logs and cluster kept in $work"
		if [[ $rc -ne 0 ]]; then
			for f in "$work"/*.log; do
				[[ -s "$f" ]] || continue
				echo "---- tail of $f" >&2
				tail -n 15 "$f" >&2
			done
		fi
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for DESCRIPTION SECONDS COMMAND...: runs COMMAND until it succeeds.
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$(($(now_ms) + secs * 1000))
	until "$@" >/dev/null 2>&1; do
		(($(now_ms) < deadline)) || die "timed out after ${secs}s waiting for $what"
		sleep 0.05
	done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_port: sets the global port to a free TCP port on 127.0.0.1.
next_port=18180
free_port() {
	while ! port_free "$next_port"; do
		next_port=$((next_port + 1))
		((next_port < 19000)) || die "no free port in 18180..18999"
	done
	port=$next_port
	next_port=$((next_port + 1))
}

# ---- PostgreSQL ----------------------------------------------------------------

say "initdb a throwaway cluster in $work/pgdata"
mkdir -m 700 "$work/pgdata" "$work/sock"
[[ "$(id -u)" -eq 0 ]] && chown "$pguser" "$work/pgdata" "$work/sock"
# --no-sync: the cluster is thrown away; it only skips initdb's final sync
as_pg "$pgbin/initdb" -D "$work/pgdata" -U bench --auth=trust -E UTF8 --no-locale \
	--no-instructions --no-sync >"$work/initdb.log" 2>&1 || die "initdb failed (see $work/initdb.log)"
pgport=5432
cat >>"$work/pgdata/postgresql.conf" <<EOF

# hookflow bench: unix socket only; durable defaults spelled out
listen_addresses = ''
port = $pgport
unix_socket_directories = '$work/sock'
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 256MB
max_connections = 200
EOF
if [[ "${BENCH_PG_STATEMENTS:-}" = 1 ]]; then
	printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n" \
		>>"$work/pgdata/postgresql.conf"
fi
touch "$work/postgres.log"
[[ "$(id -u)" -eq 0 ]] && chown "$pguser" "$work/postgres.log"
pg_up=1
as_pg "$pgbin/pg_ctl" start -D "$work/pgdata" -l "$work/postgres.log" -w -t 60 >/dev/null ||
	die "PostgreSQL did not start"
pgver=$("$pgbin/postgres" --version | awk '{print $3}')

conninfo() { echo "host=$work/sock port=$pgport user=bench dbname=$1"; }
psql_db() {
	local db=$1
	shift
	"$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -tA -d "$(conninfo "$db")" "$@"
}
# Every measured phase starts after a checkpoint, so each pays the same
# full-page writes and none inherits another's dirty buffers.
checkpoint() { psql_db postgres -c CHECKPOINT >/dev/null; }
# fresh_db NAME: creates a new database; sets the global db to its name.
db_seq=0
fresh_db() {
	db_seq=$((db_seq + 1))
	db="bench_$1_$db_seq"
	psql_db postgres -c "CREATE DATABASE $db" >/dev/null
}

# ---- the webhook ----------------------------------------------------------------

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
"$tools/webhook" -p 0 -f "$work/webhook.port" 2>"$work/webhook.log" &
wh_pid=$!
pids+=("$wh_pid")
wait_for "the webhook" 10 test -s "$work/webhook.port"
whport=$(cat "$work/webhook.port")
wh="http://127.0.0.1:$whport"
wh_stats() { curl -sf "$wh/stats"; }
wh_field() { wh_stats | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
curl -sf -X POST "$wh/stats/reset" >/dev/null

# ---- hookflow ----------------------------------------------------------------------

# start_hookflow NAME DB [VAR=VALUE...]: starts an instance on a free port; sets
# hf_pid and hf_port.
start_hookflow() {
	local name=$1 db=$2
	shift 2
	free_port
	hf_port=$port
	local envs=(HOOKFLOW_DATABASE_URL="$(conninfo "$db")" HOOKFLOW_LISTEN="127.0.0.1:$hf_port"
		HOOKFLOW_LOG_LEVEL=warn HOOKFLOW_SHUTDOWN_GRACE_MS=3000)
	[[ -n "${BENCH_HTTP_THREADS:-}" ]] && envs+=(HOOKFLOW_HTTP_THREADS="$BENCH_HTTP_THREADS")
	[[ -n "${BENCH_DB_POOL:-}" ]] && envs+=(HOOKFLOW_DB_POOL="$BENCH_DB_POOL")
	[[ -n "${BENCH_WORKERS:-}" ]] && envs+=(HOOKFLOW_WORKERS="$BENCH_WORKERS")
	env "${envs[@]}" "$@" "$bin" serve >>"$work/hookflow-$name.log" 2>&1 &
	hf_pid=$!
	pids+=("$hf_pid")
	wait_for "hookflow $name on port $hf_port" 60 curl -sf "http://127.0.0.1:$hf_port/readyz"
}

# stop_hookflow PID NAME: SIGTERM; it must exit within 15 s.
stop_hookflow() {
	stop_pid "$1" 15 || die "hookflow $2 did not exit within 15 s of SIGTERM"
	local keep=() p
	for p in "${pids[@]}"; do
		[[ "$p" = "$1" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# CPU accounting, in clock ticks: a process, the whole cluster (live children
# of the postmaster, plus what it reaped), the whole machine (busy time).
clk_tck=$(getconf CLK_TCK)
pid_ticks() {
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
pg_ticks() {
	local pm
	pm=$(head -1 "$work/pgdata/postmaster.pid")
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } |
		awk -v pm="$pm" '$4 == pm { s += $14 + $15 } $1 == pm { s += $14 + $15 + $16 + $17 } END { print s + 0 }'
}
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# cpu_begin PIDS...: snapshot; cpu_end KEY STEPS PIDS...: sets R[KEY_*] to the CPU
# microseconds per settled step of hookflow (PIDS), PostgreSQL and the webhook,
# and the share of the machine's 2 cores used by everything else meanwhile.
cpu_begin() {
	cpu_hf0=$(pid_ticks "$@") cpu_pg0=$(pg_ticks) cpu_wh0=$(pid_ticks "$wh_pid")
	cpu_all0=$(machine_ticks) cpu_t0=$(now_ms)
}
cpu_end() {
	local key=$1 steps=$2
	shift 2
	local hf pg whk all ms
	hf=$(($(pid_ticks "$@") - cpu_hf0)) pg=$(($(pg_ticks) - cpu_pg0))
	whk=$(($(pid_ticks "$wh_pid") - cpu_wh0)) all=$(($(machine_ticks) - cpu_all0))
	ms=$(($(now_ms) - cpu_t0))
	((steps > 0)) || steps=1
	R[${key}_hf_us]=$((hf * 1000000 / clk_tck / steps))
	R[${key}_pg_us]=$((pg * 1000000 / clk_tck / steps))
	R[${key}_wh_us]=$((whk * 1000000 / clk_tck / steps))
	# everything else: whatever else runs on the machine
	R[${key}_lg_us]=$((${lg_cpu_ms:-0} * 1000 / steps))
	R[${key}_other_pct]=$(awk -v o="$((all - hf - pg - whk - ${lg_cpu_ms:-0} * clk_tck / 1000))" -v t="$clk_tck" -v ms="$ms" -v n="$(nproc)" \
		'BEGIN { v = ms > 0 ? 100 * (o / t) / (ms / 1000) / n : 0; printf "%.0f", v < 0 ? 0 : v }')
}

vmhwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
vmrss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# put_workflow PORT NAME QUERY [TIMEOUT_MS]
put_workflow() {
	local code
	code=$(curl -s -o "$work/put.out" -w '%{http_code}' -X PUT "http://127.0.0.1:$1/v1/workflows/$2" \
		-H 'Content-Type: application/json' \
		-d "{\"url\": \"$wh/steps?$3\", \"timeout_ms\": ${4:-30000}, \"max_attempts\": 3}")
	[[ "$code" = 201 || "$code" = 200 ]] || die "PUT workflow $2: HTTP $code $(cat "$work/put.out")"
}

# loadgen ARGS...: runs the load generator; its key=value output becomes
# variables lg_<key>. Returns its exit status.
loadgen() {
	local rc=0 k v
	unset "${!lg_@}"
	"$tools/loadgen" "$@" >"$work/loadgen.out" 2>>"$work/loadgen.log" || rc=$?
	while IFS='=' read -r k v; do
		[[ -n "$k" ]] && printf -v "lg_$k" '%s' "$v"
	done <"$work/loadgen.out"
	return $rc
}

# check_db DB RUNS STEPS LABEL: the correctness checks after a scenario.
failures=()
check_db() {
	local db=$1 runs=$2 steps=$3 label=$4 row
	row=$(psql_db "$db" -F ' ' -c "
	SELECT (SELECT count(*) FROM run),
	       (SELECT count(*) FROM run WHERE status NOT IN ('succeeded','failed','cancelled')),
	       (SELECT count(*) FROM run WHERE status <> 'succeeded' OR final_step <> $steps - 1),
	       (SELECT count(*) FROM (SELECT 1 FROM step_attempt
	                              GROUP BY run_id, generation, step, attempt
	                              HAVING count(*) > 1) d),
	       (SELECT count(*) FROM (SELECT 1 FROM step_attempt
	                              WHERE result IN ('continue','succeed','fail','cancel')
	                              GROUP BY run_id, generation, step
	                              HAVING count(*) > 1) d),
	       (SELECT count(*) FROM step_attempt),
	       (SELECT count(*) FROM step_attempt WHERE result NOT IN ('continue','succeed'))")
	local n active bad dup_att dup_settled attempts errors
	read -r n active bad dup_att dup_settled attempts errors <<<"$row"
	local msg="$label: runs=$n (want $runs) active=$active not_succeeded=$bad dup_attempts=$dup_att dup_settled_steps=$dup_settled attempts=$attempts (want $((runs * steps))) error_attempts=$errors"
	if [[ "$n" != "$runs" || "$active" != 0 || "$bad" != 0 || "$dup_att" != 0 || "$dup_settled" != 0 ]]; then
		say "CORRECTNESS FAIL $msg"
		failures+=("$msg")
	else
		say "check ok: $msg"
	fi
	check_errors=$errors
}

# ---- scenarios --------------------------------------------------------------------

declare -A R # results, written to results.env

# throughput NAME RUNS STEPS KEY INSTANCES [INPUT_BYTES]: fresh db, instances,
# submit, wait, check. Sets R[KEY_*].
throughput() {
	local name=$1 runs=$2 steps=$3 key=$4 ninst=$5 bytes=${6:-0}
	local db hps=() targets="" i rc=0
	fresh_db "$name"
	for ((i = 0; i < ninst; i++)); do
		start_hookflow "$name$i" "$db"
		hps+=("$hf_pid")
		targets+="${targets:+,}127.0.0.1:$hf_port"
	done
	put_workflow "${targets##*:}" "w$steps" "n=$steps"
	curl -sf -X POST "$wh/stats/reset" >/dev/null
	say "$name: $runs runs of $steps step(s), ${ninst} instance(s), input ${bytes} B"
	local args=(submit -u "$targets" -w "w$steps" -n "$runs" -c "$SUBMIT_CONNS" -p "$name"
		-d "$(conninfo "$db")" -T "$RUN_TIMEOUT")
	((bytes > 0)) && args+=(-b "$bytes")
	if [[ "${BENCH_PG_STATEMENTS:-}" = 1 && "$key" = s2 ]]; then
		psql_db "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
			-c "SELECT pg_stat_statements_reset()" >/dev/null
	fi
	checkpoint
	cpu_begin "${hps[@]}"
	loadgen "${args[@]}" || rc=$?
	cpu_end "$key" "${lg_step_attempts:-0}" "${hps[@]}"
	((rc == 0)) || say "$name: loadgen exited $rc (see below)"
	R[${key}_runs_per_s]=${lg_runs_per_s:-0}
	R[${key}_steps_per_s]=${lg_steps_per_s:-0}
	R[${key}_submit_rate]=${lg_submit_rate:-0}
	R[${key}_done_s]=${lg_done_s:-0}
	R[${key}_rss_mib]=$(($(vmhwm_kib "${hps[0]}") / 1024))
	R[${key}_db_mib]=$(psql_db "$db" -c "SELECT (pg_total_relation_size('run') + pg_total_relation_size('step_attempt')) / 1048576")
	R[${key}_deliveries]=$(wh_field steps)
	if [[ "${BENCH_PG_STATEMENTS:-}" = 1 && "$key" = s2 ]]; then
		psql_db "$db" -F ' | ' -c "
		  SELECT calls, round(total_exec_time::numeric, 1) AS ms,
		         round((total_exec_time / calls)::numeric, 3) AS ms_per_call,
		         left(regexp_replace(query, '\s+', ' ', 'g'), 90)
		  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  ORDER BY total_exec_time DESC LIMIT 15" >"$out/pg_stat_statements.txt" || true
		say "top statements in $out/pg_stat_statements.txt"
	fi
	for pid in "${hps[@]}"; do
		stop_hookflow "$pid" "$name"
	done
	check_db "$db" "$runs" "$steps" "$name"
	R[${key}_error_attempts]=$check_errors
	R[${key}_bytes_per_step]=$(psql_db "$db" -c "SELECT (pg_total_relation_size('run') + pg_total_relation_size('step_attempt')) / greatest(count(*), 1) FROM step_attempt")
	((rc == 0)) || failures+=("$name: not every run was accepted and succeeded in time (loadgen exit $rc)")
}

latency() {
	local db rc=0
	fresh_db latency
	start_hookflow latency "$db"
	local pid=$hf_pid
	put_workflow "$hf_port" w1 "n=1"
	put_workflow "$hf_port" "w$LAT_STEPS" "n=$LAT_STEPS"
	checkpoint
	say "latency: $LAT_N sequential runs of 1 step, then of $LAT_STEPS steps"
	loadgen latency -u "127.0.0.1:$hf_port" -w w1 -n "$LAT_N" -p lat1 -d "$(conninfo "$db")" || rc=$?
	R[l1_p50]=${lg_p50_ms:-0} R[l1_p99]=${lg_p99_ms:-0} R[l1_server_p50]=${lg_server_p50_ms:-0}
	loadgen latency -u "127.0.0.1:$hf_port" -w "w$LAT_STEPS" -n "$LAT_N" -p lat10 -d "$(conninfo "$db")" || rc=$?
	R[l10_p50]=${lg_p50_ms:-0} R[l10_p99]=${lg_p99_ms:-0} R[l10_server_p50]=${lg_server_p50_ms:-0}
	stop_hookflow "$pid" latency
	((rc == 0)) || failures+=("latency: some runs did not succeed")
}

# inflight N DELAY_MS KEY: N runs held by the webhook for DELAY_MS at once.
inflight() {
	local n=$1 delay=$2 key=$3 db rc=0
	fresh_db inflight
	start_hookflow inflight "$db" HOOKFLOW_MAX_INFLIGHT=$((n + n / 5))
	local pid=$hf_pid
	R[${key}_idle_rss_mib]=$(($(vmrss_kib "$pid") / 1024))
	put_workflow "$hf_port" slow "n=1&delay_ms=$delay" 60000
	curl -sf -X POST "$wh/stats/reset" >/dev/null
	checkpoint
	# All runs are submitted due at one moment, after the submission should be
	# over (from the submit rate of scenario 1), so that they are all claimable,
	# and in flight, at once.
	local due
	due=$(awk -v n="$n" -v r="${R[s1_submit_rate]:-0}" -v max="$DUE_MAX_MS" \
		'BEGIN { d = r > 0 ? 1500 * n / r + 500 : 10000; if (d < 1000) d = 1000; if (d > max) d = max; printf "%d", d }')
	say "inflight: $n runs due together in $due ms, against a webhook answering after $delay ms"
	cpu_begin "$pid"
	loadgen submit -u "127.0.0.1:$hf_port" -w slow -n "$n" -c "$SUBMIT_CONNS" -p slow \
		-d "$(conninfo "$db")" -T "$RUN_TIMEOUT" -D "$due" || rc=$?
	cpu_end "$key" "${lg_step_attempts:-0}" "$pid"
	R[${key}_rss_mib]=$(($(vmhwm_kib "$pid") / 1024))
	R[${key}_done_s]=${lg_after_due_s:-0}
	R[${key}_terminal]=${lg_succeeded:-0}
	R[${key}_peak_pending]=$(wh_field pending_peak)
	R[${key}_peak_conns]=$(wh_field conns_peak)
	stop_hookflow "$pid" inflight
	check_db "$db" "$n" 1 "inflight $n"
	((rc == 0)) || failures+=("inflight: not every run succeeded in time (loadgen exit $rc)")
}

pgbench_run() {
	psql_db postgres -c "CREATE DATABASE pgb" >/dev/null
	say "pgbench: init, then one-row UPDATE per transaction, -c 32 -j 2 -T $PGBENCH_T"
	"$pgbin/pgbench" -q -i -I "$PGBENCH_INIT" -s "$PGBENCH_SCALE" -d "$(conninfo pgb)" >"$work/pgbench.log" 2>&1 ||
		die "pgbench -i failed"
	cat >"$work/update.sql" <<EOF
\\set id random(1, $((100000 * PGBENCH_SCALE)))
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :id;
EOF
	checkpoint
	"$pgbin/pgbench" -n -c 32 -j 2 -T "$PGBENCH_T" -f "$work/update.sql" -d "$(conninfo pgb)" \
		>"$work/pgbench.out" 2>>"$work/pgbench.log" || die "pgbench failed"
	R[pgbench_tps]=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/pgbench.out" | head -1 | cut -d. -f1)
	R[pgbench_lat_ms]=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$work/pgbench.out")
	[[ -n "${R[pgbench_tps]}" ]] || die "no tps in pgbench output"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# BENCH_COMPARE: an earlier build against this one, alternately, so that the
# machine's drift hits both; prints the medians and exits.
if [[ -n "${BENCH_COMPARE:-}" ]]; then
	[[ -x "$BENCH_COMPARE" ]] || die "BENCH_COMPARE=$BENCH_COMPARE is not an executable"
	this_bin=$bin
	repeat=${BENCH_COMPARE_REPEAT:-5}
	for ((k = 1; k <= repeat; k++)); do
		bin=$BENCH_COMPARE
		throughput "compare_base_$k" "$RUNS10" "$STEPS" "cb_$k" 1
		bin=$this_bin
		throughput "compare_this_$k" "$RUNS10" "$STEPS" "ct_$k" 1
	done
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "compare: $RUNS10 runs of $STEPS steps, one instance, medians of $repeat alternated runs"
		printf '%-10s %14s %10s %10s %10s   %s\n' build transitions/s hf_us pg_us wh_us binary
		for side in cb:"$BENCH_COMPARE" ct:"$this_bin"; do
			p=${side%%:*} b=${side#*:}
			cols=()
			for f in steps_per_s hf_us pg_us wh_us; do
				vals=()
				for ((k = 1; k <= repeat; k++)); do vals+=("${R[${p}_${k}_$f]}"); done
				cols+=("$(median "${vals[@]}")")
			done
			all=() hfs=() pgs=()
			for ((k = 1; k <= repeat; k++)); do
				all+=("${R[${p}_${k}_steps_per_s]}")
				hfs+=("${R[${p}_${k}_hf_us]}")
				pgs+=("${R[${p}_${k}_pg_us]}")
			done
			printf '%-10s %14s %10s %10s %10s   %s\n' "$([[ $p = cb ]] && echo base || echo this)" \
				"${cols[@]}" "$b"
			printf '%10s all runs: transitions/s %s; hf_us %s; pg_us %s\n' "" \
				"$(IFS=,; echo "${all[*]}")" "$(IFS=,; echo "${hfs[*]}")" "$(IFS=,; echo "${pgs[*]}")"
		done
	} | tee "$out/compare.txt"
	exit 0
fi

# shellcheck source=tests/bench/scenario_size.sh
source "$root/tests/bench/scenario_size.sh" # with BENCH_SIZE=1: that scenario alone, then exit

load0=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(now_ms)
throughput runs1 "$RUNS1" 1 s1 1
throughput steps "$RUNS10" "$STEPS" s2 1
latency
inflight "$INFLIGHT" "$DELAY_MS" s4
# The same with a webhook that holds each call for HOLD_MS: long enough for the
# service to have every call in flight at once whatever its dispatch rate, so
# that the memory figure is the one of INFLIGHT concurrent calls.
if ((HOLD_MS > 0)); then
	inflight "$INFLIGHT" "$HOLD_MS" s4b
fi
pgbench_run
# Scale-out: one instance and two instances on one database, alternately,
# SCALE_REPEAT times each, so that the machine's drift hits both sides; #6
# compares the medians. (Comparing with #2, measured minutes earlier, mixed
# the noise of this shared machine into the ratio.)
for ((k = 1; k <= SCALE_REPEAT; k++)); do
	throughput "scale_one_$k" "$RUNS10" "$STEPS" "s6one_$k" 1
	throughput "scale_two_$k" "$RUNS10" "$STEPS" "s6two_$k" 2
done
one=() two=()
for ((k = 1; k <= SCALE_REPEAT; k++)); do
	one+=("${R[s6one_${k}_steps_per_s]}")
	two+=("${R[s6two_${k}_steps_per_s]}")
done
R[s6one_steps_per_s]=$(median "${one[@]}")
R[s6_steps_per_s]=$(median "${two[@]}")
R[s6one_all]=$(IFS=,; echo "${one[*]}")
R[s6_all]=$(IFS=,; echo "${two[*]}")
for f in hf_us pg_us wh_us lg_us other_pct; do
	R[s6_$f]=${R[s6two_${SCALE_REPEAT}_$f]:-}
done

if [[ "${BENCH_SWEEP:-}" = 1 ]]; then
	for n in 500 2000 8000; do throughput "sweep_runs" "$n" 1 "sw_runs_$n" 1; done
	for s in 1 10 30; do throughput "sweep_steps" 500 "$s" "sw_steps_$s" 1; done
	for b in 100 10240 102400; do throughput "sweep_payload" 500 10 "sw_payload_$b" 1 "$b"; done
	for n in 1000 5000 10000; do inflight "$n" 2000 "sw_inflight_$n"; done
	size_scenario
fi
t_total=$((($(now_ms) - t_start) / 1000))

# ---- the table -------------------------------------------------------------------

tps=${R[pgbench_tps]}
ratio() { awk -v a="$1" -v b="$tps" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
verdict() { # verdict CONDITION-COMMAND...
	if [[ "$scale" != full ]]; then
		echo "n/a"
	elif "$@"; then
		echo "PASS"
	else
		echo "FAIL"
	fi
}
s2=${R[s2_steps_per_s]} s6=${R[s6_steps_per_s]} s6one=${R[s6one_steps_per_s]}
scale_ratio=$(awk -v a="$s6" -v b="$s6one" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }')
v1=$(verdict ge "${R[s1_runs_per_s]}" 2500)
target2() { ge "$s2" 5000 && ge "$s2" "$(awk -v t="$tps" 'BEGIN { print 0.6 * t }')"; }
# 10,000 calls really in flight at once (seen by the webhook), under 512 MiB,
# and every run finished, in both in-flight runs.
target4() {
	local k
	for k in s4 s4b; do
		[[ -n "${R[${k}_terminal]:-}" ]] || continue
		[[ "${R[${k}_terminal]}" = "$INFLIGHT" ]] && (("${R[${k}_rss_mib]}" < 512)) || return 1
	done
	local peak=${R[s4b_peak_pending]:-0}
	((peak * 100 >= INFLIGHT * 95))
}
v2=$(verdict target2)
v3a=$(verdict le "${R[l1_p50]}" 4)
v3b=$(verdict le "${R[l10_p50]}" 15)
v4=$(verdict target4)
v6=$(verdict ge "$scale_ratio" 0.95)
dups=PASS
((${#failures[@]} == 0)) || dups=FAIL
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=
if git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then
	dirty=+dirty
fi

default_workers=$(($(nproc) / 2))
((default_workers >= 1)) || default_workers=1
{
	echo
	echo "hookflow bench ($scale) at $commit$dirty, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), PostgreSQL $pgver (fsync=on, synchronous_commit=on), $(gcc --version | head -1)"
	echo "load average before the bench: $load0 (other work on the machine skews every figure)${BENCH_NICE:+; run at nice $BENCH_NICE}"
	echo "hookflow: workers=${BENCH_WORKERS:-$default_workers (default: CPUs / 2)} http_threads=${BENCH_HTTP_THREADS:-4} db_pool=${BENCH_DB_POOL:-8}; loadgen: $SUBMIT_CONNS keep-alive connections; total ${t_total}s"
	echo
	printf '%-4s %-52s %16s %-22s %9s %s\n' "#" "measure" "figure" "target" "vs pgbench" "result"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "1" "$RUNS1 runs x 1 step: runs/s" "${R[s1_runs_per_s]}" ">= 2500" "$(ratio "${R[s1_runs_per_s]}")" "$v1"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "2" "$RUNS10 runs x $STEPS steps: step transitions/s" "$s2" ">= 5000, >= 0.6x pgb" "$(ratio "$s2")" "$v2"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "3a" "idle latency, 1 step: p50 / p99 ms" "${R[l1_p50]} / ${R[l1_p99]}" "p50 <= 4 ms" "-" "$v3a"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "3b" "idle latency, $LAT_STEPS steps: p50 / p99 ms" "${R[l10_p50]} / ${R[l10_p99]}" "p50 <= 15 ms" "-" "$v3b"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "4" "$INFLIGHT in flight (${DELAY_MS} ms webhook): peak RSS MiB" "${R[s4_rss_mib]}" "< 512 MiB, all finish" "-" "$v4"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  finished / peak concurrent at webhook / s after due" "${R[s4_terminal]} / ${R[s4_peak_pending]} / ${R[s4_done_s]}" "" "" ""
	if [[ -n "${R[s4b_terminal]:-}" ]]; then
		printf '%-4s %-52s %16s %-22s %9s %s\n' "4b" "same, webhook holding each call ${HOLD_MS} ms: peak RSS" "${R[s4b_rss_mib]}" "(all in flight at once)" "-" ""
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  finished / peak concurrent at webhook / s after due" "${R[s4b_terminal]} / ${R[s4b_peak_pending]} / ${R[s4b_done_s]}" "" "" ""
	fi
	printf '%-4s %-52s %16s %-22s %9s %s\n' "5" "pgbench 1-row UPDATE, 32 clients: tps" "$tps" "(reference)" "1.00x" "-"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "6" "2 instances, $RUNS10 x $STEPS steps: transitions/s" "$s6" ">= 0.95x of 1 inst." "$(ratio "$s6")" "$v6 (${scale_ratio}x)"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  1 instance, alternated with it (median)" "$s6one" "" "$(ratio "$s6one")" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  runs: 2 instances / 1 instance" "${R[s6_all]} / ${R[s6one_all]}" "" "" ""
	if [[ -n "${R[size_ratio]:-}" ]]; then size_rows; fi
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "no step settled twice, no run lost (all scenarios)" "${#failures[@]} problems" "0" "-" "$dups"
	echo
	echo "CPU per settled step (us): hookflow + postgres + webhook + loadgen; ceiling = $(nproc) cores / (hookflow + postgres);"
	echo "other = CPU used meanwhile by anything else on the machine (% of all cores): it skews the figures"
	for k in s1 s2 s4 s4b s6; do
		[[ -n "${R[${k}_hf_us]:-}" ]] || continue
		printf '  #%-2s %6s + %6s + %5s + %5s us   ceiling %6s steps/s   other %3s%%\n' "${k#s}" \
			"${R[${k}_hf_us]}" "${R[${k}_pg_us]}" "${R[${k}_wh_us]}" "${R[${k}_lg_us]}" \
			"$(awk -v a="${R[${k}_hf_us]}" -v b="${R[${k}_pg_us]}" -v n="$(nproc)" 'BEGIN { if (a + b > 0) printf "%.0f", n * 1e6 / (a + b); else print "-" }')" \
			"${R[${k}_other_pct]}"
	done
	echo
	if [[ "${BENCH_SWEEP:-}" = 1 ]]; then
		echo "sweeps (fresh database and instance per point):"
		for n in 500 2000 8000; do
			printf '  runs %-6s 1 step     : %6s runs/s  submit %6s/s  rss %4s MiB\n' "$n" \
				"${R[sw_runs_${n}_runs_per_s]}" "${R[sw_runs_${n}_submit_rate]}" "${R[sw_runs_${n}_rss_mib]}"
		done
		for s in 1 10 30; do
			printf '  steps %-5s 500 runs   : %6s transitions/s  %6s runs/s  %5s B/step in db\n' "$s" \
				"${R[sw_steps_${s}_steps_per_s]}" "${R[sw_steps_${s}_runs_per_s]}" "${R[sw_steps_${s}_bytes_per_step]}"
		done
		for b in 100 10240 102400; do
			printf '  payload %-7s 500x10 : %6s transitions/s  rss %4s MiB  %8s B/step in db\n' "$b" \
				"${R[sw_payload_${b}_steps_per_s]}" "${R[sw_payload_${b}_rss_mib]}" "${R[sw_payload_${b}_bytes_per_step]}"
		done
		for n in 1000 5000 10000; do
			printf '  in flight %-6s 2 s   : peak rss %4s MiB (idle %s)  done %s s after due  peak at webhook %s\n' "$n" \
				"${R[sw_inflight_${n}_rss_mib]}" "${R[sw_inflight_${n}_idle_rss_mib]}" \
				"${R[sw_inflight_${n}_done_s]}" "${R[sw_inflight_${n}_peak_pending]}"
		done
		echo
	fi
	if ((${#failures[@]} > 0)); then
		echo "CORRECTNESS FAILURES:"
		printf '  %s\n' "${failures[@]}"
		echo
	fi
} | tee "$out/results.txt"

{
	echo "commit=$commit$dirty"
	echo "scale=$scale"
	for k in $(printf '%s\n' "${!R[@]}" | sort); do
		echo "$k=${R[$k]}"
	done
} >"$out/results.env"

((${#failures[@]} == 0)) || die "correctness failures (above)"
say "done in ${t_total}s; results in $out/results.txt"
