# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 5: multicast_sync to MCAST random uids: the
# reply and the last delivery.

phase_multicast() {
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
  log "multicast_sync to $MCAST random uids"
  if mil multicast --count "$MCAST" --uids "$STREAMS"; then
    MT0=$(jget t0_ms <<<"$MIL")
    WRITTEN=$(jget written <<<"$MIL")
    REPLY_S=$(calc "$(jget reply_us <<<"$MIL") / 1000000" %.3f)
    wait_for 30 "the multicast at $MCAST streams" settled "$MCAST"
    sleep 1.2
    GOT=$(grown)
    MLAST=$(maxf last_msg_ms "${ERRS[@]}")
    MCAST_LAST=$(calc "($MLAST - $MT0) / 1000" %.3f)
  else WRITTEN=0 REPLY_S=null GOT=0 MCAST_LAST=null; fi
  put multicast_uids "$MCAST"
  put multicast_written "$WRITTEN"
  put multicast_delivered "$GOT"
  put multicast_reply_s "$REPLY_S"
  put multicast_last_delivery_s "$MCAST_LAST"
  check "multicast_sync" $((WRITTEN == MCAST && GOT == MCAST)) "$MCAST uids: the reply after $REPLY_S s said $WRITTEN written; $GOT delivered, the last $MCAST_LAST s after the call"
}
