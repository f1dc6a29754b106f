# Memory against idle streams, two panels: the server's RSS and the kernel's
# socket memory. Called by bench/lib/plots.sh with
#   data: "streams server_MB kernel_growth_MB" lines; out: the PNG.
set terminal (strstrt(GPVAL_TERMINALS, "pngcairo") ? "pngcairo" : "png") size 1100,500
set output out
set multiplot layout 1,2 title "Memory vs idle streams (loopback)"
set xlabel "open streams (thousands)"
set ylabel "MB"
set key top left reverse Left
set grid
set xrange [0:*]

# Left: the server, with the target (256 bytes per stream over its RSS when
# empty, the first sample).
stats data using 2 nooutput
s0 = STATS_min
set title "server RSS" font ",10"
set yrange [0:*]
plot data using ($1 / 1000):2 with linespoints lw 2 pt 7 title "server RSS", \
     s0 + x * 1000 * 256 / 1e6 with lines dt 2 lw 1 lc rgb "gray40" title "target: 256 B per stream"

# Right: the kernel, machine-wide, both ends of each loopback connection.
set title "kernel: slab + TCP pages, growth (both ends of each connection)" font ",10"
set yrange [*:*]
plot data using ($1 / 1000):3 with linespoints lw 2 pt 5 lc rgb "#009e73" title "kernel growth", \
     x * 1000 * 2 * 4660 / 1e6 with lines dt 2 lw 1 lc rgb "gray40" title "2 x 4,660 B per connection"
unset multiplot
