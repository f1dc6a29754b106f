# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The "client -> Erlang" section of scripts/bench.sh (sourced, not run):
# WebSocket clients send messages up (httpclient --send-rate, each stream
# in turn, far below --client-rate per stream), the C-node hands them to
# the --inbox process on a master (bench/erlang/inbox_bench.erl,
# counting per (Uid, Conn), checking each connection's sequence), which
# answers the requests (--request-rate, a low rate alongside) with
# {conn, Conn, <<"t=NS;">>}: their round trip. The server's CPU per message
# is its utime + stime (/proc/PID/stat) from the streams being up to the
# inbox having every message, over the messages. Then POST /send/1: skipped
# with a line saying so while the server answers it 404 or 405.
# Expects lib.sh and phases.sh (put, get, broken) to be sourced.

INBOX_NAME=bench_inbox
INBOX_OK=0           # phase_inbox ran and nothing broke
SRC_INBOX=127.0.15.1-127.0.15.20
INBOX_HEAD="## 10. Client -> Erlang"

# inbox_cli ARGS...: one inbox_bench command on a one-shot node; its JSON
# line in INB, non-zero when it failed.
inbox_cli() {
  PUB_SEQ=$((PUB_SEQ + 1))
  timeout -k 5 "$(left 60)" erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
    -sname "benchinbcli_$$_$PUB_SEQ@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
    -eval 'inbox_bench:cli()' -extra "$@" --master "$INBOX_MASTER" --name "$INBOX_NAME" \
    >"$WORK/inbcli-$PUB_SEQ.out" 2>"$WORK/inbcli-$PUB_SEQ.err" </dev/null &
  local pid=$! rc
  BENCH_PIDS+=("$pid")
  wait "$pid"
  rc=$?
  forget "$pid"
  INB=$(grep '^{' "$WORK/inbcli-$PUB_SEQ.out" | tail -n1)
  [[ $rc -eq 0 && -n $INB ]]
}

inbox_cli_error() { tail -n1 "$WORK/inbcli-$PUB_SEQ.err" 2>/dev/null; }

# start_inbox_master: an Erlang node whose inbox_bench inbox is registered
# as INBOX_NAME; sets INBOX_MASTER, INBOX_MASTER_PID.
start_inbox_master() {
  INBOX_MASTER="benchinbmaster_$$@localhost"
  local log="$WORK/inbox-master.log" end
  (exec erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell -sname "$INBOX_MASTER" \
     -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" -eval 'inbox_bench:master_cli()' \
     -extra "$INBOX_NAME") >"$log" 2>&1 </dev/null &
  INBOX_MASTER_PID=$!
  BENCH_PIDS+=("$INBOX_MASTER_PID")
  end=$(($(date +%s) + $(left 20)))
  while (($(date +%s) < end)); do
    grep -q 'inbox master up' "$log" && return 0
    alive "$INBOX_MASTER_PID" || break
    sleep 0.05
  done
  log "the inbox master did not come up: $(tail -n3 "$log" | tr '\n' ' ')"
  return 1
}

# phase_inbox TAG CLIENTS SECONDS RATE REQUEST_RATE POST_CONNS POST_RATE
# POST_SECONDS: the figures as TAG_*.
phase_inbox() {
  local broken_before
  broken_before=$(wc -l <"$WORK/broken")
  phase_inbox_run "$@"
  INBOX_OK=1
  (($(wc -l <"$WORK/broken") == broken_before)) || INBOX_OK=0
}

phase_inbox_run() {
  local tag=$1 n=$2 secs=$3 rate=$4 rrate=$5 out t0 t1 j s
  out="$WORK/$tag"
  put "${tag}_load" "$(cut -d' ' -f1-3 /proc/loadavg)"
  log "client -> Erlang: $n WebSocket clients, $rate msg/s + $rrate requests/s for $secs s"
  start_inbox_master || { broken "$tag: the inbox master did not start"; return; }
  if ! start_server "$tag" --master "$INBOX_MASTER" --inbox "$INBOX_NAME"; then
    broken "$tag: the server did not start: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"
    end_pid "$INBOX_MASTER_PID" 5
    return
  fi
  if ! inbox_cli linked --cnode "$SRV_NODE" --ms 15000; then
    broken "$tag: the master never linked to the C-node: $(inbox_cli_error)"
    stop_server; end_pid "$INBOX_MASTER_PID" 5
    return
  fi
  start_client "$out" -n "$n" -P 2 --proto ws --src "$SRC_INBOX" --pending 500 \
    --send-rate "$rate" --request-rate "$rrate" --hold "$secs" --max-time "$(left $((secs + 90)))"
  local cpid=$CLI_PID
  if ! wait_streams "$n" 60 "$cpid"; then
    broken "$tag: $n streams not reached: $(tail -n2 "$out.err" | tr '\n' ' ')"
    end_pid "$cpid" 5; stop_server; end_pid "$INBOX_MASTER_PID" 5
    return
  fi
  t0=$(cpu_ticks "$SRV_PID")
  finish_client "$cpid" $((secs + 30)) || broken "$tag: the client did not end by itself"
  j="$out.json"
  local sent requests
  sent=$(jget up_sent <"$j")
  requests=$(jget up_requests <"$j")
  inbox_cli settle --expect "${sent:-0}" --ms 30000 || broken "$tag: the inbox did not answer: $(inbox_cli_error)"
  t1=$(cpu_ticks "$SRV_PID")
  local msgs first last
  msgs=$(jget msgs <<<"$INB")
  first=$(jget first_ms <<<"$INB")
  last=$(jget last_ms <<<"$INB")
  put "${tag}_clients" "$n"
  put "${tag}_seconds" "$secs"
  put "${tag}_rate" "$rate"
  put "${tag}_request_rate" "$rrate"
  put "${tag}_welcomed" "$(jget welcomed <"$j")"
  put "${tag}_sent" "$sent"
  put "${tag}_requests" "$requests"
  put "${tag}_blocked" "$(jget up_blocked <"$j")"
  put "${tag}_sent_per_s" "$(jget up_per_s <"$j")"
  put "${tag}_replies" "$(jget replies <"$j")"
  put "${tag}_rtt_p50" "$(jget rtt_p50_us <"$j")"
  put "${tag}_rtt_p99" "$(jget rtt_p99_us <"$j")"
  put "${tag}_rtt_max" "$(jget rtt_max_us <"$j")"
  put "${tag}_received" "$msgs"
  put "${tag}_lost" "$(( ${sent:-0} - ${msgs:-0} ))"
  put "${tag}_seq_lost" "$(jget lost <<<"$INB")"
  put "${tag}_out_of_order" "$(jget out_of_order <<<"$INB")"
  put "${tag}_bad" "$(jget bad <<<"$INB")"
  put "${tag}_conns" "$(jget conns <<<"$INB")"
  if [[ -n $first && -n $last ]] && ((last > first)); then
    put "${tag}_received_per_s" "$(calc "$msgs * 1000 / ($last - $first)" %.0f)"
  fi
  if [[ -n $msgs ]] && ((msgs > 0)); then
    put "${tag}_cpu_us" "$(calc "($t1 - $t0) * 1e6 / $(getconf CLK_TCK) / $msgs" %.2f)"
  fi
  s=$(stats)
  local k
  for k in client_in client_in_dropped in_no_master client_rate_closed client_paused ws_policy_closed conn_sent conn_dropped; do
    put "${tag}_srv_$k" "$(jget "$k" <<<"$s")"
  done
  inbox_post "$tag" "$6" "$7" "$8"
  stop_server || broken "$tag: server exit: $SRV_EXIT"
  end_pid "$INBOX_MASTER_PID" 5
  inbox_check "$tag"
}

# POST /send/N, when the server has it: asked first with a type it refuses
# (415, nothing delivered), 404 or 405 meaning there is no POST /send/N yet
# (then skipped with a line saying so). Else inbox_bench's poster: K
# keep-alive connections from their own addresses (the rate bucket of a
# POST without ?conn= is its peer address's), R / K a second each, for S
# seconds; what the inbox got of it, against the 202s.
# inbox_post TAG K R S
inbox_post() {
  local tag=$1 k=$2 r=$3 secs=$4 code before after
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST \
           -H 'Content-Type: application/x-www-form-urlencoded' --data 'x' \
           "http://127.0.0.1:$SRV_PORT/send/1")
  put "${tag}_post_code" "$code"
  case "$code" in
    404 | 405)
      put "${tag}_post" "skipped: the server answers POST /send/1 with $code (no POST /send/N yet)"
      log "POST: $(get "${tag}_post")"
      return ;;
  esac
  log "POST /send/N: $k connections, $r requests/s for $secs s"
  inbox_cli counts || { broken "$tag: the inbox did not answer: $(inbox_cli_error)"; return; }
  before=$INB
  t0=$(cpu_ticks "$SRV_PID")
  if ! inbox_cli post --port "$SRV_PORT" --conns "$k" --rate "$r" --seconds "$secs" --uid-base 20000; then
    broken "$tag: the POST client failed: $(inbox_cli_error)"
    return
  fi
  local post=$INB acc
  acc=$(jget post_accepted <<<"$post")
  inbox_cli settle --expect $(($(jget msgs <<<"$before") + ${acc:-0})) --ms 30000 ||
    { broken "$tag: the inbox did not answer: $(inbox_cli_error)"; return; }
  after=$INB
  t1=$(cpu_ticks "$SRV_PID")
  local got=$(($(jget msgs <<<"$after") - $(jget msgs <<<"$before")))
  put "${tag}_post_conns" "$k"
  put "${tag}_post_rate" "$r"
  put "${tag}_post_seconds" "$secs"
  put "${tag}_post_sent" "$(jget post_sent <<<"$post")"
  put "${tag}_post_accepted" "$acc"
  put "${tag}_post_refused" "$(jget post_refused <<<"$post")"
  put "${tag}_post_codes" "$(jget post_codes <<<"$post")"
  put "${tag}_post_errors" "$(jget post_errors <<<"$post")"
  put "${tag}_post_per_s" "$(jget post_per_s <<<"$post")"
  put "${tag}_post_received" "$got"
  put "${tag}_post_lost" "$((${acc:-0} - got))"
  put "${tag}_post_seq_lost" "$(($(jget lost <<<"$after") - $(jget lost <<<"$before")))"
  put "${tag}_post_out_of_order" "$(($(jget out_of_order <<<"$after") - $(jget out_of_order <<<"$before")))"
  ((got > 0)) && put "${tag}_post_cpu_us" "$(calc "($t1 - $t0) * 1e6 / $(getconf CLK_TCK) / $got" %.2f)"
  put "${tag}_post" "$(get "${tag}_post_accepted") of $(get "${tag}_post_sent") requests accepted (202; refused: $(get "${tag}_post_refused"), their codes: $(get "${tag}_post_codes"); errors $(get "${tag}_post_errors")) from $k keep-alive connections at $r/s for $secs s: $(get "${tag}_post_per_s") msg/s, $got delivered, lost $(get "${tag}_post_lost"), gaps $(get "${tag}_post_seq_lost"), out of order $(get "${tag}_post_out_of_order"), server CPU $(get "${tag}_post_cpu_us") µs per message"
  log "POST: $(get "${tag}_post")"
  local v
  for v in post_lost post_seq_lost post_out_of_order post_errors; do
    [[ $(get "${tag}_$v") == 0 ]] || broken "$tag: $v is $(get "${tag}_$v"), not 0"
  done
  [[ ${acc:-0} -gt 0 ]] || broken "$tag: no POST accepted: $post"
}

# What must hold: every client up, every message in the inbox once, in
# order, every request answered; the server alive, nothing dropped.
inbox_check() {
  local tag=$1 v
  [[ $(get "${tag}_welcomed") == "$(get "${tag}_clients")" ]] ||
    broken "$tag: welcomed $(get "${tag}_welcomed") of $(get "${tag}_clients") clients"
  [[ $(get "${tag}_sent") =~ ^[0-9]+$ && $(get "${tag}_sent") -gt 0 ]] ||
    broken "$tag: the client sent nothing up"
  for v in lost seq_lost out_of_order bad srv_client_in_dropped srv_in_no_master srv_client_rate_closed; do
    [[ $(get "${tag}_$v") == 0 ]] || broken "$tag: $v is $(get "${tag}_$v"), not 0"
  done
  [[ $(get "${tag}_replies") == "$(get "${tag}_requests")" ]] ||
    broken "$tag: $(get "${tag}_replies") of $(get "${tag}_requests") requests answered"
}

# inbox_section TAG: the section of BENCHMARKS.md, on stdout (n0 and ms
# from report.sh).
inbox_section() {
  local t=$1 rate n load
  rate=$(get "${t}_rate") n=$(get "${t}_clients") load=$(get "${t}_load")
  cat <<EOF
$INBOX_HEAD

Measured by \`scripts/bench.sh --inbox\` (this section alone; \`make bench\` runs it too) on
$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null), on the machine of the sections above.
EOF
  if awk -v l="${load%% *}" -v c="$(nproc)" 'BEGIN { exit !(l >= c / 2) }'; then
    echo
    echo "> The machine was busy when this started (load average $load on $(nproc) cores): other work shared its cores, so the latencies are noisier and higher than on an idle machine."
  fi
  cat <<EOF

$(n0 "$n") WebSocket clients (\`httpclient --proto ws -P 2 --send-rate $rate --request-rate
$(get "${t}_request_rate") --hold $(get "${t}_seconds")\`) send text messages up for $(get "${t}_seconds") s: masked frames
\`q=SEQ;t=NS;\`, SEQ counting each connection's from 0, each stream in turn, $(calc "${rate:-0} / ${n:-1}" %.1f) a
second each against the default \`--client-rate\` of 50. The server (\`--inbox $INBOX_NAME\`) hands
them to the inbox of one Erlang master (\`bench/erlang/inbox_bench.erl\` run by
\`httpdcnode_inbox\`, which acknowledges), which counts them per (Uid, Conn) and checks each
connection's sequence. Alongside, $(get "${t}_request_rate") requests a second (\`r=SEQ;t=NS;\`, in the same sequence)
that it answers with \`httpdcnode:reply/2\` (\`{conn, Conn, <<"t=NS;">>}\`); the client times each
from its send to the answer's arrival.

| | |
|---|---:|
| sent up (requests included) | $(n0 "$(get "${t}_sent")"), $(n0 "$(get "${t}_sent_per_s")") msg/s ($(get "${t}_blocked") refused by a full socket, not sent) |
| delivered to the inbox | $(n0 "$(get "${t}_received")"), $(n0 "$(get "${t}_received_per_s")") msg/s (first to last), from $(n0 "$(get "${t}_conns")") connections |
| lost (sent − delivered) | $(get "${t}_lost") |
| gaps in a connection's sequence, out of order, malformed | $(get "${t}_seq_lost"), $(get "${t}_out_of_order"), $(get "${t}_bad") |
| server \`client_in\`, \`client_in_dropped\`, \`in_no_master\`, \`client_rate_closed\`, \`client_paused\` | $(n0 "$(get "${t}_srv_client_in")"), $(get "${t}_srv_client_in_dropped"), $(get "${t}_srv_in_no_master"), $(get "${t}_srv_client_rate_closed"), $(get "${t}_srv_client_paused") |
| server CPU per message (utime + stime from the streams up to the last delivery, ÷ messages) | $(get "${t}_cpu_us") µs |
| requests answered with \`{conn, ...}\` | $(n0 "$(get "${t}_replies")") of $(n0 "$(get "${t}_requests")") |
| round trip p50 / p99 / max | $(ms "$(get "${t}_rtt_p50")") / $(ms "$(get "${t}_rtt_p99")") / $(ms "$(get "${t}_rtt_max")") |
| \`POST /send/N\` | $(get "${t}_post") |

The server, the master, the client and the one-shot Erlang nodes share the machine's cores;
the server's CPU per message includes its heartbeats to the idle streams during the phase.
EOF
}

# put_inbox_section FILE: FILE's text in place of the section in
# BENCHMARKS.md, else at its end (after the bench-million block, which
# write_report keeps, so the full run puts it back after write_report).
put_inbox_section() {
  local report="$ROOT/BENCHMARKS.md" tmp="$ROOT/BENCHMARKS.md.inbox.$$"
  [[ -e $report ]] || : >"$report"
  # Blank lines are held back until a line follows, so that the file's
  # end gets one blank line before the section, however often it is put.
  awk -v h="$INBOX_HEAD" -v f="$1" '
    function put() { while ((getline l < f) > 0) print l; close(f); done = 1 }
    function flush() { while (blanks > 0) { print ""; blanks-- } }
    $0 == h { flush(); put(); skip = 1; next }
    skip && /^## / { skip = 0; print "" }
    skip { next }
    $0 == "" { blanks++; next }
    { flush(); print }
    END { if (!done) { print ""; put() } }' "$report" >"$tmp" && mv "$tmp" "$report"
}

# print_inbox_section: the section now in BENCHMARKS.md.
print_inbox_section() {
  [[ -e $ROOT/BENCHMARKS.md ]] || return 0
  awk -v h="$INBOX_HEAD" '$0 == h { on = 1; print; next } on && /^## / { exit } on { print }' \
    "$ROOT/BENCHMARKS.md"
}
