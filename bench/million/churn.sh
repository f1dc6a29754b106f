# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 7: churn clients on chunked nodes connect and
# disconnect CHURN times a second (half of them resets) on uids beyond the
# streams', while paced sends go to the streams that stay: none lost.

# churners_up: every churning client's streams welcomed once.
churners_up() { (($(sumf welcomed "${CH_ERRS[@]}") >= n_ch * CHURN_CONNS)); }

phase_churn() {
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
    CH_PID[j]=$LAST_CPID
    CH_ERRS+=("$WORK/churn-$j.err")
  done
  wait_for 60 "the churning streams" churners_up
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
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
  check "churn" "$([[ $CHURN_LOST == 0 && $CSENT -gt 0 ]] && echo 1 || echo 0)" "$CSENT sent to the $STREAMS streams that stayed, lost $CHURN_LOST (extra $EXTRA); churn: $CH_CLOSED disconnects ($CH_RESET resets), $CH_CONN_RATE connects/s over the sends, failed $CH_FAILED"
  # The churn uids leave the presence table: back to the million.
  wait_for 60 "presence back to $STREAMS" presence_is "$STREAMS"
}
