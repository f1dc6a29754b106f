# Message latency percentiles, flat-out and paced, with the targets. Called
# by bench/lib/plots.sh with data: "pct blast paced" rows in ms; out: the PNG.
# Targets: flat-out p99 10 ms; paced p50 0.1 ms and p99 1 ms.
set terminal (strstrt(GPVAL_TERMINALS, "pngcairo") ? "pngcairo" : "png") size 900,560
set output out
set title "Message latency, 10,000 streams (median of the runs)"
set ylabel "ms (log scale)"
set logscale y
set grid ytics
set style fill solid 0.8 border -1
set key outside top center horizontal maxrows 2 font ",10"
set yrange [0.001:*]
set xrange [-0.6:3.6]
set xtics ("p50" 0, "p90" 1, "p99" 2, "max" 3) scale 0
fmt(v) = v >= 10 ? sprintf("%.0f", v) : sprintf("%.3g", v)
# Row i (after the header) is percentile i: bars at i - 0.2 and i + 0.2.
plot data every ::1 using ($0 - 0.2):2:(0.38) with boxes lc rgb "#9400d3" title "200,000 flat out", \
     '' every ::1 using ($0 + 0.2):3:(0.38) with boxes lc rgb "#009e73" title "20,000 msg/s paced", \
     '' every ::1 using ($0 - 0.2):2:(fmt($2)) with labels offset 0,0.7 font ",10" notitle, \
     '' every ::1 using ($0 + 0.2):3:(fmt($3)) with labels offset 0,0.7 font ",10" notitle, \
     10 with lines dt 2 lw 1.5 lc rgb "#9400d3" title "flat-out p99 target", \
     1 with lines dt 2 lw 1.5 lc rgb "#007050" title "paced p99 target", \
     0.1 with lines dt 3 lw 1.5 lc rgb "#007050" title "paced p50 target"
