# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 9 (MILLION_ROLLING=1): a rolling upgrade,
# every C-node in turn taken over by a new process under paced sends.

# Every C-node in turn: the same binary, started with the same options and
# --takeover, takes over from it, while the master sends RATE msg/s to
# random uids. No client reconnects or loses a stream (only the killed
# node's has --reconnect-lost: its retries must not move either); every
# message sent arrives. Per node: from the new process's start to the old
# one's exit (the hand-over, the new one's start included: the nodes run
# with -q, their logs say nothing of it), and until the new one answers.
phase_rolling() {
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
  snapshot_msgs
  UP_R0=$(sumf up "${ERRS[@]}")
  CLOSED_R0=$(sumf closed "${ERRS[@]}")
  RETRIES_R0=$(sumf retries "${ERRS[@]}")
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
  UP_R1=$(sumf up "${ERRS[@]}")
  CLOSED_R1=$(sumf closed "${ERRS[@]}")
  RETRIES_R1=$(sumf retries "${ERRS[@]}")
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
  check "rolling: no stream lost" "$([[ $UP_R1 == "$UP_R0" && $CLOSED_R1 == "$CLOSED_R0" && $RETRIES_R1 == "$RETRIES_R0" ]] && echo 1 || echo 0)" "streams up $UP_R0 before, $UP_R1 after; closed by a server $((CLOSED_R1 - CLOSED_R0)); reconnections $((RETRIES_R1 - RETRIES_R0))"
  check "rolling: none lost" "$([[ $ROLL_LOST == 0 && ${RSENT:-0} -gt 0 ]] && echo 1 || echo 0)" "$RSENT sent at $RATE msg/s, lost $ROLL_LOST (extra $EXTRA); latency over the phase p50 $ROLL_P50 us, p99 $ROLL_P99 us"
}
