# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by the scripts that write a section of BENCHMARKS.md
# (bench-million.sh, cluster-sim.sh): the section between its markers.

# benchmarks_section NAME FILE TMPDIR: FILE (which starts with <!-- NAME -->
# and ends with <!-- /NAME -->) replaces the section between those markers
# in BENCHMARKS.md, or is appended when there is none yet.
benchmarks_section() {
  local name=$1 file=$2 tmp=$3
  if grep -q "^<!-- $name -->\$" BENCHMARKS.md; then
    awk -v sec="$file" -v open="<!-- $name -->" -v shut="<!-- /$name -->" '
      $0 == open { while ((getline l < sec) > 0) print l; skip = 1; next }
      $0 == shut { skip = 0; next } !skip' BENCHMARKS.md >"$tmp/BENCHMARKS.md" &&
      cp "$tmp/BENCHMARKS.md" BENCHMARKS.md
  else
    { echo; cat "$file"; } >>BENCHMARKS.md
  fi
}
