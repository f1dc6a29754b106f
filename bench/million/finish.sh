# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, the end: every process ended by pid (the clients
# first, their gaps and id errors read from their summaries), then the
# machine checked back as it was.

# Ours: connected sockets from the clients' addresses (TIME_WAIT aside).
ours() { ss -Htn state connected '( src 127.50.0.0/16 or src 127.51.0.0/16 )' 2>/dev/null | grep -vc TIME-WAIT; }
none_ours() { (($(ours) == 0)); }

phase_end() {
  STATS_KILLED=$(stats_of "$KILLED")
  log "ending the clients"
  stop_all "${CPID[@]}"
  GAPS=$(jget gaps <"$WORK/client-$KILLED.json")
  GAPS=${GAPS:-0}
  IDERR=0
  for ((i = 0; i < NODES; i++)); do v=$(jget id_errors <"$WORK/client-$i.json"); IDERR=$((IDERR + ${v:-0})); done
  put node_kill_gaps "$GAPS"
  put id_errors "$IDERR"
  # With the topic (MILLION_TOPIC=1), each is told of two: its uid's and the topic's.
  check "node kill: gaps" $((GAPS == CNT[KILLED] * (1 + TOPIC))) "$GAPS of ${CNT[$KILLED]} resumed streams told of a gap$( ((TOPIC)) && echo " (two each: the uid's and the topic's)") (replay_gaps $(jget replay_gaps <<<"$STATS_KILLED"))"
  check "id errors" $((IDERR == 0)) "$IDERR over the SSE and WebSocket streams"
  stop_all "${SPID[@]}"
  end_pid "$MASTER_PID" 10
  wait_for 60 "the sockets closed" none_ours
  FILES1=$(cut -f1 /proc/sys/fs/file-nr)
  TCP1=$(awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat)
  AVAIL1=$(mem_avail_kb)
  OURS1=$(ours)
  ok=0
  ((OURS1 == 0 && AVAIL1 * 100 >= AVAIL_START * 95)) && ok=1
  check "machine back" $ok "every process ended by pid; $OURS1 of the bench's sockets left (TIME_WAIT aside); MemAvailable $((AVAIL_START / 1024)) MiB at the start, $((AVAIL1 / 1024)) at the end; machine-wide TCP in use $TCP0, $TCP1; open files $FILES0, $FILES1"
}
