# shellcheck shell=bash
# The size scenario of the benchmark (issue 13, item 4: "size does not cost"),
# sourced by tests/bench/bench.sh, whose helpers it uses (fresh_db,
# start_hookflow, put_workflow, loadgen, check_db, cpu_begin/cpu_end,
# checkpoint). It runs with BENCH_SWEEP=1, or alone with BENCH_SIZE=1.
#
# Three databases: one with no run kept, one with SIZE_KEPT / 10 and one
# with SIZE_KEPT finished runs of 10 steps (tests/bench/kept_runs.sql, written
# by SQL: 2,000,000 history rows for 200,000 runs; then VACUUM ANALYZE). On
# each in turn, SIZE_REPEAT (BENCH_SIZE_REPEAT, 3) rounds of: RUNS10 runs of
# STEPS steps measured as scenario 2 is (transitions/s; a fresh hookflow and a
# workflow of its own each time), so that the drift of this shared machine
# hits every point alike; each point's median is reported. After the last
# round, with the service idle, it times SIZE_GETS requests of each of
#   GET /v1/runs?limit=100
#   GET /v1/runs?limit=100&workflow=<the first measured runs'>&status=succeeded
#   GET /v1/runs?limit=100&status=failed            (2% of the kept runs)
#   GET /v1/runs/{id}                               (a measured run)
#   GET /v1/runs/{id}/steps
# with curl on one keep-alive connection, after SIZE_WARMUP requests not
# counted: median and p99 of curl's time_total.
#
# Targets: throughput with SIZE_KEPT runs kept >= 0.95x the empty database's;
# each GET's p99 under 5 ms with SIZE_KEPT runs kept.
#
# The correctness checks (check_db: every run succeeded, no attempt or
# settlement twice) and loadgen's counts see only the measured runs: both
# connect with search_path set to a schema of views that show the run and
# step_attempt rows of the point's workflow only (hookflow's own sessions do
# not see them).
#
# Writes $out/sweep_kept.dat ("runs_kept transitions/s" per point) for the
# charts; its rows of the result table go into results.txt (with
# BENCH_SWEEP=1) or, alone, into $out/size.txt.

case "$scale" in
full) SIZE_KEPT=${BENCH_SIZE_KEPT:-200000} SIZE_GETS=200 SIZE_WARMUP=20 SIZE_REPEAT=${BENCH_SIZE_REPEAT:-3} ;;
*) SIZE_KEPT=${BENCH_SIZE_KEPT:-2000} SIZE_GETS=20 SIZE_WARMUP=5 SIZE_REPEAT=1 ;;
esac
SIZE_KEPT_STEPS=10

# size_view_db DB WORKFLOW: a conninfo "dbname" value for DB whose sessions
# see, as run and step_attempt, only WORKFLOW's runs and their history.
size_view_db() {
	local db=$1 wf=$2 schema="bench_only_$2"
	psql_db "$db" -c "
	CREATE SCHEMA $schema;
	CREATE VIEW $schema.run AS SELECT * FROM public.run WHERE workflow = '$wf';
	CREATE VIEW $schema.step_attempt AS SELECT a.* FROM public.step_attempt a
		WHERE a.run_id IN (SELECT r.run_id FROM public.run r WHERE r.workflow = '$wf');" >/dev/null
	echo "$db options=-csearch_path=$schema,public"
}

# size_fill DB RUNS: migrates DB and keeps RUNS finished runs in it.
size_fill() {
	local db=$1 n=$2 t0
	t0=$(now_ms)
	HOOKFLOW_DATABASE_URL="$(conninfo "$db")" "$bin" migrate >>"$work/hookflow-size.log" 2>&1 ||
		die "size: hookflow migrate failed (see $work/hookflow-size.log)"
	if ((n > 0)); then
		say "size: keeping $n runs ($SIZE_KEPT_STEPS history rows each) in $db"
		psql_db "$db" -v runs="$n" -v steps="$SIZE_KEPT_STEPS" -v prefix=kept \
			-f "$root/tests/bench/kept_runs.sql" >/dev/null
	fi
	psql_db "$db" -c "VACUUM ANALYZE" >/dev/null
	R[size_${n}_fill_s]=$((($(now_ms) - t0) / 1000))
	R[size_${n}_db_mib]=$(psql_db "$db" -c "SELECT pg_database_size(current_database()) / 1048576")
	((n == 0)) || say "size: $n runs kept in ${R[size_${n}_fill_s]} s"
}

# size_path NAME WORKFLOW RUN_ID: the path of GET NAME (list, filtered, failed,
# run, steps).
size_path() {
	case $1 in
	list) echo "/v1/runs?limit=100" ;;
	filtered) echo "/v1/runs?limit=100&workflow=$2&status=succeeded" ;;
	failed) echo "/v1/runs?limit=100&status=failed" ;;
	run) echo "/v1/runs/$3" ;;
	steps) echo "/v1/runs/$3/steps" ;;
	esac
}

# size_gets KEY PORT RUN_ID WORKFLOW: times the GETs; sets R[KEY_<get>_p50/_p99]
# (ms).
size_gets() {
	local key=$1 port=$2 rid=$3 wf=$4 name path i args times stats bad
	local base="http://127.0.0.1:$port"
	for name in list filtered failed run steps; do
		path=$(size_path "$name" "$wf" "$rid")
		args=()
		for ((i = 0; i < SIZE_WARMUP + SIZE_GETS; i++)); do
			args+=(-o /dev/null "$base$path")
		done
		times=$(curl -s -w '%{http_code} %{time_total}\n' "${args[@]}") ||
			die "size: curl failed on $path"
		bad=$(awk '$1 != 200' <<<"$times" | head -1)
		[[ -z "$bad" ]] || die "size: GET $path answered $bad"
		stats=$(tail -n +"$((SIZE_WARMUP + 1))" <<<"$times" | awk '{ print $2 * 1000 }' | sort -g |
			awk '{ v[NR] = $1 } END { p = int(NR * 0.99 + 0.999); if (p > NR) p = NR;
				printf "%.2f %.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[p] }')
		R[${key}_${name}_p50]=${stats% *}
		R[${key}_${name}_p99]=${stats#* }
	done
}

# size_measure KEPT K: measurement K on the database with KEPT runs kept;
# after the last, the GETs.
size_measure() {
	local kept=$1 k=$2 wf="size_$1_$2" db=${size_db[$1]} mdb pid rc=0
	start_hookflow "$wf" "$db"
	pid=$hf_pid
	put_workflow "$hf_port" "$wf" "n=$STEPS"
	mdb=$(size_view_db "$db" "$wf")
	say "size: $kept runs kept, round $k of $SIZE_REPEAT: $RUNS10 runs of $STEPS steps"
	checkpoint
	cpu_begin "$pid"
	loadgen submit -u "127.0.0.1:$hf_port" -w "$wf" -n "$RUNS10" -c "$SUBMIT_CONNS" -p "$wf" \
		-d "$(conninfo "$mdb")" -T "$RUN_TIMEOUT" || rc=$?
	cpu_end "${wf}" "${lg_step_attempts:-0}" "$pid"
	((rc == 0)) || failures+=("size $wf: not every run was accepted and succeeded in time (loadgen exit $rc)")
	R[${wf}_steps_per_s]=${lg_steps_per_s:-0}
	# the GETs' run and workflow: the first measured ones of this database
	if ((k == SIZE_REPEAT)); then
		size_gets "size_$kept" "$hf_port" "size_${kept}_1-7" "size_${kept}_1"
	fi
	stop_hookflow "$pid" "$wf"
	check_db "$mdb" "$RUNS10" "$STEPS" "size $wf"
}

size_scenario() {
	local kept k f vals
	size_points=(0 $((SIZE_KEPT / 10)) "$SIZE_KEPT")
	declare -gA size_db
	for kept in "${size_points[@]}"; do
		fresh_db "size_$kept"
		size_db[$kept]=$db
		size_fill "$db" "$kept"
	done
	for ((k = 1; k <= SIZE_REPEAT; k++)); do
		for kept in "${size_points[@]}"; do
			size_measure "$kept" "$k"
		done
	done
	for kept in "${size_points[@]}"; do
		for f in steps_per_s hf_us pg_us; do
			vals=()
			for ((k = 1; k <= SIZE_REPEAT; k++)); do vals+=("${R[size_${kept}_${k}_$f]}"); done
			R[size_${kept}_$f]=$(median "${vals[@]}")
			[[ $f != steps_per_s ]] || R[size_${kept}_all]=$(IFS=,; echo "${vals[*]}")
		done
	done
	R[size_ratio]=$(awk -v a="${R[size_${SIZE_KEPT}_steps_per_s]}" -v b="${R[size_0_steps_per_s]}" \
		'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }')
	{
		echo "# runs_kept throughput_transitions_per_s"
		for kept in "${size_points[@]}"; do
			echo "$kept ${R[size_${kept}_steps_per_s]}"
		done
	} >"$out/sweep_kept.dat"
}

# size_rows: the scenario's rows of the result table (bench.sh's format).
size_rows() {
	local kept name label mid=${size_points[1]} ok
	size_verdict() { # size_verdict CONDITION-COMMAND...
		if [[ "$scale" != full ]]; then echo "n/a"; elif "$@"; then echo "PASS"; else echo "FAIL"; fi
	}
	size_ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
	size_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
	size_pgb() { # the ratio to pgbench's tps, when pgbench ran
		awk -v a="$1" -v b="${R[pgbench_tps]:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'
	}
	printf '%-4s %-52s %16s %-22s %9s %s\n' "S1" "$RUNS10 x $STEPS steps, no run kept: transitions/s" \
		"${R[size_0_steps_per_s]}" "(reference)" "$(size_pgb "${R[size_0_steps_per_s]}")" "-"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  with $mid runs kept" "${R[size_${mid}_steps_per_s]}" \
		"" "$(size_pgb "${R[size_${mid}_steps_per_s]}")" "$(awk -v a="${R[size_${mid}_steps_per_s]}" -v b="${R[size_0_steps_per_s]}" \
			'BEGIN { if (b > 0) printf "(%.2fx)", a / b }')"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "S2" \
		"  with $SIZE_KEPT runs kept ($((SIZE_KEPT * SIZE_KEPT_STEPS / 1000))k history rows)" \
		"${R[size_${SIZE_KEPT}_steps_per_s]}" ">= 0.95x of no run kept" \
		"$(size_pgb "${R[size_${SIZE_KEPT}_steps_per_s]}")" \
		"$(size_verdict size_ge "${R[size_ratio]}" 0.95) (${R[size_ratio]}x)"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  each round (0 / $mid / $SIZE_KEPT kept), median shown" \
		"${R[size_0_all]} / ${R[size_${mid}_all]} / ${R[size_${SIZE_KEPT}_all]}" "" "" ""
	for kept in 0 "$SIZE_KEPT"; do
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  CPU us per step, $kept kept: hookflow + postgres" \
			"${R[size_${kept}_hf_us]} + ${R[size_${kept}_pg_us]}" "" "" ""
	done
	printf '%-4s %-52s %16s %-22s %9s %s\n' "S3" "GETs, $SIZE_KEPT runs kept, $SIZE_GETS each: p50 / p99 ms" \
		"" "p99 < 5 ms" "" ""
	for name in list filtered failed run steps; do
		label="GET $(size_path "$name" W '{id}')"
		ok=$(size_verdict size_lt "${R[size_${SIZE_KEPT}_${name}_p99]}" 5)
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  $label" \
			"${R[size_${SIZE_KEPT}_${name}_p50]} / ${R[size_${SIZE_KEPT}_${name}_p99]}" "" "-" \
			"$ok (no run kept: ${R[size_0_${name}_p50]} / ${R[size_0_${name}_p99]})"
	done
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  $SIZE_KEPT kept runs: written in s / database MiB" \
		"${R[size_${SIZE_KEPT}_fill_s]} / ${R[size_${SIZE_KEPT}_db_mib]}" "" "" ""
}

# Alone: BENCH_SIZE=1 runs only this scenario.
if [[ "${BENCH_SIZE:-}" = 1 ]]; then
	size_scenario
	{
		echo
		echo "hookflow bench ($scale), size scenario, at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"
		echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every figure)"
		echo
		printf '%-4s %-52s %16s %-22s %9s %s\n' "#" "measure" "figure" "target" "vs pgbench" "result"
		size_rows
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "no step settled twice, no run lost" \
			"${#failures[@]} problems" "0" "-" "$( ((${#failures[@]} == 0)) && echo PASS || echo FAIL)"
		if ((${#failures[@]} > 0)); then
			echo "CORRECTNESS FAILURES:"
			printf '  %s\n' "${failures[@]}"
		fi
	} | tee "$out/size.txt"
	((${#failures[@]} == 0)) || die "correctness failures (above)"
	say "done; results in $out/size.txt and $out/sweep_kept.dat"
	exit 0
fi
