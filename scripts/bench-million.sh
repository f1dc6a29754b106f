#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench-million`: a million open streams over C-nodes routed by the
# application, on loopback, measured end to end. Needs `make all`.
#
# One Erlang master runs the httpdcnode application (bench/erlang/
# million.erl samples its presence count every 50 ms); ceil(STREAMS /
# PER_NODE) C-nodes, each --master it, --presence httpdcnode_presence,
# --history-bytes 4 MiB, its own ports, holding one contiguous block of
# uids (each uid on one node; random uids hit every node). One ./httpclient
# process per C-node, each over its own 127.50.N.* source addresses (the
# per-process cap on open files, 20,000 here, is what sets ~19,000 streams
# per process on either side). Whole nodes are SSE or WebSocket (ws+meta,
# with ids), a tenth of the streams each at least; the rest chunked.
#
# Phases, in order, each measured: connect (time to all open; rate and memory
# sampled every second, plotted); presence (until the master's count is every
# uid); memory at the peak (servers' RssAnon, kernel Slab + TCP pages,
# clients' RssAnon, MemAvailable); paced sends (RATE msg/s through
# httpdcnode:send/2 to random uids, stamped: delivered, lost, latency);
# multicast_sync to MCAST random uids; broadcast to all, against the write
# floor (writefloor's us per write x STREAMS / cores); churn (CHURN connects
# and disconnects a second, half resets, for CHURN_S s, on extra uids) under
# paced sends; a C-node killed (SIGKILL) and restarted under paced sends
# (its client comes back with --reconnect-lost); with MILLION_ROLLING=1, a
# rolling upgrade: every C-node in turn taken over by a new process
# (--takeover) under paced sends (no stream may close or reconnect, no
# message be lost; the hand-over of each, the latency over the phase).
# Checks print PASS/FAIL,
# targets "TARGET met/missed". Writes $MILLION_DIR/report.md,
# result.json, connect.png and memory.png; ends with "bench-million: P
# passed, F failed" and exits non-zero when a check failed.
#
# Set-up: checks open files per process, fs.file-max, the local port range,
# somaxconn, tcp_mem, conntrack (when it tracks loopback) and memory; raises
# what it may as root (put back at the end), or stops naming the limit. Runs
# in a network namespace of its own whose TCP hash table is sized to its
# sockets (net.ipv4.tcp_child_ehash_entries). After the run, the kernel alone
# at the same scale: writefloor over as many sockets, to the last byte read.
#
#   MILLION_STREAMS   streams (default 1000000)
#   MILLION_PER_NODE  most streams per C-node (default 19000)
#   MILLION_RATE      paced msg/s (default 20000)    MILLION_PACED_S (default 30)
#   MILLION_MCAST     multicast uids (default 100000, at most STREAMS / 2)
#   MILLION_CHURN     churn disconnects/s (default 1000)  MILLION_CHURN_S (default 60)
#   MILLION_KILL_S    paced seconds around the C-node kill (default 20)
#   MILLION_ROLLING   1: the rolling upgrade too (default 0)
#   MILLION_DIR       report and logs (default build/bench-million)
#   MILLION_PUBLISH   0: leave BENCHMARKS.md and bench/ alone (default 1: write
#                     its section there and bench/million-*.png)
#   MILLION_NETNS     auto (default: when the machine's TCP hash table has fewer
#                     buckets than the run's sockets), 1 (always), 0 (never)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '3,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-million: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

STREAMS=${MILLION_STREAMS:-1000000}
PER_MAX=${MILLION_PER_NODE:-19000}
RATE=${MILLION_RATE:-20000}
PACED_S=${MILLION_PACED_S:-30}
MCAST=${MILLION_MCAST:-100000}
CHURN=${MILLION_CHURN:-1000}
CHURN_S=${MILLION_CHURN_S:-60}
KILL_S=${MILLION_KILL_S:-20}
ROLLING=${MILLION_ROLLING:-0}
WORK=${MILLION_DIR:-$ROOT/build/bench-million}
for v in STREAMS PER_MAX RATE PACED_S MCAST CHURN CHURN_S KILL_S ROLLING; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench-million: $v must be a number" >&2; exit 2; }
done
NODES=$(((STREAMS + PER_MAX - 1) / PER_MAX))
((NODES >= 3 && PER_MAX <= 19000 && RATE >= 1 && PACED_S >= 2 && CHURN >= 1 &&
  CHURN_S >= 2 && KILL_S >= 6)) || {
  echo "bench-million: want at least 3 C-nodes (STREAMS / PER_NODE), PER_NODE <= 19000," \
       "PACED_S, CHURN_S >= 2, KILL_S >= 6" >&2; exit 2; }
PER=$(((STREAMS + NODES - 1) / NODES))      # balanced blocks of uids
((MCAST > STREAMS / 2)) && MCAST=$((STREAMS / 2))
HISTORY_BYTES=4194304
MAX_USERS=$((STREAMS + 200000))
CHURN_CONNS=500                   # per churn client, on a chunked node with room
CORES=$(nproc)

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
# shellcheck source=bench/section.sh
source bench/lib/section.sh
log() { printf '%s bench-million: %s\n' "$(date +%T)" "$*" >&2; }

START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# Every wait gives up by then: at most about 15 min at a million (a run takes about 5).
DEADLINE=$((START + 280 + PACED_S + CHURN_S + KILL_S + STREAMS / 2000))
# Inside its own network namespace (below) the run keeps what the outer
# run wrote there.
if [[ -z ${MILLION_IN_NETNS:-} ]]; then rm -rf "$WORK"; mkdir -p "$WORK"; : >"$WORK/setup.txt"; fi
COOKIE="million_$$_${RANDOM}${RANDOM}"
MASTER="millmaster_$$@localhost"
CHECKS="$WORK/checks"
RESULT="$WORK/result.kv"           # name value, one a line: result.json
: >"$CHECKS"
: >"$RESULT"
RESTORE=()                         # "key value" of the sysctls changed

restore_sysctls() {
  local kv
  for kv in "${RESTORE[@]}"; do sysctl -q -w "${kv%% *}=${kv#* }" >/dev/null 2>&1; done
  RESTORE=()
}
# The epmd of a namespace of its own is the run's (started below): ended with it.
trap 'end_all; restore_sysctls; [[ -n ${MILLION_IN_NETNS:-} ]] && epmd -kill >/dev/null 2>&1' EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

for f in "$BIN/httpdcnode" "$BIN/httpclient" "$BIN/writefloor" "$BIN/wakefloor" tools/erlang/ebin/million.beam \
         tools/erlang/ebin/httpdcnode.app; do
  [[ -e $f ]] || { echo "bench-million: $f missing: run 'make all' first" >&2; exit 1; }
done
[[ $("$BIN/httpclient" --help) == *--reconnect-lost* ]] ||
  { echo "bench-million: $BIN/httpclient is old: rebuild it" >&2; exit 1; }

check() {
  local v=FAIL
  [[ $2 == 1 ]] && v=PASS
  printf '%s %s: %s\n' "$v" "$1" "$3" | tee -a "$CHECKS"
}
target() {
  local v=missed
  [[ $2 == 1 ]] && v=met
  printf 'TARGET %s %s: %s\n' "$v" "$1" "$3" | tee -a "$CHECKS"
}
put() { printf '%s %s\n' "$1" "$2" >>"$RESULT"; }
sysv() { cat "/proc/sys/${1//.//}" 2>/dev/null | tr '\t' ' '; }
stop() { echo "bench-million: $*" >&2; log "stopped by the set-up"; exit 1; }

# --- set-up: what this machine allows ------------------------------------------

# raise KEY VALUE WHY: sets a sysctl as root (remembered, put back at the
# end) or stops naming it.
raise() {
  local old
  old=$(sysv "$1")
  if [[ $(id -u) == 0 ]] && sysctl -q -w "$1=$2" >/dev/null 2>&1; then
    RESTORE+=("$1 $old")
    echo "set $1 = $2 (was $old): $3" | tee -a "$WORK/setup.txt" >&2
  else
    stop "$1 is $old; $3: set it to $2 (as root: sysctl -w $1='$2')"
  fi
}

# A broadcast leaves a message queued on every socket for a moment: pages
# from tcp_mem, one each at worst. A machine-wide setting, not seen inside
# a network namespace: the outer run sets it.
tcp_mem_room() {
  local m0 m1 m2
  read -r m0 m1 m2 < <(sysv net.ipv4.tcp_mem)
  ((m2 >= 2 * STREAMS)) ||
    raise net.ipv4.tcp_mem "$m0 $((m1 > STREAMS ? m1 : STREAMS)) $((2 * STREAMS))" \
      "a message queued on each of $STREAMS sockets at once must not meet the limit"
}

setup() {
  local need hard fmax used lo hi range avail
  need=$((PER + 300))               # streams + the server's own descriptors
  hard=$(ulimit -Hn)
  [[ $hard == unlimited ]] || ((hard >= need)) ||
    stop "open files per process: the hard limit is $hard, a C-node needs $need for $PER streams: lower MILLION_PER_NODE or raise nofile"
  ulimit -n "$hard" 2>/dev/null
  echo "open files per process: $(ulimit -n) (hard $hard), need $need" >>"$WORK/setup.txt"
  read -r used _ _ </proc/sys/fs/file-nr
  fmax=$(sysv fs.file-max)
  ((fmax >= used + 2 * STREAMS + 100000)) ||
    raise fs.file-max $((used + 2 * STREAMS + 200000)) "both ends of $STREAMS streams are on this machine"
  read -r lo hi < <(sysv net.ipv4.ip_local_port_range)
  range=$((hi - lo + 1))
  # Each client process connects to one server port: PER connections per
  # source address fit when the range holds them with room for TIME_WAIT.
  SRC_PER_CLIENT=$(((PER * 4 / 3 + range - 1) / range))
  ((SRC_PER_CLIENT < 2)) && SRC_PER_CLIENT=2
  echo "local port range $lo-$hi: $SRC_PER_CLIENT source addresses per client process" >>"$WORK/setup.txt"
  (($(sysv net.core.somaxconn) >= 4096)) || raise net.core.somaxconn 4096 "connect bursts of thousands"
  (($(sysv net.ipv4.tcp_max_syn_backlog) >= 4096)) ||
    raise net.ipv4.tcp_max_syn_backlog 4096 "connect bursts of thousands"
  [[ -r /proc/sys/net/ipv4/tcp_mem ]] && tcp_mem_room
  # Conntrack counts only when a rule makes it track: then its table caps
  # the connections (both directions of one are one entry).
  if [[ -r /proc/sys/net/netfilter/nf_conntrack_count ]]; then
    if (($(sysv net.netfilter.nf_conntrack_count) > 0)); then
      (($(sysv net.netfilter.nf_conntrack_max) >= STREAMS + 100000)) ||
        raise net.netfilter.nf_conntrack_max $((STREAMS + 200000)) "conntrack tracks loopback here"
    else
      echo "conntrack: loaded, tracking nothing (count 0): no limit" >>"$WORK/setup.txt"
    fi
  fi
  avail=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
  # ~10.1 KB of kernel per connection (both ends) + ~1 KB of processes.
  ((avail * 1024 >= STREAMS * 12000)) ||
    stop "memory: $((avail / 1024)) MiB available, $STREAMS streams need ~$((STREAMS * 12000 / 1048576)) MiB"
  echo "memory available $((avail / 1024)) MiB, fs.file-max $(sysv fs.file-max), somaxconn $(sysv net.core.somaxconn)" >>"$WORK/setup.txt"
}

# --- processes -------------------------------------------------------------------

declare -a SPORT APORT SPID CPID KIND CNT UBASE
node_name() { echo "mill$1_$$"; }
stats_of() { curl -s --max-time 3 "http://127.0.0.1:${APORT[$1]}/stats"; }

# start_node I [ARG]: C-node I in the background (log node-I.log); ARG:
# --takeover, to take over from the one running.
start_node() {
  local i=$1
  shift
  (exec "$BIN/httpdcnode" --listen "127.0.0.1:${SPORT[$i]}" --admin-listen "127.0.0.1:${APORT[$i]}" \
     --name "$(node_name "$i")@localhost" --master "$MASTER" --presence httpdcnode_presence \
     --cookie "$COOKIE" -q --history-bytes "$HISTORY_BYTES" --max-users "$MAX_USERS" \
     --heartbeat 0 --keepalive 0 --drain-seconds 0 "$@") 2>>"$WORK/node-$i.log" &
  SPID[$i]=$!
  BENCH_PIDS+=("${SPID[$i]}")
}
node_up() {
  local i=$1
  alive "${SPID[$i]}" && stats_of "$i" >/dev/null &&
    epmd -names 2>/dev/null | grep -q "^name $(node_name "$i") at"
}
# until node I answers; a killed one's name may linger in epmd: retried.
# await_node I [fixed]: until node I is up, started again when it exits. A
# port taken meanwhile (an outgoing connection's, from the wide local port
# range) is replaced by another: the admin port always, the public one
# unless "fixed" (a restart its clients come back to).
await_node() {
  local i=$1 end=$(($(date +%s) + $(left 60))) last
  while (($(date +%s) < end)); do
    node_up "$i" && return 0
    if ! alive "${SPID[$i]}"; then
      wait "${SPID[$i]}" 2>/dev/null
      forget "${SPID[$i]}"
      last=$(tail -n1 "$WORK/node-$i.log")
      if [[ $last == *"for --admin-listen: Address already in use"* ]]; then
        unique_port && APORT[$i]=$UPORT && log "C-node $i: admin port taken, now ${APORT[$i]}"
      elif [[ ${2:-} != fixed && $last == *"port in use?"* ]]; then
        unique_port && SPORT[$i]=$UPORT && log "C-node $i: port taken, now ${SPORT[$i]}"
      fi
      sleep 0.2
      start_node "$i"
    fi
    sleep 0.05
  done
  log "C-node $i did not come up: $(tail -n2 "$WORK/node-$i.log" | tr '\n' ' ')"
  return 1
}

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
# node_msgs: NM[i] = the messages client i counted.
declare -a NM
node_msgs() { mapfile -t NM < <(fieldv msgs $(CLIENT_ERRS)); }
CLIENT_ERRS() { local i; for ((i = 0; i < NODES; i++)); do echo "$WORK/client-$i.err"; done; }

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

# cpu_all: CPU ticks (1/100 s) used so far by the servers, the clients and the master.
cpu_all() {
  local p t=0
  for p in "${SPID[@]}" $(client_pids "${CPID[@]}") "$MASTER_PID"; do t=$((t + $(cpu_ticks "$p"))); done
  echo "$t"
}

# sched_all: "WAIT_NS RUNS" summed over every thread of the servers, the
# clients and the master (/proc/PID/task/TID/schedstat: time on the CPU,
# time runnable but waiting for one, times run): how long the run's work
# waited for a core.
sched_all() {
  local p
  for p in "${SPID[@]}" $(client_pids "${CPID[@]}") "$MASTER_PID"; do
    cat /proc/"$p"/task/*/schedstat 2>/dev/null
  done | awk '{ w += $2; r += $3 } END { printf "%.0f %.0f\n", w, r }'
}

# cpu_split: "SERVERS CLIENTS MASTER BUSY" CPU ticks (1/100 s) so far: the
# C-nodes', the load clients', the master's, and the machine's busy time
# (/proc/stat: all but idle and iowait), the rest of which is the publisher,
# the kernel's softirq work and the script itself.
cpu_split() {
  local p s=0 c=0
  for p in "${SPID[@]}"; do s=$((s + $(cpu_ticks "$p"))); done
  for p in $(client_pids "${CPID[@]}"); do c=$((c + $(cpu_ticks "$p"))); done
  echo "$s $c $(cpu_ticks "$MASTER_PID") $(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat)"
}

# settle SECONDS: until the processes of the run used under 10 % of one core
# over each of 2 seconds in a row (what is left of the connect and its
# presence snapshots is done), at most SECONDS; SETTLE_S the time it took.
settle() {
  local t0 quiet=0 a b
  t0=$(now_ms)
  a=$(cpu_all)
  while (($(now_ms) - t0 < $1 * 1000)); do
    sleep 1
    b=$(cpu_all)
    if ((b - a < 10)); then quiet=$((quiet + 1)); else quiet=0; fi
    a=$b
    ((quiet >= 2)) && break
  done
  SETTLE_S=$(calc "($(now_ms) - $t0) / 1000" %.1f)
  SETTLE_QUIET=$((quiet >= 2))
}

# rss_sum PID...: RssAnon in kB, summed.
rss_sum() {
  local p files=()
  for p in "$@"; do files+=("/proc/$p/status"); done
  awk '$1 == "RssAnon:" { s += $2 } END { print s + 0 }' "${files[@]}" 2>/dev/null
}
# The load client's processes: each coordinator and its workers.
client_pids() { local p; for p in "$@"; do echo "$p"; children_of "$p"; done; }
mem_avail_kb() { awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo; }
# MemFree: what the machine gave out, reclaimable slab included.
mem_free_kb() { awk '$1 == "MemFree:" { print $2 }' /proc/meminfo; }

# mil CMD ARGS...: million:cli on a one-shot node; its JSON line in MIL.
MIL_SEQ=0
mil() {
  MIL_SEQ=$((MIL_SEQ + 1))
  timeout -k 5 "$(left 600)" erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
    -sname "milldrv_$$_$MIL_SEQ@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
    -eval 'million:cli()' -extra "$@" --master "$MASTER" \
    >"$WORK/mil-$MIL_SEQ.out" 2>"$WORK/mil-$MIL_SEQ.err" </dev/null
  local rc=$?
  MIL=$(grep '^{' "$WORK/mil-$MIL_SEQ.out" | tail -n1)
  [[ $rc == 0 && -n $MIL ]] || { log "million $1 failed: $(tail -n2 "$WORK/mil-$MIL_SEQ.err")"; return 1; }
}
# The per_node list of a paced answer, space-separated.
per_node() { sed -n 's/.*"per_node":\[\([^]]*\)\].*/\1/p' <<<"$1" | tr ',' ' '; }

# presence_at_least N FROM_MS: the first sample time >= FROM_MS with count
# >= N (empty when none yet).
presence_at() {
  awk -v n="$1" -v from="$2" '$1 >= from && $2 >= n { print $1; exit }' "$WORK/presence.dat"
}
presence_now() { tail -n1 "$WORK/presence.dat" 2>/dev/null | cut -d' ' -f2; }

# snapshot_msgs: MSGS0[i] = client i's count now.
declare -a MSGS0
snapshot_msgs() { node_msgs; MSGS0=("${NM[@]}"); }
# settled TOTAL: the clients' counts grew by TOTAL since the snapshot.
grown() { echo $(($(sumf msgs $(CLIENT_ERRS)) - MSGS_TOTAL0)); }
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
# expect_per_node PER_NODE_LIST SKIP SECONDS: until each node's client has it.
all_arrived() {
  local i=0 s skip=${2:--1}
  sleep 0.4                     # (wait_for's 0.1 s is too often for this)
  node_msgs
  for s in $1; do
    ((i == skip)) || ((NM[i] - MSGS0[i] >= s)) || return 1
    i=$((i + 1))
  done
}

# unique_port: UPORT = a port free now and not given to another node of this
# run (not in a subshell: TAKEN must grow).
TAKEN=" "
unique_port() {
  local p try
  for try in 1 2 3 4 5; do
    p=$(free_port) || return 1
    [[ $TAKEN == *" $p "* ]] && continue
    TAKEN+="$p "
    UPORT=$p
    return 0
  done
  return 1
}

# --- a network namespace of its own --------------------------------------------------
# The kernel finds each packet's socket in one hash table (ehash), sized at
# boot: 262,144 buckets here, so the 2,000,000 sockets of a million streams
# (both ends on this machine) hang in chains about 8 long, walked for every
# packet, each link a cache miss. A network namespace made after
# net.ipv4.tcp_child_ehash_entries is set (Linux 6.1) has a table of that
# size: the run goes on inside one whose table has a bucket for every 1.5
# sockets or more. MILLION_NETNS: auto (when the machine's table has fewer
# buckets than sockets), 1 (always), 0 (never).
NETNS=${MILLION_NETNS:-auto}
[[ $NETNS =~ ^(auto|0|1)$ ]] || { echo "bench-million: MILLION_NETNS is auto, 0 or 1" >&2; exit 2; }
run_in_netns() {
  local want=1024 inner rc
  while ((want < 3 * STREAMS && want < 16777216)); do want=$((want * 2)); done
  [[ $(id -u) == 0 && -w /proc/sys/net/ipv4/tcp_child_ehash_entries ]] &&
    command -v unshare >/dev/null && command -v ip >/dev/null ||
    stop "a network namespace with a TCP hash table of $want buckets needs root, unshare, ip and net.ipv4.tcp_child_ehash_entries (Linux 6.1); MILLION_NETNS=0 runs without one"
  tcp_mem_room
  raise net.ipv4.tcp_child_ehash_entries "$want" \
    "a network namespace of its own, its TCP hash table sized to $((2 * STREAMS)) sockets"
  MILLION_IN_NETNS=1 MILLION_EHASH_MACHINE=$EHASH unshare --net -- bash -c 'ip link set lo up && exec bash "$0"' \
    "$ROOT/scripts/bench-million.sh" &
  inner=$!
  # A background job ignores SIGINT: both are passed on as TERM.
  trap 'kill -TERM $inner 2>/dev/null' INT TERM
  wait "$inner"
  rc=$?
  while alive "$inner"; do wait "$inner"; rc=$?; done
  restore_sysctls
  exit "$rc"
}
if [[ -z ${MILLION_IN_NETNS:-} && $NETNS != 0 ]]; then
  EHASH=$(sysv net.ipv4.tcp_ehash_entries)
  if [[ $NETNS == 1 ]] || ((${EHASH#-} < 2 * STREAMS)); then
    run_in_netns
  fi
  echo "TCP hash table: $EHASH buckets for $((2 * STREAMS)) sockets: enough" >>"$WORK/setup.txt"
fi
[[ -n ${MILLION_IN_NETNS:-} ]] &&
  echo "network namespace of its own (loopback only): TCP hash table of $(sysv net.ipv4.tcp_ehash_entries) buckets" >>"$WORK/setup.txt"
EHASH_HERE=$(sysv net.ipv4.tcp_ehash_entries)
put tcp_hash_buckets "${EHASH_HERE#-}"
put tcp_hash_buckets_machine "${MILLION_EHASH_MACHINE:-${EHASH_HERE#-}}"

# --- the run -----------------------------------------------------------------------

setup
log "$STREAMS streams over $NODES C-nodes ($PER each), $RATE msg/s paced; in $WORK"
epmd -daemon
FILES0=$(cut -f1 /proc/sys/fs/file-nr)
TCP0=$(awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat)
AVAIL0=$(mem_avail_kb)
AVAIL_START=$AVAIL0
KERN0=$(kernel_bytes)

# The machine's write floor, while it is quiet.
FLOOR=$(timeout 60 "$BIN/writefloor" 10000 5 40 1 2>/dev/null | tail -n1)
US_PER_WRITE=$(jget us_per_write <<<"$FLOOR")
WRITE_FLOOR_S=$(calc "${US_PER_WRITE:-0} * $STREAMS / 1000000 / $CORES" %.3f)
put write_floor_us_per_write "${US_PER_WRITE:-null}"
put write_floor_s "$WRITE_FLOOR_S"
log "write floor: $US_PER_WRITE us per write, $WRITE_FLOOR_S s for $STREAMS on $CORES cores"

# The master first: the C-nodes connect to it as they come up.
(exec erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell -sname "$MASTER" -setcookie "$COOKIE" \
   -pa "$ROOT/tools/erlang/ebin" -eval 'million:master_cli()' -extra "$WORK/presence.dat") \
  >"$WORK/master.log" 2>&1 </dev/null &
MASTER_PID=$!
BENCH_PIDS+=("$MASTER_PID")
wait_for 30 "the master" grep -q 'million master up' "$WORK/master.log" || exit 1

# Kinds: SSE and WebSocket whole nodes, a tenth of the streams each at least.
N_ID=$(((STREAMS / 10 + PER - 1) / PER))
((N_ID < 1)) && N_ID=1
for ((i = 0; i < NODES; i++)); do
  KIND[$i]=chunked
  ((i >= 1 && i <= N_ID)) && KIND[$i]=sse
  ((i > N_ID && i <= 2 * N_ID)) && KIND[$i]=ws
  UBASE[$i]=$((1 + i * PER))
  CNT[$i]=$PER
  ((i == NODES - 1)) && CNT[$i]=$((STREAMS - i * PER))
  unique_port && SPORT[$i]=$UPORT && unique_port && APORT[$i]=$UPORT || exit 1
done
((2 * N_ID < NODES)) || { log "too few C-nodes for the SSE and WebSocket shares"; exit 1; }
KILLED=1                                     # an SSE node: its streams resume with ids
T_NODES=$(now_ms)
for ((i = 0; i < NODES; i++)); do start_node "$i"; done
for ((i = 0; i < NODES; i++)); do await_node "$i" || exit 1; done
log "$NODES C-nodes up in $(($(now_ms) - T_NODES)) ms"
NODE_PIDS=("${SPID[@]}")
SRV_KB0=$(rss_sum "${SPID[@]}")
MASTER_KB0=$(rss_sum "$MASTER_PID")
KERN0=$(kernel_bytes)
AVAIL0=$(mem_free_kb)

# --- 1. connect ----------------------------------------------------------------
# TCP sockets in use: read with the memory, at the same moment (the clients'
# counts are up to a second old); two a stream, both ends being here.
tcp_inuse() { awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat; }
TCPB=$(tcp_inuse)
T0=$(now_ms)
for ((i = 0; i < NODES; i++)); do
  extra=()
  ((i == KILLED)) && extra=(--reconnect-lost 200 --reconnect-cap 2000)
  client "client-$i" "${SPORT[$i]}" "$(src_of 50 "$i")" --proto "${KIND[$i]}" -n "${CNT[$i]}" \
    --uid-base "${UBASE[$i]}" --hist-out "$WORK/client-$i.hist" "${extra[@]}"
  CPID[$i]=$LAST_CPID
done
SAMPLES="$WORK/samples.dat"     # ms streams servers_kB clients_kB kernel_B memfree_kB master_kB tcp_inuse
printf '0 0 %s 0 %s %s %s %s\n' "$SRV_KB0" "$KERN0" "$AVAIL0" "$MASTER_KB0" "$TCPB" >"$SAMPLES"
T_OPEN= UP=0
# The samples come from a loop of their own, reniced as root: at a load
# average of 50 during the connect, a plain shell loop got a sample in ~28 s.
sample_connect() {
  trap 'exit 0' TERM
  local up
  while :; do
    sleep 1
    up=$(sumf up $(CLIENT_ERRS))
    printf '%s %s %s %s %s %s %s %s\n' $(($(now_ms) - T0)) "$up" "$(rss_sum "${SPID[@]}")" \
      "$(rss_sum $(client_pids "${CPID[@]}"))" "$(kernel_bytes)" "$(mem_free_kb)" "$(rss_sum "$MASTER_PID")" \
      "$(tcp_inuse)" >>"$SAMPLES"
  done
}
sample_connect &
SAMPLER_PID=$!
BENCH_PIDS+=("$SAMPLER_PID")
[[ $(id -u) == 0 ]] && renice -n -10 -p "$SAMPLER_PID" >/dev/null 2>&1
end=$(($(date +%s) + $(left $((60 + STREAMS / 2000)))))
while (($(date +%s) < end)); do
  sleep 1
  UP=$(tail -n1 "$SAMPLES" | cut -d' ' -f2)
  ((UP >= STREAMS)) && { T_OPEN=$(tail -n1 "$SAMPLES" | cut -d' ' -f1); break; }
  for ((i = 0; i < NODES; i++)); do
    alive "${SPID[$i]}" || { log "C-node $i died during the connect"; break 2; }
  done
done
end_pid "$SAMPLER_PID" 5
OPEN_MAX=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$SAMPLES")
# The servers' own count, the exact figure.
SRV_OPEN=0
for ((i = 0; i < NODES; i++)); do v=$(stats_of "$i" | jget streams_open); SRV_OPEN=$((SRV_OPEN + ${v:-0})); done
((SRV_OPEN > OPEN_MAX)) && OPEN_MAX=$SRV_OPEN
put streams_open_max "$OPEN_MAX"
put streams_target "$STREAMS"
put c_nodes "$NODES"
if [[ -n $T_OPEN ]]; then
  CONNECT_S=$(calc "$T_OPEN / 1000" %.1f)
  put connect_s "$CONNECT_S"
  log "all $STREAMS open in $CONNECT_S s (clients' count, 1 s samples; servers count $SRV_OPEN)"
else
  CONNECT_S=
  put connect_s null
  log "not all open: $OPEN_MAX of $STREAMS; $(tail -n3 "$WORK"/client-0.err | tr '\n' ' ')"
  failed_free=$(free -m | awk '/Mem:/ { print $7 }')
  log "machine: MemAvailable $failed_free MiB, $(cat /proc/net/sockstat | grep TCP)"
fi
check "all open" $((OPEN_MAX == STREAMS)) "$OPEN_MAX of $STREAMS streams open at once (servers' streams_open $SRV_OPEN), in ${CONNECT_S:-never} s"
((OPEN_MAX == STREAMS)) || { log "stopping: the streams did not all open"; }

# --- 2. presence -----------------------------------------------------------------
wait_for 120 "the master to know every uid" eval '[[ $(presence_now) -ge $OPEN_MAX ]]'
T_PRES=$(presence_at "$OPEN_MAX" "$T0")
if [[ -n $T_PRES ]]; then PRESENCE_S=$(calc "($T_PRES - $T0) / 1000" %.2f)
else PRESENCE_S=null; fi
put presence_s "$PRESENCE_S"
check "presence" $([[ -n $T_PRES ]] && echo 1 || echo 0) "the master knew all $OPEN_MAX uids $PRESENCE_S s after the first connect (its count sampled every 50 ms: $(presence_now); the clients' count of open streams comes once a second)"

# --- 3. memory at the peak ----------------------------------------------------------
SRV_KB=$(rss_sum "${SPID[@]}")
CLI_KB=$(rss_sum $(client_pids "${CPID[@]}"))
MASTER_KB=$(rss_sum "$MASTER_PID")
KERN=$(kernel_bytes)
AVAIL=$(mem_free_kb)
N=$((OPEN_MAX > 0 ? OPEN_MAX : 1))
SRV_MARG=$(((SRV_KB - SRV_KB0) * 1024 / N))
SRV_ALL=$((SRV_KB * 1024 / N))
KERN_SOCK=$(((KERN - KERN0) / (2 * N)))
CLI_PER=$((CLI_KB * 1024 / N))
MASTER_PER=$(((MASTER_KB - MASTER_KB0) * 1024 / N))
MACHINE_PER=$(((AVAIL0 - AVAIL) * 1024 / N))
put server_private_bytes_per_stream "$SRV_MARG"
put server_private_bytes_per_stream_with_fixed "$SRV_ALL"
put server_fixed_bytes_per_process $((SRV_KB0 * 1024 / NODES))
put kernel_bytes_per_socket "$KERN_SOCK"
put client_bytes_per_stream "$CLI_PER"
put master_bytes_per_uid "$MASTER_PER"
put machine_bytes_per_connection "$MACHINE_PER"
log "memory at $N: servers $SRV_MARG B/stream ($SRV_ALL with fixed costs), kernel $KERN_SOCK B/socket," \
    "client $CLI_PER B/stream, master $MASTER_PER B/uid, machine $MACHINE_PER B/connection"

# --- 4. paced sends, stamped -------------------------------------------------------
settle 90
put settle_s "$SETTLE_S"
log "settled after $SETTLE_S s (quiet: $SETTLE_QUIET; load average $(cut -d' ' -f1-3 /proc/loadavg))"
MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
snapshot_msgs
log "paced: $RATE msg/s for $PACED_S s through httpdcnode:send/2"
read -r SCHED_W0 SCHED_R0 < <(sched_all)
read -r CPU_S0 CPU_C0 CPU_M0 CPU_B0 < <(cpu_split)
T_PACED0=$(now_ms)
# One light thread woken by another, 1,000 times a second beside the phase:
# how long such a wake-up waits for a core under this load.
"$BIN/wakefloor" "$((PACED_S - 1))" 1000 >"$WORK/wakefloor.json" 2>&1 &
WAKE_PID=$!
BENCH_PIDS+=("$WAKE_PID")
if mil paced --rate "$RATE" --seconds "$PACED_S" --uids "$STREAMS" --per-node "$PER" --stamp 1; then
  PN=$(per_node "$MIL")
  SENT=$(jget sent <<<"$MIL")
  wait_for 30 "the paced messages" all_arrived "$PN"
  sleep 1.2                                   # one more progress line each
  lost_by "$PN"; PACED_LOST=$LOST
  read -r SCHED_W1 SCHED_R1 < <(sched_all)
  read -r CPU_S1 CPU_C1 CPU_M1 CPU_B1 < <(cpu_split)
  # CPU over the phase, in cores (ticks / 100 / seconds), by who used it.
  secs=$(calc "($(now_ms) - $T_PACED0) / 1000" %.3f)
  PACED_BUSY=$(calc "($CPU_B1 - $CPU_B0) / 100 / $secs" %.2f)
  # The run's own processes (servers, clients, master): the one-shot node
  # that starts the phase is left out, as at half the rate below.
  PACED_RUN=$(calc "($CPU_S1 - $CPU_S0 + $CPU_C1 - $CPU_C0 + $CPU_M1 - $CPU_M0) / 100 / $secs" %.2f)
  CPU_SPLIT="servers $(calc "($CPU_S1 - $CPU_S0) / 100 / $secs" %.2f), clients $(calc "($CPU_C1 - $CPU_C0) / 100 / $secs" %.2f), master $(calc "($CPU_M1 - $CPU_M0) / 100 / $secs" %.2f), the machine busy $(calc "($CPU_B1 - $CPU_B0) / 100 / $secs" %.2f) of $CORES cores"
  T_PACED1=$(now_ms)
  # Run-queue wait per run, and the runnable threads waiting for a core on
  # average over the phase (wait time / wall time).
  RQ_WAIT_US=$(calc "($SCHED_W1 - $SCHED_W0) / 1000 / ($SCHED_R1 - $SCHED_R0 + 1)" %.0f)
  RQ_WAITING=$(calc "($SCHED_W1 - $SCHED_W0) / 1000000 / ($T_PACED1 - $T_PACED0 + 1)" %.2f)
  read -r PACED_P50 PACED_P99 PACED_MAX PACED_SAMPLES < <(merged_latency)
  PACED_WORST_P99=$(maxf p99 $(CLIENT_ERRS))
  PACED_RATE=$(calc "$SENT * 1000000 / $(jget elapsed_us <<<"$MIL")" %.0f)
else SENT=0 PACED_LOST=null PACED_P50=null PACED_P99=null PACED_MAX=null PACED_RATE=0
  PACED_SAMPLES=0 PACED_WORST_P99=null RQ_WAIT_US=null RQ_WAITING=null CPU_SPLIT= PACED_BUSY=null PACED_RUN=null; fi
wait_exit "$WAKE_PID" 10
WAKE=$(tail -n1 "$WORK/wakefloor.json")
WAKE_P50=$(jget p50_us <<<"$WAKE") WAKE_P99=$(jget p99_us <<<"$WAKE") WAKE_MAX=$(jget max_us <<<"$WAKE")
put paced_wakeup_p50_us "${WAKE_P50:-null}"
put paced_wakeup_p99_us "${WAKE_P99:-null}"
put paced_wakeup_max_us "${WAKE_MAX:-null}"
put paced_sent "$SENT"
put paced_rate_per_s "$PACED_RATE"
put paced_lost "$PACED_LOST"
put paced_p50_us "$PACED_P50"
put paced_p99_us "$PACED_P99"
put paced_max_us "$PACED_MAX"
put paced_samples "$PACED_SAMPLES"
put paced_worst_client_p99_us "$PACED_WORST_P99"
put paced_runqueue_wait_us_per_run "$RQ_WAIT_US"
put paced_runqueue_waiting_threads "$RQ_WAITING"
put paced_machine_busy_cores "$PACED_BUSY"
put paced_run_cores "$PACED_RUN"
check "paced sends" $([[ $PACED_LOST == 0 && $SENT -gt 0 ]] && echo 1 || echo 0) "sent $SENT at $PACED_RATE msg/s, lost $PACED_LOST, extra ${EXTRA:-?}; latency p50 $PACED_P50 us, p99 $PACED_P99 us, max $PACED_MAX us over $PACED_SAMPLES stamped messages (every client's histogram added up; the worst client process's p99 $PACED_WORST_P99 us); meanwhile the run's threads waited $RQ_WAIT_US us for a core per run, $RQ_WAITING of them waiting on average, and one wake-up (wakefloor beside it) waited p50 ${WAKE_P50:-?} us, p99 ${WAKE_P99:-?} us, max ${WAKE_MAX:-?} us; CPU (cores): ${CPU_SPLIT:-n/a}"

# --- 4b. the same at half the rate ---------------------------------------------------------
# How the tail follows the load: half the messages a second, stamped, for
# half as long; its latency is of these messages alone (the histograms less
# what they held before).
HALF=$((RATE / 2 > 0 ? RATE / 2 : 1))
HALF_S=$((PACED_S / 2 >= 2 ? PACED_S / 2 : 2))
mkdir -p "$WORK/hist-paced"
cp "$WORK"/client-*.hist "$WORK/hist-paced/" 2>/dev/null
snapshot_msgs
log "paced: $HALF msg/s for $HALF_S s"
read -r CPU_S0 CPU_C0 CPU_M0 CPU_B0 < <(cpu_split)
T_HALF0=$(now_ms)
HALF_LOST=null HALF_P50=null HALF_P99=null HALF_RUN=null
if mil paced --rate "$HALF" --seconds "$HALF_S" --uids "$STREAMS" --per-node "$PER" --stamp 1; then
  PN=$(per_node "$MIL")
  HALF_SENT=$(jget sent <<<"$MIL")
  wait_for 30 "the paced messages at half the rate" all_arrived "$PN"
  read -r CPU_S1 CPU_C1 CPU_M1 CPU_B1 < <(cpu_split)
  HALF_RUN=$(calc "($CPU_S1 - $CPU_S0 + $CPU_C1 - $CPU_C0 + $CPU_M1 - $CPU_M0) / 100 / (($(now_ms) - $T_HALF0) / 1000)" %.2f)
  sleep 1.2                                   # one more histogram each
  lost_by "$PN"; HALF_LOST=$LOST
  read -r HALF_P50 HALF_P99 _ _ < <(merged_latency "$WORK/hist-paced")
fi
put paced_half_rate_per_s "$HALF"
put paced_half_lost "$HALF_LOST"
put paced_half_p50_us "$HALF_P50"
put paced_half_p99_us "$HALF_P99"
put paced_half_run_cores "$HALF_RUN"
check "paced at half the rate" $([[ $HALF_LOST == 0 ]] && echo 1 || echo 0) "sent ${HALF_SENT:-0} at $HALF msg/s, lost $HALF_LOST; latency p50 $HALF_P50 us, p99 $HALF_P99 us; the run's processes used $HALF_RUN cores (at the full rate $PACED_RUN)"

# --- 5. multicast_sync -----------------------------------------------------------------
MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
log "multicast_sync to $MCAST random uids"
if mil multicast --count "$MCAST" --uids "$STREAMS"; then
  MT0=$(jget t0_ms <<<"$MIL")
  WRITTEN=$(jget written <<<"$MIL")
  REPLY_S=$(calc "$(jget reply_us <<<"$MIL") / 1000000" %.3f)
  wait_for 30 "the multicast at $MCAST streams" settled "$MCAST"
  sleep 1.2
  GOT=$(grown)
  MLAST=$(maxf last_msg_ms $(CLIENT_ERRS))
  MCAST_LAST=$(calc "($MLAST - $MT0) / 1000" %.3f)
else WRITTEN=0 REPLY_S=null GOT=0 MCAST_LAST=null; fi
put multicast_uids "$MCAST"
put multicast_written "$WRITTEN"
put multicast_delivered "$GOT"
put multicast_reply_s "$REPLY_S"
put multicast_last_delivery_s "$MCAST_LAST"
check "multicast_sync" $((WRITTEN == MCAST && GOT == MCAST)) "$MCAST uids: the reply after $REPLY_S s said $WRITTEN written; $GOT delivered, the last $MCAST_LAST s after the call"

# --- 6. broadcast ------------------------------------------------------------------------
MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
log "broadcast to all"
read -r CPU_S0 CPU_C0 CPU_M0 CPU_B0 < <(cpu_split)
if mil broadcast; then
  BT0=$(jget t0_ms <<<"$MIL")
  wait_for 120 "the broadcast at every stream" settled "$OPEN_MAX"
  read -r CPU_S1 CPU_C1 CPU_M1 CPU_B1 < <(cpu_split)
  # CPU per delivery (a tick is 10,000 us), and how busy the machine was.
  B_SRV_US=$(calc "($CPU_S1 - $CPU_S0) * 10000 / $OPEN_MAX" %.2f)
  B_CLI_US=$(calc "($CPU_C1 - $CPU_C0) * 10000 / $OPEN_MAX" %.2f)
  sleep 1.2
  BGOT=$(grown)
  BLAST=$(maxf last_msg_ms $(CLIENT_ERRS))
  BCAST_S=$(calc "($BLAST - $BT0) / 1000" %.3f)
  # The cores the servers and clients kept busy over the broadcast itself
  # (the window sampled also holds the one-shot node's start).
  B_BUSY=$(calc "($CPU_S1 - $CPU_S0 + $CPU_C1 - $CPU_C0) / 100 / ($BCAST_S > 0 ? $BCAST_S : 1)" %.2f)
else BGOT=0 BCAST_S=null B_SRV_US=null B_CLI_US=null B_BUSY=null; fi
put broadcast_delivered "$BGOT"
put broadcast_server_cpu_us_per_delivery "$B_SRV_US"
put broadcast_client_cpu_us_per_message "$B_CLI_US"
put broadcast_machine_busy_cores "$B_BUSY"
put broadcast_last_delivery_s "$BCAST_S"
RATIO=$(calc "$BCAST_S / ($WRITE_FLOOR_S > 0 ? $WRITE_FLOOR_S : 1)" %.2f)
put broadcast_vs_write_floor "$RATIO"
check "broadcast" $((BGOT == OPEN_MAX)) "$BGOT of $OPEN_MAX delivered, the last $BCAST_S s after the call; write floor $WRITE_FLOOR_S s ($US_PER_WRITE us x $STREAMS / $CORES cores): $RATIO x; CPU per delivery: servers $B_SRV_US us, clients $B_CLI_US us (reading it); the two kept $B_BUSY of $CORES cores busy over the broadcast"

# --- 7. churn under paced sends ---------------------------------------------------------
CHURNERS=()
n_ch=0
for ((i = 0; i < NODES && n_ch < 10; i++)); do
  [[ ${KIND[$i]} == chunked ]] && { CHURNERS+=("$i"); n_ch=$((n_ch + 1)); }
done
CH_RATE=$(((CHURN + n_ch - 1) / n_ch))
CH_ERRS=()
for j in "${!CHURNERS[@]}"; do
  i=${CHURNERS[$j]}
  client "churn-$j" "${SPORT[$i]}" "$(src_of 51 "$j")" -n "$CHURN_CONNS" \
    --uid-base $((STREAMS + 1 + j * CHURN_CONNS)) --churn "$CH_RATE" --churn-reset 50
  CH_PID[$j]=$LAST_CPID
  CH_ERRS+=("$WORK/churn-$j.err")
done
wait_for 60 "the churning streams" eval '(($(sumf welcomed "${CH_ERRS[@]}") >= n_ch * CHURN_CONNS))'
MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
snapshot_msgs
CH_C0=$(sumf welcomed "${CH_ERRS[@]}")
log "churn: $((CH_RATE * n_ch))/s over $n_ch clients x $CHURN_CONNS streams, $RATE msg/s for $CHURN_S s"
TC0=$(now_ms)
if mil paced --rate "$RATE" --seconds "$CHURN_S" --uids "$STREAMS" --per-node "$PER"; then
  TC1=$(now_ms)
  CH_C1=$(sumf welcomed "${CH_ERRS[@]}")
  PN=$(per_node "$MIL")
  CSENT=$(jget sent <<<"$MIL")
  wait_for 30 "the messages sent during the churn" all_arrived "$PN"
  sleep 1.2
  lost_by "$PN"; CHURN_LOST=$LOST
else CSENT=0 CHURN_LOST=null TC1=$(now_ms) CH_C1=$CH_C0; fi
stop_all() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
  for p in "$@"; do wait_exit "$p" "$(left 60)" || end_pid "$p" 5; done
}
stop_all "${CH_PID[@]}"
CH_CLOSED=0 CH_RESET=0 CH_FAILED=0
for j in "${!CHURNERS[@]}"; do
  v=$(jget churn_closed <"$WORK/churn-$j.json"); CH_CLOSED=$((CH_CLOSED + ${v:-0}))
  v=$(jget churn_reset <"$WORK/churn-$j.json"); CH_RESET=$((CH_RESET + ${v:-0}))
  v=$(jget failed <"$WORK/churn-$j.json"); CH_FAILED=$((CH_FAILED + ${v:-0}))
done
CH_CONN_RATE=$(calc "($CH_C1 - $CH_C0) * 1000 / ($TC1 - $TC0)" %.0f)
put churn_sent "$CSENT"
put churn_lost "$CHURN_LOST"
put churn_connects_per_s "$CH_CONN_RATE"
put churn_disconnects "$CH_CLOSED"
put churn_resets "$CH_RESET"
check "churn" $([[ $CHURN_LOST == 0 && $CSENT -gt 0 ]] && echo 1 || echo 0) "$CSENT sent to the $STREAMS streams that stayed, lost $CHURN_LOST (extra $EXTRA); churn: $CH_CLOSED disconnects ($CH_RESET resets), $CH_CONN_RATE connects/s over the sends, failed $CH_FAILED"
# The churn uids leave the presence table: back to the million.
wait_for 60 "presence back to $STREAMS" eval '[[ $(presence_now) == "$STREAMS" ]]'

# --- 8. a C-node killed and restarted under paced sends ----------------------------------
MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
snapshot_msgs
KE="$WORK/client-$KILLED.err"
log "kill: C-node $KILLED (${KIND[$KILLED]}, ${CNT[$KILLED]} streams) under $RATE msg/s for $KILL_S s"
KSEQ=$((MIL_SEQ + 1))
mil paced --rate "$RATE" --seconds "$KILL_S" --uids "$STREAMS" --per-node "$PER" &
MIL_BG=$!
MIL_SEQ=$KSEQ
BENCH_PIDS+=("$MIL_BG")
sleep 3
{ kill -KILL "${SPID[$KILLED]}"; wait_exit "${SPID[$KILLED]}" 10; } 2>/dev/null
TK=$(now_ms)
start_node "$KILLED"
await_node "$KILLED" fixed
TR=$(now_ms)
back() { [[ $(stats_of "$KILLED" | jget streams_open) == "${CNT[$KILLED]}" ]]; }
wait_for 60 "the killed node's streams back" back
TB=$(now_ms)
wait_for 30 "presence right again" eval '[[ -n $(presence_at "$STREAMS" "$TB") ]]'
TP=$(presence_at "$STREAMS" "$TB")
wait "$MIL_BG"
forget "$MIL_BG"
MIL=$(grep '^{' "$WORK/mil-$KSEQ.out" | tail -n1)
PN=$(per_node "$MIL")
KSENT=$(jget sent <<<"$MIL")
wait_for 30 "the other nodes' messages" all_arrived "$PN" "$KILLED"
sleep 1.2
lost_by "$PN" "$KILLED"; KILL_LOST=$LOST
BACK_S=$(calc "($TB - $TR) / 1000" %.2f)
PRES_LAG=$([[ -n $TP ]] && calc "($TP - $TB) / 1000" %.2f || echo null)
put node_kill_sent "$KSENT"
put node_kill_lost "$KILL_LOST"
put node_kill_restart_ms $((TR - TK))
put node_kill_back_s "$BACK_S"
put node_kill_presence_after_back_s "$PRES_LAG"
check "node kill: others" $([[ $KILL_LOST == 0 && ${KSENT:-0} -gt 0 ]] && echo 1 || echo 0) "$KSENT sent, the other nodes' streams lost $KILL_LOST (extra $EXTRA)"
check "node kill: back" $(((TB - TR) < 60000)) "${CNT[$KILLED]} streams back $BACK_S s after the restart ($((TR - TK)) ms after the kill)"
ok=0
[[ $PRES_LAG != null ]] && (($(calc "$PRES_LAG <= 1" %.0f))) && ok=1
check "node kill: presence" $ok "the master knew all $STREAMS uids again $PRES_LAG s after the node's streams were back"

# --- 9. a rolling upgrade under paced sends (MILLION_ROLLING=1) ----------------------------
# Every C-node in turn: the same binary, started with the same options and
# --takeover, takes over from it, while the master sends RATE msg/s to
# random uids. No client reconnects or loses a stream (only the killed
# node's has --reconnect-lost: its retries must not move either); every
# message sent arrives. Per node: from the new process's start to the old
# one's exit (the hand-over, the new one's start included: the nodes run
# with -q, their logs say nothing of it), and until the new one answers.
if ((ROLLING)); then
  MSGS_TOTAL0=$(sumf msgs $(CLIENT_ERRS))
  snapshot_msgs
  UP_R0=$(sumf up $(CLIENT_ERRS))
  CLOSED_R0=$(sumf closed $(CLIENT_ERRS))
  RETRIES_R0=$(sumf retries $(CLIENT_ERRS))
  mkdir -p "$WORK/hist-rolling"
  cp "$WORK"/client-*.hist "$WORK/hist-rolling/" 2>/dev/null
  ROLL_S=$((NODES * 3 + 10))                   # enough for every node at 3 s each
  log "rolling upgrade: $NODES C-nodes in turn under $RATE msg/s (paced for up to $ROLL_S s)"
  RSEQ=$((MIL_SEQ + 1))
  mil paced --rate "$RATE" --seconds "$ROLL_S" --uids "$STREAMS" --per-node "$PER" --stamp 1 &
  MIL_BG=$!
  MIL_SEQ=$RSEQ
  BENCH_PIDS+=("$MIL_BG")
  sleep 2
  : >"$WORK/rolling.dat"
  ROLL_OK=0
  T_R0=$(now_ms)
  for ((i = 0; i < NODES; i++)); do
    OLD=${SPID[$i]}
    T=$(now_ms)
    start_node "$i" --takeover
    wait_exit "$OLD" 30 || { log "C-node $i: the old process did not exit"; break; }
    [[ $WAIT_RC == 0 ]] || { log "C-node $i: the old process exited $WAIT_RC"; break; }
    T_OLD=$(now_ms)
    wait_for 30 "C-node $i taken over" node_up "$i" || break
    printf '%s %s %s\n' "$i" "$((T_OLD - T))" "$(($(now_ms) - T))" >>"$WORK/rolling.dat"
    ROLL_OK=$((ROLL_OK + 1))
  done
  ROLL_TOTAL_S=$(calc "($(now_ms) - $T_R0) / 1000" %.1f)
  wait "$MIL_BG"
  forget "$MIL_BG"
  MIL=$(grep '^{' "$WORK/mil-$RSEQ.out" | tail -n1)
  PN=$(per_node "$MIL")
  RSENT=$(jget sent <<<"$MIL")
  wait_for 60 "the messages sent during the rolling upgrade" all_arrived "$PN"
  sleep 1.2                                   # one more histogram each
  lost_by "$PN"; ROLL_LOST=$LOST
  read -r ROLL_P50 ROLL_P99 _ _ < <(merged_latency "$WORK/hist-rolling")
  UP_R1=$(sumf up $(CLIENT_ERRS))
  CLOSED_R1=$(sumf closed $(CLIENT_ERRS))
  RETRIES_R1=$(sumf retries $(CLIENT_ERRS))
  read -r GIVE_MED GIVE_MAX UP_MAX < <(sort -n -k2 "$WORK/rolling.dat" | awk '{ g[NR] = $2; if ($3 > um) um = $3 }
    END { printf "%s %s %s\n", NR ? g[int((NR + 1) / 2)] : "null", NR ? g[NR] : "null", um + 0 }')
  put rolling_nodes "$ROLL_OK"
  put rolling_s "$ROLL_TOTAL_S"
  put rolling_sent "$RSENT"
  put rolling_lost "$ROLL_LOST"
  put rolling_closed $((CLOSED_R1 - CLOSED_R0))
  put rolling_reconnects $((RETRIES_R1 - RETRIES_R0))
  put rolling_handover_median_ms "$GIVE_MED"
  put rolling_handover_max_ms "$GIVE_MAX"
  put rolling_serving_max_ms "$UP_MAX"
  put rolling_p50_us "$ROLL_P50"
  put rolling_p99_us "$ROLL_P99"
  check "rolling: every node" $((ROLL_OK == NODES)) "$ROLL_OK of $NODES C-nodes taken over in $ROLL_TOTAL_S s; from the new process's start to the old one's exit median $GIVE_MED ms, longest $GIVE_MAX ms; the new process answering at most $UP_MAX ms after it started"
  check "rolling: no stream lost" $([[ $UP_R1 == "$UP_R0" && $CLOSED_R1 == "$CLOSED_R0" && $RETRIES_R1 == "$RETRIES_R0" ]] && echo 1 || echo 0) "streams up $UP_R0 before, $UP_R1 after; closed by a server $((CLOSED_R1 - CLOSED_R0)); reconnections $((RETRIES_R1 - RETRIES_R0))"
  check "rolling: none lost" $([[ $ROLL_LOST == 0 && ${RSENT:-0} -gt 0 ]] && echo 1 || echo 0) "$RSENT sent at $RATE msg/s, lost $ROLL_LOST (extra $EXTRA); latency over the phase p50 $ROLL_P50 us, p99 $ROLL_P99 us"
fi

# --- the end: every process, then the machine ----------------------------------------------
STATS_KILLED=$(stats_of "$KILLED")
log "ending the clients"
stop_all "${CPID[@]}"
GAPS=$(jget gaps <"$WORK/client-$KILLED.json")
GAPS=${GAPS:-0}
IDERR=0
for ((i = 0; i < NODES; i++)); do v=$(jget id_errors <"$WORK/client-$i.json"); IDERR=$((IDERR + ${v:-0})); done
put node_kill_gaps "$GAPS"
put id_errors "$IDERR"
check "node kill: gaps" $((GAPS == CNT[KILLED])) "$GAPS of ${CNT[$KILLED]} resumed streams told of a gap (replay_gaps $(jget replay_gaps <<<"$STATS_KILLED"))"
check "id errors" $((IDERR == 0)) "$IDERR over the SSE and WebSocket streams"
stop_all "${SPID[@]}"
end_pid "$MASTER_PID" 10
# Ours: connected sockets from the clients' addresses (TIME_WAIT aside).
ours() { ss -Htn state connected '( src 127.50.0.0/16 or src 127.51.0.0/16 )' 2>/dev/null | grep -vc TIME-WAIT; }
wait_for 60 "the sockets closed" eval '(($(ours) == 0))'
FILES1=$(cut -f1 /proc/sys/fs/file-nr)
TCP1=$(awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat)
AVAIL1=$(mem_avail_kb)
OURS1=$(ours)
ok=0
((OURS1 == 0 && AVAIL1 * 100 >= AVAIL_START * 95)) && ok=1
check "machine back" $ok "every process ended by pid; $OURS1 of the bench's sockets left (TIME_WAIT aside); MemAvailable $((AVAIL_START / 1024)) MiB at the start, $((AVAIL1 / 1024)) at the end; machine-wide TCP in use $TCP0, $TCP1; open files $FILES0, $FILES1"

# --- the kernel alone at this scale ---------------------------------------------------------
# The write floor above is one writer over 10,000 sockets with its reader on
# the other core. At a million, every write meets a socket cold in the caches
# and its reader shares the same cores: writefloor over as many sockets, one
# writer and its reader per C-node, one 40-byte write to each, timed to the
# last byte read. What a broadcast costs the kernel and the readers alone.
log "the kernel alone: writefloor over $STREAMS sockets, $NODES writers each with its reader"
SCALE=$(timeout "$(left 180)" "$BIN/writefloor" "$STREAMS" 1 40 "$NODES" 2>>"$WORK/writefloor.err" | tail -n1)
SCALE_S=$(jget all_read_s <<<"$SCALE")
SCALE_S=${SCALE_S:-null}
put write_floor_at_scale_s "$SCALE_S"
put write_floor_at_scale_writers "$NODES"
SCALE_RATIO=null
[[ $SCALE_S != null && $BCAST_S != null ]] && SCALE_RATIO=$(calc "$BCAST_S / $SCALE_S" %.2f)
put broadcast_vs_write_floor_at_scale "$SCALE_RATIO"
check "the kernel alone" $([[ $SCALE_S != null ]] && echo 1 || echo 0) "writefloor: one 40-byte write to each of $STREAMS sockets from $NODES processes, each with its reader, on the same $CORES cores: every byte read after $SCALE_S s (the broadcast: $SCALE_RATIO x that)$([[ $SCALE_S == null ]] && echo "; $(tail -n2 "$WORK/writefloor.err" | tr '\n' ' ')")"
restore_sysctls

# --- targets -----------------------------------------------------------------------
target "a million open" $((OPEN_MAX >= 1000000)) "$OPEN_MAX open at once"
target "connect <= 120 s" $([[ -n $CONNECT_S ]] && (($(calc "$CONNECT_S <= 120" %.0f))) && echo 1 || echo 0) "${CONNECT_S:-never} s"
target "server <= 300 B/stream" $((SRV_MARG <= 300)) "$SRV_MARG B ($SRV_ALL with fixed costs)"
target "paced p99 <= 10 ms" $([[ $PACED_P99 != null ]] && ((PACED_P99 <= 10000)) && echo 1 || echo 0) "$PACED_P99 us"
target "broadcast <= 1.5 x floor" $([[ $BCAST_S != null ]] && (($(calc "$RATIO <= 1.5" %.0f))) && echo 1 || echo 0) "$BCAST_S s against $WRITE_FLOOR_S s (the kernel alone at this scale: $SCALE_S s)"

# --- plots and report ----------------------------------------------------------------------
# x: the streams by the kernel's count at that moment (last sample: all open).
awk -v s0="$SRV_KB0" -v k0="$KERN0" -v a0="$AVAIL0" -v t0="$TCPB" -v all="$OPEN_MAX" '
  { n = ($8 - t0) / 2; if ($2 >= all) n = $2 }
  n >= 10000 {
    printf "%d %.0f %.0f %.0f %.0f %.0f\n", n, ($3 - s0) * 1024 / n, $3 * 1024 / n,
      ($5 - k0) / (2 * n), $4 * 1024 / n, (a0 - $6) * 1024 / n }' "$SAMPLES" >"$WORK/memory.dat"
awk 'NR == 1 { printf "%.1f %d 0\n", $1 / 1000, $2 } NR > 1 { dt = ($1 - t) / 1000; if (dt > 0) printf "%.1f %d %.0f\n", $1 / 1000, $2, ($2 - n) / dt }
     { t = $1; n = $2 }' "$SAMPLES" >"$WORK/connect.dat"
gnuplot >"$WORK/gnuplot.err" 2>&1 <<EOF
set terminal pngcairo size 900,500
set output '$WORK/connect.png'
set title 'bench-million: connect ($NODES C-nodes, $STREAMS streams)'
set xlabel 'seconds since the first connect'
set ylabel 'streams open'
set y2label 'connects per second'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key left top
plot '$WORK/connect.dat' using 1:2 with lines lw 2 title 'open', \
     '' using 1:3 axes x1y2 with lines title 'rate (per s)'
set output '$WORK/memory.png'
set title 'bench-million: bytes per stream as the streams open'
set xlabel 'streams open'
set ylabel 'bytes'
set y2label ''
unset y2tics
set autoscale y
set logscale x
set key top right
plot '$WORK/memory.dat' using 1:2 with lines lw 2 title 'servers RssAnon (growth)', \
     '' using 1:3 with lines title 'servers RssAnon (with fixed)', \
     '' using 1:4 with lines lw 2 title 'kernel per socket', \
     '' using 1:5 with lines title 'client per stream', \
     '' using 1:6 with lines lw 2 title 'machine per connection'
EOF

{
  printf '{'
  awk 'NR > 1 { printf "," } { v = $2; if (v !~ /^-?[0-9.]+$/ && v != "null") v = "\"" v "\""; printf "\"%s\":%s", $1, v }' "$RESULT"
  printf ',"cores":%s,"took_s":%s}\n' "$CORES" $(($(date +%s) - START))
} >"$WORK/result.json"

{
  echo "# bench-million, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "commit $(git rev-parse --short HEAD 2>/dev/null), $CORES cores, $(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) / 1048576)) GiB," \
       "kernel $(uname -r); load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; took $(($(date +%s) - START)) s"
  echo
  echo "\`MILLION_STREAMS=$STREAMS MILLION_PER_NODE=$PER_MAX MILLION_RATE=$RATE MILLION_PACED_S=$PACED_S" \
       "MILLION_MCAST=$MCAST MILLION_CHURN=$CHURN MILLION_CHURN_S=$CHURN_S MILLION_KILL_S=$KILL_S scripts/bench-million.sh\`"
  echo
  echo "$NODES C-nodes × $PER streams (--history-bytes $HISTORY_BYTES --heartbeat 0 --keepalive 0)," \
       "SSE nodes 1..$N_ID, WebSocket nodes $((N_ID + 1))..$((2 * N_ID)), the rest chunked; one client process each."
  echo
  echo "## Set-up"
  echo
  sed 's/^/- /' "$WORK/setup.txt"
  echo
  echo "## Checks and targets"
  echo
  sed 's/^/- /' "$CHECKS"
  echo
  echo "## Figures (result.json)"
  echo
  echo '| name | value |'
  echo '| --- | ---: |'
  awk '{ printf "| %s | %s |\n", $1, $2 }' "$RESULT"
} >"$WORK/report.md"
cat "$WORK/report.md" | sed -n '/## Figures/,$p'

# --- BENCHMARKS.md: a section of its own (kept by make bench) ------------------------
r() { awk -v k="$1" '$1 == k { print $2 }' "$RESULT"; }
section() {
  cat <<EOF
<!-- bench-million -->
## 8. A million streams over C-nodes (\`make bench-million\`)

Measured by \`make bench-million\` (\`scripts/bench-million.sh\`, $(( ($(date +%s) - START + 59) / 60 )) minutes) on
$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null): $CORES cores,
$(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) / 1048576)) GiB, Linux $(uname -r),
load average $LOAD0 at the start. This section and \`bench/million-*.png\` are written by the
script (\`make bench\` keeps them); the raw figures are in \`build/bench-million/\`
(\`result.json\`, \`report.md\`). The command, as run:

\`\`\`sh
MILLION_STREAMS=$STREAMS MILLION_PER_NODE=$PER_MAX MILLION_RATE=$RATE MILLION_PACED_S=$PACED_S MILLION_MCAST=$MCAST \\
  MILLION_CHURN=$CHURN MILLION_CHURN_S=$CHURN_S MILLION_KILL_S=$KILL_S make bench-million
\`\`\`

One Erlang master running the httpdcnode application; $NODES C-nodes (\`--presence
httpdcnode_presence --history-bytes $HISTORY_BYTES --heartbeat 0 --keepalive 0\`) of $PER uids
each, one contiguous block per node; one \`./httpclient\` process per node over its own
127.50.N.* addresses. Nodes 1..$N_ID hold SSE streams, $((N_ID + 1))..$((2 * N_ID)) WebSocket
(ws+meta, with ids), the rest chunked. All on this one machine: both ends of every connection,
the master and the publisher share the $CORES cores. Sends go through the application
(\`httpdcnode:send/2\`, \`multicast_sync/3\`, \`broadcast/1\` on the master), routed by its
presence table. The per-process cap on open files here is $(ulimit -Hn) (hard), which is what
sets ~19,000 streams per process on either side.

| phase | measured | target |
| --- | ---: | ---: |
| streams open at once | $(r streams_open_max) of $STREAMS | 1,000,000 |
| 1. connect: all open after | $(r connect_s) s (1 s samples) | ≤ 120 s |
| 2. presence: the master knows every uid after | $(r presence_s) s from the first connect | |
| 3. server private memory per stream (RssAnon growth) | $(r server_private_bytes_per_stream) B | ≤ 300 B |
| &nbsp;&nbsp;with the fixed costs (RssAnon / streams) | $(r server_private_bytes_per_stream_with_fixed) B | |
| &nbsp;&nbsp;kernel per socket (Slab + TCP pages, two sockets a stream) | $(r kernel_bytes_per_socket) B | |
| &nbsp;&nbsp;load client per stream (RssAnon) | $(r client_bytes_per_stream) B | |
| &nbsp;&nbsp;master per uid (presence) | $(r master_bytes_per_uid) B | |
| &nbsp;&nbsp;machine per connection (MemFree) | $(r machine_bytes_per_connection) B | |
| 4. paced: sent / lost | $(r paced_sent) at $(r paced_rate_per_s) msg/s / $(r paced_lost) | 0 lost |
| &nbsp;&nbsp;latency p50 / p99 / max (all $(r paced_samples) stamped) | $(r paced_p50_us) / $(r paced_p99_us) / $(r paced_max_us) µs | p99 ≤ 10 ms |
| &nbsp;&nbsp;the worst client process's p99 | $(r paced_worst_client_p99_us) µs | |
| &nbsp;&nbsp;run-queue wait per run / threads waiting for a core (mean) | $(r paced_runqueue_wait_us_per_run) µs / $(r paced_runqueue_waiting_threads) | |
| &nbsp;&nbsp;one wake-up beside it (wakefloor) p50 / p99 / max | $(r paced_wakeup_p50_us) / $(r paced_wakeup_p99_us) / $(r paced_wakeup_max_us) µs | |
| &nbsp;&nbsp;at half the rate ($(r paced_half_rate_per_s) msg/s): lost / p50 / p99 | $(r paced_half_lost) / $(r paced_half_p50_us) / $(r paced_half_p99_us) µs | |
| &nbsp;&nbsp;cores the run's processes used (servers, clients, master): full rate / half | $(r paced_run_cores) / $(r paced_half_run_cores) | |
| 5. multicast_sync to $(r multicast_uids): reply / last delivery | $(r multicast_reply_s) / $(r multicast_last_delivery_s) s ($(r multicast_delivered) delivered) | |
| 6. broadcast to all: last delivery | $(r broadcast_last_delivery_s) s ($(r broadcast_delivered) delivered) | ≤ 1.5 × floor |
| &nbsp;&nbsp;write floor (writefloor $(r write_floor_us_per_write) µs × streams ÷ $CORES cores) | $(r write_floor_s) s ($(r broadcast_vs_write_floor) ×) | |
| &nbsp;&nbsp;the kernel alone at this scale (writefloor, $(r write_floor_at_scale_writers) writers and their readers) | $(r write_floor_at_scale_s) s ($(r broadcast_vs_write_floor_at_scale) ×) | |
| &nbsp;&nbsp;CPU per delivery: servers / clients reading / the two busy | $(r broadcast_server_cpu_us_per_delivery) / $(r broadcast_client_cpu_us_per_message) µs / $(r broadcast_machine_busy_cores) of $CORES cores | |
| 7. churn: sent to the streams that stayed / lost | $(r churn_sent) / $(r churn_lost) | 0 lost |
| &nbsp;&nbsp;connects a second / disconnects (resets) | $(r churn_connects_per_s) / $(r churn_disconnects) ($(r churn_resets)) | 1,000/s |
| 8. C-node killed: restarted after / its streams back after | $(r node_kill_restart_ms) ms / $(r node_kill_back_s) s | |
| &nbsp;&nbsp;its streams told of a gap / the others' lost | $(r node_kill_gaps) of ${CNT[$KILLED]} / $(r node_kill_lost) of $(r node_kill_sent) sent | all / 0 |
| &nbsp;&nbsp;presence right again after the streams were back | $(r node_kill_presence_after_back_s) s | ≤ 1 s |

Latency p50/p99/max is over every stamped message: the clients' histograms added up
(\`httpclient --hist-out\`); the stamped messages are phase 4's alone, sent once the
run's processes had used under 10 % of a core for 2 s in a row ($(r settle_s) s after
the memory was read). A last delivery is the latest message arrival any client
saw (wall clock, ms) less the time just before the call on the master.

What bounds phase 6 is the kernel, with the readers on the same cores. The
write floor of the target is one writer over 10,000 sockets, its reader on the
other core; at a million every write meets a socket cold in the caches, and the
clients must read each message on the same $CORES cores. \`writefloor\` run that
way (one 40-byte write to each of $(r streams_open_max) sockets from $(r write_floor_at_scale_writers) processes, one
for each C-node, each with its reader; after the run, \`write_floor_at_scale_s\`)
had every byte read after $(r write_floor_at_scale_s) s: the broadcast, through the master, the
C-nodes and their framing, took $(r broadcast_vs_write_floor_at_scale) × what the kernel and the readers take alone.
The servers spent $(r broadcast_server_cpu_us_per_delivery) µs of CPU a delivery and the clients
$(r broadcast_client_cpu_us_per_message) µs to read it, keeping $(r broadcast_machine_busy_cores) of the $CORES cores busy.

What bounds phase 4 is waiting for a core. A paced message crosses four
processes (the publisher, the master, a C-node, a client), each woken in turn:
over the phase the run's threads waited $(r paced_runqueue_wait_us_per_run) µs for a core each time
they ran, $(r paced_runqueue_waiting_threads) of them waiting at once on average, with the
machine $(calc "100 * $(r paced_machine_busy_cores) / $CORES" %.0f) % busy. A thread that does next to nothing each time it is woken
(\`wakefloor\` beside the phase, 1,000 wake-ups a second) waited p50 $(r paced_wakeup_p50_us) µs, p99 $(r paced_wakeup_p99_us) µs,
max $(r paced_wakeup_max_us) µs: the scheduler serves a thread that has used little CPU first, and the
run's own threads, which use more, wait the longer. The tail moves with how busy the
machine is: the same 53 C-nodes and 20,000 msg/s over 106,000 streams
(\`MILLION_STREAMS=106000 MILLION_PER_NODE=2000\`) kept it 40 % busy, with a p99 of 5.2 ms;
at a million each message meets cold sockets, and the CPU a message costs goes up. At
half the rate, at a million, the run's processes used $(r paced_half_run_cores) cores (at the full rate
$(r paced_run_cores)) and the p99 was $(r paced_half_p99_us) µs.

The run is in a network namespace of its own whose TCP hash table has
$(r tcp_hash_buckets) buckets (the machine's has $(r tcp_hash_buckets_machine)): each packet finds its
socket there. With the $((2 * STREAMS)) sockets of this run in the machine's table the
chains would be about $(calc "2 * $STREAMS / $(r tcp_hash_buckets_machine)" %.1f) long: at a million, a broadcast cost the servers 10.4 µs of
CPU a delivery in it (\`MILLION_NETNS=0 make bench-million\`), against $(r broadcast_server_cpu_us_per_delivery) µs here.

Checks and targets, as the script printed them:

$(sed 's/^/- /' "$CHECKS")

![connect](bench/million-connect.png)

![memory](bench/million-memory.png)
<!-- /bench-million -->
EOF
}
if [[ ${MILLION_PUBLISH:-1} == 1 ]]; then
  section >"$WORK/section.md"
  cp "$WORK/connect.png" bench/million-connect.png 2>/dev/null
  cp "$WORK/memory.png" bench/million-memory.png 2>/dev/null
  benchmarks_section bench-million "$WORK/section.md" "$WORK"
  log "wrote its section of BENCHMARKS.md and bench/million-*.png"
fi
echo "bench-million: report in $WORK/report.md, took $(($(date +%s) - START)) s"
p=$(grep -c '^PASS' "$CHECKS")
f=$(grep -c '^FAIL' "$CHECKS")
echo "bench-million: $p passed, $f failed"
((f == 0))
