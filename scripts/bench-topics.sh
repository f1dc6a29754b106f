#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench-topics`: topics measured on loopback (BENCHMARKS.md, section
# 14). Needs `make all` done. Four phases, each writing WORK/NAME.json
# (default build/bench-topics), every load bounded in count and time:
#
#   memory      build/benchprocess (the server's code in one process, no
#               sockets: section 9): 100,000 topics x 10 streams (1,000,000
#               subscriptions), and one topic x 19,000 streams; RssAnon and
#               the index's own bytes per subscription.
#   fanout      one server, TOPICS_FAN_STREAMS SSE streams (./httpclient
#               --topics), each on TOPICS_FAN_PER topics of TOPICS_FAN_TOPICS
#               (so each topic has streams x per / topics subscribers);
#               msggen publishes TOPICS_FAN_RATE msg/s spread over the topics
#               (straight to the C-node, {topic, T, Data}) for
#               TOPICS_FAN_SECONDS; delivered/s, lost (ids checked per topic),
#               doubled, latency p50/p99.
#   resume      one server, TOPICS_RESUME_STREAMS SSE streams on 3 topics each
#               of as many topics; TOPICS_RESUME_RATE msg/s over them for
#               TOPICS_RESUME_SECONDS while every connection drops once
#               (--reconnect-after, a third of the way) and waits; 3 s after
#               the last went they all come back at once (SIGUSR1), each naming
#               every topic's last id: lost, doubled, gaps per topic (want 0),
#               reconnections, replays.
#   master_cpu  a master running the application, a server with --presence,
#               TOPICS_CPU_STREAMS SSE streams all on one topic (their uids
#               1..N); on the master bench/erlang/topic_cpu.erl times
#               TOPICS_CPU_CALLS httpdcnode:publish/2 to the topic against as
#               many httpdcnode:multicast/2 to the same uids: the node's CPU
#               per call.
#
#   TOPICS_PHASES  the phases to run (default "memory fanout resume master_cpu")
#   TOPICS_DIR     where the JSON and logs go (default build/bench-topics)
# Prints "topics: P passed, F failed"; exits non-zero when a check failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
RUN=topics
source scripts/lib-run.sh
run_options "$@"

PHASES=${TOPICS_PHASES:-memory fanout resume master_cpu}
FAN_STREAMS=${TOPICS_FAN_STREAMS:-10000}
FAN_TOPICS=${TOPICS_FAN_TOPICS:-10000}
FAN_PER=${TOPICS_FAN_PER:-100}
FAN_RATE=${TOPICS_FAN_RATE:-20000}
FAN_SECONDS=${TOPICS_FAN_SECONDS:-10}
RESUME_STREAMS=${TOPICS_RESUME_STREAMS:-10000}
RESUME_RATE=${TOPICS_RESUME_RATE:-10000}
RESUME_SECONDS=${TOPICS_RESUME_SECONDS:-20}
CPU_STREAMS=${TOPICS_CPU_STREAMS:-10000}
CPU_CALLS=${TOPICS_CPU_CALLS:-200}
WORK=${TOPICS_DIR:-$ROOT/build/bench-topics}
for v in FAN_STREAMS FAN_TOPICS FAN_PER FAN_RATE FAN_SECONDS RESUME_STREAMS RESUME_RATE \
         RESUME_SECONDS CPU_STREAMS CPU_CALLS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "topics: TOPICS_$v must be a positive number" >&2; exit 2; }
done
((FAN_STREAMS <= 19000 && RESUME_STREAMS <= 19000 && CPU_STREAMS <= 19000 && FAN_PER <= 255 &&
  FAN_PER <= FAN_TOPICS)) || {
  echo "topics: at most 19000 streams a phase (each process may open 20000 files), 255 topics a stream" >&2
  exit 2; }

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
log() { printf '%s topics: %s\n' "$(date +%T)" "$*" >&2; }

run_begin
DEADLINE=$((START + 1800))
run_needs "$BIN/httpdcnode" "$BIN/httpclient" "$ROOT/build/benchprocess" \
  tools/erlang/ebin/msggen.beam tools/erlang/ebin/topic_cpu.beam tools/erlang/ebin/httpdcnode.app
run_ready
SRC=127.0.41.1-127.0.41.8

# client NAME ARGS...: ./httpclient against the server, its progress lines in
# NAME.err, its summary in NAME.json; sets CLI_PID.
client() {
  local name=$1
  shift
  (exec "$BIN/httpclient" -p "$SRV_PORT" --src "$SRC" --json -P 1 --pending 500 "$@") \
    >"$WORK/$name.json" 2>"$WORK/$name.err" &
  CLI_PID=$!
  BENCH_PIDS+=("$CLI_PID")
}
cj() { jget "$2" <"$WORK/$1.json"; }
subs_are() { [[ $(stat_of topic_subscriptions) == "$1" ]]; }
# rss_kb PID: its resident set (VmRSS, kB).
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# --- memory --------------------------------------------------------------------------

phase_memory() {
  local bp=$ROOT/build/benchprocess
  log "memory: benchprocess, 100,000 topics x 10 streams, and 1 topic x 19,000 streams"
  BENCH_PROCESS_TOPICS=100000:10 timeout -k 5 600 "$bp" 100000 3 >"$WORK/memory-100k-topics.json" \
    2>"$WORK/memory-100k-topics.err"
  BENCH_PROCESS_TOPICS=1:1 timeout -k 5 600 "$bp" 19000 3 >"$WORK/memory-1-topic.json" \
    2>"$WORK/memory-1-topic.err"
  local f a b
  for f in 100k-topics 1-topic; do
    a=$(tr -d '\n ' <"$WORK/memory-$f.json" | jget bytes_per_subscription)
    b=$(tr -d '\n ' <"$WORK/memory-$f.json" | jget index_bytes_per_subscription)
    check "memory $f" $([[ $(tr -d '\n ' <"$WORK/memory-$f.json" | jget failed) == 0 ]] && echo 1 || echo 0) \
      "RssAnon $a B a subscription, the index $b B"
  done
}

# --- fanout --------------------------------------------------------------------------

phase_fanout() {
  local subs=$((FAN_STREAMS * FAN_PER)) count=$((FAN_RATE * FAN_SECONDS)) want t0 t1 rss0
  want=$((count * subs / FAN_TOPICS))
  log "fanout: $FAN_STREAMS streams x $FAN_PER topics of $FAN_TOPICS, $FAN_RATE msg/s for $FAN_SECONDS s ($want deliveries)"
  start_server fan --max-topics-per-stream "$FAN_PER" --max-topics "$FAN_TOPICS" || return 1
  rss0=$(rss_kb "$SRV_PID")
  client fanout-client --proto sse -n "$FAN_STREAMS" --topics "$FAN_TOPICS" --topics-per-conn "$FAN_PER" \
    --until-msgs "$want" --hold 600 --max-time "$(left 900)"
  local cli=$CLI_PID
  wait_for 300 "$subs subscriptions" subs_are "$subs" || { stop_server; return 1; }
  local rss1
  rss1=$(rss_kb "$SRV_PID")
  t0=$(now_ms)
  publish $((FAN_SECONDS * 4 + 60)) --topics "0-$((FAN_TOPICS - 1))" --rate "$FAN_RATE" \
    --count "$count" --procs 2 --sync || log "the publisher failed: $(pub_error)"
  local pub=$PUB
  finish_client "$cli" $((FAN_SECONDS * 6 + 60))
  t1=$(now_ms)
  local st
  st=$(stats)
  stop_server
  local msgs lost
  msgs=$(cj fanout-client msgs)
  lost=$((want - ${msgs:-0}))
  {
    printf '{"streams":%s,"topics":%s,"topics_per_stream":%s,"subscriptions":%s,' \
      "$FAN_STREAMS" "$FAN_TOPICS" "$FAN_PER" "$subs"
    printf '"rate":%s,"seconds":%s,"published":%s,"deliveries_expected":%s,"delivered":%s,' \
      "$FAN_RATE" "$FAN_SECONDS" "$count" "$want" "${msgs:-0}"
    printf '"delivered_per_s":%s,"wall_ms":%s,"lost":%s,"id_errors":%s,"dup":%s,"gaps":%s,' \
      "$(calc "${msgs:-0} * 1000 / ($t1 - $t0)" %.0f)" "$((t1 - t0))" "$lost" "$(cj fanout-client id_errors)" \
      "$(cj fanout-client dup)" "$(cj fanout-client gaps)"
    printf '"lat_p50_us":%s,"lat_p99_us":%s,"lat_max_us":%s,"server_rss_kb":{"empty":%s,"subscribed":%s},' \
      "$(cj fanout-client lat_p50_us)" "$(cj fanout-client lat_p99_us)" "$(cj fanout-client lat_max_us)" "${rss0:-0}" "${rss1:-0}"
    printf '"publisher":%s,"slow_closed":%s}\n' "${pub:-null}" "$(jget slow_closed <<<"$st")"
  } >"$WORK/fanout.json"
  check "fanout delivered" $((lost == 0)) "${msgs:-0} of $want delivered in $((t1 - t0)) ms"
  check "fanout ids" $(($(cj fanout-client id_errors) + $(cj fanout-client dup) == 0)) \
    "lost by id $(cj fanout-client id_errors), doubled $(cj fanout-client dup), gaps $(cj fanout-client gaps)"
}

# --- resume --------------------------------------------------------------------------

phase_resume() {
  local count=$((RESUME_RATE * RESUME_SECONDS)) want per after
  want=$((count * 3))                      # each topic has 3 subscribers
  per=$((want / RESUME_STREAMS))
  after=$((per / 3))                       # each drops once, a third of the way
  log "resume: $RESUME_STREAMS streams x 3 topics, $RESUME_RATE msg/s for $RESUME_SECONDS s; each connection dropped after $after messages, all back together 3 s after the last went"
  start_server resume --max-topics "$RESUME_STREAMS" || return 1
  client resume-client --proto sse -n "$RESUME_STREAMS" --topics "$RESUME_STREAMS" --topics-per-conn 3 \
    --reconnect-after "$after" --reconnect-on-signal --until-msgs "$want" --hold 600 \
    --max-time "$(left 900)"
  local cli=$CLI_PID
  wait_for 300 "$((RESUME_STREAMS * 3)) subscriptions" subs_are "$((RESUME_STREAMS * 3))" ||
    { stop_server; return 1; }
  # publishing goes on while the connections are away
  (publish $((RESUME_SECONDS * 4 + 60)) --topics "0-$((RESUME_STREAMS - 1))" --rate "$RESUME_RATE" \
     --count "$count" --sync || log "the publisher failed: $(pub_error)") &
  local pubsh=$!
  RUN_CLIENTS=(resume-client)
  none_up() { [[ $(progress resume-client up) == 0 ]]; }
  wait_for $((RESUME_SECONDS * 2 + 30)) "every connection dropped" none_up
  local streams_away
  streams_away=$(stat_of streams_open)
  sleep 3
  kill -USR1 "$cli"
  local t_back
  t_back=$(now_ms)
  wait "$pubsh"
  local pub
  pub=$(grep -h '^{' "$WORK"/pub-*.out 2>/dev/null | tail -n1)
  finish_client "$cli" $((RESUME_SECONDS * 6 + 60))
  local st
  st=$(stats)
  stop_server
  local msgs
  msgs=$(cj resume-client msgs)
  {
    printf '{"streams":%s,"topics_per_stream":3,"rate":%s,"seconds":%s,"published":%s,' \
      "$RESUME_STREAMS" "$RESUME_RATE" "$RESUME_SECONDS" "$count"
    printf '"deliveries_expected":%s,"delivered":%s,"reconnect_after":%s,"reconnects":%s,' \
      "$want" "${msgs:-0}" "$after" "$(cj resume-client reconnects)"
    printf '"streams_open_while_away":%s,"resume_s":%s,' "${streams_away:-null}" \
      "$(cj resume-client resume_s)"
    printf '"lost":%s,"id_errors":%s,"dup":%s,"gaps":%s,"replays":%s,"replay_gaps":%s,' \
      "$((want - ${msgs:-0}))" "$(cj resume-client id_errors)" "$(cj resume-client dup)" \
      "$(cj resume-client gaps)" "$(jget replays <<<"$st")" "$(jget replay_gaps <<<"$st")"
    printf '"lat_p50_us":%s,"lat_p99_us":%s,"publisher":%s}\n' "$(cj resume-client lat_p50_us)" \
      "$(cj resume-client lat_p99_us)" "${pub:-null}"
  } >"$WORK/resume.json"
  check "resume reconnected" $(($(cj resume-client reconnects) >= RESUME_STREAMS)) \
    "$(cj resume-client reconnects) reconnections of $RESUME_STREAMS streams; $streams_away streams open while they were away; $(jget replays <<<"$st") replays"
  check "resume none lost" $((want == ${msgs:-0} && $(cj resume-client id_errors) == 0)) \
    "${msgs:-0} of $want delivered; lost by id $(cj resume-client id_errors)"
  check "resume none doubled" $(($(cj resume-client dup) == 0 && $(cj resume-client gaps) == 0)) \
    "doubled $(cj resume-client dup), gaps $(cj resume-client gaps)"
}

# --- master_cpu ----------------------------------------------------------------------

phase_master_cpu() {
  local m="topicsm_$$" mnode="topicsm_$$@localhost"
  log "master_cpu: $CPU_STREAMS streams on one topic; $CPU_CALLS publish against $CPU_CALLS multicast of their uids"
  (exec timeout -k 5 "$(left 900)" erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
     -sname "$m@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
     -eval 'application:load(httpdcnode), {ok, _} = application:ensure_all_started(httpdcnode)') \
    >"$WORK/master.out" 2>&1 </dev/null &
  local mpid=$!
  BENCH_PIDS+=("$mpid")
  local rpc="true = net_kernel:connect_node('$mnode')"
  up_m() { run_erl "$rpc, R = erpc:call('$mnode', erlang, whereis, [httpdcnode_presence]), halt(case is_pid(R) of true -> 0; false -> 1 end)." >/dev/null 2>&1; }
  wait_for 60 "the master" up_m || return 1
  start_server cpu --master "$mnode" --presence httpdcnode_presence || return 1
  client cpu-client --proto sse -n "$CPU_STREAMS" --topics 1 --hold 900 --max-time "$(left 900)"
  local cli=$CLI_PID
  counted() { run_erl "$rpc, N = erpc:call('$mnode', httpdcnode, topic_count, [<<\"t:0\">>]), U = length(erpc:call('$mnode', httpdcnode, online_uids, ['$SRV_NODE'])), halt(case {N, U} of {$CPU_STREAMS, $CPU_STREAMS} -> 0; _ -> 1 end)." >/dev/null 2>&1; }
  wait_for 300 "the master to count $CPU_STREAMS subscribers and uids" counted || { stop_server; return 1; }
  run_erl "$rpc, R = erpc:call('$mnode', topic_cpu, measure, [<<\"t:0\">>, lists:seq(1, $CPU_STREAMS), $CPU_CALLS, 50], 600000),
    #{publish := #{cpu_us := P, busy_us := PB}, multicast := #{cpu_us := M, busy_us := MB},
      idle := #{cpu_us := I, busy_us := IB}} = R,
    io:format(\"{\\\"idle_cpu_us\\\":~.1f,\\\"idle_busy_us\\\":~.1f,\\\"uids\\\":~b,\\\"calls\\\":~b,\\\"publish_cpu_us\\\":~.1f,\\\"publish_busy_us\\\":~.1f,\\\"multicast_cpu_us\\\":~.1f,\\\"multicast_busy_us\\\":~.1f,\\\"ratio_cpu\\\":~.1f,\\\"ratio_busy\\\":~.1f}~n\",
              [I, IB, $CPU_STREAMS, $CPU_CALLS, P, PB, M, MB, M / max(P, 0.001), MB / max(PB, 0.001)]), halt(0)." \
    >"$WORK/master_cpu.out" 2>&1 || log "the measure failed: $(tail -n3 "$WORK/master_cpu.out")"
  grep '^{' "$WORK/master_cpu.out" | tail -n1 >"$WORK/master_cpu.json"
  local msgs
  sleep 2
  end_pid "$cli" 10
  msgs=$(cj cpu-client msgs)
  stop_server
  end_pid "$mpid" 10
  local r
  r=$(jget ratio_cpu <"$WORK/master_cpu.json")
  check "master cpu" $([[ -n $r ]] && echo 1 || echo 0) \
    "$(cat "$WORK/master_cpu.json"); the clients got ${msgs:-0} messages (want $((2 * CPU_CALLS * CPU_STREAMS)))"
}

for p in $PHASES; do
  case $p in
    memory | fanout | resume | master_cpu) "phase_$p" || check "$p" 0 "the phase did not complete" ;;
    *) echo "topics: unknown phase $p" >&2; exit 2 ;;
  esac
done
echo "topics: JSON in $WORK: $(cd "$WORK" && ls ./*.json | tr '\n' ' ')"
p=$(grep -c '^PASS' "$CHECKS")
f=$(grep -c '^FAIL' "$CHECKS")
echo "topics: $p passed, $f failed, took $(($(date +%s) - START)) s"
((f == 0))
