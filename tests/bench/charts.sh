#!/usr/bin/env bash
# Draws the benchmark's charts: tests/bench/charts.sh [DIR]
#
# Every data file found in DIR (default $BENCH_OUT, else build/bench) becomes a
# PNG in DIR/charts/ (drawn by tests/bench/charts.gp with gnuplot); a chart
# whose data file is missing is not drawn. bench.sh and soak.sh call it at
# their end; it can be re-run on the data they left.
#
#   latency.dat         latency.png        idle latency p50/p90/p99 (bench.sh)
#   latency_dist.dat    latency_dist.png   idle latency, every percentile (bench.sh)
#   sweep_steps.dat     steps.png          throughput against steps per run (BENCH_SWEEP=1)
#   sweep_payload.dat   payload.png        throughput, database bytes per step and
#                                          memory against payload size (BENCH_SWEEP=1)
#   sweep_inflight.dat  inflight.png       peak RSS and drain time against calls in
#                                          flight (BENCH_SWEEP=1)
#   sweep_kept.dat      kept.png           throughput against runs kept (written by
#                                          tests/bench/scenario_size.sh; columns
#                                          "runs_kept transitions_per_s", 0 = empty)
#   soak.dat            soak.png           the soak over time (soak.sh)
#
# A data file is gnuplot-readable: '#' comments, then one point a line. Two
# comment lines mean something here: "# run: TEXT" (what was measured, printed
# in a corner of the chart) and "# params: NAME=NUMBER ..." (numbers the chart
# uses, e.g. pgbench_tps=11370).
#
# BENCH_SAVE_CHARTS=1 also copies the PNGs drawn to docs/bench/ (committed
# with BENCHMARKS.md). Exit status: 0, or 1 when gnuplot is missing or fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-${BENCH_OUT:-$root/build/bench}}

if ! command -v gnuplot >/dev/null 2>&1; then
	echo "charts: gnuplot not found (Debian: apt-get install gnuplot-nox; scripts/deps.sh lists it)" >&2
	exit 1
fi
[[ -d "$dir" ]] || {
	echo "charts: no directory $dir" >&2
	exit 1
}

mkdir -p "$dir/charts"
rm -f "$dir"/charts/*.png

# has_points FILE: FILE has at least one line that is not a comment.
has_points() { grep -qv -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$1"; }

drawn=()
draw() { # draw CHART DATA-FILE PNG-NAME
	local chart=$1 data=$2 png=$3 stamp params="" kv
	[[ -f "$data" ]] && has_points "$data" || return 0
	# the chart's last title line; plain characters only (gnuplot's enhanced
	# text gives meaning to _ ^ { } @ & ~, and a quote would end the string)
	stamp=$(sed -n 's/^# run: //p' "$data" | head -1 | tr -cd 'A-Za-z0-9 .,:;+/()=-')
	for kv in $(sed -n 's/^# params: //p' "$data" | head -1); do
		if [[ "$kv" =~ ^[a-z][a-z0-9_]*=[-+0-9.eE]+$ ]]; then
			params+="$kv; "
		else
			echo "charts: $data: ignoring parameter '$kv' (want name=number)" >&2
		fi
	done
	if [[ "$chart" = kept ]]; then
		kv=$(awk '!/^[[:space:]]*#/ && NF >= 2 && $1 == 0 { print $2; exit }' "$data")
		[[ "$kv" =~ ^[0-9.]+$ ]] && params+="empty_tps=$kv; "
	fi
	# shellcheck disable=SC2016 # the single quotes are gnuplot's
	if ! gnuplot -e "chart='$chart'; data='$data'; png='$dir/charts/$png'; ${stamp:+stamp='$stamp'; }$params" \
		"$here/charts.gp" 2>"$dir/charts/$png.log"; then
		echo "charts: gnuplot failed on $data:" >&2
		cat "$dir/charts/$png.log" >&2
		exit 1
	fi
	# gnuplot's warnings (e.g. a log axis given a zero) are worth seeing
	if [[ -s "$dir/charts/$png.log" ]]; then
		sed "s|^|charts: $png: |" "$dir/charts/$png.log" >&2
	fi
	rm -f "$dir/charts/$png.log"
	drawn+=("$png")
}

draw latency "$dir/latency.dat" latency.png
draw latency_dist "$dir/latency_dist.dat" latency_dist.png
draw steps "$dir/sweep_steps.dat" steps.png
draw payload "$dir/sweep_payload.dat" payload.png
draw inflight "$dir/sweep_inflight.dat" inflight.png
draw kept "$dir/sweep_kept.dat" kept.png
draw soak "$dir/soak.dat" soak.png

if ((${#drawn[@]} == 0)); then
	echo "charts: no data files in $dir: nothing drawn" >&2
	exit 0
fi
echo "charts: ${drawn[*]} in $dir/charts/" >&2
if [[ "${BENCH_SAVE_CHARTS:-}" = 1 ]]; then
	mkdir -p "$root/docs/bench"
	for png in "${drawn[@]}"; do
		cp "$dir/charts/$png" "$root/docs/bench/$png"
	done
	echo "charts: copied to docs/bench/ (BENCH_SAVE_CHARTS=1)" >&2
fi
