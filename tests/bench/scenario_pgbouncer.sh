# shellcheck shell=bash
# shellcheck disable=SC2154 # R, scale, out, failures ...: set by bench.sh and lib.sh
# The PgBouncer scenario of the benchmark (issue 17: hookflow behind PgBouncer
# in transaction pooling mode), sourced by tests/bench/bench.sh, whose helpers
# it uses (throughput, alternated_medians, bench_start_pgbouncer). It runs as
# #8 of the full and smoke benchmarks, or alone with BENCH_PGBOUNCER=1.
#
# Scenario 2 (RUNS10 runs of STEPS steps, one instance, a fresh database
# each time) with the instance behind PgBouncer (HOOKFLOW_DATABASE_POOLER=
# transaction; LISTEN and migrations direct; BENCH_PGBOUNCER_POOL server
# connections, default 8), alternated with the same direct, SCALE_REPEAT
# times each, so that the machine's drift hits both sides: the medians of
# both and their ratio. Both sides reach their server on a unix socket.
# PgBouncer's own CPU per settled step is reported apart, and how many client
# connections the instance held against how many server connections
# PgBouncer kept for them. No target: the figure is reported.

pgbouncer_scenario() {
	bench_start_pgbouncer
	local k
	for ((k = 1; k <= SCALE_REPEAT; k++)); do
		throughput "pgb_direct_$k" "$RUNS10" "$STEPS" "s8direct_$k" 1
		via_pgbouncer=1 throughput "pgb_bouncer_$k" "$RUNS10" "$STEPS" "s8bouncer_$k" 1
	done
	alternated_medians s8 direct bouncer
	R[s8_pgb_us]=${R[s8bouncer_${SCALE_REPEAT}_pgb_us]:-}
	R[s8_pgb_clients]=${R[s8bouncer_${SCALE_REPEAT}_pgb_clients]:-}
	R[s8_pgb_servers]=${R[s8bouncer_${SCALE_REPEAT}_pgb_servers]:-}
	R[s8_ratio]=$(awk -v a="${R[s8_steps_per_s]}" -v b="${R[s8direct_steps_per_s]}" \
		'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }')
}

# pgbouncer_rows RATIO_FN: this scenario's rows of the result table; RATIO_FN
# (may be "") gives the "vs pgbench" column of a figure.
pgbouncer_rows() {
	local ratio_fn=$1
	local r1="-" r2="-"
	if [[ -n "$ratio_fn" ]]; then
		r1=$("$ratio_fn" "${R[s8_steps_per_s]}") r2=$("$ratio_fn" "${R[s8direct_steps_per_s]}")
	fi
	printf '%-4s %-52s %16s %-22s %9s %s\n' "8" "PgBouncer ${pgb_version:-}, pool $pgb_pool: $RUNS10 x $STEPS transitions/s" \
		"${R[s8_steps_per_s]}" "(reported)" "$r1" "${R[s8_ratio]}x of direct"
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  direct, alternated with it (median)" "${R[s8direct_steps_per_s]}" "" "$r2" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  runs: PgBouncer / direct" "${R[s8_all]} / ${R[s8direct_all]}" "" "" ""
	printf '%-4s %-52s %16s %-22s %9s %s\n' "" "  client / server connections; PgBouncer us/step" \
		"${R[s8_pgb_clients]} / ${R[s8_pgb_servers]}; ${R[s8_pgb_us]}" "" "" ""
}

# Alone: BENCH_PGBOUNCER=1 runs only this scenario.
if [[ "${BENCH_PGBOUNCER:-}" = 1 ]]; then
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	pgbouncer_scenario
	{
		echo
		echo "hookflow bench ($scale), PgBouncer scenario, at $(bench_commit), $(date -u +%Y-%m-%dT%H:%MZ)"
		echo "machine: $(nproc) cores, PostgreSQL $pgver (fsync=on, synchronous_commit=on); load average before: $load0 (other work on the machine skews every figure)"
		echo "hookflow: workers=${BENCH_WORKERS:-default} db_pool=${BENCH_DB_POOL:-8}; medians of $SCALE_REPEAT alternated rounds"
		echo
		printf '%-4s %-52s %16s %-22s %9s %s\n' "#" "measure" "figure" "target" "vs pgbench" "result"
		pgbouncer_rows ""
		printf '%-4s %-52s %16s %-22s %9s %s\n' "" "no step settled twice, no run lost" \
			"${#failures[@]} problems" "0" "-" "$( ((${#failures[@]} == 0)) && echo PASS || echo FAIL)"
		echo
		echo "CPU per settled step (us), last round: hookflow + postgres + webhook + loadgen (+ pgbouncer)"
		printf '  direct    %6s + %6s + %5s + %5s us   other %3s%%\n' "${R[s8direct_${SCALE_REPEAT}_hf_us]}" \
			"${R[s8direct_${SCALE_REPEAT}_pg_us]}" "${R[s8direct_${SCALE_REPEAT}_wh_us]}" \
			"${R[s8direct_${SCALE_REPEAT}_lg_us]}" "${R[s8direct_${SCALE_REPEAT}_other_pct]}"
		printf '  pgbouncer %6s + %6s + %5s + %5s (+ %s) us   other %3s%%\n' "${R[s8_hf_us]}" \
			"${R[s8_pg_us]}" "${R[s8_wh_us]}" "${R[s8_lg_us]}" "${R[s8_pgb_us]}" "${R[s8_other_pct]}"
		if ((${#failures[@]} > 0)); then
			echo "CORRECTNESS FAILURES:"
			printf '  %s\n' "${failures[@]}"
		fi
	} | tee "$out/pgbouncer.txt"
	((${#failures[@]} == 0)) || die "correctness failures (above)"
	say "done; results in $out/pgbouncer.txt"
	exit 0
fi
