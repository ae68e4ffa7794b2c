#!/usr/bin/env bash
# inflight_mem.sh: the memory per webhook call in flight (bench.sh scenario 4b)
# alone, measured the same way: N (10,000) one-step runs due at one moment,
# against the bench webhook holding each call HOLD_MS (30 s), so that all are
# in flight at once; KiB per call = (peak RSS VmHWM - idle RSS) * 1024 / N.
#
#   tests/bench/inflight_mem.sh [BINARY...]
#
# Without arguments it measures build/hookflow. With binaries (e.g. an
# earlier build and build/hookflow) it measures them in turn, alternately,
# MEM_REPEAT times each (default 3), so that the machine's drift hits them
# all, and prints every round and the median of each.
#
# Environment: MEM_CALLS (10000), MEM_HOLD_MS (30000), MEM_DUE_MS (when the
# runs come due after the submission starts: 15000, so that they are all
# submitted before), MEM_REPEAT (3); and lib.sh's (BENCH_PG_BIN, BENCH_KEEP,
# BENCH_NICE, ...).
set -euo pipefail
shopt -s inherit_errexit

me=inflight-mem
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

calls=${MEM_CALLS:-10000}
hold_ms=${MEM_HOLD_MS:-30000}
due_ms=${MEM_DUE_MS:-15000}
repeat=${MEM_REPEAT:-3}
SUBMIT_CONNS=64
RUN_TIMEOUT=300

binaries=("$@")
((${#binaries[@]} > 0)) || binaries=("$bin")
for b in "${binaries[@]}"; do
	[[ -x "$b" ]] || die "$b is not an executable"
done

bench_setup

# measure BINARY: one round; sets line to "KIB_PER_CALL IDLE_KIB PEAK_KIB PEAK_PENDING".
measure() {
	local b=$1 db rc=0
	fresh_db mem
	bin=$b start_hookflow mem "$db" HOOKFLOW_MAX_INFLIGHT=$((calls + calls / 5))
	local pid=$hf_pid idle
	idle=$(vmrss_kib "$pid")
	put_workflow "$hf_port" slow "n=1&delay_ms=$hold_ms" $((hold_ms + 30000))
	curl -sf -X POST "$wh/stats/reset" >/dev/null
	checkpoint
	loadgen submit -u "127.0.0.1:$hf_port" -w slow -n "$calls" -c "$SUBMIT_CONNS" -p mem \
		-d "$(conninfo "$db")" -T "$RUN_TIMEOUT" -D "$due_ms" || rc=$?
	local peak pending
	peak=$(vmhwm_kib "$pid")
	pending=$(wh_field pending_peak)
	stop_hookflow "$pid" mem
	((rc == 0)) || die "not every run succeeded in time (loadgen exit $rc)"
	((pending == calls)) || say "warning: only $pending calls were in flight at once (want $calls)"
	line=$(awk -v p="$peak" -v i="$idle" -v n="$calls" -v q="$pending" \
		'BEGIN { printf "%.2f %d %d %d", (p - i) / n, i, p, q }')
}

declare -A all
for ((k = 1; k <= repeat; k++)); do
	for i in "${!binaries[@]}"; do
		say "round $k/$repeat: ${binaries[$i]}: $calls calls held ${hold_ms} ms"
		measure "${binaries[$i]}"
		say "  KiB/call idle_kib peak_kib peak_pending: $line"
		all[$i]+="${line%% *} "
	done
done
for i in "${!binaries[@]}"; do
	# shellcheck disable=SC2086 # the list is meant to split
	med=$(printf '%s\n' ${all[$i]} | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	printf '%s: KiB per call in flight, median of %d: %s (all: %s)\n' "${binaries[$i]}" "$repeat" \
		"$med" "${all[$i]% }"
done
