#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make storm`: a reconnect storm, on loopback only. Needs `make all` done.
#
# When a node restarts, all its clients come back at once. One server
# (--history 32, --heartbeat STORM_HEARTBEAT) holds STORM_STREAMS streams from
# four ./httpclient processes, a quarter each: chunked, SSE, WebSocket
# (ws+meta: ids) and long-poll, each with --reconnect-lost (a stream lost or a
# connection failed is opened again after a full-jitter backoff, resuming
# from its last id, as the browser client does). Every stream first gets one
# broadcast, so that each id stream has an id to resume from; then
# bench/erlang/soak.erl publishes STORM_RATE msg/s to random uids (and a
# broadcast every 5 s) through the whole run, straight to the C-node from
# its own node. After STORM_WARM seconds the server is killed (SIGKILL);
# once every client saw its streams lost it is started again on the same
# ports with the same node name, and the storm is watched every 0.2 s.
#
# Measured: time from the restart until every stream is up again (the
# clients' count, 1 s resolution, and the server's streams_open), the
# connections refused or failed on the way, the replay work of the new
# server (/stats replays, replayed, replay_gaps), the clients' gaps, id
# errors and duplicates. Checks, each printed PASS/FAIL with its figures: all
# streams back within STORM_BOUND seconds; 0 id errors; 0 duplicates; every
# resumed id stream (SSE, WS, poll) told exactly one gap (the epoch changed)
# and the server counted as many (with STORM_HISTORY_FILE=1: none, the epoch
# and ids kept in the server's --history-file, and the file resumed, not
# refused); no stream lost after the storm; the server
# alive through it and exiting 0 on SIGTERM; its descriptors back to the
# count of a fresh server once every client left. Writes $STORM_DIR/report.md
# (default build/storm) and ends with "storm: P passed, F failed"; exits
# non-zero when a check failed. Changes no kernel setting: 18,000 clients
# over 8 source addresses fit the defaults (somaxconn 4096, one port range).
#
#   STORM_STREAMS  streams, a multiple of 4, at most 19000 (default 18000)
#   STORM_RATE     msg/s to random uids (default 500)
#   STORM_WARM     seconds of publishing before the kill (default 10)
#   STORM_AFTER    seconds of publishing once all are back (default 10)
#   STORM_BOUND    seconds all must be back within (default 120)
#   STORM_BACKOFF  the clients' backoff base, ms (default 500)
#   STORM_CAP      their longest backoff wait, ms (default 20000: both as
#                  the browser client web/httpdcnode.js)
#   STORM_HEARTBEAT  the server's --heartbeat, seconds (default 5)
#   STORM_DOWN_MS  how long the server stays down once every client saw the
#                  loss, ms (default 0: restarted at once)
#   STORM_DIR      where the report and logs go (default build/storm)
#   STORM_HISTORY_FILE  1: the server keeps its ids and history in a
#                  --history-file (under /dev/shm), which the restart resumes
#   STORM_HISTORY_BYTES  the server's --history-bytes (default 67108864)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
RUN=storm
source scripts/lib-run.sh
run_options "$@"

STREAMS=${STORM_STREAMS:-18000}
RATE=${STORM_RATE:-500}
WARM=${STORM_WARM:-10}
AFTER=${STORM_AFTER:-10}
BOUND=${STORM_BOUND:-120}
BACKOFF=${STORM_BACKOFF:-500}
CAP_MS=${STORM_CAP:-20000}
HEARTBEAT=${STORM_HEARTBEAT:-5}
DOWN_MS=${STORM_DOWN_MS:-0}
HISTORY_FILE=${STORM_HISTORY_FILE:-0}
HISTORY_BYTES=${STORM_HISTORY_BYTES:-67108864}
WORK=${STORM_DIR:-$ROOT/build/storm}
for v in STREAMS RATE WARM AFTER BOUND BACKOFF CAP_MS HEARTBEAT DOWN_MS HISTORY_FILE HISTORY_BYTES; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "storm: STORM_${v%_MS} must be a number" >&2; exit 2; }
done
((STREAMS >= 4 && STREAMS % 4 == 0 && STREAMS <= 19000 && RATE >= 1 && WARM >= 2 &&
  AFTER >= 2 && BOUND >= 5 && BACKOFF >= 1 && CAP_MS >= BACKOFF && HEARTBEAT >= 1)) || {
  echo "storm: want STORM_STREAMS a multiple of 4 in 4..19000 (one server holds ~19000)," \
       "STORM_RATE >= 1, STORM_WARM and STORM_AFTER >= 2, STORM_BOUND >= 5" >&2; exit 2; }
PER=$((STREAMS / 4))
PROTOS=(chunked sse ws poll)
SRC=127.0.30.1-127.0.30.8           # the clients' addresses (soak 127.0.20.*, bench 127.0.1x.*)
# The publisher's run: warm-up, the storm (at most BOUND), the time after.
PUB_SECONDS=$((WARM + BOUND + AFTER + 30))

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
log() { printf '%s storm: %s\n' "$(date +%T)" "$*" >&2; }

run_begin
# Every wait gives up by then: under 5 min at full scale, less when smaller.
DEADLINE=$((START + 60 + WARM + BOUND + AFTER + STREAMS / 300))

run_needs "$BIN/httpdcnode" "$BIN/httpclient" tools/erlang/ebin/soak.beam tools/erlang/ebin/msggen.beam
# (not piped into grep -q: with pipefail, its early exit fails the pipe)
[[ $("$BIN/httpclient" --help) == *--reconnect-lost* ]] ||
  { echo "storm: $BIN/httpclient has no --reconnect-lost: rebuild it" >&2; exit 1; }
run_ready

# launch N: the server on SRV_PORT / SRV_ADMIN_PORT as node SRV_NAME, its
# log server-N.log; until it answers /stats and its name is in epmd (the
# killed one's name may linger there a moment: then it exits and is tried
# again). Sets SRV_PID.
launch() {
  local n=$1 end=$(($(date +%s) + $(left 30)))
  while (($(date +%s) < end)); do
    (exec "$BIN/httpdcnode" --listen "127.0.0.1:$SRV_PORT" --admin-listen "127.0.0.1:$SRV_ADMIN_PORT" \
       --name "$SRV_NAME@localhost" --master "" --cookie "$COOKIE" \
       --history 32 --history-bytes "$HISTORY_BYTES" --heartbeat "$HEARTBEAT" "${HISTORY_ARGS[@]}") \
      2>>"$WORK/server-$n.log" &
    SRV_PID=$!
    BENCH_PIDS+=("$SRV_PID")
    while alive "$SRV_PID" && (($(date +%s) < end)); do
      if stats >/dev/null && epmd -names 2>/dev/null | grep -q "^name $SRV_NAME at"; then
        return 0
      fi
      sleep 0.02
    done
    alive "$SRV_PID" || { wait "$SRV_PID" 2>/dev/null; forget "$SRV_PID"; }
    sleep 0.1
  done
  log "server $n did not come up: $(tail -n3 "$WORK/server-$n.log" | tr '\n' ' ')"
  return 1
}

# client PROTO: a quarter of the streams, its own uids, in the background.
client() {
  local i=$1 proto=${PROTOS[$1]}
  (exec "$BIN/httpclient" -p "$SRV_PORT" --src "$SRC" --json --proto "$proto" -n "$PER" -P 1 \
     --uid-base $((1 + i * PER)) --reconnect-lost "$BACKOFF" --reconnect-cap "$CAP_MS" \
     --pending 200 --hold 86400 --max-time "$(left)") >"$WORK/$proto.json" 2>"$WORK/$proto.err" &
  CLI_PID[$i]=$!
  BENCH_PIDS+=("${CLI_PID[$i]}")
}

RUN_CLIENTS=("${PROTOS[@]}")
sum_at_least() { local s; s=$(sum "$1") && ((s >= $2)); }

# --- the run -----------------------------------------------------------------------

log "$STREAMS streams ($PER each chunked, sse, ws, poll), $RATE msg/s; kill after $WARM s; in $WORK"
SRV_NAME="storm_$$"
HISTORY_ARGS=()
if ((HISTORY_FILE)); then
  HIST="/dev/shm/httpdcnode-$SRV_NAME.history"
  [[ -d /dev/shm ]] || HIST="$WORK/$SRV_NAME.history"
  HISTORY_ARGS=(--history-file "$HIST")
  trap 'rm -f "$HIST"; end_all' EXIT
fi
SRV_PORT=$(free_port) && SRV_ADMIN_PORT=$(free_port) || exit 1
launch 1 || exit 1
SRV_NODE="$SRV_NAME@localhost"
log "server pid $SRV_PID, node $SRV_NODE, port $SRV_PORT, admin port $SRV_ADMIN_PORT"
# A fresh server, no client, no Erlang node: the count to come back to.
FD0=$(fd_count)

for i in 0 1 2 3; do client "$i"; done
wait_for 180 "$STREAMS streams up" sum_is up "$STREAMS" || exit 1
wait_for 30 "the server to count $STREAMS streams" streams_are "$STREAMS" || exit 1
log "all $STREAMS streams up"

# One broadcast: every stream has a message, every id stream an id.
run_erl "true = net_kernel:connect_node('$SRV_NODE'), {any, '$SRV_NODE'} ! {broadcast, <<\"storm\">>},
  R = make_ref(), {any, '$SRV_NODE'} ! {self(), R, stats}, receive {R, _} -> halt(0) after 10000 -> halt(1) end." \
  >"$WORK/hello.out" 2>&1 || { log "the broadcast failed: $(tail -n2 "$WORK/hello.out")"; exit 1; }
wait_for 30 "the broadcast at every stream" each_at_least msgs "$PER" || exit 1

run_publisher "$PUB_SECONDS" "$RATE" "1-$STREAMS" || exit 1
T_PUB=$(date +%s)
while (($(date +%s) < T_PUB + WARM)) && alive "$PUB_PID"; do sleep 0.2; done
alive "$SRV_PID" || { log "the server died during the warm-up"; exit 1; }
STATS_BEFORE=$(stats)
MSGS_BEFORE=$(sum msgs)
WELCOMED_BEFORE=$(sum welcomed)

# --- the kill and the storm ------------------------------------------------------------

log "kill -KILL server (pid $SRV_PID)"
{ kill -KILL "$SRV_PID"; wait_exit "$SRV_PID" 10; } 2>/dev/null
T_KILL=$(now_ms)
# Until every client saw its streams go (its progress line each second).
wait_for 30 "every client to see its streams lost" sum_is up 0
T_LOST=$(now_ms)
# A longer outage on request: the clients' waits grow meanwhile.
((DOWN_MS > 0)) && sleep "$(calc "$DOWN_MS / 1000" %.3f)"
T_DOWN=$(now_ms)
launch 2 || exit 1
T_UP=$(now_ms)            # answering /stats, in epmd: the restart
log "restarted: pid $SRV_PID, $((T_UP - T_KILL)) ms after the kill"
SAMPLES="$WORK/samples"
: >"$SAMPLES"
T_BACK= T_SRV_BACK= RETRIES_BACK=
end=$(($(date +%s) + $(left "$BOUND")))
while (($(date +%s) < end)); do
  t=$(($(now_ms) - T_UP))
  so=$(stat_of streams_open)
  up=$(sum up)
  printf '%s %s %s\n' "$t" "${so:--}" "${up:--}" >>"$SAMPLES"
  [[ -z $T_SRV_BACK && $so == "$STREAMS" ]] && T_SRV_BACK=$t
  [[ $up == "$STREAMS" ]] && { T_BACK=$t; RETRIES_BACK=$(sum retries); break; }
  alive "$SRV_PID" || break
  sleep 0.2
done
if [[ -n $T_BACK ]]; then log "all $STREAMS streams back $T_BACK ms after the restart"
else log "not all back within $BOUND s: $(tail -n1 "$SAMPLES")"; fi
STATS_STORM=$(stats)

# Publishing goes on: no stream may be lost afterwards.
T_AFTER=$(date +%s)
while (($(date +%s) < T_AFTER + AFTER)) && alive "$PUB_PID" && alive "$SRV_PID"; do sleep 0.2; done
UP_AFTER=$(sum up)
RETRIES_AFTER=$(sum retries)
# The publisher is not waited for to its end: stopped, it prints nothing;
# what it sent is not judged here (the soak does that).
end_pid "$PUB_PID" 5
STATS_LOADED=$(stats)
for i in 0 1 2 3; do end_pid "${CLI_PID[$i]}" 10; done
wait_for 60 "0 streams" streams_are 0
wait_for 30 "no Erlang node connected" nodes_are 0
wait_for 30 "$FD0 descriptors" fds_are "$FD0"
FD_END=$(fd_count)
STATS_END=$(stats)
SRV_ALIVE=0
alive "$SRV_PID" && SRV_ALIVE=1
stop_server
SRV_STATUS=$SRV_EXIT

# --- verdicts ----------------------------------------------------------------------

cj() { jget "$2" <"$WORK/$1.json"; }
ctot() { local p t=0 v; for p in "${PROTOS[@]}"; do v=$(cj "$p" "$1"); t=$((t + ${v:-0})); done; echo "$t"; }
st() { jget "$1" <<<"$STATS_END"; }

ok=0
[[ -n $T_BACK ]] && ((T_BACK <= BOUND * 1000)) && ok=1
secs() { if [[ -n $1 ]]; then calc "$1 / 1000" %.1f; else echo never; fi; }
check "all back" $ok "$STREAMS streams up again $(secs "$T_BACK") s after the restart (clients' count, 1 s resolution; bound $BOUND s); the server counted them all after $(secs "$T_SRV_BACK") s; killed to restarted $((T_UP - T_KILL)) ms"

check "id errors" $(($(ctot id_errors) == 0)) "$(ctot id_errors) ($(for p in sse ws poll; do printf '%s %s, ' "$p" "$(cj "$p" id_errors)"; done)want 0)"
check "duplicates" $(($(ctot dup) == 0)) "$(ctot dup) ($(for p in sse ws poll; do printf '%s %s, ' "$p" "$(cj "$p" dup)"; done)want 0)"

ok=1
txt=
want=$PER
((HISTORY_FILE)) && want=0
for p in sse ws poll; do
  g=$(cj "$p" gaps)
  [[ $g == "$want" ]] || ok=0
  txt+="$p $g, "
done
rg=$(st replay_gaps)
[[ $rg == $((3 * want)) ]] || ok=0
if ((HISTORY_FILE)); then
  check "no gap" $ok "${txt}each of $PER streams resumed in the same epoch from the server's --history-file; the server told $rg gaps (want 0)"
  made=$(grep -o 'made, epoch [0-9a-f]*' "$WORK/server-1.log" | awk '{print $3}')
  resumed=$(grep -o 'resumed, epoch [0-9a-f]*' "$WORK/server-2.log" | awk '{print $3}')
  ok=0
  [[ -n $made && $made == "$resumed" ]] && ok=1
  check "history resumed" $ok "epoch ${made:-?} made by the first server, ${resumed:-none} resumed by the second: $(grep -o 'resumed, .*' "$WORK/server-2.log" | head -n1)"
else
  check "one gap per resumed stream" $ok "${txt}each of $PER streams resumed once into the new epoch; the server told $rg gaps (want $((3 * PER)))"
fi

ok=0
[[ $UP_AFTER == "$STREAMS" && -n $RETRIES_BACK && $RETRIES_AFTER == "$RETRIES_BACK" ]] && ok=1
check "none lost after" $ok "$UP_AFTER of $STREAMS up $AFTER s after the storm; reconnection waits $RETRIES_BACK when all were back, $RETRIES_AFTER then"

ok=0
[[ $SRV_ALIVE == 1 && $SRV_STATUS == 0 ]] && ok=1
check "server alive" $ok "alive after the storm: $SRV_ALIVE; exit status on SIGTERM: $SRV_STATUS"
check "descriptors back" $([[ $FD_END == "$FD0" ]] && echo 1 || echo 0) "$FD0 on a fresh server, $FD_END on the restarted one after every client left"

# back_at PCT: ms from the restart until PCT% of the streams were up again.
back_at() {
  awk -v want=$((STREAMS * $1 / 100)) '$3 != "-" && $3 >= want { print $1; found = 1; exit }
    END { if (!found) print "-" }' "$SAMPLES"
}

write_report() {
  local p
  {
    echo "# Reconnect storm, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores; load average" \
         "$LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo
    echo "$STREAMS streams ($PER each chunked, SSE, WebSocket ws+meta, long-poll; one client" \
         "process each, over $SRC), --reconnect-lost $BACKOFF ms (full jitter, cap $CAP_MS ms)." \
         "Server --history 32 --history-bytes $HISTORY_BYTES --heartbeat $HEARTBEAT${HISTORY_ARGS:+ --history-file (under /dev/shm)}. One broadcast, then $RATE msg/s to random" \
         "uids and a broadcast every 5 s; SIGKILL after $WARM s, restart on the same ports once" \
         "every client saw its streams lost."
    echo
    echo "## Checks"
    echo
    sed 's/^/- /' "$CHECKS"
    echo
    echo "## The storm"
    echo
    echo "| | |"
    echo "| --- | ---: |"
    echo "| kill to every client seeing its streams lost | $((T_LOST - T_KILL)) ms |"
    echo "| kill to the new server answering | $((T_UP - T_KILL)) ms (started $((T_DOWN - T_KILL)) ms after the kill) |"
    echo "| restart to 50% / 90% / 99% back (clients' count) | $(back_at 50) / $(back_at 90) / $(back_at 99) ms |"
    echo "| restart to all $STREAMS back (clients' count) | ${T_BACK:-not within $BOUND s} ms |"
    echo "| restart to the server counting $STREAMS streams | ${T_SRV_BACK:--} ms |"
    echo "| reconnection waits begun (retries) | $(ctot retries) |"
    echo "| connections refused (connect errors) | $(ctot fail_connect) |"
    echo "| failed otherwise: timeout / status / closed before the welcome | $(ctot fail_timeout) / $(ctot fail_status) / $(ctot fail_closed) |"
    echo "| poll loops lost on a next poll (stream errors) | $(cj poll stream_errors) |"
    echo "| welcomes during the storm | $(($(ctot welcomed) - WELCOMED_BEFORE)) |"
    echo "| server replays / replayed / replay_gaps | $(jget replays <<<"$STATS_STORM") / $(jget replayed <<<"$STATS_STORM") / $(jget replay_gaps <<<"$STATS_STORM") at all back; $(st replays) / $(st replayed) / $(st replay_gaps) at the end |"
    echo
    echo "Refused: connect() said ECONNREFUSED, no server listening. Closed before the welcome:"
    echo "connected, then reset: reconnections that reached the dying server's listener while"
    echo "the kernel closed its thousands of sockets, queued (4,097 at most) and reset with it."
    echo "Poll loops lost on a next poll count as stream errors, not as refusals."
    echo
    echo "| proto | welcomed | retries | refused | gaps | id_errors | dup | msgs | closed by server |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for p in "${PROTOS[@]}"; do
      echo "| $p | $(cj "$p" welcomed) | $(cj "$p" retries) | $(cj "$p" fail_connect) | $(cj "$p" gaps) |" \
           "$(cj "$p" id_errors) | $(cj "$p" dup) | $(cj "$p" msgs) | $(cj "$p" closed_by_server) |"
    done
    echo
    echo "## Samples after the restart (every 0.2 s)"
    echo
    echo "| ms | server streams_open | clients up |"
    echo "| ---: | ---: | ---: |"
    awk '{ printf "| %s | %s | %s |\n", $1, $2, $3 }' "$SAMPLES"
    echo
    echo "## Clients"
    echo
    echo '```'
    for p in "${PROTOS[@]}"; do echo "$p: $(cat "$WORK/$p.json")"; done
    echo '```'
    echo
    echo "## Server counters (GET /stats)"
    echo
    echo "Before the kill: \`$STATS_BEFORE\`"
    echo
    echo "When all were back: \`$STATS_STORM\`"
    echo
    echo "At the end, every client gone: \`$STATS_END\`"
  } >"$WORK/report.md"
}
write_report

echo "storm: restart to 50%/90%/99%/all back $(back_at 50)/$(back_at 90)/$(back_at 99)/${T_BACK:-never} ms; retries $(ctot retries), refused $(ctot fail_connect);" \
     "replays $(st replays), replayed $(st replayed), replay_gaps $(st replay_gaps)"
run_verdict
