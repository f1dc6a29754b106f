# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The measurements of scripts/bench.sh (sourced). Each phase starts its own
# server, records figures with put KEY VALUE into $WORK/results, notes every
# breakage with broken TEXT, and stops what it started.

put() { printf '%s=%s\n' "$1" "$2" >>"$WORK/results"; }
get() { sed -n "s/^$1=//p" "$WORK/results" 2>/dev/null | tail -n1; }
broken() { log "BROKEN: $*"; printf '%s\n' "$*" >>"$WORK/broken"; }

# Source addresses per phase: a fresh local port range for each, away from
# the TIME_WAIT that earlier runs left on 127.0.0.1.
SRC_MEMORY=127.0.10.1-127.0.10.20
SRC_PUSH=127.0.11.1-127.0.11.20
SRC_FANOUT=127.0.12.1-127.0.12.20
SRC_CONNECT=127.0.13.1-127.0.13.20
SRC_SMOKE=127.0.14.1-127.0.14.4
# bench/lib/transports.sh: memory, push and resume per transport.
SRC_TMEM=127.0.15.1-127.0.15.20
SRC_TPUSH=127.0.16.1-127.0.16.20
SRC_TRESUME=127.0.17.1-127.0.17.20

# Extra client options of push_run (--proto ...), empty for the chunked runs.
PUSH_CLIENT_ARGS=()
PUSH_SRC=$SRC_PUSH

# Appends "streams server_rss kernel_bytes" to memory.dat: the stream count
# and the RSS from the same /stats answer.
mem_sample() {
  local srv
  srv=$(stats)
  printf '%s %s %s\n' "$(jget streams_open <<<"$srv")" "$(jget memory <<<"$srv")" \
    "$(kernel_bytes)" >>"$WORK/memory.dat"
}

# 1. Memory at 0, 2k, 5k, 10k, 18k idle streams: one client per step, added on
#    top of the ones before and held open until the last sample.
phase_memory() {
  log "memory: 0 -> 18,000 idle streams"
  start_server memory || { broken "memory: server did not start"; return; }
  : >"$WORK/memory.dat"
  mem_sample
  local step prev=0 i=0 clients="" ok=1
  for step in 2000 5000 10000 18000; do
    i=$((i + 1))
    start_client "$WORK/memory-$i" -n $((step - prev)) -P 2 --uid-base $((prev + 1)) \
      --src "$SRC_MEMORY" --hold 600 --max-time "$(left 600)"
    clients="$clients $CLI_PID"
    if ! wait_streams "$step" 60 "$CLI_PID"; then
      broken "memory: the server did not reach $step streams"
      ok=0
      break
    fi
    mem_sample
    prev=$step
  done
  local c n=0
  : >"$WORK/client-mem.dat"
  for c in $clients; do
    n=$((n + 1))
    end_pid "$c" 10
    local j="$WORK/memory-$n.json"
    [[ $(jget welcomed <"$j") == "$(jget conns <"$j")" ]] ||
      broken "memory: client $n welcomed $(jget welcomed <"$j") of $(jget conns <"$j")"
    echo "$(jget conns <"$j") $(jget client_rss_bytes <"$j")" >>"$WORK/client-mem.dat"
  done
  stop_server || broken "memory: server exit: $SRV_EXIT"
  ((ok)) || return
  local base
  base=$(awk 'NR == 1 { print $2, $3 }' "$WORK/memory.dat")
  put mem_server_base "${base% *}"
  put mem_server_18k "$(awk 'END { print $2 }' "$WORK/memory.dat")"
  put mem_server_slope "$(awk 'NR > 1 { print $1, $2 }' "$WORK/memory.dat" | slope)"
  put mem_kernel_slope "$(awk 'NR > 1 { print $1, $3 }' "$WORK/memory.dat" | slope)"
  put mem_kernel_18k_delta "$(awk -v b="${base#* }" 'END { print $3 - b }' "$WORK/memory.dat")"
  put mem_client_json_slope "$(slope <"$WORK/client-mem.dat")"
}

# One push run: a client of 10,000 streams, COUNT messages at RATE to uids
# 1..10000, the client stopping once all arrived. Records KIND_RUN_* figures.
push_run() {
  local kind=$1 run=$2 count=$3 rate=$4 out="$WORK/push-$1-$2" pub='' s0 s1
  start_client "$out" -n 10000 -P 2 --src "$PUSH_SRC" --until-msgs "$count" \
    --max-time "$(left 120)" "${PUSH_CLIENT_ARGS[@]}"
  local cpid=$CLI_PID
  if ! wait_streams 10000 60 "$cpid"; then
    broken "push $kind $run: 10,000 streams not reached"
    end_pid "$cpid" 10
    return 1
  fi
  s0=$(stats)
  local cpu0
  cpu0=$(cpu_ticks "$SRV_PID")
  probe_take >/dev/null
  # One more paced run, not among the medians, measures how late a sleeping
  # thread wakes under this load (./wakefloor), for section 5.
  local wpid=
  if [[ $kind == paced_wake ]]; then
    "$BIN/wakefloor" "$(calc "$count / $rate - 2" %.0f)" 1000 >"$WORK/wake-load.json" 2>&1 &
    wpid=$!
    BENCH_PIDS+=("$wpid")
  fi
  if publish 90 --count "$count" --rate "$rate" --uids 1-10000 --sync; then
    pub=$PUB
    put "${kind}_${run}_pub_status" ok
  else
    case "$(pub_error)" in
      *no_reply*) put "${kind}_${run}_pub_status" "no reply from the C-node in 10 s" ;;
      *) put "${kind}_${run}_pub_status" "failed" ;;
    esac
    broken "push $kind $run: the publisher failed: $(pub_error)"
  fi
  echo "$pub" >"$out.pub"
  if [[ -n $wpid ]]; then
    wait_exit "$wpid" 10 || end_pid "$wpid" 5
    forget "$wpid"
    put wake_load_p50 "$(jget p50_us <"$WORK/wake-load.json")"
    put wake_load_p99 "$(jget p99_us <"$WORK/wake-load.json")"
    put wake_load_max "$(jget max_us <"$WORK/wake-load.json")"
  fi
  # All messages are in the server once --sync returned: they arrive within
  # seconds or not at all.
  finish_client "$cpid" 20 || log "push $kind $run: client stopped before all messages arrived"
  s1=$(stats)
  if ! alive "$SRV_PID"; then
    broken "push $kind $run: the server died: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"
    return 1
  fi
  put_probe "${kind}_${run}" "$(probe_take)" 
  local j="$out.json" msgs
  msgs=$(jget msgs <"$j")
  put "${kind}_${run}_received" "${msgs:-0}"
  put "${kind}_${run}_loss" $((count - ${msgs:-0}))
  put "${kind}_${run}_delivered_per_s" "$(jget msgs_per_s <"$j")"
  put "${kind}_${run}_pub_rate" "$(jget rate <<<"$pub")"
  local synced sent
  synced=$(jget synced_us <<<"$pub")
  sent=$(jget sent <<<"$pub")
  [[ -n $synced && -n $sent ]] && put "${kind}_${run}_intake_rate" "$(calc "$sent * 1e6 / $synced")"
  # The ratio within one run: medians of the two figures may come from
  # different runs.
  local prate dps
  prate=$(jget rate <<<"$pub")
  dps=$(jget msgs_per_s <"$j")
  [[ -n $prate && -n $dps ]] && put "${kind}_${run}_ratio" "$(calc "$dps / $prate" %.3f)"
  local p
  for p in p50 p90 p99 max; do put "${kind}_${run}_$p" "$(jget "lat_${p}_us" <"$j")"; done
  local deliveries=$(($(jget deliveries <<<"$s1") - $(jget deliveries <<<"$s0")))
  put "${kind}_${run}_server_deliveries" "$deliveries"
  # Server CPU (all its threads, user + system) per message delivered.
  local cpu1
  cpu1=$(cpu_ticks "$SRV_PID")
  ((deliveries > 0)) && put "${kind}_${run}_cpu_us" \
    "$(calc "($cpu1 - $cpu0) * 1e6 / $(getconf CLK_TCK) / $deliveries" %.2f)"
  # The same per message received: long-polls answered at once from the
  # history are not deliveries of the server's count.
  ((${msgs:-0} > 0)) && put "${kind}_${run}_cpu_msg_us" \
    "$(calc "($cpu1 - $cpu0) * 1e6 / $(getconf CLK_TCK) / $msgs" %.2f)"
  # The other CPU on the machine, per message: the client from its first
  # message on, the publisher's node while it sent and synced.
  local ccpu pcpu
  ccpu=$(jget msgs_cpu_us <"$j")
  pcpu=$(jget cpu_us <<<"$pub")
  ((${msgs:-0} > 0)) && isnum "$ccpu" && put "${kind}_${run}_client_cpu_us" "$(calc "$ccpu / $msgs" %.2f)"
  isnum "$pcpu" && put "${kind}_${run}_pub_cpu_us" "$(calc "$pcpu / $count" %.2f)"
  # Paced: how many messages the publisher sent at once per wake-up.
  local f
  for f in burst_p50 burst_p99 burst_max; do put "${kind}_${run}_$f" "$(jget "$f" <<<"$pub")"; done
  put "${kind}_${run}_slow_closed" $(($(jget slow_closed <<<"$s1") - $(jget slow_closed <<<"$s0")))
  [[ ${msgs:-0} == "$count" ]] ||
    broken "push $kind $run: LOSS: $((count - ${msgs:-0})) of $count messages not received"
  [[ $(jget welcomed <"$j") == 10000 ]] ||
    broken "push $kind $run: client welcomed $(jget welcomed <"$j") of 10000"
}

# Ages at the server's hops (--probe-latency) from one /probe reading.
put_probe() {
  local prefix=$1 json=$2 hop obj
  for hop in received applied written; do
    obj=$(probe_hop "$hop" <<<"$json")
    put "${prefix}_${hop}_p50" "$(jget p50_us <<<"$obj")"
    put "${prefix}_${hop}_p99" "$(jget p99_us <<<"$obj")"
  done
}

# Medians over the runs of KIND for every figure of one run.
push_medians() {
  local kind=$1 runs=$2 f r vals
  for f in received loss delivered_per_s pub_rate intake_rate ratio p50 p90 p99 max \
           server_deliveries slow_closed cpu_us cpu_msg_us client_cpu_us pub_cpu_us \
           received_p50 received_p99 applied_p50 applied_p99 written_p50 written_p99 \
           burst_p50 burst_p99 burst_max; do
    vals=()
    for r in $(seq "$runs"); do vals+=("$(get "${kind}_${r}_$f")"); done
    put "${kind}_$f" "$(median "${vals[@]}")"
  done
  vals=()
  for r in $(seq "$runs"); do vals+=("$(get "${kind}_${r}_loss")"); done
  put "${kind}_loss_total" "$(printf '%s\n' "${vals[@]}" | awk '{ s += $1 } END { print s + 0 }')"
}

# 2. Push: flat-out blast and 20k msg/s paced, RUNS times each.
# 3a. Fan-out: one acknowledged multicast to 10,000 uids (same server).
phase_push() {
  local runs=$1 blast=$2 paced_rate=$3 paced_s=$4 r
  log "push: $runs x $blast messages flat out, $runs x ${paced_rate}/s for ${paced_s}s; multicast"
  start_server push --probe-latency || { broken "push: server did not start"; return; }
  for r in $(seq "$runs"); do
    log "push: blast run $r"
    push_run blast "$r" "$blast" max || break
  done
  for r in $(seq "$runs"); do
    log "push: paced run $r"
    push_run paced "$r" $((paced_rate * paced_s)) "$paced_rate" || break
  done
  push_medians blast "$runs"
  push_medians paced "$runs"
  log "push: one more paced run with ./wakefloor beside it"
  push_run paced_wake 1 $((paced_rate * paced_s)) "$paced_rate"
  alive "$SRV_PID" && profile_run "$blast"
  alive "$SRV_PID" && multicast_run
  stop_server || broken "push: server exit: $SRV_EXIT"
}

# One more flat-out run with \`perf record\` attached to the server (both
# threads, kernel stacks included): where its CPU goes. Skipped, and said so
# in the report, where perf is missing or not allowed.
profile_run() {
  local count=$1 out="$WORK/profile" data="$WORK/perf.data" ppid
  put prof_count "$count"
  if ! { command -v perf >/dev/null && perf stat -e cpu-clock true >/dev/null 2>&1; }; then
    put prof_status "not measured: perf is missing or not allowed here (Debian package linux-perf)"
    return
  fi
  log "profile: one more flat-out run under perf record"
  start_client "$out" -n 10000 -P 2 --src "$SRC_PUSH" --until-msgs "$count" --max-time "$(left 60)"
  local cpid=$CLI_PID
  if ! wait_streams 10000 60 "$cpid"; then
    broken "profile: 10,000 streams not reached"
    end_pid "$cpid" 10
    return
  fi
  perf record -e cpu-clock -F 1999 -g -p "$SRV_PID" -o "$data" >"$out.perf.err" 2>&1 &
  ppid=$!
  BENCH_PIDS+=("$ppid")
  publish 60 --count "$count" --rate max --uids 1-10000 --sync ||
    broken "profile: the publisher failed: $(pub_error)"
  finish_client "$cpid" 20 || broken "profile: not every message arrived"
  kill -INT "$ppid" 2>/dev/null
  wait_exit "$ppid" 15 || end_pid "$ppid" 5
  forget "$ppid"
  local dso sym
  dso=$(perf report -i "$data" --stdio --no-children --sort dso -g none 2>/dev/null)
  sym=$(perf report -i "$data" --stdio --children --sort symbol -g none 2>/dev/null)
  if [[ -z $dso ]]; then
    put prof_status "not measured: perf report gave nothing ($(tail -n1 "$out.perf.err"))"
    return
  fi
  put prof_status ok
  put prof_kernel "$(prof_pct '\[kernel\.kallsyms\]' <<<"$dso")"
  put prof_server "$(prof_pct 'httpdcnode *$' <<<"$dso")"
  put prof_libevent "$(prof_pct 'libevent' <<<"$dso")"
  put prof_libc "$(prof_pct 'libc\.so' <<<"$dso")"
  put prof_writev "$(prof_pct '\[k\] do_writev ' <<<"$sym")"
  put prof_wakeup "$(prof_pct '\[k\] sock_def_readable ' <<<"$sym")"
  put prof_irq "$(prof_pct '\[k\] pvm_irq_enable ' <<<"$sym")"
  put prof_epoll "$(prof_pct '\[k\] do_epoll_wait ' <<<"$sym")"
}

# The first percentage of the perf report line matching a pattern (for
# --children reports, the share including callees), or nothing.
prof_pct() { grep -E "$1" | head -n1 | grep -oE '[0-9]+\.[0-9]+%' | head -n1 | tr -d '%'; }

# multicast_run [PREFIX]: one acknowledged multicast to 10,000 uids on the
# current server; figures PREFIX_* (default mc).
multicast_run() {
  local prefix=${1:-mc} out="$WORK/multicast-${1:-mc}" pub
  log "fan-out: one multicast to 10,000 uids ($prefix)"
  start_client "$out" -n 10000 -P 2 --src "$SRC_FANOUT" --until-msgs 10000 --max-time "$(left 90)"
  local cpid=$CLI_PID
  if ! wait_streams 10000 60 "$cpid"; then
    broken "fan-out: 10,000 streams not reached"
    end_pid "$cpid" 10
    return
  fi
  publish 30 --once --uids 1-10000 || broken "fan-out: the multicast failed: $(pub_error)"
  pub=$PUB
  finish_client "$cpid" 15 || broken "fan-out: not every stream got the multicast"
  put_fanout "$prefix" "$pub" "$out.json"
  [[ $(jget conns <<<"$pub") == 10000 && $(jget msgs <"$out.json") == 10000 ]] ||
    broken "fan-out: multicast written to $(jget conns <<<"$pub"), received $(jget msgs <"$out.json") of 10000"
}

# Figures of one fan-out (PREFIX mc or bc): the publisher's JSON and the
# client's summary file.
put_fanout() {
  local prefix=$1 pub=$2 json=$3
  put "${prefix}_conns" "$(jget conns <<<"$pub")"
  put "${prefix}_ack_us" "$(jget elapsed_us <<<"$pub")"
  put "${prefix}_received" "$(jget msgs <"$json")"
  put "${prefix}_last_us" "$(jget lat_max_us <"$json")"
}

# What the writer threads buy: one flat-out run and one multicast on a
# server with --writers 1 (the event loop writes alone), figures single_*.
phase_one_writer() {
  local blast=$1
  log "writers: the same with --writers 1"
  start_server single --probe-latency --writers 1 || { broken "writers: server did not start"; return; }
  push_run single 1 "$blast" max
  alive "$SRV_PID" && multicast_run single_mc
  stop_server || broken "writers: server exit: $SRV_EXIT"
}

# 4. Connect: 18,000 streams opened flat out (no rate limit), then
# 3b. a broadcast to all of them.
phase_connect() {
  local pending=$1 out="$WORK/connect" pub
  log "connect: 18,000 streams flat out; then a broadcast"
  start_server connect || { broken "connect: server did not start"; return; }
  start_client "$out" -n 18000 -P 2 --src "$SRC_CONNECT" --pending "$pending" \
    --until-msgs 18000 --max-time "$(left 120)"
  local cpid=$CLI_PID
  if wait_streams 18000 90 "$cpid"; then
    publish 30 --broadcast || broken "broadcast: the publisher failed: $(pub_error)"
    pub=$PUB
    finish_client "$cpid" 15 || broken "broadcast: not every stream got the broadcast"
    put_fanout bc "$pub" "$out.json"
    [[ $(jget msgs <"$out.json") == 18000 ]] ||
      broken "broadcast: received $(jget msgs <"$out.json") of 18000"
  else
    broken "connect: 18,000 streams not reached"
    end_pid "$cpid" 10
  fi
  put conn_rate "$(jget connect_rate <"$out.json")"
  put conn_welcomed "$(jget welcomed <"$out.json")"
  put conn_failed "$(jget failed <"$out.json")"
  put conn_pending "$pending"
  put conn_client_rss "$(jget client_rss_bytes <"$out.json")"
  stop_server || broken "connect: server exit: $SRV_EXIT"
}

# 5. The floor (./writefloor): one small write to a loopback TCP socket with
# an epolling reader, from one thread (no single-threaded server delivers to
# distinct sockets faster); from as many writers as cores at once (no server
# at all does); and in bursts of 20 a millisecond apart, as a 20k msg/s
# publisher paced by Erlang's 1 ms timer makes the server write.
phase_floor() {
  floor_run floor 10000 5 40
  floor_run floor_all 10000 5 40 "$(nproc)"
  floor_run floor_burst 10000 1 40 1 20
  local out
  if out=$(timeout 30 "$BIN/wakefloor" 3 1000); then
    put wake_idle_p50 "$(jget p50_us <<<"$out")"
    put wake_idle_p99 "$(jget p99_us <<<"$out")"
    put wake_idle_max "$(jget max_us <<<"$out")"
  else
    broken "floor: ./wakefloor failed"
  fi
}

# floor_run KEY ARGS...: ./writefloor ARGS three times (the figures of this
# host vary from run to run); KEY_us and KEY_rate are the medians.
floor_run() {
  local key=$1 out us=() rate=() i
  shift
  for i in 1 2 3; do
    if out=$(timeout 60 "$BIN/writefloor" "$@"); then
      us+=("$(jget us_per_write <<<"$out")")
      rate+=("$(jget writes_per_s <<<"$out")")
    else
      broken "floor: ./writefloor $* failed"
      return
    fi
  done
  put "${key}_us" "$(median "${us[@]}")"
  put "${key}_rate" "$(median "${rate[@]}")"
}

# The tiny run of --smoke: 300 streams, 3,000 messages flat out, one
# acknowledged multicast to all 300, then the plots from those figures. Only
# breakage is noted, never a timing.
phase_smoke() {
  local out="$WORK/smoke" once s
  start_server smoke --probe-latency || { broken "the server did not start: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"; return; }
  : >"$WORK/memory.dat"
  mem_sample
  start_client "$out" -n 300 -P 2 --src "$SRC_SMOKE" --until-msgs 3300 --max-time "$(left 40)"
  local cpid=$CLI_PID
  if ! wait_streams 300 20 "$cpid"; then
    broken "300 streams not reached: $(tail -n2 "$out.err" | tr '\n' ' ')"
    end_pid "$cpid" 5
    stop_server
    return
  fi
  mem_sample
  publish 20 --count 3000 --rate max --uids 1-300 --sync ||
    broken "the publisher failed: $(pub_error)"
  publish 20 --once --uids 1-300 ||
    broken "the multicast failed: $(pub_error)"
  once=$PUB
  [[ $(jget conns <<<"$once") == 300 ]] ||
    broken "the multicast was written to $(jget conns <<<"$once") of 300 streams"
  finish_client "$cpid" 10 || broken "the client did not get every message in time"
  local j="$out.json"
  [[ $(jget welcomed <"$j") == 300 ]] || broken "client welcomed $(jget welcomed <"$j") of 300"
  [[ $(jget msgs <"$j") == 3300 ]] ||
    broken "LOSS: the client received $(jget msgs <"$j") of 3300 messages"
  [[ $(jget closed_by_server <"$j") == 0 && $(jget stream_errors <"$j") == 0 ]] ||
    broken "streams closed by the server or malformed: $(cat "$j")"
  if ! alive "$SRV_PID"; then
    broken "the server died: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"
  else
    s=$(stats)
    [[ $(jget deliveries <<<"$s") == 3300 ]] ||
      broken "the server counted $(jget deliveries <<<"$s") deliveries, not 3300"
    # The probe saw every message arrive (3,001) and every write (3,300).
    s=$(probe_take)
    [[ $(probe_hop received <<<"$s" | jget n) == 3001 && $(probe_hop written <<<"$s" | jget n) == 3300 ]] ||
      broken "the latency probe counted wrong: $s"
  fi
  stop_server || broken "server exit: $SRV_EXIT"
  # The plots of the full run, from these figures, must render.
  local p
  for p in p50 p90 p99 max; do
    put "blast_$p" "$(jget "lat_${p}_us" <"$j")"
    put "paced_$p" "$(jget "lat_${p}_us" <"$j")"
  done
  make_plots "$WORK" "$WORK" || broken "gnuplot failed: $(tail -n3 "$WORK/gnuplot.err" | tr '\n' ' ')"
  for p in memory latency; do
    [[ -s $WORK/$p.png ]] || broken "no $p.png"
  done
  smoke_transport sse
  smoke_transport poll
  smoke_transport ws
}
