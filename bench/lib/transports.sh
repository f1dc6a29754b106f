# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Section 6 of scripts/bench.sh (sourced): the web transports against the
# chunked stream, each on servers of its own. Per transport (sse, ws, poll;
# ws only when the server answers GET /ws/1 with 101):
#   - server heap per idle stream: the method of section 1 (0 -> 18,000);
#   - flat-out delivery to 10,000 streams: one run as in section 2;
#   - resume: 10,000 clients each get 5 messages and drop (the client's
#     --reconnect-after 5 --reconnect-on-signal), 20 more messages per uid
#     are sent while they are away (kept in the server's history), then
#     SIGUSR1 makes them all reconnect from their last id: the time until
#     the last of the 250,000 messages arrived, and the client's id checks
#     (none lost, none doubled, no gap).
# Figures t_<proto>_*; the command lines that made them t_<proto>_*_cmd.

T_RESUME_FIRST=5        # messages per uid before the drop
T_RESUME_MISSED=20      # messages per uid while away (--history is 32)

# The command line of the last start_client, for the report ($PORT for the port).
client_cmd() { printf './httpclient -p $PORT --json -q %s' "$*"; }

# ws_available: whether the server of this run upgrades GET /ws/1 (101).
# Sets WS_STATUS to the status line's code ("" when none came).
ws_available() {
  WS_STATUS=$(curl -si --max-time 2 -H 'Upgrade: websocket' -H 'Connection: Upgrade' \
    -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Version: 13' \
    -H 'Sec-WebSocket-Protocol: ws+meta.httpdcnode' \
    "http://127.0.0.1:$SRV_PORT/ws/1" 2>/dev/null | head -n1 | awk '{ print $2 }')
  [[ $WS_STATUS == 101 ]]
}

# Idle streams of PROTO at 2k, 5k, 10k, 18k: server RSS slope (section 1's method).
transport_memory() {
  local proto=$1 step prev=0 i=0 clients="" ok=1 dat="$WORK/memory-$1.dat" args
  log "transports: $proto, 0 -> 18,000 idle streams"
  # Long-polls wait up to --poll-timeout: longer than this phase.
  start_server "mem-$proto" --poll-timeout 600 ||
    { broken "transports: $proto memory: server did not start"; return 1; }
  : >"$dat"
  local srv
  srv=$(stats)
  echo "$(jget streams_open <<<"$srv") $(jget memory <<<"$srv")" >>"$dat"
  for step in 2000 5000 10000 18000; do
    i=$((i + 1))
    args=(-n $((step - prev)) -P 2 --proto "$proto" --uid-base $((prev + 1)) --src "$SRC_TMEM"
          --hold 600 --max-time "$(left 600)")
    start_client "$WORK/tmem-$proto-$i" "${args[@]}"
    ((i == 1)) && put "t_${proto}_mem_cmd" "./httpdcnode --poll-timeout 600; then $(client_cmd "${args[@]}") (and the next steps with --uid-base)"
    clients="$clients $CLI_PID"
    if ! wait_streams "$step" 60 "$CLI_PID"; then
      broken "transports: $proto memory: the server did not reach $step streams"
      ok=0
      break
    fi
    srv=$(stats)
    echo "$(jget streams_open <<<"$srv") $(jget memory <<<"$srv")" >>"$dat"
    prev=$step
  done
  local c
  for c in $clients; do end_pid "$c" 10; done
  stop_server || broken "transports: $proto memory: server exit: $SRV_EXIT"
  ((ok)) || return 1
  put "t_${proto}_mem_slope" "$(awk 'NR > 1 { print $1, $2 }' "$dat" | slope)"
  put "t_${proto}_mem_18k" "$(awk 'END { print $2 }' "$dat")"
}

# One flat-out run of COUNT messages to 10,000 streams of PROTO (push_run).
transport_push() {
  local proto=$1 count=$2
  log "transports: $proto, $count messages flat out to 10,000 streams"
  start_server "push-$proto" --probe-latency ||
    { broken "transports: $proto push: server did not start"; return 1; }
  PUSH_CLIENT_ARGS=(--proto "$proto")
  PUSH_SRC=$SRC_TPUSH
  push_run "t_${proto}_blast" 1 "$count" max
  PUSH_CLIENT_ARGS=()
  PUSH_SRC=$SRC_PUSH
  put "t_${proto}_blast_cmd" "$(client_cmd -n 10000 -P 2 --src "$SRC_TPUSH" --until-msgs "$count" --proto "$proto") with msggen --count $count --rate max --uids 1-10000 --sync"
  local j="$WORK/push-t_${proto}_blast-1.json" f
  for f in id_errors dup gaps; do put "t_${proto}_blast_$f" "$(jget "$f" <"$j")"; done
  [[ $(jget id_errors <"$j") == 0 && $(jget dup <"$j") == 0 ]] ||
    broken "transports: $proto push: ids out of order: $(jget id_errors <"$j") errors, $(jget dup <"$j") duplicates"
  stop_server || broken "transports: $proto push: server exit: $SRV_EXIT"
}

# 10,000 clients drop after T_RESUME_FIRST messages, miss T_RESUME_MISSED
# each, and come back resuming from their last id.
transport_resume() {
  local proto=$1 n=10000 out="$WORK/resume-$1"
  local first=$((n * T_RESUME_FIRST)) missed=$((n * T_RESUME_MISSED))
  local total=$((first + missed)) args
  log "transports: $proto, resume of 10,000 clients after $T_RESUME_MISSED missed messages each"
  start_server "resume-$proto" || { broken "transports: $proto resume: server did not start"; return 1; }
  args=(-n "$n" -P 2 --proto "$proto" --src "$SRC_TRESUME" --until-msgs "$total"
        --reconnect-after "$T_RESUME_FIRST" --reconnect-on-signal --max-time "$(left 150)")
  start_client "$out" "${args[@]}"
  put "t_${proto}_resume_cmd" "$(client_cmd "${args[@]}"); msggen --count $first --rate max --uids 1-10000 --sync; once the server holds no stream, msggen --count $missed (the same); then kill -USR1 the client"
  local cpid=$CLI_PID ok=1
  if ! wait_streams "$n" 60 "$cpid"; then
    broken "transports: $proto resume: 10,000 streams not reached"
    ok=0
  elif ! publish 60 --count "$first" --rate max --uids 1-$n --sync; then
    broken "transports: $proto resume: the publisher failed: $(pub_error)"
    ok=0
  elif ! wait_streams 0 60 "$cpid"; then
    broken "transports: $proto resume: the clients did not all drop after $T_RESUME_FIRST messages"
    ok=0
  elif ! publish 90 --count "$missed" --rate max --uids 1-$n --sync; then
    broken "transports: $proto resume: the publisher failed: $(pub_error)"
    ok=0
  fi
  if ((ok)); then
    put "t_${proto}_resume_kept" "$(stat_of history_entries)"
    kill -USR1 "$cpid" 2>/dev/null
    finish_client "$cpid" 60 || log "transports: $proto resume: client stopped before all messages arrived"
  else
    end_pid "$cpid" 10
  fi
  local j="$out.json" msgs f
  msgs=$(jget msgs <"$j")
  put "t_${proto}_resume_received" "${msgs:-0}"
  put "t_${proto}_resume_loss" $((total - ${msgs:-0}))
  put "t_${proto}_resume_expected" "$total"
  for f in resume_s id_errors dup gaps reconnects lat_p50_us lat_p99_us; do
    put "t_${proto}_resume_$f" "$(jget "$f" <"$j")"
  done
  if ((ok)) && ! [[ ${msgs:-0} == "$total" && $(jget id_errors <"$j") == 0 &&
                    $(jget dup <"$j") == 0 && $(jget gaps <"$j") == 0 ]]; then
    broken "transports: $proto resume: received ${msgs:-0} of $total, $(jget id_errors <"$j") id errors, $(jget dup <"$j") duplicates, $(jget gaps <"$j") gaps"
  fi
  alive "$SRV_PID" || broken "transports: $proto resume: the server died: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"
  stop_server || broken "transports: $proto resume: server exit: $SRV_EXIT"
}

# 6. Every transport the server has.
phase_transports() {
  local count=$1 proto list="sse poll"
  start_server wsprobe || { broken "transports: server did not start"; return; }
  if ws_available; then
    list="sse ws poll"
    put t_ws_status "available"
  else
    put t_ws_status "skipped: GET /ws/1 answered ${WS_STATUS:-nothing}, not 101 (no WebSocket in this build)"
    log "transports: ws skipped, GET /ws/1 answered ${WS_STATUS:-nothing}"
  fi
  stop_server || broken "transports: server exit: $SRV_EXIT"
  put t_list "$list"
  for proto in $list; do
    transport_memory "$proto"
    transport_push "$proto" "$count"
    transport_resume "$proto"
  done
}

# The smoke's share: 100 streams of PROTO, 1,000 messages flat out, every
# one received once, ids in order.
smoke_transport() {
  local proto=$1 out="$WORK/smoke-$1" j
  start_server "smoke-$proto" ||
    { broken "$proto: the server did not start: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"; return; }
  start_client "$out" -n 100 -P 1 --proto "$proto" --src "$SRC_SMOKE" --until-msgs 1000 \
    --max-time "$(left 20)"
  if wait_streams 100 15 "$CLI_PID"; then
    publish 15 --count 1000 --rate max --uids 1-100 --sync ||
      broken "$proto: the publisher failed: $(pub_error)"
    finish_client "$CLI_PID" 10 || broken "$proto: the client did not get every message in time"
  else
    broken "$proto: 100 streams not reached: $(tail -n2 "$out.err" | tr '\n' ' ')"
    end_pid "$CLI_PID" 5
  fi
  j="$out.json"
  [[ $(jget proto <"$j") == "$proto" && $(jget msgs <"$j") == 1000 && $(jget id_errors <"$j") == 0 &&
     $(jget dup <"$j") == 0 && $(jget stream_errors <"$j") == 0 ]] ||
    broken "$proto: wanted 1000 messages with ids in order: $(cat "$j")"
  stop_server || broken "$proto: server exit: $SRV_EXIT"
}
