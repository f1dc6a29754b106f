#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench-process`: the server's own code paths (open, register,
# deliver, broadcast, presence snapshot, close) for 10,000, 100,000 and
# 1,000,000 streams in one process, no network: build/benchprocess
# (tools/benchprocess/benchprocess.c, whose opening comment says how the
# streams share a few socketpair sinks) once per size, each in a process of
# its own. Prints a table of the figures per stream and a PASS/FAIL line for
# each flatness check: the largest size's figure within +-20 % of the
# smallest's. CPU figures are the loop thread's CPU time (user + kernel),
# the median of BENCH_PROCESS_REPEATS runs (noisy on a shared machine);
# memory is RssAnon growth, exact to the page. Every driver check (each
# phase ran and delivered exactly what it should, memory per stream at most
# 256 B, presence pieces at most 4096 uids) counts too.
# Writes $BENCH_PROCESS_DIR/result.json (default build/bench-process) and
# section.md; with BENCH_PROCESS_DOC=1, section 9 of BENCHMARKS.md from it.
# Ends with "bench-process: P passed, F failed"; exits non-zero when a check
# failed. The million takes about a minute and 300 MB.
#
#   BENCH_PROCESS_SIZES    streams per run (default "10000 100000 1000000";
#                          one size: no flatness check, and the run counts
#                          as one check, as make test's 20000)
#   BENCH_PROCESS_REPEATS  runs per CPU figure, the median kept (default 5)
#   BENCH_PROCESS_BIN      the driver (default build/benchprocess)
#   BENCH_PROCESS_DIR      where the results go (default build/bench-process)
#   BENCH_PROCESS_DOC      1: rewrite section 9 of BENCHMARKS.md
#   BENCH_PROCESS_HISTORY_FILE  the history in this file, as --history-file
#                          (default: in memory, as without the option)
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

sizes=${BENCH_PROCESS_SIZES:-10000 100000 1000000}
repeats=${BENCH_PROCESS_REPEATS:-5}
bin=${BENCH_PROCESS_BIN:-build/benchprocess}
dir=${BENCH_PROCESS_DIR:-build/bench-process}
mkdir -p "$dir"
[[ -x $bin ]] || { echo "bench-process: $bin not built (make all)"; echo "bench-process: 0 passed, 1 failed"; exit 1; }

runs=()
for n in $sizes; do
  echo "== benchprocess $n streams, $repeats repeats"
  timeout --kill-after=10 600 "$bin" "$n" "$repeats" >"$dir/$n.json" 2>"$dir/$n.log"
  echo "   exit $? ($(grep -c '^benchprocess: ok' "$dir/$n.log") checks ok, $(grep -c FAILED "$dir/$n.log") failed)"
  grep FAILED "$dir/$n.log"
  runs+=("$dir/$n.json")
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$dir" "$commit" "${BENCH_PROCESS_DOC:-0}" "$repeats" "${runs[@]}" <<'EOF'
import json, os, sys, time
d, commit, doc, repeats, files = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], sys.argv[5:]
runs, passed, failed, lines = [], 0, 0, []
for f in files:
    try:
        runs.append(json.load(open(f)))
    except (OSError, ValueError):
        print(f"FAIL driver {f}: no result (see {f[:-5]}.log)")
        failed += 1
for r in runs:
    for c in r["checks"]:
        ok = c["ok"]
        passed, failed = passed + ok, failed + (not ok)
        lines.append(f"{'PASS' if ok else 'FAIL'} {r['streams']}: {c['name']}: {c['detail']}")
    for phase in ("open", "memory", "presence up", "deliver", "broadcast", "snapshot",
                  "bounded pieces", "close"):
        if phase not in [c["name"] for c in r["checks"]]:
            lines.append(f"FAIL {r['streams']}: {phase}: did not run")
            failed += 1

# (key, label, unit, digits)
figures = [("bytes_per_stream", "memory per stream (RssAnon growth over the opens)", "B", 1),
           ("open_cpu_ns", "open + register + head, CPU per stream", "ns", 0),
           ("deliver_cpu_ns", "deliver: CPU per message to one uid", "ns", 0),
           ("broadcast_cpu_ns", "broadcast: CPU per stream", "ns", 0),
           ("snapshot_bytes_per_uid", "presence snapshot: bytes per uid", "B", 3),
           ("snapshot_cpu_ns", "presence snapshot: CPU per uid", "ns", 2),
           ("close_cpu_ns", "close (terminator, presence down, reap): CPU per stream", "ns", 0)]
flat = []
if len(runs) >= 2:
    lo, hi = runs[0], runs[-1]
    for key, label, unit, _ in figures:
        ratio = hi[key] / lo[key] if lo[key] else float("inf")
        ok = 0.8 <= ratio <= 1.2
        passed, failed = passed + ok, failed + (not ok)
        flat.append({"figure": key, "from": lo["streams"], "to": hi["streams"],
                     "ratio": round(ratio, 3), "ok": ok})
        lines.append(f"{'PASS' if ok else 'FAIL'} flat {key}: {hi[key]:.2f} at {hi['streams']} / "
                     f"{lo[key]:.2f} at {lo['streams']} = {ratio:.3f} (0.8..1.2)")

head = "| per stream | " + " | ".join(f"{r['streams']:,}" for r in runs) + \
       (f" | {runs[-1]['streams']:,} / {runs[0]['streams']:,} |" if len(runs) >= 2 else " |")
table = [head, "| --- |" + " ---: |" * (len(runs) + (len(runs) >= 2))]
for i, (key, label, unit, dig) in enumerate(figures):
    row = f"| {label} | " + " | ".join(f"{r[key]:.{dig}f} {unit}" for r in runs)
    if flat:
        row += f" | {flat[i]['ratio']:.2f} {'PASS' if flat[i]['ok'] else 'FAIL'}"
    table.append(row + " |")
table.append("| largest presence piece (uids) | " +
             " | ".join(str(r["snapshot_max_piece_uids"]) for r in runs) + (" | |" if flat else " |"))
table.append("| peak RSS (VmHWM) | " +
             " | ".join(f"{r['vm_hwm_kb'] / 1024:.0f} MiB" for r in runs) + (" | |" if flat else " |"))
print("\n".join(table))
print("\n".join(lines))

result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
          "repeats": int(repeats), "runs": runs, "flatness": flat, "passed": passed, "failed": failed}
json.dump(result, open(os.path.join(d, "result.json"), "w"), indent=1)

s = runs[-1] if runs else {}
sizes = " ".join(str(r["streams"]) for r in runs)
section = f"""<!-- bench-process -->
## 9. The server's code paths for a million streams in one process (`make bench-process`)

Measured by `make bench-process` (`scripts/bench-process.sh`, `tools/benchprocess/`) on
{result['date']}, commit {commit}, on the machine above. This section is written by the
script (`BENCH_PROCESS_DOC=1`, which `make bench-process` sets); the raw figures are in
`build/bench-process/result.json`. The command, as run:

```sh
BENCH_PROCESS_SIZES="{sizes}" BENCH_PROCESS_REPEATS={repeats} make bench-process
```

One process, no network: the server's objects driven as the event loop and the C-node
thread drive them. Streams are opened with `stream_open` + `stream_import` + the head
through `stream_send` (what `transport_open` does once the socket left evhttp), all
chunked, uids 1..N, {s.get('sinks', 32)} socketpairs shared as their sockets (drained by one
reader thread that counts every byte); messages of {s.get('payload_bytes', 32)} B go through the inbox ring and
`dispatch.c` (history, batch, one writev each), a broadcast is one `CMD_BROADCAST`, a
snapshot is `presence_snapshot()` into the outbox (read off by a thread that checks every
piece), a close is `stream_end` (terminator, out of the uid table, presence down) and
the reaper. CPU is the loop thread's (user + kernel: the writes' kernel time is in it,
`--writers 1`), the median of {repeats} runs each of at least 200,000 deliveries or a million
snapshot uids; memory is the RssAnon growth over the opens (`struct stream` is
{s.get('struct_stream_bytes', 152)} B from a pool, plus an 8-byte uid slot). Each size runs in a process of its own.
Every delivery is one writev of one message: the messages go in rounds (one to each uid in
turn, or one broadcast), each closed by a `CMD_STATS`, which flushes the batch; left to pile
up in the ring they would be coalesced several to a writev, the more so the smaller N, and
the figures would not compare. A snapshot's fixed costs (the presence window's flush, the
last partial piece) weigh most at the smallest N.

{chr(10).join(table)}

Flatness: the {runs[-1]['streams'] if runs else ''} figure over the {runs[0]['streams'] if runs else ''} one, within 0.8..1.2. As the script printed them:

{chr(10).join('- ' + l for l in lines)}
<!-- /bench-process -->
"""
open(os.path.join(d, "section.md"), "w").write(section)
if doc:
    p = "BENCHMARKS.md"
    text = open(p).read()
    a, b = text.find("<!-- bench-process -->"), text.find("<!-- /bench-process -->")
    if a >= 0 and b > a:
        text = text[:a] + section.rstrip("\n") + text[b + len("<!-- /bench-process -->"):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    open(p, "w").write(text)
    print("bench-process: section 9 of BENCHMARKS.md written")
if len(files) == 1:           # make test's run: one check, its parts above
    print(f"bench-process: {passed} of {passed + failed} parts passed")
    passed, failed = (0, 1) if failed else (1, 0)
print(f"bench-process: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
