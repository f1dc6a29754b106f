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
# message be lost; the hand-over of each, the latency over the phase);
# with MILLION_TOPIC=1, every stream also subscribes to the topic t:0 when it
# opens (so the memory figures hold a subscription each), and after the
# broadcast the master publishes to it (httpdcnode:publish/2) MILLION_TOPIC_CALLS
# times, each to its last delivery (against the broadcast's), and makes as
# many multicasts (httpdcnode:multicast/2) of the same uids, every uid: what
# the master spends a publish against a multicast (its CPU, all threads, and
# its schedulers' busy time, read on the master around each call, less the
# same around a call doing nothing; the calling process's reductions).
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
#   MILLION_TOPIC     1: the topic phase too (default 0)
#   MILLION_TOPIC_CALLS  its publishes, and multicasts (default 5)
#   MILLION_DIR       report and logs (default build/bench-million)
#   MILLION_PUBLISH   0: leave BENCHMARKS.md and bench/ alone (default 1: write
#                     its section there and bench/million-*.png)
#   MILLION_NETNS     auto (default: when the machine's TCP hash table has fewer
#                     buckets than the run's sockets), 1 (always), 0 (never)
#
# The phases are in bench/million/, a file each, sourced here in order.
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
TOPIC=${MILLION_TOPIC:-0}
TOPIC_CALLS=${MILLION_TOPIC_CALLS:-5}
WORK=${MILLION_DIR:-$ROOT/build/bench-million}
NETNS=${MILLION_NETNS:-auto}
for v in STREAMS PER_MAX RATE PACED_S MCAST CHURN CHURN_S KILL_S ROLLING TOPIC TOPIC_CALLS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench-million: $v must be a number" >&2; exit 2; }
done
NODES=$(((STREAMS + PER_MAX - 1) / PER_MAX))
((NODES >= 3 && PER_MAX <= 19000 && RATE >= 1 && PACED_S >= 2 && CHURN >= 1 &&
  CHURN_S >= 2 && KILL_S >= 6 && TOPIC_CALLS >= 1)) || {
  echo "bench-million: want at least 3 C-nodes (STREAMS / PER_NODE), PER_NODE <= 19000," \
       "PACED_S, CHURN_S >= 2, KILL_S >= 6, TOPIC_CALLS >= 1" >&2; exit 2; }
PER=$(((STREAMS + NODES - 1) / NODES))      # balanced blocks of uids
[[ $NETNS =~ ^(auto|0|1)$ ]] || { echo "bench-million: MILLION_NETNS is auto, 0 or 1" >&2; exit 2; }
((MCAST > STREAMS / 2)) && MCAST=$((STREAMS / 2))
HISTORY_BYTES=4194304
MAX_USERS=$((STREAMS + 200000))
CHURN_CONNS=500                   # per churn client, on a chunked node with room
CORES=$(nproc)

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
# shellcheck source=bench/lib/lib.sh
source bench/lib/lib.sh
# shellcheck source=bench/lib/section.sh
source bench/lib/section.sh
log() { printf '%s bench-million: %s\n' "$(date +%T)" "$*" >&2; }
# shellcheck source=bench/million/setup.sh
source bench/million/setup.sh
# shellcheck source=bench/million/nodes.sh
source bench/million/nodes.sh
# shellcheck source=bench/million/clients.sh
source bench/million/clients.sh
# shellcheck source=bench/million/measure.sh
source bench/million/measure.sh
# shellcheck source=bench/million/floor.sh
source bench/million/floor.sh
# shellcheck source=bench/million/connect.sh
source bench/million/connect.sh
# shellcheck source=bench/million/presence.sh
source bench/million/presence.sh
# shellcheck source=bench/million/memory.sh
source bench/million/memory.sh
# shellcheck source=bench/million/paced.sh
source bench/million/paced.sh
# shellcheck source=bench/million/multicast.sh
source bench/million/multicast.sh
# shellcheck source=bench/million/broadcast.sh
source bench/million/broadcast.sh
# shellcheck source=bench/million/topic.sh
source bench/million/topic.sh
# shellcheck source=bench/million/churn.sh
source bench/million/churn.sh
# shellcheck source=bench/million/kill.sh
source bench/million/kill.sh
# shellcheck source=bench/million/rolling.sh
source bench/million/rolling.sh
# shellcheck source=bench/million/finish.sh
source bench/million/finish.sh
# shellcheck source=bench/million/report.sh
source bench/million/report.sh

START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# Every wait gives up by then: at most about 15 min at a million (a run takes about 5).
DEADLINE=$((START + 280 + PACED_S + CHURN_S + KILL_S + STREAMS / 2000 +
             TOPIC * TOPIC_CALLS * (30 + STREAMS / 25000)))
# Inside its own network namespace (setup.sh) the run keeps what the outer
# run wrote there.
if [[ -z ${MILLION_IN_NETNS:-} ]]; then rm -rf "$WORK"; mkdir -p "$WORK"; : >"$WORK/setup.txt"; fi
COOKIE="million_$$_${RANDOM}${RANDOM}"
MASTER="millmaster_$$@localhost"
CHECKS="$WORK/checks"
RESULT="$WORK/result.kv"           # name value, one a line: result.json
: >"$CHECKS"
: >"$RESULT"

# Whatever ends the run, its processes end and the sysctls it raised are put
# back. The epmd of a namespace of its own is the run's: ended with it.
# shellcheck disable=SC2317  # called by the EXIT trap
on_exit() {
  end_all
  restore_sysctls
  [[ -n ${MILLION_IN_NETNS:-} ]] && epmd -kill >/dev/null 2>&1
}
trap on_exit EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

for f in "$BIN/httpdcnode" "$BIN/httpclient" "$BIN/writefloor" "$BIN/wakefloor" tools/erlang/ebin/million.beam \
         tools/erlang/ebin/httpdcnode.app; do
  [[ -e $f ]] || { echo "bench-million: $f missing: run 'make all' first" >&2; exit 1; }
done
[[ $("$BIN/httpclient" --help) == *--reconnect-lost* ]] ||
  { echo "bench-million: $BIN/httpclient is old: rebuild it" >&2; exit 1; }

# --- the run -----------------------------------------------------------------------
netns                              # (goes on in a namespace of its own: setup.sh)
setup
log "$STREAMS streams over $NODES C-nodes ($PER each), $RATE msg/s paced; in $WORK"
epmd -daemon
FILES0=$(cut -f1 /proc/sys/fs/file-nr)
TCP0=$(awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat)
AVAIL_START=$(mem_avail_kb)
write_floor
start_master
start_nodes
phase_connect                      # 1
phase_presence                     # 2
phase_memory                       # 3
phase_paced                        # 4
phase_paced_half                   # 4b
phase_multicast                    # 5
phase_broadcast                    # 6
((TOPIC)) && phase_topic           # 6b
phase_churn                        # 7
phase_kill                         # 8
((ROLLING)) && phase_rolling       # 9
phase_end
phase_kernel_alone
restore_sysctls
report_targets
report_plots
report_files
report_publish
report_tally
