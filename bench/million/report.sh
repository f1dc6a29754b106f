# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`: what the run writes once measured: the targets met or
# missed, the plots (connect.png, memory.png), result.json and report.md in
# WORK, its section of BENCHMARKS.md with bench/million-*.png
# (MILLION_PUBLISH=1), and the tally of the checks.

report_targets() {
  target "a million open" $((OPEN_MAX >= 1000000)) "$OPEN_MAX open at once"
  target "connect <= 120 s" "$([[ -n $CONNECT_S ]] && (($(calc "$CONNECT_S <= 120" %.0f))) && echo 1 || echo 0)" "${CONNECT_S:-never} s"
  target "server <= 300 B/stream" $((SRV_MARG <= 300)) "$SRV_MARG B ($SRV_ALL with fixed costs)"
  target "paced p99 <= 10 ms" "$([[ $PACED_P99 != null ]] && ((PACED_P99 <= 10000)) && echo 1 || echo 0)" "$PACED_P99 us"
  target "broadcast <= 1.5 x floor" "$([[ $BCAST_S != null ]] && (($(calc "$RATIO <= 1.5" %.0f))) && echo 1 || echo 0)" "$BCAST_S s against $WRITE_FLOOR_S s (the kernel alone at this scale: $SCALE_S s)"
  if ((TOPIC)); then
    target "topic publish <= 1.25 x broadcast" "$([[ $TOPIC_VS_BCAST != null ]] && (($(calc "$TOPIC_VS_BCAST <= 1.25" %.0f))) && echo 1 || echo 0)" "$TOPIC_LAST s against $BCAST_S s"
    target "topic: the master's CPU a publish <= 1 % of a multicast's" "$([[ $TOPIC_CPU_RATIO != null ]] && ((TOPIC_CPU_RATIO >= 100)) && echo 1 || echo 0)" "the multicast's at least $TOPIC_CPU_RATIO x"
  fi
}

# connect.png and memory.png from the connect's samples; x: the streams by
# the kernel's count at that moment (last sample: all open).
report_plots() {
  awk -v s0="$SRV_KB0" -v k0="$KERN0" -v a0="$AVAIL0" -v t0="$TCPB" -v all="$OPEN_MAX" '
    { n = ($8 - t0) / 2; if ($2 >= all) n = $2 }
    n >= 10000 {
      printf "%d %.0f %.0f %.0f %.0f %.0f\n", n, ($3 - s0) * 1024 / n, $3 * 1024 / n,
        ($5 - k0) / (2 * n), $4 * 1024 / n, (a0 - $6) * 1024 / n }' "$SAMPLES" >"$WORK/memory.dat"
  awk 'NR == 1 { printf "%.1f %d 0\n", $1 / 1000, $2 } NR > 1 { dt = ($1 - t) / 1000; if (dt > 0) printf "%.1f %d %.0f\n", $1 / 1000, $2, ($2 - n) / dt }
       { t = $1; n = $2 }' "$SAMPLES" >"$WORK/connect.dat"
  gnuplot >"$WORK/gnuplot.err" 2>&1 <<EOF
set terminal pngcairo size 900,500
set output '$WORK/connect.png'
set title 'bench-million: connect ($NODES C-nodes, $STREAMS streams)'
set xlabel 'seconds since the first connect'
set ylabel 'streams open'
set y2label 'connects per second'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key left top
plot '$WORK/connect.dat' using 1:2 with lines lw 2 title 'open', \
     '' using 1:3 axes x1y2 with lines title 'rate (per s)'
set output '$WORK/memory.png'
set title 'bench-million: bytes per stream as the streams open'
set xlabel 'streams open'
set ylabel 'bytes'
set y2label ''
unset y2tics
set autoscale y
set logscale x
set key top right
plot '$WORK/memory.dat' using 1:2 with lines lw 2 title 'servers RssAnon (growth)', \
     '' using 1:3 with lines title 'servers RssAnon (with fixed)', \
     '' using 1:4 with lines lw 2 title 'kernel per socket', \
     '' using 1:5 with lines title 'client per stream', \
     '' using 1:6 with lines lw 2 title 'machine per connection'
EOF
}

# result.json (from result.kv) and report.md, whose figures are printed.
report_files() {
  {
    printf '{'
    awk 'NR > 1 { printf "," } { v = $2; if (v !~ /^-?[0-9.]+$/ && v != "null") v = "\"" v "\""; printf "\"%s\":%s", $1, v }' "$RESULT"
    printf ',"cores":%s,"took_s":%s}\n' "$CORES" $(($(date +%s) - START))
  } >"$WORK/result.json"

  {
    echo "# bench-million, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "commit $(git rev-parse --short HEAD 2>/dev/null), $CORES cores, $(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) / 1048576)) GiB," \
         "kernel $(uname -r); load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; took $(($(date +%s) - START)) s"
    echo
    echo "\`MILLION_STREAMS=$STREAMS MILLION_PER_NODE=$PER_MAX MILLION_RATE=$RATE MILLION_PACED_S=$PACED_S" \
         "MILLION_MCAST=$MCAST MILLION_CHURN=$CHURN MILLION_CHURN_S=$CHURN_S MILLION_KILL_S=$KILL_S$(opt_in) scripts/bench-million.sh\`"
    echo
    echo "$NODES C-nodes × $PER streams (--history-bytes $HISTORY_BYTES --heartbeat 0 --keepalive 0)," \
         "SSE nodes 1..$N_ID, WebSocket nodes $((N_ID + 1))..$((2 * N_ID)), the rest chunked; one client process each."
    echo
    echo "## Set-up"
    echo
    sed 's/^/- /' "$WORK/setup.txt"
    echo
    echo "## Checks and targets"
    echo
    sed 's/^/- /' "$CHECKS"
    echo
    echo "## Figures (result.json)"
    echo
    echo '| name | value |'
    echo '| --- | ---: |'
    awk '{ printf "| %s | %s |\n", $1, $2 }' "$RESULT"
  } >"$WORK/report.md"
  sed -n '/## Figures/,$p' "$WORK/report.md"
}

# BENCHMARKS.md: a section of its own (kept by make bench).
r() { awk -v k="$1" '$1 == k { print $2 }' "$RESULT"; }
# The opt-in phases of the run, as the command's variables.
opt_in() {
  ((ROLLING)) && printf ' MILLION_ROLLING=1'
  ((TOPIC)) && printf ' MILLION_TOPIC=1 MILLION_TOPIC_CALLS=%s' "$TOPIC_CALLS"
  return 0
}
# The topic phase's rows of the section's table, each after a newline (none
# without it).
topic_rows() {
  ((TOPIC)) || return 0
  printf '\n| 6b. publish to one topic of %s streams (each subscribed from the start: the memory above holds it): last delivery | %s s (median of %s: %s), %s × the broadcast | ≈ the broadcast |' \
    "$(r topic_subscribers)" "$(r topic_last_delivery_s)" "$(r topic_publishes)" "$(r topic_last_delivery_each_s)" "$(r topic_vs_broadcast)"
  printf '\n| &nbsp;&nbsp;the master, a publish / a multicast of the same uids: CPU (all its threads; ± the reading'"'"'s spread) | %s / %s µs (± %s: at least %s ×) | far below |' \
    "$(r topic_publish_master_cpu_us)" "$(r topic_multicast_master_cpu_us)" "$(r topic_master_cpu_noop_spread_us)" \
    "$(r topic_multicast_vs_publish_master_cpu_at_least)"
  printf '\n| &nbsp;&nbsp;schedulers busy; reductions; the call | %s / %s µs (%s ×); %s / %s; %s / %s µs | |' \
    "$(r topic_publish_master_busy_us)" "$(r topic_multicast_master_busy_us)" "$(r topic_multicast_vs_publish_master_busy)" \
    "$(r topic_publish_reductions)" "$(r topic_multicast_reductions)" "$(r topic_publish_call_us)" "$(r topic_multicast_call_us)"
  printf '\n| &nbsp;&nbsp;the multicast: last delivery | %s s | |' "$(r topic_multicast_last_delivery_s)"
}
section() {
  cat <<EOF
<!-- bench-million -->
## 8. A million streams over C-nodes (\`make bench-million\`)

Measured by \`make bench-million\` (\`scripts/bench-million.sh\`, $(( ($(date +%s) - START + 59) / 60 )) minutes) on
$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null): $CORES cores,
$(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) / 1048576)) GiB, Linux $(uname -r),
load average $LOAD0 at the start. This section and \`bench/million-*.png\` are written by the
script (\`make bench\` keeps them); the raw figures are in \`build/bench-million/\`
(\`result.json\`, \`report.md\`). The command, as run:

\`\`\`sh
MILLION_STREAMS=$STREAMS MILLION_PER_NODE=$PER_MAX MILLION_RATE=$RATE MILLION_PACED_S=$PACED_S MILLION_MCAST=$MCAST \\
  MILLION_CHURN=$CHURN MILLION_CHURN_S=$CHURN_S MILLION_KILL_S=$KILL_S$(opt_in) make bench-million
\`\`\`

One Erlang master running the httpdcnode application; $NODES C-nodes (\`--presence
httpdcnode_presence --history-bytes $HISTORY_BYTES --heartbeat 0 --keepalive 0\`) of $PER uids
each, one contiguous block per node; one \`./httpclient\` process per node over its own
127.50.N.* addresses. Nodes 1..$N_ID hold SSE streams, $((N_ID + 1))..$((2 * N_ID)) WebSocket
(ws+meta, with ids), the rest chunked. All on this one machine: both ends of every connection,
the master and the publisher share the $CORES cores. Sends go through the application
(\`httpdcnode:send/2\`, \`multicast_sync/3\`, \`broadcast/1\` on the master), routed by its
presence table. The per-process cap on open files here is $(ulimit -Hn) (hard), which is what
sets ~19,000 streams per process on either side.

| phase | measured | target |
| --- | ---: | ---: |
| streams open at once | $(r streams_open_max) of $STREAMS | 1,000,000 |
| 1. connect: all open after | $(r connect_s) s (1 s samples) | ≤ 120 s |
| 2. presence: the master knows every uid after | $(r presence_s) s from the first connect | |
| 3. server private memory per stream (RssAnon growth) | $(r server_private_bytes_per_stream) B | ≤ 300 B |
| &nbsp;&nbsp;with the fixed costs (RssAnon / streams) | $(r server_private_bytes_per_stream_with_fixed) B | |
| &nbsp;&nbsp;kernel per socket (Slab + TCP pages, two sockets a stream) | $(r kernel_bytes_per_socket) B | |
| &nbsp;&nbsp;load client per stream (RssAnon) | $(r client_bytes_per_stream) B | |
| &nbsp;&nbsp;master per uid (presence) | $(r master_bytes_per_uid) B | |
| &nbsp;&nbsp;machine per connection (MemFree) | $(r machine_bytes_per_connection) B | |
| 4. paced: sent / lost | $(r paced_sent) at $(r paced_rate_per_s) msg/s / $(r paced_lost) | 0 lost |
| &nbsp;&nbsp;latency p50 / p99 / max (all $(r paced_samples) stamped) | $(r paced_p50_us) / $(r paced_p99_us) / $(r paced_max_us) µs | p99 ≤ 10 ms |
| &nbsp;&nbsp;the worst client process's p99 | $(r paced_worst_client_p99_us) µs | |
| &nbsp;&nbsp;run-queue wait per run / threads waiting for a core (mean) | $(r paced_runqueue_wait_us_per_run) µs / $(r paced_runqueue_waiting_threads) | |
| &nbsp;&nbsp;one wake-up beside it (wakefloor) p50 / p99 / max | $(r paced_wakeup_p50_us) / $(r paced_wakeup_p99_us) / $(r paced_wakeup_max_us) µs | |
| &nbsp;&nbsp;at half the rate ($(r paced_half_rate_per_s) msg/s): lost / p50 / p99 | $(r paced_half_lost) / $(r paced_half_p50_us) / $(r paced_half_p99_us) µs | |
| &nbsp;&nbsp;cores the run's processes used (servers, clients, master): full rate / half | $(r paced_run_cores) / $(r paced_half_run_cores) | |
| 5. multicast_sync to $(r multicast_uids): reply / last delivery | $(r multicast_reply_s) / $(r multicast_last_delivery_s) s ($(r multicast_delivered) delivered) | |
| 6. broadcast to all: last delivery | $(r broadcast_last_delivery_s) s ($(r broadcast_delivered) delivered) | ≤ 1.5 × floor |
| &nbsp;&nbsp;write floor (writefloor $(r write_floor_us_per_write) µs × streams ÷ $CORES cores) | $(r write_floor_s) s ($(r broadcast_vs_write_floor) ×) | |
| &nbsp;&nbsp;the kernel alone at this scale (writefloor, $(r write_floor_at_scale_writers) writers and their readers) | $(r write_floor_at_scale_s) s ($(r broadcast_vs_write_floor_at_scale) ×) | |
| &nbsp;&nbsp;CPU per delivery: servers / clients reading / the two busy | $(r broadcast_server_cpu_us_per_delivery) / $(r broadcast_client_cpu_us_per_message) µs / $(r broadcast_machine_busy_cores) of $CORES cores | |$(topic_rows)
| 7. churn: sent to the streams that stayed / lost | $(r churn_sent) / $(r churn_lost) | 0 lost |
| &nbsp;&nbsp;connects a second / disconnects (resets) | $(r churn_connects_per_s) / $(r churn_disconnects) ($(r churn_resets)) | 1,000/s |
| 8. C-node killed: restarted after / its streams back after | $(r node_kill_restart_ms) ms / $(r node_kill_back_s) s | |
| &nbsp;&nbsp;its streams told of a gap / the others' lost | $(r node_kill_gaps) of ${CNT[$KILLED]} / $(r node_kill_lost) of $(r node_kill_sent) sent | all / 0 |
| &nbsp;&nbsp;presence right again after the streams were back | $(r node_kill_presence_after_back_s) s | ≤ 1 s |

Latency p50/p99/max is over every stamped message: the clients' histograms added up
(\`httpclient --hist-out\`); the stamped messages are phase 4's alone, sent once the
run's processes had used under 10 % of a core for 2 s in a row ($(r settle_s) s after
the memory was read). A last delivery is the latest message arrival any client
saw (wall clock, ms) less the time just before the call on the master.

What bounds phase 6 is the kernel, with the readers on the same cores. The
write floor of the target is one writer over 10,000 sockets, its reader on the
other core; at a million every write meets a socket cold in the caches, and the
clients must read each message on the same $CORES cores. \`writefloor\` run that
way (one 40-byte write to each of $(r streams_open_max) sockets from $(r write_floor_at_scale_writers) processes, one
for each C-node, each with its reader; after the run, \`write_floor_at_scale_s\`)
had every byte read after $(r write_floor_at_scale_s) s: the broadcast, through the master, the
C-nodes and their framing, took $(r broadcast_vs_write_floor_at_scale) × what the kernel and the readers take alone.
The servers spent $(r broadcast_server_cpu_us_per_delivery) µs of CPU a delivery and the clients
$(r broadcast_client_cpu_us_per_message) µs to read it, keeping $(r broadcast_machine_busy_cores) of the $CORES cores busy.

What bounds phase 4 is waiting for a core. A paced message crosses four
processes (the publisher, the master, a C-node, a client), each woken in turn:
over the phase the run's threads waited $(r paced_runqueue_wait_us_per_run) µs for a core each time
they ran, $(r paced_runqueue_waiting_threads) of them waiting at once on average, with the
machine $(calc "100 * $(r paced_machine_busy_cores) / $CORES" %.0f) % busy. A thread that does next to nothing each time it is woken
(\`wakefloor\` beside the phase, 1,000 wake-ups a second) waited p50 $(r paced_wakeup_p50_us) µs, p99 $(r paced_wakeup_p99_us) µs,
max $(r paced_wakeup_max_us) µs: the scheduler serves a thread that has used little CPU first, and the
run's own threads, which use more, wait the longer. The tail moves with how busy the
machine is: the same 53 C-nodes and 20,000 msg/s over 106,000 streams
(\`MILLION_STREAMS=106000 MILLION_PER_NODE=2000\`) kept it 40 % busy, with a p99 of 5.2 ms;
at a million each message meets cold sockets, and the CPU a message costs goes up. At
half the rate, at a million, the run's processes used $(r paced_half_run_cores) cores (at the full rate
$(r paced_run_cores)) and the p99 was $(r paced_half_p99_us) µs.

The run is in a network namespace of its own whose TCP hash table has
$(r tcp_hash_buckets) buckets (the machine's has $(r tcp_hash_buckets_machine)): each packet finds its
socket there. With the $((2 * STREAMS)) sockets of this run in the machine's table the
chains would be about $(calc "2 * $STREAMS / $(r tcp_hash_buckets_machine)" %.1f) long: at a million, a broadcast cost the servers 10.4 µs of
CPU a delivery in it (\`MILLION_NETNS=0 make bench-million\`), against $(r broadcast_server_cpu_us_per_delivery) µs here.

Checks and targets, as the script printed them:

$(sed 's/^/- /' "$CHECKS")

![connect](bench/million-connect.png)

![memory](bench/million-memory.png)
<!-- /bench-million -->
EOF
}

# report_publish: the section and the plots, when MILLION_PUBLISH=1 (the default).
report_publish() {
  if [[ ${MILLION_PUBLISH:-1} == 1 ]]; then
    section >"$WORK/section.md"
    cp "$WORK/connect.png" bench/million-connect.png 2>/dev/null
    cp "$WORK/memory.png" bench/million-memory.png 2>/dev/null
    benchmarks_section bench-million "$WORK/section.md" "$WORK"
    log "wrote its section of BENCHMARKS.md and bench/million-*.png"
  fi
}

# report_tally: the checks passed and failed; fails when one failed.
report_tally() {
  echo "bench-million: report in $WORK/report.md, took $(($(date +%s) - START)) s"
  p=$(grep -c '^PASS' "$CHECKS")
  f=$(grep -c '^FAIL' "$CHECKS")
  echo "bench-million: $p passed, $f failed"
  ((f == 0))
}
