# The benchmark's charts (gnuplot 5). tests/bench/charts.sh calls it once per
# chart with, on the command line:
#   chart  which chart: steps, payload, kept, inflight, latency, latency_dist, soak
#   data   the data file (.dat, columns named in its header comment)
#   png    the PNG to write
#   stamp  (optional) what was measured, where and when: printed in a corner
# and the numbers of the data file's "# params:" line (pgbench_tps, rate, ...).

set terminal pngcairo size 1000,620 enhanced font 'DejaVu Sans,12' linewidth 1.2
set output png
set encoding utf8
set datafile commentschars '#'
set style line 100 lc rgb '#d4d4d4' lw 1 dt 1
set grid xtics ytics ls 100
set lmargin 16
set rmargin 5
set border 3 lw 1.2
set tics nomirror out
set key opaque box lc rgb '#bbbbbb' samplen 2.5 spacing 1.2
set style line 1 lc rgb '#1f77b4' lw 2.5 pt 7 ps 1.3
set style line 2 lc rgb '#d62728' lw 2.5 pt 5 ps 1.3
set style line 3 lc rgb '#2ca02c' lw 2.5 pt 9 ps 1.5
set style line 4 lc rgb '#666666' lw 1.5 dt 2
set style line 5 lc rgb '#ff7f0e' lw 2.5 pt 11 ps 1.4
set style line 6 lc rgb '#9467bd' lw 1.5 dt 4
# the last line of every chart's title: what was measured, where and when
st = exists("stamp") ? "\n{/*0.75 " . stamp . "}" : ""

# 102400 -> "100 KiB", 28149 -> "27.5 KiB"
bytes(x) = x >= 1048576 ? sprintf("%.3g MiB", x / 1048576.) : \
           x >= 1024 ? sprintf("%.3g KiB", x / 1024.) : sprintf("%.0f B", x)

# thousands separated by a thin space: 11370 -> "11 370"
th(x) = abs(x) >= 1000 ? sprintf("%d %03d", int(x) / 1000, int(x) % 1000) : sprintf("%.0f", x)

# ---- throughput against steps per run ----------------------------------------
if (chart eq 'steps') {
	set title "Throughput against steps per run\n{/*0.8 500 runs a point, one hookflow instance, a fresh database each}" . st
	set xlabel "steps per run (log scale)"
	set ylabel "step transitions per second"
	set logscale x
	stats data u 1 nooutput
	set xrange [STATS_min / 1.5 : STATS_max * 1.5]
	set yrange [0:*]
	set offsets 0, 0, graph 0.15, 0
	set key bottom right
	# a reference missing from the data file: NaN, and no key entry
	pgb = exists("pgbench_tps") ? pgbench_tps : NaN
	pgbt = pgb == pgb ? sprintf("pgbench, one-row UPDATE per transaction, 32 clients: %s tps", th(pgb)) : ""
	plot data u 1:2:xtic(1) w lp ls 1 t "step transitions/s (labels: and runs/s)", \
	     '' u 1:2:(sprintf("%s/s\n(%s runs/s)", th($2), th($3))) w labels offset 0,1.6 tc ls 1 notitle, \
	     pgb w l ls 4 t pgbt
}

# ---- payload size: throughput, database bytes per step, memory ---------------
if (chart eq 'payload') {
	set terminal pngcairo size 1000,1150 enhanced font 'DejaVu Sans,12' linewidth 1.2
	set output png
	set multiplot layout 3,1 title "Cost of the payload size\n{/*0.8 500 runs x 10 steps a point, incompressible input, one instance, a fresh database each}" . st
	set logscale x
	stats data u 1 nooutput
	set xrange [STATS_min / 1.6 : STATS_max * 1.6]
	set xlabel "payload per step (log scale)"
	set offsets 0, 0, graph 0.15, 0

	set title "Throughput"
	set ylabel "step transitions per second\n(log scale)"
	set logscale y
	set key top right
	plot data u 1:2:xtic(bytes($1)) w lp ls 1 t "step transitions/s", \
	     '' u 1:2:(th($2)) w labels offset 0,1.1 tc ls 1 notitle

	set title "Database growth"
	set ylabel "database bytes per step\n(log scale)"
	set ytics ("100 B" 100, "1 KiB" 1024, "10 KiB" 10240, "100 KiB" 102400, "1 MiB" 1048576, \
	           "10 MiB" 10485760)
	set key bottom right
	plot data u 1:4:xtic(bytes($1)) w lp ls 1 t "database bytes per step (tables + indexes)", \
	     '' u 1:4:(sprintf("%s (%.2g x)", bytes($4), $4 / $1)) w labels offset 0,1.1 tc ls 1 notitle, \
	     x w l ls 4 t "1 x the payload", \
	     1.3 * x w l ls 6 t "1.3 x the payload (target)"

	set title "hookflow memory"
	unset logscale y
	set ytics autofreq
	set yrange [0:*]
	set ylabel "hookflow peak RSS, MiB"
	set key left center
	plot data u 1:3:xtic(bytes($1)) w lp ls 2 t "peak RSS (VmHWM), up to 1,024 calls in flight", \
	     '' u 1:3:(sprintf("%.0f MiB", $3)) w labels offset 0,1.1 tc ls 2 notitle, \
	     256 w l ls 4 t "256 MiB (target with 100 KiB payloads)"
	unset multiplot
}

# ---- runs kept (tests/bench/scenario_size.sh) ------------------------------------
if (chart eq 'kept') {
	set title "Throughput against the runs kept in the database" . st
	set xlabel "runs kept before the measurement (log scale)"
	set ylabel "step transitions per second"
	set logscale x
	set format x "%.0s%c"
	stats data u ($1 > 0 ? $1 : NaN) nooutput
	set xrange [STATS_min / 1.6 : STATS_max * 1.6]
	set yrange [0:*]
	set offsets 0, 0, graph 0.12, 0
	set key bottom left
	# the empty database (0 runs kept; charts.sh passes its figure as
	# empty_tps) cannot sit on a log axis: a line
	empty = exists("empty_tps") ? empty_tps : NaN
	et = empty == empty ? sprintf("empty database: %s/s", th(empty)) : ""
	et95 = empty == empty ? "0.95 x the empty database (target)" : ""
	kl(y) = empty == empty ? sprintf("%s (%.2f x)", th(y), y / empty) : th(y)
	plot data u ($1 > 0 ? $1 : NaN):2 w lp ls 1 t "step transitions/s", \
	     '' u ($1 > 0 ? $1 : NaN):2:(kl($2)) w labels offset 0,1.1 tc ls 1 notitle, \
	     empty w l ls 4 t et, \
	     0.95 * empty w l ls 6 t et95
}

# ---- calls in flight: memory and drain time -------------------------------------
if (chart eq 'inflight') {
	set terminal pngcairo size 1000,1150 enhanced font 'DejaVu Sans,12' linewidth 1.2
	set output png
	set multiplot layout 3,1 title "Calls in flight\n{/*0.8 N runs of 1 step all due at one moment, the webhook holding each call; one instance, a fresh database each}" . st
	set xlabel "calls in flight at once"
	stats data u 1 nooutput
	set xrange [0 : STATS_max * 1.08]
	set format x "%.0f"
	set yrange [0:*]
	set offsets 0, 0, graph 0.15, 0

	set title "hookflow memory"
	set ylabel "hookflow RSS, MiB"
	set key top left
	plot data u 1:2 w lp ls 2 t "peak RSS (VmHWM)", \
	     '' u 1:2:(sprintf("%.0f", $2)) w labels offset 0,1.1 tc ls 2 notitle, \
	     '' u 1:3 w l ls 4 t "idle RSS before the calls"

	set title "Memory per call in flight"
	set ylabel "KiB per call\n(peak - idle) / calls"
	set key bottom right
	plot data u 1:(($2 - $3) * 1024 / $1) w lp ls 5 t "hookflow memory per call in flight", \
	     '' u 1:(($2 - $3) * 1024 / $1):(sprintf("%.1f", ($2 - $3) * 1024 / $1)) w labels offset 0,1.1 tc ls 5 notitle, \
	     12 w l ls 6 t "12 KiB (target at 10,000 calls)"

	set title "Time to drain them"
	set ylabel "seconds from due\nto the last run ended"
	set key bottom right
	plot data u 1:4 w lp ls 1 t "all runs ended after", \
	     '' u 1:4:(sprintf("%.1f s", $4)) w labels offset 0,1.1 tc ls 1 notitle, \
	     '' u 1:($5 / 1000) w l ls 4 t "the webhook's delay (the floor)"
	unset multiplot
}

# ---- idle latency percentiles -------------------------------------------------
if (chart eq 'latency') {
	n = exists("runs") ? sprintf(", %g runs each", runs) : ""
	set title "Idle latency, one run at a time\n{/*0.8 from just before the POST to the terminal answer of the long-poll" . n . "}" . st
	set ylabel "latency, ms"
	set xlabel ""
	set yrange [0:*]
	set offsets 0, 0, graph 0.12, 0
	set style data histogram
	set style histogram clustered gap 1
	set style fill solid 0.85 border -1
	set boxwidth 0.9
	set grid noxtics ytics
	set key top left
	lbl(n) = n == 1 ? "runs of 1 step" : sprintf("runs of %d steps", n)
	plot data u 2:xtic(lbl($1)) lc rgb '#1f77b4' t "p50", \
	     '' u 3 lc rgb '#ff7f0e' t "p90", \
	     '' u 4 lc rgb '#d62728' t "p99", \
	     '' u ($0 - 0.25):2:(sprintf("%.2f", $2)) w labels offset 0,0.7 notitle, \
	     '' u ($0):3:(sprintf("%.2f", $3)) w labels offset 0,0.7 notitle, \
	     '' u ($0 + 0.25):4:(sprintf("%.2f", $4)) w labels offset 0,0.7 notitle
}

# ---- idle latency distribution --------------------------------------------------
if (chart eq 'latency_dist') {
	set title "Idle latency distribution, one run at a time\n{/*0.8 from just before the POST to the terminal answer of the long-poll}" . st
	nines(p) = -log10(1 - p / 100.)
	set xlabel "percentile (scale stretched toward the tail: -log10(1 - p))"
	set ylabel "latency, ms (log scale)"
	# the ranges from the data (stats before any range is set: it would filter)
	stats data u (nines($1)) nooutput
	xhi = STATS_max
	stats data u 2:3 nooutput
	lo = STATS_min_x < STATS_min_y ? STATS_min_x : STATS_min_y
	hi = STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y
	set logscale y
	set yrange [lo / 1.25 : hi * 1.5]
	set ytics (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, \
	           300, 500, 700, 1000, 2000, 5000)
	set xrange [0 : xhi * 1.04]
	set xtics ("0" 0, "50" nines(50), "80" nines(80), "90" nines(90), "95" nines(95), \
	           "99" nines(99), "99.9" nines(99.9))
	set key top left
	sa = exists("steps_a") ? steps_a : 1
	sb = exists("steps_b") ? steps_b : 10
	runs(n) = n == 1 ? "runs of 1 step" : sprintf("runs of %d steps", n)
	plot data u (nines($1)):2 w l ls 1 t runs(sa), \
	     '' u (nines($1)):3 w l ls 2 t runs(sb)
}

# ---- the soak ---------------------------------------------------------------------
if (chart eq 'soak') {
	set terminal pngcairo size 1000,1600 enhanced font 'DejaVu Sans,12' linewidth 1.2
	set output png
	sub = exists("rate") ? sprintf("%g runs/s of %g steps, open loop", rate, exists("steps") ? steps : 10) : "open loop"
	if (exists("retention_s")) { sub = sub . sprintf(", HOOKFLOW\\_RETENTION\\_MS = %g s", retention_s) }
	set multiplot layout 5,1 title "Soak: a fixed submission rate with retention on\n{/*0.8 " . sub . "}" . st
	set xlabel "time since the start, s"
	set xrange [0:*]
	set key top right
	# the first and the last minute, which the verdict compares
	w = exists("window_s") ? window_s : 60
	stats data u 1 nooutput
	tend = STATS_max
	set object 1 rect from 0, graph 0 to w, graph 1 fc rgb '#eef3fa' fs solid 1.0 noborder behind
	set object 2 rect from tend - w, graph 0 to tend, graph 1 fc rgb '#eef3fa' fs solid 1.0 noborder behind
	if (exists("retention_s")) {
		set arrow 1 from retention_s, graph 0 to retention_s, graph 1 nohead ls 6 front
	}

	set title "Runs finished"
	set ylabel "runs per second"
	set yrange [0:*]
	set offsets 0, 0, graph 0.1, 0
	set key bottom right
	r = exists("rate") ? rate : NaN
	rt = exists("rate") ? "submission rate" : ""
	kt = exists("retention_s") ? sprintf("runs deleted from %g s on (retention)", retention_s) : ""
	iv = exists("interval_s") ? interval_s : 10
	plot data u 1:2 w lp ls 1 ps 0.8 t sprintf("runs finished per second, per %g s (shaded: first and last %g s)", iv, w), \
	     r w l ls 4 t rt, \
	     NaN w l ls 6 t kt

	set offsets 0, 0, graph 0.3, 0
	set key top right horizontal
	set title "Latency of the runs finished in each interval"
	set ylabel "submission to terminal, ms"
	plot data u 1:4 w lp ls 1 ps 0.8 t "p50", \
	     '' u 1:5 w lp ls 2 ps 0.8 t "p99"

	set title "Database size"
	set ylabel "pg\\_database\\_size, MiB"
	plot data u 1:6 w lp ls 3 ps 0.8 t "database size"

	set title "hookflow memory"
	set ylabel "hookflow RSS, MiB"
	plot data u 1:7 w lp ls 5 ps 0.8 t "VmRSS"

	set title "The machine's CPU over each interval"
	set ylabel "% of all cores"
	set yrange [0:150]
	set ytics 0, 20, 100
	set xrange [0:tend]
	set offsets 0, 0, 0, 0
	set key top left horizontal
	plot data u 1:10 w lp ls 1 ps 0.8 t "busy", \
	     '' u 1:13 w lp ls 3 ps 0.8 t "PostgreSQL", \
	     '' u 1:12 w lp ls 5 ps 0.8 t "hookflow", \
	     '' u 1:14 w lp ls 4 ps 0.8 t "webhook", \
	     '' u 1:11 w lp ls 2 ps 0.8 t "stolen by the hypervisor"
	unset multiplot
}
