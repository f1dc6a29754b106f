# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`: the load clients (one ./httpclient process per
# C-node) and what the run reads of them: their progress lines (once a
# second), their latency histograms, and the messages each node's client
# counted against what was sent to that node.

# client NAME PORT SRC ARGS...: httpclient in the background; JSON to
# NAME.json, progress (every second) to NAME.err; sets LAST_CPID.
client() {
  local name=$1 port=$2 src=$3
  shift 3
  (exec "$BIN/httpclient" -p "$port" --src "$src" --json -P 1 --pending 200 --timeout 60 \
     --hold 86400 --max-time "$(left)" "$@") >"$WORK/$name.json" 2>"$WORK/$name.err" &
  LAST_CPID=$!
  BENCH_PIDS+=("$LAST_CPID")
}
src_of() { echo "127.$1.$2.1-127.$1.$2.$SRC_PER_CLIENT"; }

# Progress lines come once a second: only each file's tail is read (one tail
# and one awk for all the files), so that watching 53 clients costs the
# machine little while it is being measured.
# fieldv FIELD FILES...: FIELD of each file's last progress line, one a line
# in the files' order (the part before a "/"; 0 when none yet).
fieldv() {
  local f=$1
  shift
  tail -v -n 4 "$@" 2>/dev/null | awk -v f="$f" '
    /^==> .* <==$/ { k = $2; order[++n] = k; next }
    /^httpclient / { last[k] = $0 }
    END { for (j = 1; j <= n; j++) { v = 0; m = split(last[order[j]], a, " ")
            for (i = 1; i < m; i++) if (a[i] == f) { v = a[i + 1]; sub(/\/.*/, "", v) }
            printf "%.0f\n", v } }'
}
# sumf / maxf FIELD FILES...: the sum / the largest of fieldv.
sumf() { fieldv "$@" | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
maxf() { fieldv "$@" | awk '$1 > m { m = $1 } END { printf "%.0f\n", m }'; }
# ERRS: the progress files of the nodes' clients, in the nodes' order.
ERRS=()
client_errs() {
  local i
  ERRS=()
  for ((i = 0; i < NODES; i++)); do ERRS+=("$WORK/client-$i.err"); done
}
# node_msgs: NM[i] = the messages client i counted.
declare -a NM
node_msgs() { mapfile -t NM < <(fieldv msgs "${ERRS[@]}"); }
# The load client's processes, one a line: each coordinator and its workers
# (children_of gives these space-separated, a line per thread).
client_pids() { local p; for p in "$@"; do echo "$p"; children_of "$p" | tr -s ' ' '\n' | sed '/^$/d'; done; }

# merged_latency: "P50 P99 MAX SAMPLES" (us) of every client's latency
# histogram added up (httpclient --hist-out: "HIGH_US COUNT" lines, then
# "max US"): the percentiles of all the stamped messages, not of one client.
# merged_latency BASE: of what came since the copies in BASE (no max then).
merged_latency() {
  local base=${1:-}
  { [[ -n $base ]] && awk '$1 != "max" { print $1, -$2 }' "$base"/client-*.hist
    cat "$WORK"/client-*.hist; } 2>/dev/null | awk -v base="$base" '
    $1 == "max" { if (base == "" && $2 > mx) mx = $2; next }
    { c[$1] += $2; n += $2 }
    END {
      if (!n) { print "null null null 0"; exit }
      k = 0; for (v in c) vs[++k] = v + 0
      for (i = 2; i <= k; i++) { x = vs[i]; for (j = i - 1; j >= 1 && vs[j] > x; j--) vs[j + 1] = vs[j]; vs[j + 1] = x }
      s = 0; p50 = ""; p99 = ""
      for (i = 1; i <= k; i++) { s += c[vs[i]]
        if (p50 == "" && s >= 0.50 * n) p50 = vs[i]
        if (p99 == "" && s >= 0.99 * n) p99 = vs[i] }
      if (base == "" && p50 > mx) p50 = mx
      if (base == "" && p99 > mx) p99 = mx
      printf "%d %d %s %d\n", p50, p99, base == "" ? mx : "null", n }'
}

# snapshot_msgs: MSGS0[i] = client i's count now.
declare -a MSGS0
snapshot_msgs() { node_msgs; MSGS0=("${NM[@]}"); }
# settled TOTAL: the clients' counts grew by TOTAL since the snapshot.
grown() { echo $(($(sumf msgs "${ERRS[@]}") - MSGS_TOTAL0)); }
settled() { sleep 0.4; (($(grown) >= $1)); }
# lost_by PER_NODE_LIST SKIP: LOST = the sum over nodes (but SKIP) of sent -
# delivered since the snapshot; EXTRA = the deliveries beyond what was sent.
lost_by() {
  local i=0 s d lost=0 skip=${2:--1}
  EXTRA=0
  node_msgs
  for s in $1; do
    if ((i != skip)); then
      d=$((NM[i] - MSGS0[i]))
      ((d < s)) && lost=$((lost + s - d))
      ((d > s)) && EXTRA=$((EXTRA + d - s))
    fi
    i=$((i + 1))
  done
  LOST=$lost
}
# all_arrived PER_NODE_LIST SKIP: each node's client (but SKIP's) has what was
# sent to it since the snapshot (a wait_for condition).
all_arrived() {
  local i=0 s skip=${2:--1}
  sleep 0.4                     # (wait_for's 0.1 s is too often for this)
  node_msgs
  for s in $1; do
    ((i == skip)) || ((NM[i] - MSGS0[i] >= s)) || return 1
    i=$((i + 1))
  done
}
