# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 4: paced sends through httpdcnode:send/2 to
# random uids, stamped, once the run's processes are quiet: delivered, lost,
# latency over every client's histogram, what waited for a core; then the
# same at half the rate.

phase_paced() {
  settle 90
  put settle_s "$SETTLE_S"
  log "settled after $SETTLE_S s (quiet: $SETTLE_QUIET; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
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
    PACED_WORST_P99=$(maxf p99 "${ERRS[@]}")
    PACED_RATE=$(calc "$SENT * 1000000 / $(jget elapsed_us <<<"$MIL")" %.0f)
  else SENT=0 PACED_LOST=null PACED_P50=null PACED_P99=null PACED_MAX=null PACED_RATE=0
    PACED_SAMPLES=0 PACED_WORST_P99=null RQ_WAIT_US=null RQ_WAITING=null CPU_SPLIT='' PACED_BUSY=null PACED_RUN=null; fi
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
  check "paced sends" "$([[ $PACED_LOST == 0 && $SENT -gt 0 ]] && echo 1 || echo 0)" "sent $SENT at $PACED_RATE msg/s, lost $PACED_LOST, extra ${EXTRA:-?}; latency p50 $PACED_P50 us, p99 $PACED_P99 us, max $PACED_MAX us over $PACED_SAMPLES stamped messages (every client's histogram added up; the worst client process's p99 $PACED_WORST_P99 us); meanwhile the run's threads waited $RQ_WAIT_US us for a core per run, $RQ_WAITING of them waiting on average, and one wake-up (wakefloor beside it) waited p50 ${WAKE_P50:-?} us, p99 ${WAKE_P99:-?} us, max ${WAKE_MAX:-?} us; CPU (cores): ${CPU_SPLIT:-n/a}"
}

# How the tail follows the load: half the messages a second, stamped, for
# half as long; its latency is of these messages alone (the histograms less
# what they held before).
phase_paced_half() {
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
  check "paced at half the rate" "$([[ $HALF_LOST == 0 ]] && echo 1 || echo 0)" "sent ${HALF_SENT:-0} at $HALF msg/s, lost $HALF_LOST; latency p50 $HALF_P50 us, p99 $HALF_P99 us; the run's processes used $HALF_RUN cores (at the full rate $PACED_RUN)"
}
