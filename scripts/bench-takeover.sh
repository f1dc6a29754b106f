#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench-takeover`: a hot upgrade under load (httpdcnode --takeover),
# on loopback, in a network namespace of its own. Needs root (the
# namespace) and `make all` done.
#
# One server (--history 32, --heartbeat TAKEOVER_HEARTBEAT) holds
# TAKEOVER_STREAMS streams from six ./httpclient processes: chunked, SSE,
# WebSocket (ws+meta) and long-poll clients that read, and a third of the
# streams (SSE and WebSocket) whose clients read nothing until told to
# (--no-read --read-on-signal). In the namespace the TCP buffers are small
# (net.ipv4.tcp_wmem and tcp_rmem, per namespace: the machine's stay as they
# are), so that each of those streams holds what does not fit in them: after
# one broadcast (every stream has an id), TAKEOVER_FILL bytes of multicasts
# go to them, and the server keeps what their sockets do not take. Then
# bench/erlang/soak.erl publishes TAKEOVER_RATE msg/s to random uids
# (and a broadcast every 5 s) from its own Erlang node, straight to the
# C-node. After TAKEOVER_WARM seconds a new server process is started with
# the same options and --takeover; publishing goes on TAKEOVER_AFTER seconds
# more, then the clients that did not read read everything.
#
# Measured: the hand-over (each process's log: the running one from the
# hello to its exit, the new one from its start to serving), the delivery
# pause the clients that read saw (their latency histograms from just
# before the hand-over to 3 s after it: p99 and max, against the same span
# before), the memory of both processes through it (VmRSS every 20 ms),
# what was handed over. Checks, each printed PASS/FAIL: no stream lost
# (every client's streams up throughout, no reconnection, none closed by
# the server); 0 id errors (lost), 0 duplicates, 0 gaps on every SSE,
# WebSocket and long-poll stream, those that did not read included (their
# held bytes read after the hand-over); a third of the streams held unsent
# bytes when handed over; the old process exited 0 and the new one counts
# every stream, the publisher's link kept (no reconnection). Writes
# $TAKEOVER_DIR/report.md and result.json (default build/takeover), ends
# with "takeover: P passed, F failed"; exits non-zero when a check failed.
#
#   TAKEOVER_STREAMS  streams, a multiple of 6, at most 19000 (default 19000:
#                     18998 when not a multiple; a sixth each chunked, SSE,
#                     WebSocket, long-poll, SSE not read, WebSocket not read,
#                     the rounding to the readers)
#   TAKEOVER_RATE     msg/s to random uids (default 20000)
#   TAKEOVER_WARM     seconds of publishing before the hand-over (default 10)
#   TAKEOVER_AFTER    seconds of publishing after it (default 10)
#   TAKEOVER_FILL     bytes sent to each stream that does not read, in 16 KiB
#                     multicasts, before publishing (default 32768)
#   TAKEOVER_HEARTBEAT  the server's --heartbeat, seconds (default 30: a WebSocket
#                     that does not read does not answer pings either, and is
#                     ended after two)
#   TAKEOVER_HISTORY_FILE  1: the server keeps its history in a --history-file
#   TAKEOVER_DIR      where the report and logs go (default build/takeover)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
RUN=takeover
source scripts/lib-run.sh
run_options "$@"

# In a namespace of its own: its TCP buffers, its epmd.
if [[ -z ${TAKEOVER_IN_NETNS:-} ]]; then
  [[ $(id -u) == 0 ]] && command -v unshare >/dev/null && command -v ip >/dev/null || {
    echo "takeover: needs root, unshare and ip (a network namespace with small TCP buffers)" >&2
    exit 2
  }
  TAKEOVER_IN_NETNS=1 exec unshare --net -- bash -c 'ip link set lo up && exec bash "$0"' \
    "$ROOT/scripts/bench-takeover.sh"
fi
sysctl -q -w net.ipv4.tcp_wmem="4096 8192 16384" net.ipv4.tcp_rmem="4096 8192 16384" || {
  echo "takeover: cannot set the namespace's TCP buffers" >&2; exit 1; }

STREAMS=${TAKEOVER_STREAMS:-19000}
RATE=${TAKEOVER_RATE:-20000}
WARM=${TAKEOVER_WARM:-10}
AFTER=${TAKEOVER_AFTER:-10}
FILL=${TAKEOVER_FILL:-32768}
HEARTBEAT=${TAKEOVER_HEARTBEAT:-30}
HISTORY_FILE=${TAKEOVER_HISTORY_FILE:-0}
WORK=${TAKEOVER_DIR:-$ROOT/build/takeover}
for v in STREAMS RATE WARM AFTER FILL HEARTBEAT HISTORY_FILE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "takeover: TAKEOVER_$v must be a number" >&2; exit 2; }
done
((STREAMS >= 6 && STREAMS <= 19000 && RATE >= 1 && WARM >= 2 && AFTER >= 4)) || {
  echo "takeover: want TAKEOVER_STREAMS 6..19000, TAKEOVER_RATE >= 1, TAKEOVER_WARM >= 2," \
       "TAKEOVER_AFTER >= 4" >&2; exit 2; }
SLOW=$((STREAMS / 6))                     # each of the two clients that do not read
FAST=$(((STREAMS - 2 * SLOW) / 4))        # each of the four that do
STREAMS=$((4 * FAST + 2 * SLOW))
NAMES=(chunked sse ws poll sse_held ws_held)
PROTOS=(chunked sse ws poll sse ws)
COUNTS=("$FAST" "$FAST" "$FAST" "$FAST" "$SLOW" "$SLOW")
SRC=127.0.40.1-127.0.40.8
PUB_SECONDS=$((WARM + AFTER + 120))

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
log() { printf '%s takeover: %s\n' "$(date +%T)" "$*" >&2; }

run_begin
trap 'end_all; epmd -kill >/dev/null 2>&1' EXIT
DEADLINE=$((START + 300 + WARM + AFTER + STREAMS / 100))
run_needs "$BIN/httpdcnode" "$BIN/httpclient" tools/erlang/ebin/soak.beam tools/erlang/ebin/msggen.beam
[[ $("$BIN/httpclient" --help) == *--read-on-signal* ]] ||
  { echo "takeover: $BIN/httpclient has no --read-on-signal: rebuild it" >&2; exit 1; }
run_ready

SRV_NAME="takeover_$$"
SRV_NODE="$SRV_NAME@localhost"
SRV_PORT=$(free_port) && SRV_ADMIN_PORT=$(free_port) || exit 1
HISTORY_ARGS=()
if ((HISTORY_FILE)); then
  HIST="/dev/shm/httpdcnode-$SRV_NAME.history"
  HISTORY_ARGS=(--history-file "$HIST")
  trap 'rm -f "$HIST"; end_all; epmd -kill >/dev/null 2>&1' EXIT
fi
SRV_ARGS=(--listen "127.0.0.1:$SRV_PORT" --admin-listen "127.0.0.1:$SRV_ADMIN_PORT"
          --name "$SRV_NODE" --master "" --cookie "$COOKIE" --history 32
          --heartbeat "$HEARTBEAT" --max-backlog-total 1073741824 "${HISTORY_ARGS[@]}")

# The server, until it answers /stats and is in epmd. Sets SRV_PID.
(exec "$BIN/httpdcnode" "${SRV_ARGS[@]}") 2>>"$WORK/server.log" &
SRV_PID=$!
BENCH_PIDS+=("$SRV_PID")
up() { stats >/dev/null && epmd -names 2>/dev/null | grep -q "^name $SRV_NAME at"; }
WAIT_ON_SERVER=1 wait_for 30 "the server" up || exit 1
log "$STREAMS streams ($FAST each chunked, sse, ws, poll; $SLOW each sse and ws not read), $RATE msg/s, in $WORK"

# client I: its streams, its own uids, in the background.
UID0=()
client() {
  local i=$1 base=1 k extra=()
  for ((k = 0; k < i; k++)); do base=$((base + COUNTS[k])); done
  UID0[$i]=$base
  ((i >= 4)) && extra=(--no-read --read-on-signal)
  ((i < 4)) && extra=(--hist-out "$WORK/${NAMES[$i]}.hist")
  (exec "$BIN/httpclient" -p "$SRV_PORT" --src "$SRC" --json --proto "${PROTOS[$i]}" \
     -n "${COUNTS[$i]}" -P 1 --uid-base "$base" --reconnect-lost 500 --reconnect-cap 20000 \
     --pending 200 --hold 86400 --max-time "$(left)" "${extra[@]}") \
    >"$WORK/${NAMES[$i]}.json" 2>"$WORK/${NAMES[$i]}.err" &
  CLI_PID[$i]=$!
  BENCH_PIDS+=("${CLI_PID[$i]}")
}
RUN_CLIENTS=("${NAMES[@]}")
RUN_READERS=(chunked sse ws poll)

for i in 0 1 2 3 4 5; do client "$i"; done
wait_for 180 "$STREAMS streams up" sum_is up "$STREAMS" || exit 1
wait_for 30 "the server to count $STREAMS streams" streams_are "$STREAMS" || exit 1
log "all $STREAMS streams up"

# One broadcast (an id for every stream), then what the streams that do not
# read cannot take: TAKEOVER_FILL bytes each, as 16 KiB multicasts.
HELD_FIRST=${UID0[4]}
HELD_LAST=$((HELD_FIRST + 2 * SLOW - 1))
run_erl "N = '$SRV_NODE', true = net_kernel:connect_node(N), {any, N} ! {broadcast, <<\"takeover\">>},
  Uids = lists:seq($HELD_FIRST, $HELD_LAST), Pad = binary:copy(<<\"h\">>, 16384),
  [{any, N} ! {Uids, Pad} || _ <- lists:seq(1, max(1, $FILL div 16384))],
  R = make_ref(), {any, N} ! {self(), R, stats}, receive {R, _} -> halt(0) after 30000 -> halt(1) end." \
  >"$WORK/fill.out" 2>&1 || { log "the fill failed: $(tail -n2 "$WORK/fill.out")"; exit 1; }
wait_for 30 "the broadcast at every stream that reads" each_at_least msgs "$FAST" || exit 1

run_publisher "$PUB_SECONDS" "$RATE" "1-$STREAMS" || exit 1
T_PUB=$(date +%s)

# sum_hist OUT FILE...: the histograms added up (lines "HIGH_US COUNT", then "max US").
sum_hist() {
  local out=$1
  shift
  awk '$1 == "max" { if ($2 > m) m = $2; next } { c[$1] += $2 } END {
         for (k in c) print k, c[k] | "sort -n"; close("sort -n"); print "max", m + 0 }' "$@" >"$out"
}
hists() { local n; for n in chunked sse ws poll; do echo "$WORK/$n.hist"; done; }
# window A B: the latencies of the messages that came between snapshots A and
# B: "count p50 p99 max", each the upper bound of its histogram bucket (1.6 %).
window() {
  awk 'FNR == NR { if ($1 != "max") a[$1] = $2; next }
       $1 == "max" { next } { d = $2 - a[$1]; if (d > 0) { k[++n] = $1; c[$1] = d; t += d } }
       END { s = 0; p50 = p99 = mx = "-"
             for (i = 1; i <= n; i++) { s += c[k[i]]; if (p50 == "-" && s >= 0.5 * t) p50 = k[i];
                                        if (p99 == "-" && s >= 0.99 * t) p99 = k[i]; mx = k[i] }
             printf "%d %s %s %s\n", t, p50, p99, mx }' "$1" "$2"
}

while (($(date +%s) < T_PUB + WARM - 4)) && alive "$PUB_PID"; do sleep 0.2; done
sum_hist "$WORK/hist.before0" $(hists)
sleep 4                                  # the same span as the hand-over's, before it
sum_hist "$WORK/hist.before1" $(hists)
alive "$SRV_PID" || { log "the server died during the warm-up"; exit 1; }
STATS_BEFORE=$(stats)
# rss_kb PID: its resident set (VmRSS, kB), 0 once it is gone.
rss_kb() { local v; v=$(awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null); echo "${v:-0}"; }
RSS_OLD_BEFORE=$(rss_kb "$SRV_PID")
RETRIES_BEFORE=$(sum retries)

# --- the hand-over ----------------------------------------------------------------

log "takeover of pid $SRV_PID"
T0=$(now_ms)
(exec "$BIN/httpdcnode" "${SRV_ARGS[@]}" --takeover) 2>>"$WORK/server.log" &
NEW_PID=$!
BENCH_PIDS+=("$NEW_PID")
OLD_PID=$SRV_PID
: >"$WORK/rss"
T_SAMPLED=
while (($(now_ms) < T0 + 60000)); do
  # Until half a second after the old one is gone: the new one's peak.
  alive "$OLD_PID" || { [[ -n $T_SAMPLED ]] || T_SAMPLED=$(now_ms); (($(now_ms) > T_SAMPLED + 500)) && break; }
  printf '%s %s %s\n' "$(($(now_ms) - T0))" "$(rss_kb "$OLD_PID")" "$(rss_kb "$NEW_PID")" >>"$WORK/rss"
  sleep 0.02
done
wait_exit "$OLD_PID" 10
OLD_STATUS=$WAIT_RC
T_GONE=$(now_ms)
SRV_PID=$NEW_PID
log "old pid $OLD_PID exited $OLD_STATUS $((T_GONE - T0)) ms after the new one started"
wait_for 10 "the new server's /stats" stats >/dev/null
sleep 3                                  # the span the pause is measured over
sum_hist "$WORK/hist.after" $(hists)
RSS_NEW_AFTER=$(rss_kb "$NEW_PID")

# Publishing goes on; then the clients that did not read read it all.
T_AFTER=$(date +%s)
while (($(date +%s) < T_AFTER + AFTER)) && alive "$PUB_PID" && alive "$SRV_PID"; do sleep 0.2; done
STATS_AFTER=$(stats)
for i in 4 5; do kill -USR1 "${CLI_PID[$i]}"; done
held_read() { (($(stat_of backlog_bytes) < 1048576)); }
wait_for 120 "the held bytes read" held_read
sleep 2
UP_END=$(sum up)
RETRIES_END=$(sum retries)
NODES_END=$(stat_of erl_nodes)
end_pid "$PUB_PID" 5
STATS_END=$(stats)
for i in 0 1 2 3 4 5; do end_pid "${CLI_PID[$i]}" 10; done
stop_server
SRV_STATUS=$SRV_EXIT

# --- verdicts ---------------------------------------------------------------------

cj() { jget "$2" <"$WORK/$1.json"; }
ctot() { local n t=0 v; for n in "${NAMES[@]}"; do v=$(cj "$n" "$1"); t=$((t + ${v:-0})); done; echo "$t"; }
ids() { local n; for n in sse ws poll sse_held ws_held; do printf '%s %s, ' "$n" "$(cj "$n" "$1")"; done; }
G=$(grep 'takeover: handed over to pid' "$WORK/server.log" | tail -n1)
T=$(grep 'takeover: took over from pid' "$WORK/server.log" | tail -n1)
GIVE_MS=$(sed -n 's/.* in \([0-9]*\) ms .*/\1/p' <<<"$G")
TAKE_MS=$(sed -n 's/.* in \([0-9]*\) ms: .*/\1/p' <<<"$T")
HELD_STREAMS=$(sed -n 's/.* streams, \([0-9]*\) of them with .*/\1/p' <<<"$G")
HELD_BYTES=$(sed -n 's/.* of them with \([0-9]*\) bytes unsent.*/\1/p' <<<"$G")
STATE_BYTES=$(sed -n 's/.*unsent; \([0-9]*\) bytes of state.*/\1/p' <<<"$G")
STEPS=$(sed -n 's/.*; ms: \(.*\)); exiting.*/\1/p' <<<"$G")
read -r W_N W_P50 W_P99 W_MAX < <(window "$WORK/hist.before1" "$WORK/hist.after")
read -r B_N B_P50 B_P99 B_MAX < <(window "$WORK/hist.before0" "$WORK/hist.before1")
read -r RSS_OLD_PEAK RSS_NEW_PEAK RSS_SUM_PEAK < <(awk '{ o = $2 + 0; n = $3 + 0; if (o > a) a = o;
  if (n > b) b = n; if (o + n > c) c = o + n } END { print a + 0, b + 0, c + 0 }' "$WORK/rss")

ok=0
[[ $UP_END == "$STREAMS" && $RETRIES_END == "$RETRIES_BEFORE" && $(ctot closed_by_server) == 0 ]] && ok=1
check "no stream lost" $ok "$UP_END of $STREAMS up at the end; reconnections $RETRIES_BEFORE before, $RETRIES_END at the end; closed by the server $(ctot closed_by_server)"
check "none lost" $(($(ctot id_errors) == 0)) "id errors $(ctot id_errors) ($(ids id_errors)want 0)"
check "none twice" $(($(ctot dup) == 0)) "duplicates $(ctot dup) ($(ids dup)want 0)"
check "no gap" $(($(ctot gaps) == 0)) "gaps $(ctot gaps) ($(ids gaps)want 0)"
ok=0
[[ -n $HELD_STREAMS ]] && ((HELD_STREAMS >= 2 * SLOW)) && ok=1
check "a third held" $ok "${HELD_STREAMS:-?} streams handed over with ${HELD_BYTES:-?} bytes unsent (want at least $((2 * SLOW)))"
ok=0
[[ $OLD_STATUS == 0 && -n $TAKE_MS ]] && ok=1
check "handed over" $ok "old process exited $OLD_STATUS; $G; $T"
ok=0
[[ $NODES_END == 1 && $(jget erl_connects <<<"$STATS_END") == $(jget erl_connects <<<"$STATS_BEFORE") ]] && ok=1
check "link kept" $ok "Erlang nodes before the publisher stopped $NODES_END (want 1); connections made $(jget erl_connects <<<"$STATS_BEFORE") before, $(jget erl_connects <<<"$STATS_END") at the end"
check "server exit" $([[ $SRV_STATUS == 0 ]] && echo 1 || echo 0) "the new server exited $SRV_STATUS on SIGTERM"

{
  echo "{\"streams\":$STREAMS,\"rate\":$RATE,\"held_streams\":${HELD_STREAMS:-null},\"held_bytes\":${HELD_BYTES:-null},"
  echo "\"state_bytes\":${STATE_BYTES:-null},\"give_ms\":${GIVE_MS:-null},\"take_ms\":${TAKE_MS:-null},"
  echo "\"pause\":{\"messages\":$W_N,\"p50_us\":\"$W_P50\",\"p99_us\":\"$W_P99\",\"max_us\":\"$W_MAX\"},"
  echo "\"before\":{\"messages\":$B_N,\"p50_us\":\"$B_P50\",\"p99_us\":\"$B_P99\",\"max_us\":\"$B_MAX\"},"
  echo "\"rss_kb\":{\"old_before\":$RSS_OLD_BEFORE,\"old_peak\":$RSS_OLD_PEAK,\"new_peak\":$RSS_NEW_PEAK,\"both_peak\":$RSS_SUM_PEAK,\"new_after\":$RSS_NEW_AFTER},"
  echo "\"closed\":$(ctot closed_by_server),\"reconnects\":$((RETRIES_END - RETRIES_BEFORE)),\"id_errors\":$(ctot id_errors),\"dup\":$(ctot dup),\"gaps\":$(ctot gaps),"
  echo "\"msgs\":$(ctot msgs),\"passed\":$(grep -c '^PASS' "$CHECKS"),\"failed\":$(grep -c '^FAIL' "$CHECKS")}"
} | tr -d '\n' >"$WORK/result.json"
echo >>"$WORK/result.json"

{
  echo "# Hot upgrade under load, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores; load average $LOAD0 at the start,"
  echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end"
  echo
  echo "$STREAMS streams: $FAST each chunked, SSE, WebSocket, long-poll read; $SLOW each SSE and"
  echo "WebSocket not read until after the hand-over. $RATE msg/s to random uids, a broadcast every 5 s."
  echo
  echo "## Checks"
  echo
  sed 's/^/- /' "$CHECKS"
  echo
  echo "## The hand-over"
  echo
  echo "| | |"
  echo "| --- | ---: |"
  echo "| running process, hello to exit | ${GIVE_MS:-?} ms |"
  echo "| its steps (ms) | ${STEPS:-?} |"
  echo "| new process, start to serving | ${TAKE_MS:-?} ms |"
  echo "| state / streams with unsent bytes / their bytes | ${STATE_BYTES:-?} B / ${HELD_STREAMS:-?} / ${HELD_BYTES:-?} B |"
  echo "| latency of the messages that came in the 3 s after the hand-over began: count, p50, p99, max | $W_N, $W_P50, $W_P99, $W_MAX us |"
  echo "| the same over the 4 s before it | $B_N, $B_P50, $B_P99, $B_MAX us |"
  echo "| memory (VmRSS): old before, old peak, new peak, both together at most, new 3 s after | $RSS_OLD_BEFORE, $RSS_OLD_PEAK, $RSS_NEW_PEAK, $RSS_SUM_PEAK, $RSS_NEW_AFTER kB |"
  echo
  echo "## Clients"
  echo
  echo '```'
  for n in "${NAMES[@]}"; do echo "$n: $(cat "$WORK/$n.json")"; done
  echo '```'
  echo
  echo "## Server counters"
  echo
  echo "Before: \`$STATS_BEFORE\`"
  echo
  echo "After: \`$STATS_AFTER\`"
  echo
  echo "At the end: \`$STATS_END\`"
} >"$WORK/report.md"

echo "takeover: give ${GIVE_MS:-?} ms, take ${TAKE_MS:-?} ms; pause p99 $W_P99 us, max $W_MAX us;" \
     "held ${HELD_STREAMS:-?} streams ${HELD_BYTES:-?} B; rss old $RSS_OLD_PEAK new $RSS_NEW_PEAK both $RSS_SUM_PEAK kB"
run_verdict
