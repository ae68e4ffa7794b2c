#!/usr/bin/env bash
# hookflow's benchmark: `make bench` (full) and `make bench-smoke` (BENCH_SCALE=smoke).
#
# It builds hookflow and the bench tools (tests/bench/webhook.c, loadgen.c, into
# build/bench/), makes a throwaway PostgreSQL cluster with durable defaults
# (fsync=on, synchronous_commit=on) in a temp dir, starts one C webhook, and
# runs each scenario on a fresh database with a fresh hookflow:
#
#   1. RUNS1 runs of 1 step submitted as fast as possible: runs/s (full: 20,000,
#      as many transitions as scenario 2, so that the figure is the steady
#      state: 2,000 runs lasted 0.3 s, mostly the start and the tail)
#   2. RUNS10 runs of 10 steps: step transitions/s (settled attempts / elapsed)
#   3. idle latency, submission to terminal (POST then ?wait_ms long-poll), one
#      run at a time, 1-step and 10-step: p50, p99, and where the time goes
#      (submit, claim, call, answer: measured by loadgen from its clock and
#      the database's timestamps); 3c. the same right after a burst of RUNS10
#      10-step runs, within two seconds of it
#   4. INFLIGHT 1-step runs, all due at one moment, against a webhook answering
#      after DELAY_MS, with HOOKFLOW_MAX_INFLIGHT above it: hookflow's peak RSS
#      (VmHWM), how many calls the webhook held at once, all finish;
#      4b. the same with each call held HOLD_MS, so that all are in flight at
#      once: KiB of hookflow's memory per call in flight (alone, and
#      alternated between builds: tests/bench/inflight_mem.sh)
#   5. pgbench on the same cluster: one-row UPDATE per transaction, 32 clients
#   6. scenario 2 with two hookflow instances on one database, alternated with
#      the same on one instance (SCALE_REPEAT times each): the medians' ratio
#   7. flow control's cost: scenario 2 with the runs spread over 10,000
#      concurrency keys and key_concurrency 2, alternated with the same
#      without keys (SCALE_REPEAT times each): the medians' ratio
#   8. scenario 2 with hookflow behind PgBouncer in transaction pooling mode
#      (tests/bench/scenario_pgbouncer.sh), alternated with the same direct
#      (SCALE_REPEAT times each): both medians and their ratio
#
# After every scenario it checks in SQL that all runs exist and succeeded, that
# no (run_id, generation, step, attempt) appears twice in step_attempt and that
# no step was settled with an outcome twice. It prints one table: figure,
# target, ratio to pgbench, PASS/FAIL. Missed performance targets are reported
# but do not fail; a correctness failure exits 1.
#
# It then writes the data of the charts into $BENCH_OUT (latency.dat,
# latency_dist.dat and, with BENCH_SWEEP=1, sweep_steps.dat, sweep_payload.dat,
# sweep_inflight.dat; gnuplot-readable, columns named in a header comment) and
# draws them as PNGs in $BENCH_OUT/charts/ with tests/bench/charts.sh (which
# also draws sweep_kept.dat and soak.dat when present, and can be re-run on
# the data alone). Without gnuplot it says so and draws nothing.
#
# The shared parts (build, cluster, webhook, hookflow instances, the throughput
# scenario and the SQL checks) are in tests/bench/lib.sh, which soak.sh uses too.
#
# Environment:
#   BENCH_SCALE=full|smoke   full (default) or the quick smoke version (50 runs of
#                            1 and 3 steps, 200 in flight, short pgbench, no
#                            performance verdicts; under 30 s on an idle machine)
#   BENCH_SWEEP=1            also run the cost sweeps (runs, steps, payload size,
#                            in-flight calls, runs kept; points in SWEEP_* below)
#                            recorded in BENCHMARKS.md and drawn as charts
#   BENCH_SIZE=1             only the size scenario (runs kept: tests/bench/scenario_size.sh)
#   BENCH_SIZE_REPEAT=N      rounds of the size scenario at full scale (3)
#   BENCH_PGBOUNCER=1        only the PgBouncer scenario (#8; results in $BENCH_OUT/pgbouncer.txt)
#   BENCH_PGBOUNCER_POOL=N   PgBouncer's server connections per database (default 8)
#   BENCH_PG_STATEMENTS=1    load pg_stat_statements and write the top statements
#                            of the 10-step scenario to $BENCH_OUT/pg_stat_statements.txt,
#                            and of the idle 10-step runs (latency scenario) to
#                            latency_statements.txt (with BENCH_LATENCY: _base_K, _this_K)
#   BENCH_PG_STATEMENTS_KEY=K  the scenario whose statements go to pg_stat_statements.txt
#                            instead of the 10-step one (s2): s1 (1-step runs),
#                            s7keys_1 (keys, BENCH_FLOW), ...
#   BENCH_KEEP=1             keep the temp dir (logs, cluster) for inspection
#   BENCH_OUT=DIR            where results.txt/results.env, the .dat files and
#                            charts/ go (build/bench)
#   BENCH_SAVE_CHARTS=1      also copy the charts to docs/bench/ (committed with
#                            BENCHMARKS.md)
#   BENCH_HTTP_THREADS, BENCH_DB_POOL, BENCH_WORKERS   passed to hookflow as
#                            HOOKFLOW_HTTP_THREADS/DB_POOL/WORKERS when set
#   BENCH_PG_BIN             PostgreSQL binaries (/usr/lib/postgresql/15/bin)
#   BENCH_COMPARE=BINARY     instead of the scenarios above: scenario 2 with
#                            BINARY (an earlier build) and with this build,
#                            alternately BENCH_COMPARE_REPEAT times (5), then
#                            the medians of both: transitions/s and CPU per step;
#                            BENCH_COMPARE_STEPS=N runs of N steps instead of 10
#                            (as many runs as make the same transitions)
#   BENCH_TRACES=1           instead of the scenarios above: the cost of traces
#                            (README "Traces"): scenario 2 with spans exported
#                            (HOOKFLOW_OTLP_ENDPOINT: a local sink that takes and
#                            discards them, a second bench webhook) and without,
#                            alternately BENCH_COMPARE_REPEAT times (5), then the
#                            medians of both and their ratio (target >= 0.9);
#                            BENCH_TRACES_BASE=BINARY runs the side without spans
#                            with BINARY (an earlier build: what traces cost in all)
#   BENCH_FLOW=1             instead of the scenarios above: scenario 7 alone (10,000
#                            keys with key_concurrency 2 against no key, alternately
#                            SCALE_REPEAT times each, 5), then the medians of both,
#                            their ratio (target >= 0.8) and CPU per step;
#                            BENCH_FLOW_BASE=BINARY runs both sides with BINARY (an
#                            earlier build) too, in turn with this one, in each round
#   BENCH_PAYLOAD=1          instead of the scenarios above: the payload sweep's points
#                            (SWEEP_PAYLOAD: 500 runs of 10 steps each) alternately
#                            BENCH_COMPARE_REPEAT times (3), then the medians, each
#                            point's ratio to the smallest, CPU per step and peak RSS;
#                            BENCH_PAYLOAD_BASE=BINARY runs every point with BINARY
#                            (an earlier build) too, in turn with this one
#   BENCH_PAYLOAD_RUNS=N     runs a point with BENCH_PAYLOAD (500; at most as many
#                            calls are in flight at once, up to HOOKFLOW_MAX_INFLIGHT)
#   BENCH_PAYLOAD_KIND=json  the runs' inputs (and so every step's payload) are
#                            typical JSON records, which lz4 compresses, instead
#                            of incompressible text (the default: the worst case
#                            for storage, and the figures the targets are judged on)
#   BENCH_LATENCY=1          instead of the scenarios above: the idle latency scenario
#                            (#3a/3b/3c) alone, BENCH_COMPARE_REPEAT times (3), then the
#                            medians of its p50s and of the breakdown; BENCH_LATENCY_BASE=
#                            BINARY runs it with BINARY (an earlier build) too, in turn
#   BENCH_NICE=N             run everything at nice N (e.g. -5 as root) so that other
#                            work on a shared machine skews the figures less; the
#                            table says so
set -euo pipefail
shopt -s inherit_errexit

me=bench
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

scale=${BENCH_SCALE:-full}

case "$scale" in
full)
	RUNS1=20000 RUNS10=2000 STEPS=10 LAT_N=200 LAT_STEPS=10 INFLIGHT=10000 DELAY_MS=2000 HOLD_MS=30000
	PGBENCH_T=15 PGBENCH_SCALE=10 PGBENCH_INIT=dtgvp SUBMIT_CONNS=64 RUN_TIMEOUT=300 DUE_MAX_MS=60000
	SCALE_REPEAT=5 LATB_N1=50 LATB_N10=20
	;;
smoke)
	RUNS1=50 RUNS10=50 STEPS=3 LAT_N=10 LAT_STEPS=3 INFLIGHT=200 DELAY_MS=500 HOLD_MS=0
	PGBENCH_T=2 PGBENCH_SCALE=1 PGBENCH_INIT=dtGp SUBMIT_CONNS=16 RUN_TIMEOUT=20 DUE_MAX_MS=2000
	SCALE_REPEAT=1 LATB_N1=5 LATB_N10=3
	;;
*)
	echo "bench: BENCH_SCALE must be full or smoke" >&2
	exit 2
	;;
esac

# The sweeps' points (BENCH_SWEEP=1), each on a fresh database and instance;
# charts.sh draws them. 500 runs a point, of 10 steps for the payload sweep.
SWEEP_RUNS=(500 2000 8000)
SWEEP_STEPS=(1 3 10 30)
# BENCH_PAYLOAD_SIZES="B ..." replaces the payload sizes (bytes) of the sweep and of BENCH_PAYLOAD.
read -ra SWEEP_PAYLOAD <<<"${BENCH_PAYLOAD_SIZES:-100 1024 10240 102400}"
SWEEP_INFLIGHT=(1000 2000 5000 10000)
SWEEP_DELAY_MS=2000

bench_setup
# The data files this run writes for the charts: none left from an earlier run.
rm -f "$out"/latency.dat "$out"/latency_dist.dat "$out"/sweep_steps.dat \
	"$out"/sweep_payload.dat "$out"/sweep_inflight.dat

# ---- scenarios --------------------------------------------------------------------

# bd_keep KEY: the latency breakdown loadgen measured (loadgen.c, "latency").
bd_keep() {
	local f
	for f in submit claim call answer; do
		local v="lg_bd_${f}_ms"
		R[${1}_bd_$f]=${!v:-0}
	done
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
	loadgen latency -u "127.0.0.1:$hf_port" -w w1 -n "$LAT_N" -p lat1 -d "$(conninfo "$db")" \
		-o "$work/latency_1.raw" || rc=$?
	R[l1_p50]=${lg_p50_ms:-0} R[l1_p99]=${lg_p99_ms:-0} R[l1_server_p50]=${lg_server_p50_ms:-0}
	R[l1_p90]=${lg_p90_ms:-0} R[l1_max]=${lg_max_ms:-0}
	bd_keep l1
	[[ "${BENCH_PG_STATEMENTS:-}" = 1 ]] && statements_reset "$db"
	loadgen latency -u "127.0.0.1:$hf_port" -w "w$LAT_STEPS" -n "$LAT_N" -p lat10 -d "$(conninfo "$db")" \
		-o "$work/latency_n.raw" || rc=$?
	if [[ "${BENCH_PG_STATEMENTS:-}" = 1 ]]; then
		statements_dump "$db" >"$out/latency_statements${lat_tag:+_$lat_tag}.txt"
		say "top statements in $out/latency_statements${lat_tag:+_$lat_tag}.txt"
	fi
	R[l10_p50]=${lg_p50_ms:-0} R[l10_p99]=${lg_p99_ms:-0} R[l10_server_p50]=${lg_server_p50_ms:-0}
	R[l10_p90]=${lg_p90_ms:-0} R[l10_max]=${lg_max_ms:-0}
	bd_keep l10
	# The same right after a burst of RUNS10 runs of LAT_STEPS steps: what a
	# run waits for while the service and PostgreSQL catch up (autovacuum,
	# dirty buffers, caches the burst pushed out). Both measures finish
	# within two seconds of the burst's last settlement (lb_span_ms says).
	say "latency after a burst of $RUNS10 runs of $LAT_STEPS steps"
	loadgen submit -u "127.0.0.1:$hf_port" -w "w$LAT_STEPS" -n "$RUNS10" -c "$SUBMIT_CONNS" \
		-p burst -d "$(conninfo "$db")" -T "$RUN_TIMEOUT" || rc=$?
	local tb
	tb=$(now_ms)
	loadgen latency -u "127.0.0.1:$hf_port" -w w1 -n "$LATB_N1" -p latb1 -d "$(conninfo "$db")" || rc=$?
	R[l1b_p50]=${lg_p50_ms:-0} R[l1b_p99]=${lg_p99_ms:-0}
	loadgen latency -u "127.0.0.1:$hf_port" -w "w$LAT_STEPS" -n "$LATB_N10" -p latb10 \
		-d "$(conninfo "$db")" || rc=$?
	R[l10b_p50]=${lg_p50_ms:-0} R[l10b_p99]=${lg_p99_ms:-0}
	R[lb_span_ms]=$(($(now_ms) - tb))
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
# alternated_medians S BASE TEST: the medians of the SCALE_REPEAT alternated
# rounds S<BASE>_k and S<TEST>_k: R[S<BASE>_steps_per_s] and, for the side
# under test, R[S_steps_per_s]; every round's figure in R[S<BASE>_all] and
# R[S_all]; the CPU split of the last round under test in R[S_hf_us] ...
alternated_medians() {
	local s=$1 base=$2 test=$3 k f base_all=() test_all=()
	for ((k = 1; k <= SCALE_REPEAT; k++)); do
		base_all+=("${R[${s}${base}_${k}_steps_per_s]}")
		test_all+=("${R[${s}${test}_${k}_steps_per_s]}")
	done
	R[${s}${base}_steps_per_s]=$(median "${base_all[@]}")
	R[${s}_steps_per_s]=$(median "${test_all[@]}")
	R[${s}${base}_all]=$(IFS=,; echo "${base_all[*]}")
	R[${s}_all]=$(IFS=,; echo "${test_all[*]}")
	for f in hf_us pg_us wh_us lg_us other_pct; do
		R[${s}_$f]=${R[${s}${test}_${SCALE_REPEAT}_$f]:-}
	done
}

# BENCH_COMPARE: an earlier build against this one, alternately, so that the
# machine's drift hits both; prints the medians and exits.
if [[ -n "${BENCH_COMPARE:-}" ]]; then
	[[ -x "$BENCH_COMPARE" ]] || die "BENCH_COMPARE=$BENCH_COMPARE is not an executable"
	this_bin=$bin
	repeat=${BENCH_COMPARE_REPEAT:-5}
	# as many transitions as scenario 2 whatever the steps per run
	cmp_steps=${BENCH_COMPARE_STEPS:-$STEPS}
	cmp_runs=$((RUNS10 * STEPS / cmp_steps))
	for ((k = 1; k <= repeat; k++)); do
		bin=$BENCH_COMPARE
		throughput "compare_base_$k" "$cmp_runs" "$cmp_steps" "cb_$k" 1
		bin=$this_bin
		throughput "compare_this_$k" "$cmp_runs" "$cmp_steps" "ct_$k" 1
	done
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "compare: $cmp_runs runs of $cmp_steps steps, one instance, medians of $repeat alternated runs"
		printf '%-10s %14s %10s %10s %10s %10s   %s\n' build transitions/s hf_us pg_us wh_us wal_b binary
		for side in cb:"$BENCH_COMPARE" ct:"$this_bin"; do
			p=${side%%:*} b=${side#*:}
			cols=()
			for f in steps_per_s hf_us pg_us wh_us wal_b; do
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
			printf '%-10s %14s %10s %10s %10s %10s   %s\n' "$([[ $p = cb ]] && echo base || echo this)" \
				"${cols[@]}" "$b"
			printf '%10s all runs: transitions/s %s; hf_us %s; pg_us %s\n' "" \
				"$(IFS=,; echo "${all[*]}")" "$(IFS=,; echo "${hfs[*]}")" "$(IFS=,; echo "${pgs[*]}")"
		done
	} | tee "$out/compare.txt"
	exit 0
fi

# BENCH_PAYLOAD: the payload sweep's points alone, alternately (and with an
# earlier build in turn, BENCH_PAYLOAD_BASE); prints the medians and exits.
if [[ "${BENCH_PAYLOAD:-}" = 1 ]]; then
	this_bin=$bin
	pay_base=${BENCH_PAYLOAD_BASE:-}
	[[ -z "$pay_base" || -x "$pay_base" ]] || die "BENCH_PAYLOAD_BASE=$pay_base is not an executable"
	repeat=${BENCH_COMPARE_REPEAT:-3}
	pay_runs=${BENCH_PAYLOAD_RUNS:-500}
	[[ "$pay_runs" =~ ^[1-9][0-9]*$ ]] || die "BENCH_PAYLOAD_RUNS must be a positive integer, not '$pay_runs'"
	sides=(pt)
	[[ -n "$pay_base" ]] && sides=(pb pt)
	for ((k = 1; k <= repeat; k++)); do
		for b in "${SWEEP_PAYLOAD[@]}"; do
			for side in "${sides[@]}"; do
				bin=$([[ $side = pb ]] && echo "$pay_base" || echo "$this_bin")
				throughput "payload_${side}_${b}_$k" "$pay_runs" 10 "${side}_${b}_$k" 1 "$b"
			done
		done
	done
	bin=$this_bin
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "payload sizes: $pay_runs runs of 10 steps, one instance, medians of $repeat alternated rounds," \
			"$([[ "${BENCH_PAYLOAD_KIND:-}" = json ]] && echo "JSON records" || echo "incompressible")"
		[[ -n "$pay_base" ]] && echo "base: $pay_base; this: $this_bin"
		printf '%-5s %8s %14s %8s %10s %10s %10s %10s %8s   %s\n' build bytes transitions/s ratio \
			hf_us pg_us wal_b db_b/step rss_mib 'all rounds: transitions/s; rss_mib'
		for side in "${sides[@]}"; do
			first=
			for b in "${SWEEP_PAYLOAD[@]}"; do
				cols=() all=()
				for f in steps_per_s hf_us pg_us wal_b bytes_per_step rss_mib; do
					vals=()
					for ((k = 1; k <= repeat; k++)); do vals+=("${R[${side}_${b}_${k}_$f]}"); done
					cols+=("$(median "${vals[@]}")")
				done
				rss=()
				for ((k = 1; k <= repeat; k++)); do
					all+=("${R[${side}_${b}_${k}_steps_per_s]}")
					rss+=("${R[${side}_${b}_${k}_rss_mib]}")
				done
				first=${first:-${cols[0]}}
				printf '%-5s %8s %14s %8s %10s %10s %10s %10s %8s   %s\n' \
					"$([[ $side = pb ]] && echo base || echo this)" "$b" "${cols[0]}" \
					"$(awk -v a="${cols[0]}" -v b="$first" 'BEGIN { printf "%.3fx", (b > 0 ? a / b : 0) }')" \
					"${cols[@]:1}" "$(IFS=,; echo "${all[*]}"); $(IFS=,; echo "${rss[*]}")"
			done
		done
	} | tee "$out/payload.txt"
	exit 0
fi

# BENCH_LATENCY: the latency scenario alone, in turn with an earlier build
# (BENCH_LATENCY_BASE); prints the medians and exits.
if [[ "${BENCH_LATENCY:-}" = 1 ]]; then
	this_bin=$bin
	lat_base=${BENCH_LATENCY_BASE:-}
	[[ -z "$lat_base" || -x "$lat_base" ]] || die "BENCH_LATENCY_BASE=$lat_base is not an executable"
	repeat=${BENCH_COMPARE_REPEAT:-3}
	sides=(lt)
	[[ -n "$lat_base" ]] && sides=(lb lt)
	lat_keys=(l1_p50 l1_p99 l1_bd_submit l1_bd_claim l1_bd_call l1_bd_answer l10_p50 l10_p99
		l10_bd_claim l10_bd_call l10_bd_answer l1b_p50 l10b_p50)
	for ((k = 1; k <= repeat; k++)); do
		for side in "${sides[@]}"; do
			bin=$([[ $side = lb ]] && echo "$lat_base" || echo "$this_bin")
			lat_tag=$([[ $side = lb ]] && echo "base_$k" || echo "this_$k")
			latency
			for f in "${lat_keys[@]}"; do R[${side}_${k}_$f]=${R[$f]}; done
		done
	done
	bin=$this_bin
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "idle latency ($LAT_N runs of 1 and of $LAT_STEPS steps; after a burst: $LATB_N1 and $LATB_N10), medians of $repeat rounds, ms"
		[[ -n "$lat_base" ]] && echo "base: $lat_base; this: $this_bin"
		for side in "${sides[@]}"; do
			line="$([[ $side = lb ]] && echo base || echo this):"
			for f in "${lat_keys[@]}"; do
				vals=()
				for ((k = 1; k <= repeat; k++)); do vals+=("${R[${side}_${k}_$f]}"); done
				line+=" $f=$(printf '%s\n' "${vals[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
			done
			echo "$line"
		done
	} | tee "$out/latency.txt"
	exit 0
fi

# BENCH_TRACES: spans exported against none, alternately, on this build;
# prints the medians and their ratio and exits.
if [[ "${BENCH_TRACES:-}" = 1 ]]; then
	"$tools/webhook" -p 0 -f "$work/sink.port" 2>"$work/sink.log" &
	pids+=("$!")
	wait_for "the span sink" 10 test -s "$work/sink.port"
	sink="http://127.0.0.1:$(cat "$work/sink.port")"
	repeat=${BENCH_COMPARE_REPEAT:-5}
	this_bin=$bin
	base_bin=${BENCH_TRACES_BASE:-$bin}
	[[ -x "$base_bin" ]] || die "BENCH_TRACES_BASE=$base_bin is not an executable"
	for ((k = 1; k <= repeat; k++)); do
		bin=$base_bin hf_extra_env=()
		throughput "traces_off_$k" "$RUNS10" "$STEPS" "toff_$k" 1
		bin=$this_bin hf_extra_env=(HOOKFLOW_OTLP_ENDPOINT="$sink")
		throughput "traces_on_$k" "$RUNS10" "$STEPS" "ton_$k" 1
	done
	hf_extra_env=()
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "traces: $RUNS10 runs of $STEPS steps, one instance, medians of $repeat alternated runs"
		echo "without spans: $base_bin; spans exported: $this_bin"
		printf '%-10s %14s %10s %10s %10s   %s\n' spans transitions/s hf_us pg_us wal_b \
			'all runs: transitions/s'
		for p in toff ton; do
			cols=() all=()
			for f in steps_per_s hf_us pg_us wal_b; do
				vals=()
				for ((k = 1; k <= repeat; k++)); do vals+=("${R[${p}_${k}_$f]}"); done
				cols+=("$(median "${vals[@]}")")
			done
			for ((k = 1; k <= repeat; k++)); do all+=("${R[${p}_${k}_steps_per_s]}"); done
			R[${p}_steps_per_s]=${cols[0]}
			printf '%-10s %14s %10s %10s %10s   %s\n' "$([[ $p = toff ]] && echo off || echo exported)" \
				"${cols[@]}" "$(IFS=,; echo "${all[*]}")"
		done
		exp=() drop=()
		for ((k = 1; k <= repeat; k++)); do
			exp+=("${R[ton_${k}_spans_exported]:-?}")
			drop+=("${R[ton_${k}_spans_dropped]:-?}")
		done
		echo "spans exported when the load ended: $(IFS=,; echo "${exp[*]}"); dropped: $(IFS=,; echo "${drop[*]}")"
		awk -v a="${R[ton_steps_per_s]}" -v b="${R[toff_steps_per_s]}" \
			'BEGIN { r = b > 0 ? a / b : 0; printf "ratio exported/off: %.3f (target >= 0.9): %s\n", r, (r >= 0.9 ? "PASS" : "MISS") }'
	} | tee "$out/traces.txt"
	exit 0
fi

# BENCH_FLOW: scenario 7 alone (keys against no key, alternately,
# SCALE_REPEAT times each); prints the medians, their ratio and the CPU per
# step of both sides, and exits. With BENCH_FLOW_BASE=BINARY each round runs
# both sides with BINARY (an earlier build) too, in turn with this one.
if [[ "${BENCH_FLOW:-}" = 1 ]]; then
	this_bin=$bin
	flow_base=${BENCH_FLOW_BASE:-}
	[[ -z "$flow_base" || -x "$flow_base" ]] || die "BENCH_FLOW_BASE=$flow_base is not an executable"
	sides=(s7none s7keys)
	[[ -n "$flow_base" ]] && sides=(b7none b7keys s7none s7keys)
	for ((k = 1; k <= SCALE_REPEAT; k++)); do
		if [[ -n "$flow_base" ]]; then
			bin=$flow_base
			throughput "flow_base_none_$k" "$RUNS10" "$STEPS" "b7none_$k" 1
			throughput "flow_base_keys_$k" "$RUNS10" "$STEPS" "b7keys_$k" 1 0 10000
			bin=$this_bin
		fi
		throughput "flow_none_$k" "$RUNS10" "$STEPS" "s7none_$k" 1
		throughput "flow_keys_$k" "$RUNS10" "$STEPS" "s7keys_$k" 1 0 10000
	done
	((${#failures[@]} == 0)) || die "$(printf '%s; ' "${failures[@]}")"
	{
		echo "flow: $RUNS10 runs of $STEPS steps, one instance, 10,000 keys with key_concurrency 2" \
			"against no key, medians of $SCALE_REPEAT alternated rounds"
		echo "this build: $this_bin${flow_base:+; base: $flow_base}"
		printf '%-10s %14s %10s %10s %10s   %s\n' side transitions/s hf_us pg_us wal_b \
			'all runs: transitions/s; hf_us; pg_us'
		for p in "${sides[@]}"; do
			cols=() all=() hfs=() pgs=()
			for f in steps_per_s hf_us pg_us wal_b; do
				vals=()
				for ((k = 1; k <= SCALE_REPEAT; k++)); do vals+=("${R[${p}_${k}_$f]}"); done
				cols+=("$(median "${vals[@]}")")
			done
			for ((k = 1; k <= SCALE_REPEAT; k++)); do
				all+=("${R[${p}_${k}_steps_per_s]}")
				hfs+=("${R[${p}_${k}_hf_us]}")
				pgs+=("${R[${p}_${k}_pg_us]}")
			done
			R[${p}_steps_per_s]=${cols[0]}
			printf '%-10s %14s %10s %10s %10s   %s; %s; %s\n' \
				"$([[ $p = b* ]] && echo base || echo this) $([[ $p = *none ]] && echo none || echo keys)" \
				"${cols[@]}" "$(IFS=,; echo "${all[*]}")" "$(IFS=,; echo "${hfs[*]}")" \
				"$(IFS=,; echo "${pgs[*]}")"
		done
		for pre in ${flow_base:+b7} s7; do
			ratios=()
			for ((k = 1; k <= SCALE_REPEAT; k++)); do
				ratios+=("$(awk -v a="${R[${pre}keys_${k}_steps_per_s]}" -v b="${R[${pre}none_${k}_steps_per_s]}" \
					'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')")
			done
			awk -v a="${R[${pre}keys_steps_per_s]}" -v b="${R[${pre}none_steps_per_s]}" \
				-v all="$(IFS=,; echo "${ratios[*]}")" -v who="$([[ $pre = b7 ]] && echo base || echo this)" \
				'BEGIN { r = b > 0 ? a / b : 0; printf "%s: ratio of the medians keys/no key: %.3f (target >= 0.8): %s; per round: %s\n", who, r, (r >= 0.8 ? "PASS" : "MISS"), all }'
		done
		if [[ -n "$flow_base" ]]; then
			awk -v a="${R[s7none_steps_per_s]}" -v b="${R[b7none_steps_per_s]}" \
				'BEGIN { printf "no key, this/base: %.3f (target: within 5%%)\n", (b > 0 ? a / b : 0) }'
		fi
	} | tee "$out/flow.txt"
	exit 0
fi

# shellcheck source=tests/bench/scenario_size.sh
source "$root/tests/bench/scenario_size.sh" # with BENCH_SIZE=1: that scenario alone, then exit
# shellcheck source=tests/bench/scenario_pgbouncer.sh
source "$root/tests/bench/scenario_pgbouncer.sh" # with BENCH_PGBOUNCER=1: alone, then exit

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
alternated_medians s6 one two

# Flow control's cost (issue 14): the same runs spread over 10,000
# concurrency keys with key_concurrency set, against no key, alternately
# SCALE_REPEAT times each; #7 compares the medians.
for ((k = 1; k <= SCALE_REPEAT; k++)); do
	throughput "flow_none_$k" "$RUNS10" "$STEPS" "s7none_$k" 1
	throughput "flow_keys_$k" "$RUNS10" "$STEPS" "s7keys_$k" 1 0 10000
done
alternated_medians s7 none keys

# PgBouncer (issue 17): #8, scenario 2 behind PgBouncer against direct.
pgbouncer_scenario

if [[ "${BENCH_SWEEP:-}" = 1 ]]; then
	for n in "${SWEEP_RUNS[@]}"; do throughput "sweep_runs" "$n" 1 "sw_runs_$n" 1; done
	for s in "${SWEEP_STEPS[@]}"; do throughput "sweep_steps" 500 "$s" "sw_steps_$s" 1; done
	for b in "${SWEEP_PAYLOAD[@]}"; do throughput "sweep_payload" 500 10 "sw_payload_$b" 1 "$b"; done
	for n in "${SWEEP_INFLIGHT[@]}"; do inflight "$n" "$SWEEP_DELAY_MS" "sw_inflight_$n"; done
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
target1() { ge "${R[s1_runs_per_s]}" 2500 && ge "${R[s1_runs_per_s]}" "$(awk -v t="$tps" 'BEGIN { print 0.6 * t }')"; }
v1=$(verdict target1)
target2() { ge "$s2" 5000 && ge "$s2" "$(awk -v t="$tps" 'BEGIN { print 0.8 * t }')"; }
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
v3a=$(verdict le "${R[l1_p50]}" 1.5)
v3b=$(verdict le "${R[l10_p50]}" 6)
target3c() {
	le "${R[l1b_p50]}" "$(awk -v a="${R[l1_p50]}" 'BEGIN { print 2 * a }')" &&
		le "${R[l10b_p50]}" "$(awk -v a="${R[l10_p50]}" 'BEGIN { print 2 * a }')" &&
		((${R[lb_span_ms]} <= 2000))
}
v3c=$(verdict target3c)
kib_per_call=$(awk -v r="${R[s4b_rss_mib]:-0}" -v i="${R[s4b_idle_rss_mib]:-0}" -v n="$INFLIGHT" \
	'BEGIN { if (n > 0 && r > 0) printf "%.1f", (r - i) * 1024 / n; else print 0 }')
v4b=$(verdict le "$kib_per_call" 12)
v4=$(verdict target4)
v6=$(verdict ge "$scale_ratio" 0.95)
s7=${R[s7_steps_per_s]} s7none=${R[s7none_steps_per_s]}
flow_ratio=$(awk -v a="$s7" -v b="$s7none" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }')
v7=$(verdict ge "$flow_ratio" 0.8)
dups=PASS
((${#failures[@]} == 0)) || dups=FAIL
commit=$(bench_commit)

default_workers=$(($(nproc) / 2))
((default_workers >= 1)) || default_workers=1
{
	echo
	echo "hookflow bench ($scale) at $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), PostgreSQL $pgver (fsync=on, synchronous_commit=on), $(gcc --version | head -1)"
	echo "load average before the bench: $load0 (other work on the machine skews every figure)${BENCH_NICE:+; run at nice $BENCH_NICE}"
	echo "hookflow: workers=${BENCH_WORKERS:-$default_workers (default: CPUs / 2)} http_threads=${BENCH_HTTP_THREADS:-4} db_pool=${BENCH_DB_POOL:-8}; loadgen: $SUBMIT_CONNS keep-alive connections; total ${t_total}s"
	echo
	printf '%-4s %-52s %16s %-22s %9s %s\n' "#" "measure" "figure" "target" "vs pgbench" "result"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "1" "$RUNS1 runs x 1 step: runs/s" "${R[s1_runs_per_s]}" ">= 2500, >= 0.6x pgb" "$(ratio "${R[s1_runs_per_s]}")" "$v1"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "2" "$RUNS10 runs x $STEPS steps: step transitions/s" "$s2" ">= 5000, >= 0.8x pgb" "$(ratio "$s2")" "$v2"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "3a" "idle latency, 1 step: p50 / p99 ms" "${R[l1_p50]} / ${R[l1_p99]}" "p50 <= 1.5 ms" "-" "$v3a"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  submit / claim / call / answer (medians, ms)" "${R[l1_bd_submit]} / ${R[l1_bd_claim]} / ${R[l1_bd_call]} / ${R[l1_bd_answer]}" "(per step: claim, call)" "" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "3b" "idle latency, $LAT_STEPS steps: p50 / p99 ms" "${R[l10_p50]} / ${R[l10_p99]}" "p50 <= 6 ms" "-" "$v3b"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  submit / claim / call / answer (medians, ms)" "${R[l10_bd_submit]} / ${R[l10_bd_claim]} / ${R[l10_bd_call]} / ${R[l10_bd_answer]}" "(per step: claim, call)" "" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "3c" "after a $RUNS10-run burst: p50 1 step / $LAT_STEPS steps ms" "${R[l1b_p50]} / ${R[l10b_p50]}" "<= 2x idle, in 2 s" "-" "$v3c (${R[lb_span_ms]} ms)"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "4" "$INFLIGHT in flight (${DELAY_MS} ms webhook): peak RSS MiB" "${R[s4_rss_mib]}" "< 512 MiB, all finish" "-" "$v4"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  finished / peak concurrent at webhook / s after due" "${R[s4_terminal]} / ${R[s4_peak_pending]} / ${R[s4_done_s]}" "" "" ""
	if [[ -n "${R[s4b_terminal]:-}" ]]; then
		printf '%-4s %-52s %16s %-22s %9s %s\n' "4b" "same, webhook holding each call ${HOLD_MS} ms: peak RSS" "${R[s4b_rss_mib]}" "(all in flight at once)" "-" ""
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  KiB per call in flight (over ${R[s4b_idle_rss_mib]} MiB idle)" "$kib_per_call" "<= 12 KiB" "-" "$v4b"
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  finished / peak concurrent at webhook / s after due" "${R[s4b_terminal]} / ${R[s4b_peak_pending]} / ${R[s4b_done_s]}" "" "" ""
	fi
	printf '%-4s %-52s %16s %-22s %9s %s\n' "5" "pgbench 1-row UPDATE, 32 clients: tps" "$tps" "(reference)" "1.00x" "-"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "6" "2 instances, $RUNS10 x $STEPS steps: transitions/s" "$s6" ">= 0.95x of 1 inst." "$(ratio "$s6")" "$v6 (${scale_ratio}x)"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  1 instance, alternated with it (median)" "$s6one" "" "$(ratio "$s6one")" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  runs: 2 instances / 1 instance" "${R[s6_all]} / ${R[s6one_all]}" "" "" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "7" "10,000 keys, key_concurrency 2: transitions/s" "$s7" ">= 0.8x of no key" "$(ratio "$s7")" "$v7 (${flow_ratio}x)"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  no key, alternated with it (median)" "$s7none" "" "$(ratio "$s7none")" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  runs: keys / no key" "${R[s7_all]} / ${R[s7none_all]}" "" "" ""
	pgbouncer_rows ratio
	if [[ -n "${R[size_ratio]:-}" ]]; then size_rows; fi
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "no step settled twice, no run lost (all scenarios)" "${#failures[@]} problems" "0" "-" "$dups"
	echo
	echo "CPU per settled step (us): hookflow + postgres + webhook + loadgen; ceiling = $(nproc) cores / (hookflow + postgres);"
	echo "other = CPU used meanwhile by anything else on the machine (% of all cores): it skews the figures;"
	echo "WAL = the cluster's WAL bytes per settled step"
	for k in s1 s2 s4 s4b s6 s7 s8; do
		[[ -n "${R[${k}_hf_us]:-}" ]] || continue
		printf '  #%-2s %6s + %6s + %5s + %5s us   ceiling %6s steps/s   other %3s%%   WAL %6s B\n' "${k#s}" \
			"${R[${k}_hf_us]}" "${R[${k}_pg_us]}" "${R[${k}_wh_us]}" "${R[${k}_lg_us]}" \
			"$(awk -v a="${R[${k}_hf_us]}" -v b="${R[${k}_pg_us]}" -v n="$(nproc)" 'BEGIN { if (a + b > 0) printf "%.0f", n * 1e6 / (a + b); else print "-" }')" \
			"${R[${k}_other_pct]}" "${R[${k}_wal_b]:--}"
	done
	echo "  #8 behind PgBouncer: PgBouncer itself ${R[s8_pgb_us]} us per step more (not in the ceiling)"
	echo
	if [[ "${BENCH_SWEEP:-}" = 1 ]]; then
		echo "sweeps (fresh database and instance per point):"
		for n in "${SWEEP_RUNS[@]}"; do
			printf '  runs %-6s 1 step     : %6s runs/s  submit %6s/s  rss %4s MiB\n' "$n" \
				"${R[sw_runs_${n}_runs_per_s]}" "${R[sw_runs_${n}_submit_rate]}" "${R[sw_runs_${n}_rss_mib]}"
		done
		for s in "${SWEEP_STEPS[@]}"; do
			printf '  steps %-5s 500 runs   : %6s transitions/s  %6s runs/s  %5s B/step in db\n' "$s" \
				"${R[sw_steps_${s}_steps_per_s]}" "${R[sw_steps_${s}_runs_per_s]}" "${R[sw_steps_${s}_bytes_per_step]}"
		done
		for b in "${SWEEP_PAYLOAD[@]}"; do
			printf '  payload %-7s 500x10 : %6s transitions/s  rss %4s MiB  %8s B/step in db\n' "$b" \
				"${R[sw_payload_${b}_steps_per_s]}" "${R[sw_payload_${b}_rss_mib]}" "${R[sw_payload_${b}_bytes_per_step]}"
		done
		for n in "${SWEEP_INFLIGHT[@]}"; do
			printf '  in flight %-6s %-4s : peak rss %4s MiB (idle %s)  done %s s after due  peak at webhook %s\n' "$n" \
				"$((SWEEP_DELAY_MS / 1000)) s" \
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
	echo "commit=$commit"
	echo "scale=$scale"
	for k in $(printf '%s\n' "${!R[@]}" | sort); do
		echo "$k=${R[$k]}"
	done
} >"$out/results.env"

# ---- data for the charts (charts.sh) -----------------------------------------------

stamp=$(dat_stamp)
{
	echo "# hookflow idle latency, one run at a time: from just before the POST to the"
	echo "# terminal answer of the long-poll (GET /v1/runs/{id}?wait_ms), $LAT_N runs each"
	echo "$stamp"
	echo "# params: runs=$LAT_N"
	echo "# steps p50_ms p90_ms p99_ms max_ms"
	echo "1 ${R[l1_p50]} ${R[l1_p90]} ${R[l1_p99]} ${R[l1_max]}"
	echo "$LAT_STEPS ${R[l10_p50]} ${R[l10_p90]} ${R[l10_p99]} ${R[l10_max]}"
} >"$out/latency.dat"
if [[ -s "$work/latency_1.raw" && -s "$work/latency_n.raw" ]]; then
	{
		echo "# hookflow idle latency distribution: the same runs as latency.dat, each"
		echo "# column sorted; percentile = 100 * (rank - 0.5) / runs"
		echo "$stamp"
		echo "# params: steps_a=1 steps_b=$LAT_STEPS"
		echo "# percentile latency_ms_1_step latency_ms_${LAT_STEPS}_steps"
		paste -d ' ' "$work/latency_1.raw" "$work/latency_n.raw" |
			awk -v n="$(wc -l <"$work/latency_1.raw")" '{ printf "%.3f %s %s\n", 100 * (NR - 0.5) / n, $1, $2 }'
	} >"$out/latency_dist.dat"
fi
if [[ "${BENCH_SWEEP:-}" = 1 ]]; then
	{
		echo "# hookflow throughput against steps per run: 500 runs, one instance, fresh database"
		echo "$stamp"
		echo "# params: pgbench_tps=$tps"
		echo "# steps_per_run transitions_per_s runs_per_s db_bytes_per_step"
		for s in "${SWEEP_STEPS[@]}"; do
			echo "$s ${R[sw_steps_${s}_steps_per_s]} ${R[sw_steps_${s}_runs_per_s]} ${R[sw_steps_${s}_bytes_per_step]}"
		done
	} >"$out/sweep_steps.dat"
	{
		echo "# hookflow throughput against payload size: 500 runs x 10 steps, incompressible input"
		echo "$stamp"
		echo "# payload_bytes transitions_per_s peak_rss_mib db_bytes_per_step"
		for b in "${SWEEP_PAYLOAD[@]}"; do
			echo "$b ${R[sw_payload_${b}_steps_per_s]} ${R[sw_payload_${b}_rss_mib]} ${R[sw_payload_${b}_bytes_per_step]}"
		done
	} >"$out/sweep_payload.dat"
	{
		echo "# hookflow calls in flight: N 1-step runs all due at once, the webhook answering"
		echo "# each after delay_ms; drain_s: from when they came due until the last ended"
		echo "$stamp"
		echo "# calls peak_rss_mib idle_rss_mib drain_s delay_ms peak_at_webhook"
		for n in "${SWEEP_INFLIGHT[@]}"; do
			echo "$n ${R[sw_inflight_${n}_rss_mib]} ${R[sw_inflight_${n}_idle_rss_mib]} ${R[sw_inflight_${n}_done_s]} $SWEEP_DELAY_MS ${R[sw_inflight_${n}_peak_pending]}"
		done
	} >"$out/sweep_inflight.dat"
fi
draw_charts

((${#failures[@]} == 0)) || die "correctness failures (above)"
say "done in ${t_total}s; results in $out/results.txt"
