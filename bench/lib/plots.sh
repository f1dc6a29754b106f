# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The PNGs of scripts/bench.sh (sourced): make_plots DATADIR OUTDIR turns
# DATADIR/memory.dat and the latency figures in the results into
# OUTDIR/memory.png and OUTDIR/latency.png with the gnuplot files beside this one.

make_plots() {
  local data=$1 out=$2 gp="$ROOT/bench/lib"
  # Memory in MB; the kernel as the growth since the first sample (it is
  # machine-wide and starts wherever the machine is).
  awk 'NR == 1 { k0 = $3 } { printf "%d %.3f %.3f\n", $1, $2 / 1e6, ($3 - k0) / 1e6 }' \
    "$data/memory.dat" >"$data/memory-plot.dat"
  # Latency in ms, one row per percentile, one column per kind of run; a
  # missing figure is drawn at the floor of the log scale.
  local p
  {
    echo "pct blast paced"
    for p in p50 p90 p99 max; do
      printf '%s %s %s\n' "$p" "$(calc "max_ms(0$(get "blast_$p"))" %.3f)" \
        "$(calc "max_ms(0$(get "paced_$p"))" %.3f)"
    done
  } >"$data/latency-plot.dat"
  gnuplot -e "data='$data/memory-plot.dat'; out='$out/memory.png'" \
    "$gp/memory.gp" 2>>"$data/gnuplot.err" &&
    gnuplot -e "data='$data/latency-plot.dat'; out='$out/latency.png'" \
      "$gp/latency.gp" 2>>"$data/gnuplot.err"
}
