#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What --history-file costs on the hot paths: build/benchprocess (make
# bench-process's driver) with the history in memory and in a file under
# /dev/shm, and optionally an older build of the driver, run in turns
# (ROUNDS rounds, each variant once a round, so that a busy machine weighs
# on all alike). Prints, per variant, the median of all its runs' samples
# (ROUNDS x REPEATS) of the deliver and broadcast CPU per stream, the loop
# thread's user + kernel time and its user time alone (the history's
# work; the kernel's writes are most of the rest), each against the first
# variant.
#
#   bench/lib/history_file_cost.sh [OLD_BENCHPROCESS]
#
#   STREAMS  streams (default 100000)    REPEATS  runs per figure (default 5)
#   ROUNDS   rounds (default 6)          HISTORY_DIR  where the file goes (default /dev/shm)
# Bounded: every run is cut at 300 s. Writes build/history-file-cost/result.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
streams=${STREAMS:-100000}
repeats=${REPEATS:-5}
rounds=${ROUNDS:-6}
dir=build/history-file-cost
file=${HISTORY_DIR:-/dev/shm}/httpdcnode-bench-history-$$
mkdir -p "$dir"
trap 'rm -f "$file"' EXIT
[[ -x build/benchprocess ]] || { echo "history_file_cost: build/benchprocess not built (make all)" >&2; exit 1; }

names=(memory file)
bins=(build/benchprocess build/benchprocess)
envs=("" "$file")
if [[ -n ${1:-} ]]; then
  names=(older "${names[@]}")
  bins=("$1" "${bins[@]}")
  envs=("" "${envs[@]}")
fi

for ((r = 1; r <= rounds; r++)); do
  for i in "${!names[@]}"; do
    out="$dir/${names[$i]}-$r.json"
    if [[ -n ${envs[$i]} ]]; then
      BENCH_PROCESS_HISTORY_FILE=${envs[$i]} timeout --kill-after=10 300 "${bins[$i]}" "$streams" "$repeats" >"$out" 2>"$dir/${names[$i]}-$r.log"
    else
      env -u BENCH_PROCESS_HISTORY_FILE timeout --kill-after=10 300 "${bins[$i]}" "$streams" "$repeats" >"$out" 2>"$dir/${names[$i]}-$r.log"
    fi
    echo "round $r ${names[$i]}: exit $?"
  done
done

python3 - "$dir" "$rounds" "$streams" "${names[@]}" <<'EOF'
import json, statistics, sys
d, rounds, streams, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
keys = [("deliver", "deliver_cpu_ns_samples"), ("broadcast", "broadcast_cpu_ns_samples"),
        ("deliver user", "deliver_user_ns_samples"), ("broadcast user", "broadcast_user_ns_samples")]
res = {}
for n in names:
    runs = []
    for r in range(1, rounds + 1):
        try:
            j = json.load(open(f"{d}/{n}-{r}.json"))
        except (OSError, ValueError):
            continue
        if j.get("failed") == 0:
            runs.append(j)
    res[n] = {k: statistics.median(x for j in runs for x in j[f]) if runs else None
              for k, f in keys}
    res[n]["runs"] = len(runs)
base = res[names[0]]
print(f"{streams} streams, the median of {rounds} runs' samples each, ns per stream:")
for n in names:
    line = f"  {n:8s} runs {res[n]['runs']}"
    for k, _ in keys:
        v = res[n][k]
        line += f"  {k} {v:.0f} ({v / base[k]:.3f})" if v and base[k] else f"  {k} -"
    print(line)
json.dump(res, open(f"{d}/result.json", "w"), indent=1)
EOF
