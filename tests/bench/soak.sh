#!/usr/bin/env bash
# hookflow's soak test: `make soak` (issue 13, item 5).
#
# On the bench's throwaway durable PostgreSQL cluster and C webhook
# (tests/bench/lib.sh), it:
#
#   1. measures the peak: SOAK_PEAK_RUNS runs of SOAK_STEPS steps submitted
#      as fast as possible (bench.sh's throughput scenario), in runs/s; or takes
#      SOAK_RATE from the environment. The peak is sustained: 60,000 runs take
#      about a minute and end with the tables at the soak's working size, with
#      autovacuum's visits and a checkpoint in it. 2,000 runs (1.6 s on an
#      empty database) gave 1,114 to 1,274 runs/s from one run to the next,
#      and 70% of the higher figures was more than the service sustains once
#      its tables hold a minute of runs (BENCHMARKS.md, "The soak's rate");
#   2. on a fresh database, starts hookflow with HOOKFLOW_RETENTION_MS set
#      (SOAK_RETENTION_MS, 10 s: terminated runs are deleted, with their
#      history, that long after they end, so old runs go as new ones come,
#      from the first minute on: with 60 s, until 2026-12-08, the first
#      minute, the one the last is compared with, deleted nothing and every
#      later one did, BENCHMARKS.md "the soak's ten-second beat");
#   3. submits runs open loop at SOAK_SHARE (70) % of the peak for SOAK_SECONDS
#      (`loadgen rate`: run i is due at start + i / rate whatever the service's
#      pace; its latency runs from then to its finished_at in the database);
#   4. every SOAK_INTERVAL (10) s samples: runs finished in the interval and
#      their p50/p99 latency, the database size (pg_database_size) and
#      hookflow's VmRSS; and the CPU over the interval (/proc: the machine's
#      busy and stolen time, hookflow's, PostgreSQL's and the webhook's, % of
#      all cores), so that a slow interval can be told from a saturated
#      machine, and which part took more; the checkpoints PostgreSQL logged
#      during the soak are listed with the second they started at;
#   5. compares the first minute with the last and prints a verdict table:
#        throughput   last minute's runs/s within +-10% of the first's
#        p99          last minute's p99 within +-10% of the first's
#                     (shown beside it: the lowest and highest p99 of the
#                     intervals in each window, and over the whole soak)
#        database     levels off: it grows by at most 10% over the last third
#                     of the soak (last sample against the sample at 2/3)
#        RSS          flat: at most 10% growth over the last third (same)
#        submissions  none refused by the service
#      and writes $out/soak.txt, $out/soak.dat and $out/charts/soak.png.
#
# Exit status: 1 only on a correctness failure: a run accepted and never seen
# terminal (lost), a run that did not succeed at its last step, an attempt or a
# step settled twice, or the SQL checks of bench.sh failing on the runs still
# kept at the end. Retention deletes finished runs, so the load generator
# checks each run when it sees it end (every 250 ms, long before retention
# comes), and counts submitted against finished itself. Missed performance
# criteria print FAIL but exit 0.
#
# Environment:
#   SOAK_SECONDS=600        how long to submit
#   SOAK_RATE=R             runs/s (skips the peak measurement)
#   SOAK_SHARE=70           % of the measured peak
#   SOAK_STEPS=10           steps per run
#   SOAK_PEAK_RUNS=60000    runs of the peak measurement
#   SOAK_RETENTION_MS=10000 HOOKFLOW_RETENTION_MS of the soaked instance
#   SOAK_INTERVAL=10        seconds between samples
#   SOAK_CONNS=64           most keep-alive connections the load generator opens
#   SOAK_DRAIN=120          seconds to wait for the last runs after SOAK_SECONDS
#   BENCH_PG_STATEMENTS=1   each minute's top-level statements (calls, time) in
#                           $BENCH_OUT/soak_statements.txt
#   BENCH_OUT, BENCH_KEEP, BENCH_NICE, BENCH_PG_BIN, BENCH_HTTP_THREADS,
#   BENCH_DB_POOL, BENCH_WORKERS, BENCH_SAVE_CHARTS   as for bench.sh
set -euo pipefail
shopt -s inherit_errexit

me=soak
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

soak_s=${SOAK_SECONDS:-600}
share=${SOAK_SHARE:-70}
steps=${SOAK_STEPS:-10}
peak_runs=${SOAK_PEAK_RUNS:-60000}
retention_ms=${SOAK_RETENTION_MS:-10000}
interval=${SOAK_INTERVAL:-10}
conns=${SOAK_CONNS:-64}
drain=${SOAK_DRAIN:-120}
for v in soak_s share steps peak_runs retention_ms interval conns drain; do
	[[ "${!v}" =~ ^[1-9][0-9]*$ ]] || {
		echo "soak: the SOAK_ setting behind $v must be a positive integer, not '${!v}'" >&2
		exit 2
	}
done
if [[ -n "${SOAK_RATE:-}" ]] && ! [[ "$SOAK_RATE" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
	echo "soak: SOAK_RATE must be a number of runs per second, not '$SOAK_RATE'" >&2
	exit 2
fi
((interval <= soak_s)) || {
	echo "soak: SOAK_INTERVAL ($interval) longer than SOAK_SECONDS ($soak_s)" >&2
	exit 2
}
# throughput (lib.sh), for the peak
SUBMIT_CONNS=64 RUN_TIMEOUT=300

bench_setup
rm -f "$out/soak.dat" "$out/soak.txt"

# ---- the rate ------------------------------------------------------------------------

peak=-
if [[ -n "${SOAK_RATE:-}" ]]; then
	rate=$SOAK_RATE
	rate_from="SOAK_RATE"
else
	throughput peak "$peak_runs" "$steps" peak 1
	peak=${R[peak_runs_per_s]}
	((${peak%.*} > 0)) || die "the peak measurement gave $peak runs/s"
	rate=$(awk -v p="$peak" -v s="$share" 'BEGIN { printf "%.1f", p * s / 100 }')
	rate_from="$share% of the peak, $peak runs/s ($peak_runs runs of $steps steps as fast as possible)"
fi

# ---- the soak ------------------------------------------------------------------------

fresh_db soak
start_hookflow soak "$db" HOOKFLOW_RETENTION_MS="$retention_ms"
hf=$hf_pid
put_workflow "$hf_port" "w$steps" "n=$steps"
curl -sf -X POST "$wh/stats/reset" >/dev/null
checkpoint
say "soak: $rate runs/s of $steps steps for ${soak_s}s ($rate_from), HOOKFLOW_RETENTION_MS=$retention_ms"
rc=0
# BENCH_PG_STATEMENTS=1: the statements of each minute of the soak, nested ones
# included (time, calls, buffers) in $out/soak_statements.txt, counted afresh
# every minute.
stmt_pid=
if [[ "${BENCH_PG_STATEMENTS:-}" = 1 ]]; then
	: >"$out/soak_statements.txt"
	statements_reset "$db"
	(
		# stopped by a TERM while it waits: the sleep goes with it
		nap=
		trap 'kill "$nap" 2>/dev/null; exit 0' TERM
		for ((m = 60; m <= soak_s; m += 60)); do
			sleep 60 &
			nap=$!
			wait "$nap"
			{
				echo "# minute to ${m}s: calls | total ms | ms per call | rows per call | buffers per call | statement"
				statements_dump "$db"
				statements_reset "$db"
			} >>"$out/soak_statements.txt" 2>&1 || true
		done
	) &
	stmt_pid=$!
fi
# The CPU, one line per interval from the load's start: "T BUSY
# STEAL HOOKFLOW POSTGRESQL WEBHOOK", % of all cores' time (busy: neither idle
# nor waiting for I/O; steal: taken by the hypervisor for other guests; then
# what hookflow, the whole cluster and the bench webhook used of it).
(
	nap=
	trap 'kill "$nap" 2>/dev/null; exit 0' TERM
	read -r busy0 steal0 all0 <<<"$(machine_split)"
	hf0=$(pid_ticks "$hf") pg0=$(pg_ticks) wh0=$(pid_ticks "$wh_pid")
	for ((t = interval; ; t += interval)); do
		sleep "$interval" &
		nap=$!
		wait "$nap"
		read -r busy1 steal1 all1 <<<"$(machine_split)"
		hf1=$(pid_ticks "$hf") pg1=$(pg_ticks) wh1=$(pid_ticks "$wh_pid")
		awk -v t="$t" -v all=$((all1 - all0)) -v busy=$((busy1 - busy0)) -v steal=$((steal1 - steal0)) \
			-v hf=$((hf1 - hf0)) -v pg=$((pg1 - pg0)) -v wh=$((wh1 - wh0)) \
			'BEGIN { if (all > 0) printf "%d %.1f %.1f %.1f %.1f %.1f\n", t, 100 * busy / all,
				100 * steal / all, 100 * hf / all, 100 * pg / all, 100 * wh / all }'
		busy0=$busy1 steal0=$steal1 all0=$all1 hf0=$hf1 pg0=$pg1 wh0=$wh1
	done
) >"$work/soak.cpu" &
cpu_pid=$!
soak_t0=$(date +%s)
loadgen rate -u "127.0.0.1:$hf_port" -w "w$steps" -r "$rate" -s "$soak_s" -S "$steps" -c "$conns" \
	-p soak -d "$(conninfo "$db")" -i "$interval" -P "$hf" -o "$work/soak.samples" -T "$drain" || rc=$?
kill "$cpu_pid" 2>/dev/null || true
wait "$cpu_pid" 2>/dev/null || true
if [[ -n "$stmt_pid" ]]; then
	kill "$stmt_pid" 2>/dev/null || true
	wait "$stmt_pid" 2>/dev/null || true
	say "each minute's statements in $out/soak_statements.txt"
fi
hwm_mib=$(($(vmhwm_kib "$hf") / 1024))
stop_hookflow "$hf" soak
check_db "$db" - "$steps" "soak (the runs retention had not deleted yet)"
[[ -s "$work/soak.samples" ]] || die "the load generator wrote no samples (exit $rc; see $work/loadgen.log)"

# ---- verdicts ------------------------------------------------------------------------

# within A B PCT: |A / B - 1| <= PCT %
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { exit !(b > 0 && a / b - 1 <= p / 100 && 1 - a / b <= p / 100) }'; }
pct_change() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%+.1f%%", 100 * (a / b - 1); else print "-" }'; }
pass() { if "$@"; then echo PASS; else echo FAIL; fi; }

# the samples: column 6 database MiB, 7 RSS MiB; the one at two thirds of the
# soak and the last
third_row=$(awk -v t="$((soak_s * 2 / 3))" '!/^#/ && $1 >= t { print; exit }' "$work/soak.samples")
last_row=$(awk '!/^#/ { r = $0 } END { print r }' "$work/soak.samples")
db_a=$(awk '{ print $6 }' <<<"$third_row") db_b=$(awk '{ print $6 }' <<<"$last_row")
rss_a=$(awk '{ print $7 }' <<<"$third_row") rss_b=$(awk '{ print $7 }' <<<"$last_row")
t_a=$(awk '{ print $1 }' <<<"$third_row") t_b=$(awk '{ print $1 }' <<<"$last_row")
grows_le() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { exit !(a > 0 && b <= a * (1 + p / 100)) }'; }

v_tput=$(pass within "${lg_last_runs_per_s:-0}" "${lg_first_runs_per_s:-0}" 10)
v_p99=$(pass within "${lg_last_p99_ms:-0}" "${lg_first_p99_ms:-0}" 10)
v_db=$(pass grows_le "$db_a" "$db_b" 10)
v_rss=$(pass grows_le "$rss_a" "$rss_b" 10)
v_rej=$(pass test "${lg_rejected:-1}" = 0)
problems=$((${lg_lost:-1} + ${lg_not_succeeded:-1} + ${lg_dup_settled:-1} + ${lg_wrong_steps:-1}))
((problems == 0 && rc == 0)) ||
	failures+=("soak: lost=${lg_lost:-?} not_succeeded=${lg_not_succeeded:-?} dup_settled=${lg_dup_settled:-?} wrong_steps=${lg_wrong_steps:-?} (loadgen exit $rc)")
v_ok=$(pass test "${#failures[@]}" = 0)
w=${lg_window_s:-60}
overlap=
((soak_s >= 2 * w)) || overlap=" (the two overlap: soak shorter than $((2 * w)) s)"

# The CPU of the first and the last window (means of their intervals) and the
# busiest interval; the checkpoints from the cluster's log (log_checkpoints is
# on by default in PostgreSQL 15), as seconds since the load's start.
cpu_in() {
	awk -v a="$1" -v b="$2" '$1 > a && $1 <= b { n++; u += $2; s += $3; h += $4; p += $5; k += $6 }
		END { if (n) printf "%.0f%% busy (hookflow %.0f, PostgreSQL %.0f, webhook %.0f), %.1f%% stolen",
			u / n, h / n, p / n, k / n, s / n; else print "-" }' "$work/soak.cpu"
}
cpu_first=$(cpu_in 0 "$w") cpu_last=$(cpu_in "$((soak_s - w))" "$soak_s")
cpu_max=$(sort -k2,2nr "$work/soak.cpu" | awk 'NR == 1 { printf "%s%% at %ss", $2, $1 }')
checkpoints=$(awk -v t0="$soak_t0" '/checkpoint starting:/ {
		cmd = "date -d \"" $1 " " $2 " " $3 "\" +%s"; cmd | getline e; close(cmd)
		if (e >= t0) { r = $0; sub(/.*checkpoint starting: /, "", r); printf "%s%ds (%s)", sep, e - t0, r; sep = ", " } }' \
	"$work/postgres.log")

# p99_range A B: the lowest and the highest p99 of the intervals ending in
# (A, B] seconds, "LOW-HIGH" ms: how far one interval's p99 is from the next
# at this load, beside the windows' comparison.
p99_range() {
	awk -v a="$1" -v b="$2" '!/^#/ && $1 > a && $1 <= b { if (n++ == 0 || $5 < lo) lo = $5; if ($5 > hi) hi = $5 }
		END { if (n) printf "%.0f-%.0f", lo, hi; else print "-" }' "$work/soak.samples"
}

commit=$(bench_commit)
{
	echo
	echo "hookflow soak at $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), PostgreSQL $pgver (fsync=on, synchronous_commit=on)"
	echo "load: open loop, $rate runs/s of $steps steps for ${soak_s}s ($rate_from);"
	echo "      HOOKFLOW_RETENTION_MS=$retention_ms; samples every ${interval}s; first and last ${w}s compared$overlap"
	echo
	printf '%-54s %14s %14s %9s  %s\n' "measure" "first" "last" "change" "result"
	printf '%-54s %14s %14s %9s  %s\n' "runs finished per second (target: within 10%)" \
		"${lg_first_runs_per_s:-}" "${lg_last_runs_per_s:-}" "$(pct_change "${lg_last_runs_per_s:-0}" "${lg_first_runs_per_s:-0}")" "$v_tput"
	printf '%-54s %14s %14s %9s  %s\n' "p99 latency, submission to terminal, ms (within 10%)" \
		"${lg_first_p99_ms:-}" "${lg_last_p99_ms:-}" "$(pct_change "${lg_last_p99_ms:-0}" "${lg_first_p99_ms:-0}")" "$v_p99"
	printf '%-54s %14s %14s %9s  %s\n' "  p50 latency, ms (shown, not judged)" \
		"${lg_first_p50_ms:-}" "${lg_last_p50_ms:-}" "$(pct_change "${lg_last_p50_ms:-0}" "${lg_first_p50_ms:-0}")" ""
	printf '%-54s %14s %14s %9s  %s\n' "  p99 of each ${interval}s interval, lowest-highest (shown)" \
		"$(p99_range 0 "$w")" "$(p99_range "$((soak_s - w))" "$soak_s")" "" ""
	printf '%-54s %14s %14s %9s  %s\n' "database MiB at ${t_a}s / ${t_b}s (levels off: last third <= +10%)" \
		"$db_a" "$db_b" "$(pct_change "$db_b" "$db_a")" "$v_db"
	printf '%-54s %14s %14s %9s  %s\n' "hookflow RSS MiB at ${t_a}s / ${t_b}s (flat: last third <= +10%)" \
		"$rss_a" "$rss_b" "$(pct_change "$rss_b" "$rss_a")" "$v_rss"
	printf '%-54s %14s %14s %9s  %s\n' "submissions refused by hookflow" "" "${lg_rejected:-?}" "" "$v_rej"
	printf '%-54s %14s %14s %9s  %s\n' "runs lost / not succeeded / settled twice / wrong steps" "" \
		"${lg_lost:-?}/${lg_not_succeeded:-?}/${lg_dup_settled:-?}/${lg_wrong_steps:-?}" "" "$v_ok"
	echo
	echo "runs: ${lg_runs:-?} due, ${lg_accepted:-?} accepted, ${lg_finished:-?} seen finished (last ${lg_drain_s:-?}s after the end);" \
		"late submissions (> 10 ms after due): ${lg_late_submissions:-?}, at most ${lg_max_lag_ms:-?} ms; ${lg_conns:-?} connections"
	echo "latency over the whole soak: p50 ${lg_p50_ms:-?} / p90 ${lg_p90_ms:-?} / p99 ${lg_p99_ms:-?} / max ${lg_max_ms:-?} ms;" \
		"hookflow peak RSS (VmHWM) $hwm_mib MiB; p99 of the ${interval}s intervals $(p99_range 0 "$soak_s") ms"
	echo "latency = finished_at (the settling transaction's time in PostgreSQL) - the moment the run came due"
	echo "machine CPU, first / last ${w}s: $cpu_first / $cpu_last; busiest ${interval}s: ${cpu_max:--}"
	echo "checkpoints started (s since the load began): ${checkpoints:-none}"
	if ((${#failures[@]} > 0)); then
		echo
		echo "CORRECTNESS FAILURES:"
		printf '  %s\n' "${failures[@]}"
	fi
	echo
} | tee "$out/soak.txt"

{
	echo "# hookflow soak: runs of $steps steps submitted open loop at $rate runs/s for ${soak_s}s,"
	echo "# HOOKFLOW_RETENTION_MS=$retention_ms; per ${interval}s interval: runs finished in it (by"
	echo "# finished_at) and their latency from due to finished_at; database size and hookflow"
	echo "# VmRSS sampled at the interval's end; the CPU over the interval"
	dat_stamp
	echo "# params: rate=$rate retention_s=$(awk -v r="$retention_ms" 'BEGIN { print r / 1000 }') steps=$steps seconds=$soak_s window_s=$w interval_s=$interval"
	# the load generator's samples, with the CPU of the same interval
	awk 'FILENAME == ARGV[1] { cpu[$1] = $2 " " $3 " " $4 " " $5 " " $6; next }
	     /^# t_s / { print $0 " cpu_busy_pct cpu_steal_pct hookflow_cpu_pct postgres_cpu_pct webhook_cpu_pct"; next }
	     /^#/ { print; next }
	     { print $0 " " ($1 in cpu ? cpu[$1] : "- - - - -") }' "$work/soak.cpu" "$work/soak.samples"
} >"$out/soak.dat"
draw_charts

((${#failures[@]} == 0)) || die "correctness failures (above)"
say "done; results in $out/soak.txt, samples in $out/soak.dat"
