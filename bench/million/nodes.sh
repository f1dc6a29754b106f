# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`: the processes of the run other than the clients:
# the master (the application, bench/erlang/million.erl sampling its
# presence count) and the C-nodes, each on ports of its own, started, awaited,
# restarted and stopped by pid.

declare -a SPORT APORT SPID CPID KIND CNT UBASE
node_name() { echo "mill$1_$$"; }
stats_of() { curl -s --max-time 3 "http://127.0.0.1:${APORT[$1]}/stats"; }

# start_node I [ARG]: C-node I in the background (log node-I.log); ARG:
# --takeover, to take over from the one running.
start_node() {
  local i=$1
  shift
  (exec "$BIN/httpdcnode" --listen "127.0.0.1:${SPORT[$i]}" --admin-listen "127.0.0.1:${APORT[$i]}" \
     --name "$(node_name "$i")@localhost" --master "$MASTER" --presence httpdcnode_presence \
     --cookie "$COOKIE" -q --history-bytes "$HISTORY_BYTES" --max-users "$MAX_USERS" \
     --heartbeat 0 --keepalive 0 --drain-seconds 0 "$@") 2>>"$WORK/node-$i.log" &
  SPID[i]=$!
  BENCH_PIDS+=("${SPID[$i]}")
}
node_up() {
  local i=$1
  alive "${SPID[$i]}" && stats_of "$i" >/dev/null &&
    epmd -names 2>/dev/null | grep -q "^name $(node_name "$i") at"
}
# until node I answers; a killed one's name may linger in epmd: retried.
# await_node I [fixed]: until node I is up, started again when it exits. A
# port taken meanwhile (an outgoing connection's, from the wide local port
# range) is replaced by another: the admin port always, the public one
# unless "fixed" (a restart its clients come back to).
await_node() {
  local i=$1 end=$(($(date +%s) + $(left 60))) last
  while (($(date +%s) < end)); do
    node_up "$i" && return 0
    if ! alive "${SPID[$i]}"; then
      wait "${SPID[$i]}" 2>/dev/null
      forget "${SPID[$i]}"
      last=$(tail -n1 "$WORK/node-$i.log")
      if [[ $last == *"for --admin-listen: Address already in use"* ]]; then
        unique_port && APORT[i]=$UPORT && log "C-node $i: admin port taken, now ${APORT[$i]}"
      elif [[ ${2:-} != fixed && $last == *"port in use?"* ]]; then
        unique_port && SPORT[i]=$UPORT && log "C-node $i: port taken, now ${SPORT[$i]}"
      fi
      sleep 0.2
      start_node "$i"
    fi
    sleep 0.05
  done
  log "C-node $i did not come up: $(tail -n2 "$WORK/node-$i.log" | tr '\n' ' ')"
  return 1
}

# client NAME PORT SRC ARGS...: httpclient in the background; JSON to

# unique_port: UPORT = a port free now and not given to another node of this
# run (not in a subshell: TAKEN must grow).
TAKEN=" "
unique_port() {
  local p try
  for try in 1 2 3 4 5; do
    p=$(free_port) || return 1
    [[ $TAKEN == *" $p "* ]] && continue
    TAKEN+="$p "
    UPORT=$p
    return 0
  done
  return 1
}


# stop_all PID...: SIGTERM to each, then each waited for (SIGKILL after 5 s
# more when it does not end).
stop_all() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
  for p in "$@"; do wait_exit "$p" "$(left 60)" || end_pid "$p" 5; done
}

# start_master: the master first: the C-nodes connect to it as they come up.
# With MILLION_TOPIC=1 its samples hold the topic's count too.
start_master() {
  local topic=()
  ((TOPIC)) && topic=("$TOPIC_NAME")
  (exec erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell -sname "$MASTER" -setcookie "$COOKIE" \
     -pa "$ROOT/tools/erlang/ebin" -eval 'million:master_cli()' -extra "$WORK/presence.dat" "${topic[@]}") \
    >"$WORK/master.log" 2>&1 </dev/null &
  MASTER_PID=$!
  BENCH_PIDS+=("$MASTER_PID")
  wait_for 30 "the master" grep -q 'million master up' "$WORK/master.log" || exit 1
}

# start_nodes: the C-nodes, each with its kind of streams, its block of uids
# and its ports; then what they hold before any stream (the memory's base).
start_nodes() {
  # Kinds: SSE and WebSocket whole nodes, a tenth of the streams each at least.
  N_ID=$(((STREAMS / 10 + PER - 1) / PER))
  ((N_ID < 1)) && N_ID=1
  for ((i = 0; i < NODES; i++)); do
    KIND[i]=chunked
    ((i >= 1 && i <= N_ID)) && KIND[i]=sse
    ((i > N_ID && i <= 2 * N_ID)) && KIND[i]=ws
    UBASE[i]=$((1 + i * PER))
    CNT[i]=$PER
    ((i == NODES - 1)) && CNT[i]=$((STREAMS - i * PER))
    { unique_port && SPORT[i]=$UPORT && unique_port && APORT[i]=$UPORT; } || exit 1
  done
  ((2 * N_ID < NODES)) || { log "too few C-nodes for the SSE and WebSocket shares"; exit 1; }
  KILLED=1                                     # an SSE node: its streams resume with ids
  T_NODES=$(now_ms)
  for ((i = 0; i < NODES; i++)); do start_node "$i"; done
  for ((i = 0; i < NODES; i++)); do await_node "$i" || exit 1; done
  log "$NODES C-nodes up in $(($(now_ms) - T_NODES)) ms"
  SRV_KB0=$(rss_sum "${SPID[@]}")
  MASTER_KB0=$(rss_sum "$MASTER_PID")
  KERN0=$(kernel_bytes)
  AVAIL0=$(mem_free_kb)
}
