# shellcheck shell=bash
# shellcheck disable=SC2034 # results and settings are read by the scripts sourcing this
# Shared by the benchmark scripts (bench.sh, soak.sh): sourced, it defines the
# common state and functions and runs nothing. The caller sets `me` (the prefix
# of its messages, default bench) and, for `throughput`, SUBMIT_CONNS and
# RUN_TIMEOUT, then calls bench_setup, which builds hookflow and the tools,
# makes the throwaway PostgreSQL cluster and starts the webhook; an EXIT trap
# stops every process started and removes the temp dir (kept on failure or
# with BENCH_KEEP=1).
#
# Environment (read here): BENCH_OUT, BENCH_PG_BIN, BENCH_NICE, BENCH_KEEP,
# BENCH_PG_STATEMENTS, BENCH_HTTP_THREADS, BENCH_DB_POOL, BENCH_WORKERS,
# BENCH_PGBOUNCER_POOL, BENCH_PAYLOAD_KIND (see bench.sh).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 2

me=${me:-bench}
pgbin=${BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
out=${BENCH_OUT:-$root/build/bench}
bin=$root/build/hookflow
tools=$root/build/bench

t0_ms=$(date +%s%3N)
say() { printf '%s: [%5.1fs] %s\n' "$me" "$((($(date +%s%3N) - t0_ms) / 100))e-1" "$*" >&2; }
die() {
	printf '%s: FAIL: %s\n' "$me" "$*" >&2
	exit 1
}
now_ms() { date +%s%3N; }

# bench_setup: everything a benchmark needs before its scenarios, in order: the
# build, the temp dir and its clean-up trap, the cluster, the webhook.
bench_setup() {
	bench_build
	bench_workdir
	bench_start_cluster
	bench_start_webhook
}

# ---- build -------------------------------------------------------------------

bench_build() {
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
}

# bench_commit: the commit measured, +dirty when tracked files differ from it.
bench_commit() {
	local c
	c=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
	if git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then
		c+=+dirty
	fi
	echo "$c"
}

# dat_stamp: the line that the data files for charts carry (charts.sh prints it
# in a corner of each chart).
dat_stamp() {
	echo "# run: hookflow $(bench_commit), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, PostgreSQL ${pgver:-?}"
}

# draw_charts: the PNG charts of every data file in $out (tests/bench/charts.sh),
# unless gnuplot is missing.
draw_charts() {
	if ! command -v gnuplot >/dev/null 2>&1; then
		say "gnuplot not found: no charts drawn (Debian: gnuplot-nox, in scripts/deps.sh)"
		return 0
	fi
	"$root/tests/bench/charts.sh" "$out"
}

# ---- processes and clean-up --------------------------------------------------

pids=()     # every background process we started
pg_up=0
work=
pgport=5432

# bench_workdir: the temp dir (sets work) and the EXIT trap that cleans up.
bench_workdir() {
	work=$(mktemp -d /tmp/hookflow-bench.XXXXXX)
	chmod 755 "$work"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	# PostgreSQL refuses to run as root: as root it runs as a system user.
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
}

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

bench_start_cluster() {
	say "initdb a throwaway cluster in $work/pgdata"
	mkdir -m 700 "$work/pgdata" "$work/sock"
	[[ "$(id -u)" -eq 0 ]] && chown "$pguser" "$work/pgdata" "$work/sock"
	# --no-sync: the cluster is thrown away; it only skips initdb's final sync
	as_pg "$pgbin/initdb" -D "$work/pgdata" -U bench --auth=trust -E UTF8 --no-locale \
		--no-instructions --no-sync >"$work/initdb.log" 2>&1 || die "initdb failed (see $work/initdb.log)"
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
# README "Production PostgreSQL", "Autovacuum and checkpoints": every step
# leaves two dead versions of its run row; with the default (1min) they pile up
# between visits. And at thousands of steps a second the default max_wal_size
# (1GB) forces a checkpoint every minute or less, each followed by a burst of
# full-page images: checkpoints every 5 minutes (checkpoint_timeout) instead.
autovacuum_naptime = 10s
max_wal_size = 8GB
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
}

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

# BENCH_PG_STATEMENTS=1: statements_reset DB starts counting DB's statements
# afresh; statements_dump DB prints the top 30 by total time (every statement,
# nested ones included: pg_stat_statements.track = all): calls, total ms, ms,
# rows and shared buffers hit per call. A nested statement's time leaves out
# its executor start-up, which its caller's includes.
statements_reset() {
	psql_db "$1" -c "SET client_min_messages = warning" \
		-c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
		-c "SELECT pg_stat_statements_reset()" >/dev/null
}
statements_dump() {
	psql_db "$1" -F ' | ' -c "
	  SELECT calls, round(total_exec_time::numeric, 1) AS ms,
	         round((total_exec_time / calls)::numeric, 3) AS ms_per_call,
	         round(rows::numeric / calls, 1) AS rows_per_call,
	         round(shared_blks_hit::numeric / calls, 1) AS blks_per_call,
	         left(regexp_replace(query, '\s+', ' ', 'g'), 90)
	  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	  ORDER BY total_exec_time DESC LIMIT 30" || true
}

# ---- PgBouncer --------------------------------------------------------------------

# bench_start_pgbouncer: Debian's PgBouncer in front of the cluster, in
# transaction pooling mode with BENCH_PGBOUNCER_POOL (8) server connections
# per database, on a unix socket in $work/pgbouncer (as the cluster is: no
# TCP on either side). It runs as the cluster's user, daemonized; the EXIT
# trap stops it. Instances started with via_pgbouncer=1 go through it (README
# "PgBouncer"): statements unnamed, LISTEN and migrations direct.
pgb_bin=/usr/sbin/pgbouncer
pgb_pool=${BENCH_PGBOUNCER_POOL:-8}
pgb_port=6432
pgb_pid=
bench_start_pgbouncer() {
	[[ -n "$pgb_pid" ]] && return 0
	[[ -x "$pgb_bin" ]] || die "no $pgb_bin (scripts/deps.sh installs Debian's pgbouncer)"
	local d=$work/pgbouncer
	mkdir -m 700 "$d"
	echo '"bench" ""' >"$d/userlist.txt"
	cat >"$d/pgbouncer.ini" <<EOF
[databases]
* = host=$work/sock port=$pgport
[pgbouncer]
listen_addr =
listen_port = $pgb_port
unix_socket_dir = $d
auth_type = trust
auth_file = $d/userlist.txt
admin_users = bench
pool_mode = transaction
default_pool_size = $pgb_pool
max_client_conn = 2000
logfile = $d/pgbouncer.log
pidfile = $d/pgbouncer.pid
log_connections = 0
log_disconnections = 0
EOF
	[[ "$(id -u)" -eq 0 ]] && chown -R "$pguser" "$d"
	say "pgbouncer: transaction pooling, default_pool_size $pgb_pool"
	as_pg "$pgb_bin" -d "$d/pgbouncer.ini" >"$work/pgbouncer.log" 2>&1 || die "pgbouncer did not start"
	wait_for "pgbouncer" 10 test -s "$d/pgbouncer.pid"
	pgb_pid=$(cat "$d/pgbouncer.pid")
	pids+=("$pgb_pid")
	wait_for "pgbouncer answering" 10 pgb_admin "SHOW VERSION"
	pgb_version=$("$pgb_bin" --version | awk 'NR == 1 { print $2 }')
}
pgb_conninfo() { echo "host=$work/pgbouncer port=$pgb_port user=bench dbname=$1"; }
pgb_admin() { "$pgbin/psql" -X -q -tA -F ' ' -d "$(pgb_conninfo pgbouncer)" -c "$1"; }
# pgb_pool_counts DB: "clients servers" of DB's pool (SHOW POOLS: cl_active +
# cl_waiting, and every server connection whatever its state).
pgb_pool_counts() {
	pgb_admin "SHOW POOLS" | awk -v db="$1" '$1 == db { print $3 + $4, $7 + $10 + $11 + $12 + $13 }'
}

# ---- the webhook ----------------------------------------------------------------

bench_start_webhook() {
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	"$tools/webhook" -p 0 -f "$work/webhook.port" 2>"$work/webhook.log" &
	wh_pid=$!
	pids+=("$wh_pid")
	wait_for "the webhook" 10 test -s "$work/webhook.port"
	whport=$(cat "$work/webhook.port")
	wh="http://127.0.0.1:$whport"
	curl -sf -X POST "$wh/stats/reset" >/dev/null
}
wh_stats() { curl -sf "$wh/stats"; }
wh_field() { wh_stats | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

# ---- hookflow ----------------------------------------------------------------------

# Extra HOOKFLOW_* settings (VAR=VALUE) of the instances throughput() starts.
hf_extra_env=()

# start_hookflow NAME DB [VAR=VALUE...]: starts an instance on a free port; sets
# hf_pid and hf_port.
start_hookflow() {
	local name=$1 db=$2
	shift 2
	free_port
	hf_port=$port
	local envs=(HOOKFLOW_DATABASE_URL="$(conninfo "$db")" HOOKFLOW_LISTEN="127.0.0.1:$hf_port"
		HOOKFLOW_LOG_LEVEL=warn HOOKFLOW_SHUTDOWN_GRACE_MS=3000)
	if [[ -n "${via_pgbouncer:-}" ]]; then
		envs+=(HOOKFLOW_DATABASE_URL="$(pgb_conninfo "$db")" HOOKFLOW_DATABASE_POOLER=transaction
			HOOKFLOW_LISTEN_DATABASE_URL="$(conninfo "$db")")
	fi
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
# machine_split: "BUSY STEAL ALL": the machine's busy time without what the
# hypervisor stole, the stolen time, and all of its time (idle and I/O wait too).
machine_split() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
machine_ticks() { machine_split | awk '{ print $1 + $2 }'; }

# cpu_begin PIDS...: snapshot; cpu_end KEY STEPS PIDS...: sets R[KEY_*] to the CPU
# microseconds per settled step of hookflow (PIDS), PostgreSQL and the webhook,
# and the share of the machine's 2 cores used by everything else meanwhile.
cpu_begin() {
	cpu_hf0=$(pid_ticks "$@") cpu_pg0=$(pg_ticks) cpu_wh0=$(pid_ticks "$wh_pid")
	cpu_pgb0=$(pid_ticks ${pgb_pid:+"$pgb_pid"})
	cpu_all0=$(machine_ticks) cpu_t0=$(now_ms)
}
cpu_end() {
	local key=$1 steps=$2
	shift 2
	local hf pg whk pgb all ms
	hf=$(($(pid_ticks "$@") - cpu_hf0)) pg=$(($(pg_ticks) - cpu_pg0))
	whk=$(($(pid_ticks "$wh_pid") - cpu_wh0)) all=$(($(machine_ticks) - cpu_all0))
	pgb=$(($(pid_ticks ${pgb_pid:+"$pgb_pid"}) - cpu_pgb0))
	ms=$(($(now_ms) - cpu_t0))
	((steps > 0)) || steps=1
	R[${key}_hf_us]=$((hf * 1000000 / clk_tck / steps))
	R[${key}_pg_us]=$((pg * 1000000 / clk_tck / steps))
	R[${key}_wh_us]=$((whk * 1000000 / clk_tck / steps))
	# PgBouncer's, for an instance behind it (via_pgbouncer)
	if [[ -n "${via_pgbouncer:-}" ]]; then
		R[${key}_pgb_us]=$((pgb * 1000000 / clk_tck / steps))
	fi
	# everything else: whatever else runs on the machine
	R[${key}_lg_us]=$((${lg_cpu_ms:-0} * 1000 / steps))
	R[${key}_other_pct]=$(awk -v o="$((all - hf - pg - whk - pgb - ${lg_cpu_ms:-0} * clk_tck / 1000))" -v t="$clk_tck" -v ms="$ms" -v n="$(nproc)" \
		'BEGIN { v = ms > 0 ? 100 * (o / t) / (ms / 1000) / n : 0; printf "%.0f", v < 0 ? 0 : v }')
}

vmhwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
vmrss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# put_workflow PORT NAME QUERY [TIMEOUT_MS]
put_workflow() {
	local code
	code=$(curl -s -o "$work/put.out" -w '%{http_code}' -X PUT "http://127.0.0.1:$1/v1/workflows/$2" \
		-H 'Content-Type: application/json' \
		-d "{\"url\": \"$wh/steps?$3\", \"timeout_ms\": ${4:-30000}, \"max_attempts\": 3${5:-}}")
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

# check_db DB RUNS STEPS LABEL: the correctness checks after a scenario. RUNS
# "-" skips the count of runs (retention deleted some: the soak counts
# submitted against finished runs in the load generator instead).
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
	local msg
	if [[ "$runs" = - ]]; then
		msg="$label: runs kept=$n active=$active not_succeeded=$bad dup_attempts=$dup_att dup_settled_steps=$dup_settled attempts=$attempts error_attempts=$errors"
		runs=$n
	else
		msg="$label: runs=$n (want $runs) active=$active not_succeeded=$bad dup_attempts=$dup_att dup_settled_steps=$dup_settled attempts=$attempts (want $((runs * steps))) error_attempts=$errors"
	fi
	if [[ "$n" != "$runs" || "$active" != 0 || "$bad" != 0 || "$dup_att" != 0 || "$dup_settled" != 0 ]]; then
		say "CORRECTNESS FAIL $msg"
		failures+=("$msg")
	else
		say "check ok: $msg"
	fi
	check_errors=$errors
}

declare -A R # results (bench.sh writes them to results.env)

# throughput NAME RUNS STEPS KEY INSTANCES [INPUT_BYTES]: fresh db, instances,
# submit, wait, check. Sets R[KEY_*].
throughput() {
	local name=$1 runs=$2 steps=$3 key=$4 ninst=$5 bytes=${6:-0} keys=${7:-0}
	local db hps=() targets="" i rc=0
	fresh_db "$name"
	for ((i = 0; i < ninst; i++)); do
		start_hookflow "$name$i" "$db" "${hf_extra_env[@]}"
		hps+=("$hf_pid")
		targets+="${targets:+,}127.0.0.1:$hf_port"
	done
	# With KEYS: run i has concurrency key i % KEYS, at most 2 calls of a key at once.
	put_workflow "${targets##*:}" "w$steps" "n=$steps" 30000 \
		"$( ((keys > 0)) && echo ', "key_concurrency": 2')"
	curl -sf -X POST "$wh/stats/reset" >/dev/null
	say "$name: $runs runs of $steps step(s), ${ninst} instance(s), input ${bytes} B$( ((bytes > 0)) && [[ "${BENCH_PAYLOAD_KIND:-}" = json ]] && echo ' (JSON records)'), ${keys} keys"
	local args=(submit -u "$targets" -w "w$steps" -n "$runs" -c "$SUBMIT_CONNS" -p "$name"
		-d "$(conninfo "$db")" -T "$RUN_TIMEOUT")
	((bytes > 0)) && args+=(-b "$bytes")
	((bytes > 0)) && [[ "${BENCH_PAYLOAD_KIND:-}" = json ]] && args+=(-J)
	((keys > 0)) && args+=(-k "$keys")
	[[ "${BENCH_PG_STATEMENTS:-}" = 1 && "$key" = "${BENCH_PG_STATEMENTS_KEY:-s2}" ]] && statements_reset "$db"
	checkpoint
	local wal0
	wal0=$(psql_db "$db" -c "SELECT pg_current_wal_lsn()")
	cpu_begin "${hps[@]}"
	loadgen "${args[@]}" || rc=$?
	cpu_end "$key" "${lg_step_attempts:-0}" "${hps[@]}"
	# With spans exported (BENCH_TRACES): what the instance says of them.
	if [[ " ${hf_extra_env[*]} " == *" HOOKFLOW_OTLP_ENDPOINT="* ]]; then
		local m
		m=$(curl -sf "http://127.0.0.1:$hf_port/metrics" || true)
		R[${key}_spans_exported]=$(awk '$1 == "hookflow_spans_exported_total" { print $2 }' <<<"$m")
		R[${key}_spans_dropped]=$(awk '/^hookflow_spans_dropped_total/ { s += $2 } END { print s + 0 }' <<<"$m")
	fi
	# WAL bytes per settled step: the cluster's whole WAL meanwhile (autovacuum
	# included), the figure that bounds one primary (README "Beyond one primary").
	R[${key}_wal_b]=$(psql_db "$db" -c "SELECT (pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0') / greatest(${lg_step_attempts:-0}, 1))::bigint")
	((rc == 0)) || say "$name: loadgen exited $rc (see below)"
	R[${key}_runs_per_s]=${lg_runs_per_s:-0}
	R[${key}_steps_per_s]=${lg_steps_per_s:-0}
	R[${key}_submit_rate]=${lg_submit_rate:-0}
	R[${key}_done_s]=${lg_done_s:-0}
	R[${key}_rss_mib]=$(($(vmhwm_kib "${hps[0]}") / 1024))
	R[${key}_db_mib]=$(psql_db "$db" -c "SELECT (pg_total_relation_size('run') + pg_total_relation_size('step_attempt')) / 1048576")
	R[${key}_deliveries]=$(wh_field steps)
	if [[ -n "${via_pgbouncer:-}" ]]; then
		local counts
		counts=$(pgb_pool_counts "$db")
		R[${key}_pgb_clients]=${counts% *} R[${key}_pgb_servers]=${counts#* }
	fi
	if [[ "${BENCH_PG_STATEMENTS:-}" = 1 && "$key" = "${BENCH_PG_STATEMENTS_KEY:-s2}" ]]; then
		statements_dump "$db" >"$out/pg_stat_statements.txt"
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
