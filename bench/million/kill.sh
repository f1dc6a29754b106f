# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 8: a C-node (an SSE one: its streams resume
# with ids) killed with SIGKILL and started again under paced sends: its
# streams back (each told of a gap), the others' messages all delivered, the
# master's presence right again.

# back: the killed node holds all its streams again.
back() { [[ $(stats_of "$KILLED" | jget streams_open) == "${CNT[$KILLED]}" ]]; }

phase_kill() {
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
  snapshot_msgs
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
  wait_for 60 "the killed node's streams back" back
  TB=$(now_ms)
  wait_for 30 "presence right again" presence_since "$STREAMS" "$TB"
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
  check "node kill: others" "$([[ $KILL_LOST == 0 && ${KSENT:-0} -gt 0 ]] && echo 1 || echo 0)" "$KSENT sent, the other nodes' streams lost $KILL_LOST (extra $EXTRA)"
  check "node kill: back" $(((TB - TR) < 60000)) "${CNT[$KILLED]} streams back $BACK_S s after the restart ($((TR - TK)) ms after the kill)"
  ok=0
  [[ $PRES_LAG != null ]] && (($(calc "$PRES_LAG <= 1" %.0f))) && ok=1
  check "node kill: presence" $ok "the master knew all $STREAMS uids again $PRES_LAG s after the node's streams were back"
}
