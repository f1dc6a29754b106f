# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 1: every client connects its node's streams;
# rate and memory sampled every second (plotted) until all are open.

SAMPLES=                        # ms streams servers_kB clients_kB kernel_B memfree_kB master_kB tcp_inuse

# The samples come from a loop of their own, reniced as root: at a load
# average of 50 during the connect, a plain shell loop got a sample in ~28 s.
sample_connect() {
  trap 'exit 0' TERM
  local up cp
  while :; do
    sleep 1
    up=$(sumf up "${ERRS[@]}")
    mapfile -t cp < <(client_pids "${CPID[@]}")
    printf '%s %s %s %s %s %s %s %s\n' $(($(now_ms) - T0)) "$up" "$(rss_sum "${SPID[@]}")" \
      "$(rss_sum "${cp[@]}")" "$(kernel_bytes)" "$(mem_free_kb)" "$(rss_sum "$MASTER_PID")" \
      "$(tcp_inuse)" >>"$SAMPLES"
  done
}

phase_connect() {
  local i extra end v failed_free
  client_errs
  TCPB=$(tcp_inuse)
  T0=$(now_ms)
  for ((i = 0; i < NODES; i++)); do
    extra=()
    ((i == KILLED)) && extra=(--reconnect-lost 200 --reconnect-cap 2000)
    ((TOPIC)) && extra+=(--topics 1)              # every stream on t:0 (topic.sh)
    client "client-$i" "${SPORT[$i]}" "$(src_of 50 "$i")" --proto "${KIND[$i]}" -n "${CNT[$i]}" \
      --uid-base "${UBASE[$i]}" --hist-out "$WORK/client-$i.hist" "${extra[@]}"
    CPID[i]=$LAST_CPID
  done
  SAMPLES="$WORK/samples.dat"
  printf '0 0 %s 0 %s %s %s %s\n' "$SRV_KB0" "$KERN0" "$AVAIL0" "$MASTER_KB0" "$TCPB" >"$SAMPLES"
  T_OPEN='' UP=0
  sample_connect &
  SAMPLER_PID=$!
  BENCH_PIDS+=("$SAMPLER_PID")
  [[ $(id -u) == 0 ]] && renice -n -10 -p "$SAMPLER_PID" >/dev/null 2>&1
  end=$(($(date +%s) + $(left $((60 + STREAMS / 2000)))))
  while (($(date +%s) < end)); do
    sleep 1
    UP=$(tail -n1 "$SAMPLES" | cut -d' ' -f2)
    ((UP >= STREAMS)) && { T_OPEN=$(tail -n1 "$SAMPLES" | cut -d' ' -f1); break; }
    for ((i = 0; i < NODES; i++)); do
      alive "${SPID[$i]}" || { log "C-node $i died during the connect"; break 2; }
    done
  done
  end_pid "$SAMPLER_PID" 5
  OPEN_MAX=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$SAMPLES")
  # The servers' own count, the exact figure.
  SRV_OPEN=0
  for ((i = 0; i < NODES; i++)); do v=$(stats_of "$i" | jget streams_open); SRV_OPEN=$((SRV_OPEN + ${v:-0})); done
  ((SRV_OPEN > OPEN_MAX)) && OPEN_MAX=$SRV_OPEN
  put streams_open_max "$OPEN_MAX"
  put streams_target "$STREAMS"
  put c_nodes "$NODES"
  if [[ -n $T_OPEN ]]; then
    CONNECT_S=$(calc "$T_OPEN / 1000" %.1f)
    put connect_s "$CONNECT_S"
    log "all $STREAMS open in $CONNECT_S s (clients' count, 1 s samples; servers count $SRV_OPEN)"
  else
    CONNECT_S=
    put connect_s null
    log "not all open: $OPEN_MAX of $STREAMS; $(tail -n3 "$WORK"/client-0.err | tr '\n' ' ')"
    failed_free=$(free -m | awk '/Mem:/ { print $7 }')
    log "machine: MemAvailable $failed_free MiB, $(grep TCP /proc/net/sockstat)"
  fi
  check "all open" $((OPEN_MAX == STREAMS)) "$OPEN_MAX of $STREAMS streams open at once (servers' streams_open $SRV_OPEN), in ${CONNECT_S:-never} s"
  ((OPEN_MAX == STREAMS)) || { log "stopping: the streams did not all open"; }
}
