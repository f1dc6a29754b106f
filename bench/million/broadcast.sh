# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 6: a broadcast to every stream, its last
# delivery against the write floor, the CPU a delivery cost.

phase_broadcast() {
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
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
    BLAST=$(maxf last_msg_ms "${ERRS[@]}")
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
}
