# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# BENCHMARKS.md from the results of scripts/bench.sh (sourced): machine_facts
# records the machine, write_report FILE writes the report. Every verdict is
# computed here from the figures.

machine_facts() {
  put date "$(date -u '+%Y-%m-%d %H:%M UTC')"
  put commit "$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- src include 2>/dev/null || echo ' + uncommitted changes in src/include')"
  put version "$("$BIN/httpdcnode" --version 2>/dev/null | head -n1)"
  put cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  put cores "$(nproc)"
  put memory "$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  put kernel "$(uname -sr)"
  put os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") ($(cat /etc/debian_version 2>/dev/null))"
  put libevent "$(pkg-config --modversion libevent 2>/dev/null) (package $(dpkg-query -W -f='${Version}' libevent-2.1-7 2>/dev/null))"
  put otp "$(erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().' 2>/dev/null) ($(cat "$(erl -noshell -eval 'io:format("~s", [code:root_dir()]), halt().' 2>/dev/null)"/releases/*/OTP_VERSION 2>/dev/null | head -n1), erts $(erl -noshell -eval 'io:format("~s", [erlang:system_info(version)]), halt().' 2>/dev/null))"
  put compiler "$(${CC:-cc} --version 2>/dev/null | head -n1)"
  put nofile "$(ulimit -n)"
  # httpdcnode's default --writers: the CPUs it may use, at most 4 (src/options.c).
  put writers "$(($(nproc) < 4 ? $(nproc) : 4))"
  put load "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# --- number formatting -------------------------------------------------------------

isnum() { [[ ${1:-} =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# Integer with thousands separators, or "n/a".
n0() {
  isnum "${1:-}" || { echo "n/a"; return; }
  awk -v v="$1" 'BEGIN { s = sprintf("%.0f", v < 0 ? -v : v); o = ""
    while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) }
    print (v < 0 && s o != "0" ? "-" : "") s o }'
}

# Microseconds as milliseconds.
ms() {
  isnum "${1:-}" || { echo "n/a"; return; }
  awk -v v="$1" 'BEGIN { m = v / 1000; printf (m < 10 ? "%.3f ms\n" : "%.1f ms\n"), m }'
}

ratio() {
  if ! { isnum "${1:-}" && isnum "${2:-}" && awk -v b="$2" 'BEGIN { exit !(b != 0) }'; }; then
    echo "n/a"
    return
  fi
  calc "$1 / $2" %.3f
}

# verdict VALUE OP TARGET: "met", "**not met**", or "not measured".
verdict() {
  isnum "${1:-}" || { echo "not measured"; return; }
  if awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN {
       ok = op == "<=" ? v <= t : op == "<" ? v < t : op == ">=" ? v >= t : op == "==" ? v == t : 0
       exit !ok }'; then
    echo "met"
  else
    echo "**not met**"
  fi
}

# deliveries per second from a count and microseconds
per_s() {
  if ! { isnum "${1:-}" && isnum "${2:-}" && awk -v u="$2" 'BEGIN { exit !(u > 0) }'; }; then
    echo ""
    return
  fi
  calc "$1 * 1e6 / $2" %.0f
}

# CPU per message of server + client + publisher for KIND (blast, paced).
cpu_sum() {
  local a b c
  a=$(get "$1_cpu_us") b=$(get "$1_client_cpu_us") c=$(get "$1_pub_cpu_us")
  isnum "$a" && isnum "$b" && isnum "$c" || { echo "n/a"; return; }
  calc "$a + $b + $c" %.2f
}

# Messages per second the machine's cores can carry at cpu_sum KIND.
cpu_ceiling() {
  local s
  s=$(cpu_sum "$1")
  isnum "$s" && isnum "$(get cores)" || { echo ""; return; }
  calc "$(get cores) * 1e6 / $s" %.0f
}

# A percentage figure, or n/a.
pct() { isnum "${1:-}" && echo "$1 %" || echo "n/a"; }

# --- the report -------------------------------------------------------------------------

write_report() {
  local f=$1 r keep
  # The sections scripts/bench-million.sh and bench-process.sh write are theirs, and the
  # restart with --history-file (make storm, bench/lib/history_file_cost.sh), the hot
  # upgrade (make bench-takeover) and topics (make bench-topics): kept as they are.
  keep=$(sed -n -e '/^<!-- bench-million -->$/,/^<!-- \/bench-million -->$/p' \
    -e '/^<!-- bench-process -->$/,/^<!-- \/bench-process -->$/p' \
    -e '/^<!-- history-file -->$/,/^<!-- \/history-file -->$/p' \
    -e '/^<!-- takeover -->$/,/^<!-- \/takeover -->$/p' \
    -e '/^<!-- topics -->$/,/^<!-- \/topics -->$/p' "$f" 2>/dev/null)
  local blast_ratio paced_ratio mc_rate bc_rate mc_ack_rate bc_ack_rate loss_total kslope
  blast_ratio=$(get blast_ratio)
  paced_ratio=$(get paced_ratio)
  isnum "$blast_ratio" || blast_ratio=n/a
  isnum "$paced_ratio" || paced_ratio=n/a
  mc_rate=$(per_s "$(get mc_received)" "$(get mc_last_us)")
  bc_rate=$(per_s "$(get bc_received)" "$(get bc_last_us)")
  mc_ack_rate=$(per_s "$(get mc_conns)" "$(get mc_ack_us)")
  bc_ack_rate=$(per_s "$(get bc_conns)" "$(get bc_ack_us)")
  loss_total=
  isnum "$(get blast_loss_total)" && isnum "$(get paced_loss_total)" &&
    loss_total=$(($(get blast_loss_total) + $(get paced_loss_total)))
  kslope=$(get mem_kernel_slope)
  {
    cat <<EOF
# Benchmarks

Measured by \`make bench\` (\`scripts/bench.sh\`) on $(get date), commit $(get commit)
($(get version)). The whole file and the plots in \`bench/\` are written by the script;
the raw figures of the last run are in \`build/bench/\`. Regenerate with:

\`\`\`sh
make bench
\`\`\`

EOF
    if [[ -s $WORK/broken ]]; then
      echo "> **BROKEN during this run** (figures below may be missing or wrong):"
      sed 's/^/> - /' "$WORK/broken"
      echo
    fi
    local load1
    load1=$(get load | cut -d' ' -f1)
    if isnum "$load1" && awk -v l="$load1" -v c="$(get cores)" 'BEGIN { exit !(l >= c / 2) }'; then
      echo "> The machine was busy when this run started (load average $(get load) on $(get cores) cores): other work shared its cores, so the figures are noisier and lower than on an idle machine."
      echo
    fi
    if isnum "$loss_total" && ((loss_total != 0)); then
      echo "> **MESSAGES WERE LOST: $(n0 "$loss_total") messages never reached a client.**"
      echo
    fi
    cat <<EOF
## Machine

| | |
|---|---|
| CPU | $(get cpu), $(get cores) cores |
| memory | $(get memory) |
| OS, kernel | $(get os), $(get kernel) |
| libevent | $(get libevent) |
| Erlang/OTP | $(get otp) |
| compiler | $(get compiler) (\`-O2\`) |
| open files per process | $(get nofile) |
| load average at the start | $(get load) |

Everything runs on this one machine over loopback: the server (\`./httpdcnode --master ""\`,
one per section, at most 18,000 streams, $(get writers) writer threads by default), the load client (\`./httpclient\`, 2 worker
processes, each section from its own 20 source addresses in 127.0.10.1–127.0.13.20) and the publisher (\`msggen\` on its own Erlang
node, connected to the C-node by its published name; \`erl +sbwt none +sbwtdcpu none +sbwtdio none\`,
so that its idle schedulers do not spin). Client, publisher and server
share the 2 cores, so every figure includes the cost of the load generators too.
The run took $(get duration_s) s.

## Targets

| target | measured | verdict |
|---|---|---|
| server heap ≤ 256 B per idle stream (RSS slope 2k→18k) | $(n0 "$(get mem_server_slope)") B | $(verdict "$(get mem_server_slope)" "<=" 256) |
| delivered/s ≥ 0.95 × publisher rate (flat out, 10k streams) | $blast_ratio × | $(verdict "$blast_ratio" ">=" 0.95) |
| zero loss (all push runs) | $(n0 "$loss_total") lost | $(verdict "$loss_total" "==" 0) |
| flat-out p99 ≤ 10 ms | $(ms "$(get blast_p99)") | $(verdict "$(get blast_p99)" "<=" 10000) |
| 20k msg/s paced p50 ≤ 0.1 ms | $(ms "$(get paced_p50)") | $(verdict "$(get paced_p50)" "<=" 100) |
| 20k msg/s paced p99 ≤ 1 ms | $(ms "$(get paced_p99)") | $(verdict "$(get paced_p99)" "<=" 1000) |
| fan-out ≥ 400,000 deliveries/s (multicast to 10k, until the last delivery) | $(n0 "$mc_rate") /s | $(verdict "$mc_rate" ">=" 400000) |
| broadcast to 18k < 50 ms (until the last delivery) | $(ms "$(get bc_last_us)") | $(verdict "$(get bc_last_us)" "<" 50000) |
EOF
    transport_target_rows
    cat <<EOF

## 1. Memory per idle stream

Server started empty; one client per step, each added on top of the ones before and all
held open until the last sample; each sample taken once the server counted exactly that
many open streams. Server RSS is \`memory\` of \`GET /stats\`. Kernel is machine-wide:
\`Slab:\` of \`/proc/meminfo\` + TCP pages of \`/proc/net/sockstat\`, so it counts both
ends of every loopback connection (and anything else the machine did meanwhile).

| open streams | server RSS | kernel growth |
|---:|---:|---:|
EOF
    local conns srv kern k0=""
    while read -r conns srv kern; do
      [[ -n $k0 ]] || k0=$kern
      printf '| %s | %s MB | %s MB |\n' "$(n0 "$conns")" "$(calc "$srv / 1e6" %.2f)" \
        "$(calc "($kern - $k0) / 1e6" %.2f)"
    done <"$WORK/memory.dat"
    cat <<EOF

| bytes per stream, least-squares slope 2k → 18k | measured | target / comparison |
|---|---:|---|
| server RSS | $(n0 "$(get mem_server_slope)") B | ≤ 256 B: $(verdict "$(get mem_server_slope)" "<=" 256). Origin C-node 2,768 B, icomet 2,918 B, Nchan 11,280 B |
| kernel, per connection (2 sockets) | $(n0 "$kslope") B | |
| kernel, per socket | $(n0 "$(isnum "$kslope" && calc "$kslope / 2" %.0f)") B | ~4,660 B per TCP socket measured before on this kernel |
| load client, from its JSON (\`client_rss_bytes\` of each step's client against its streams) | $(n0 "$(get mem_client_json_slope)") B | |

Server RSS: $(n0 "$(get mem_server_base)") B empty, $(n0 "$(get mem_server_18k)") B at 18,000 streams.
At 18,000 streams opened flat out (section 4) the client's workers had
$(n0 "$(get conn_client_rss)") B RSS, $(n0 "$(isnum "$(get conn_client_rss)" && calc "$(get conn_client_rss) / 18000" %.0f)") B per stream including their fixed start-up memory.

![memory vs streams](bench/memory.png)

## 2. Push to 10,000 streams

A client holds 10,000 streams (uids 1–10,000). The publisher sends single-uid messages
\`{Uid, <<"t=<ns>;">>}\`, uids in turn, to the C-node; the client takes the latency of each
message from the timestamp in it (publisher's send → client's read) and stops once every
message arrived. Flat out: 200,000 messages as fast as the publisher can (\`--rate max\`).
Paced: 20,000 msg/s for 10 s (200,000 messages). Each 3 times, fresh client each time,
one server for all. The table gives the median of each figure over the runs that have it (the
ratio is taken within each run, then its median); losses are summed.

| | flat out | paced 20k msg/s | target |
|---|---:|---:|---|
| publisher rate (msg/s sent) | $(n0 "$(get blast_pub_rate)") | $(n0 "$(get paced_pub_rate)") | |
| C-node intake (msg/s until it acknowledged the last) | $(n0 "$(get blast_intake_rate)") | $(n0 "$(get paced_intake_rate)") | |
| delivered/s (client, first to last message) | $(n0 "$(get blast_delivered_per_s)") | $(n0 "$(get paced_delivered_per_s)") | |
| delivered/s ÷ publisher rate (within each run) | $blast_ratio | $paced_ratio | flat out ≥ 0.95: $(verdict "$blast_ratio" ">=" 0.95) |
| lost (sum over runs) | $(n0 "$(get blast_loss_total)") | $(n0 "$(get paced_loss_total)") | 0: $(verdict "$loss_total" "==" 0) |
| latency p50 | $(ms "$(get blast_p50)") | $(ms "$(get paced_p50)") | paced ≤ 0.1 ms: $(verdict "$(get paced_p50)" "<=" 100) |
| latency p90 | $(ms "$(get blast_p90)") | $(ms "$(get paced_p90)") | |
| latency p99 | $(ms "$(get blast_p99)") | $(ms "$(get paced_p99)") | flat out ≤ 10 ms: $(verdict "$(get blast_p99)" "<=" 10000); paced ≤ 1 ms: $(verdict "$(get paced_p99)" "<=" 1000) |
| latency max | $(ms "$(get blast_max)") | $(ms "$(get paced_max)") | |
| streams closed as slow consumers | $(n0 "$(get blast_slow_closed)") | $(n0 "$(get paced_slow_closed)") | |
| server CPU per delivery (all its threads) | $(get blast_cpu_us) µs | $(get paced_cpu_us) µs | floor (section 5): $(get floor_us) µs per write |

### Where the time goes

The server of this section runs with \`--probe-latency\`: it reads the publisher's stamp
at each hop and keeps one histogram per hop (\`GET /probe\`). Age of a message, from the
publisher's send, when it passed each point; medians over the runs:

| age when | flat out p50 | flat out p99 | paced p50 | paced p99 |
|---|---:|---:|---:|---:|
| the C-node thread had decoded it: Erlang's send and distribution, the C-node thread's wake-up | $(ms "$(get blast_received_p50)") | $(ms "$(get blast_received_p99)") | $(ms "$(get paced_received_p50)") | $(ms "$(get paced_received_p99)") |
| the event loop took it from the hand-off | $(ms "$(get blast_applied_p50)") | $(ms "$(get blast_applied_p99)") | $(ms "$(get paced_applied_p50)") | $(ms "$(get paced_applied_p99)") |
| its write to the stream returned | $(ms "$(get blast_written_p50)") | $(ms "$(get blast_written_p99)") | $(ms "$(get paced_written_p50)") | $(ms "$(get paced_written_p99)") |
| the client read it (the latency above) | $(ms "$(get blast_p50)") | $(ms "$(get blast_p99)") | $(ms "$(get paced_p50)") | $(ms "$(get paced_p99)") |

### Where the CPU goes

CPU time (user + system) per message, each part measured on its own: the server from
\`/proc\` over the run, the client's workers from their first message on (\`msgs_cpu_us\`
of its JSON), the publisher's Erlang node while it sent (\`cpu_us\` of msggen's JSON,
from its \`/proc/self/stat\`; its schedulers do not busy-wait, \`+sbwt none\`). Medians
over the runs.

| per message | flat out | paced 20k msg/s |
|---|---:|---:|
| server (all its threads) | $(get blast_cpu_us) µs | $(get paced_cpu_us) µs |
| load client | $(get blast_client_cpu_us) µs | $(get paced_client_cpu_us) µs |
| publisher | $(get blast_pub_cpu_us) µs | $(get paced_pub_cpu_us) µs |
| all three | $(cpu_sum blast) µs | $(cpu_sum paced) µs |
| messages per second $(get cores) cores can carry at that cost | $(n0 "$(cpu_ceiling blast)") | $(n0 "$(cpu_ceiling paced)") |

### Where the server's CPU goes

\`perf record -e cpu-clock -g -p <server>\` during one more flat-out run of $(n0 "$(get prof_count)")
messages$([[ $(get prof_status) == ok ]] || echo " ($(get prof_status))"). Share of the server's samples, all its threads:

| where | share |
|---|---:|
| the kernel | $(pct "$(get prof_kernel)") |
| httpdcnode's own code | $(pct "$(get prof_server)") |
| libevent | $(pct "$(get prof_libevent)") |
| libc (mostly the system-call stubs) | $(pct "$(get prof_libc)") |
| \`writev\` to streams, everything it calls included (TCP send and the loopback receive) | $(pct "$(get prof_writev)") |
| … of which waking the reader (\`sock_def_readable\`) | $(pct "$(get prof_wakeup)") |
| re-enabling interrupts (\`pvm_irq_enable\` of this VM's paravirtual kernel), mostly as a wake-up ends | $(pct "$(get prof_irq)") |
| \`epoll_wait\` | $(pct "$(get prof_epoll)") |

The server's own work (its code and libevent) is a small part; the rest is the kernel's
TCP path that every delivery takes, which section 5 measures with no server at all.

Each run:

| run | publisher msg/s | delivered/s | ratio | received | lost | p50 | p90 | p99 | max | publisher |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
EOF
    local kind
    for kind in blast paced; do
      for r in 1 2 3; do
        isnum "$(get "${kind}_${r}_received")" || continue
        echo "| $kind $r | $(n0 "$(get "${kind}_${r}_pub_rate")") | $(n0 "$(get "${kind}_${r}_delivered_per_s")") | $(ratio "$(get "${kind}_${r}_delivered_per_s")" "$(get "${kind}_${r}_pub_rate")") | $(n0 "$(get "${kind}_${r}_received")") | $(n0 "$(get "${kind}_${r}_loss")") | $(ms "$(get "${kind}_${r}_p50")") | $(ms "$(get "${kind}_${r}_p90")") | $(ms "$(get "${kind}_${r}_p99")") | $(ms "$(get "${kind}_${r}_max")") | $(get "${kind}_${r}_pub_status") |"
      done
    done
    cat <<EOF

For comparison, measured before on this kind of machine with the same client:

| | delivered msg/s, 10k streams, flat out | p50 / p99 at 20k msg/s |
|---|---:|---:|
| **httpdcnode (this run)** | **$(n0 "$(get blast_delivered_per_s)")** | **$(ms "$(get paced_p50)") / $(ms "$(get paced_p99)")** |
| origin C-node (ported to \`ei\`) | 108k–127k, then crash | 0.6 / 2.0 ms, crash after ~1 s |
| icomet (HTTP publish) | 27k | 0.70 / 5.9 ms |
| Nchan (HTTP publish) | 31k | 0.09 / 2.4 ms |

![latency percentiles](bench/latency.png)

## 3. Fan-out

One message to many streams. Multicast: one acknowledged \`{Pid, Ref, [1..10000], Data}\`
to 10,000 streams (same server as section 2). Broadcast: one \`{broadcast, Data}\` to the
18,000 streams of section 4, timed by the publisher until a stats request sent after it
is answered. "Last delivery" is the client's largest latency for that one message:
publisher's send → the last stream read it.

| | multicast to 10,000 | broadcast to 18,000 | target |
|---|---:|---:|---|
| streams written (C-node's count) | $(n0 "$(get mc_conns)") | $(n0 "$(get bc_conns)") | |
| received (client) | $(n0 "$(get mc_received)") | $(n0 "$(get bc_received)") | |
| publisher's acknowledged time | $(ms "$(get mc_ack_us)") | $(ms "$(get bc_ack_us)") | |
| until the last delivery | $(ms "$(get mc_last_us)") | $(ms "$(get bc_last_us)") | broadcast < 50 ms: $(verdict "$(get bc_last_us)" "<" 50000) |
| deliveries/s until the last delivery | $(n0 "$mc_rate") | $(n0 "$bc_rate") | ≥ 400,000: $(verdict "$mc_rate" ">=" 400000) / $(verdict "$bc_rate" ">=" 400000) |
| deliveries/s until acknowledged | $(n0 "$mc_ack_rate") | $(n0 "$bc_ack_rate") | |

## 4. Connect

A fresh server; one client opens 18,000 streams as fast as it can (no rate limit,
at most $(get conn_pending) connecting or awaiting their first chunk at once), over 20 source
addresses not used by the other sections so that TIME_WAIT sockets left behind cannot slow
\`connect()\`. Rate: client's \`connect_rate\`, first to last connection.

| | measured |
|---|---:|
| streams welcomed | $(n0 "$(get conn_welcomed)") of 18,000 |
| failed | $(n0 "$(get conn_failed)") |
| connections accepted per second | $(n0 "$(get conn_rate)") |

## 5. The floor, and why the targets not met are out of reach here

\`./writefloor\` is no server at all, only the cost of a \`write()\` here: TCP send, the
loopback receive that the kernel runs in the sender's context, and the reader's wake-up.
It writes 40 bytes to each of 10,000 loopback TCP sockets while another process reads them
all through epoll, as the load client does.

| command | what | one write (writer's time) | writes per second |
|---|---|---:|---:|
| \`./writefloor 10000 5 40\` | one writer | $(get floor_us) µs | $(n0 "$(get floor_rate)") |
| \`./writefloor 10000 5 40 $(get cores)\` | $(get cores) writers at once, each with its own reader: the whole machine | $(get floor_all_us) µs | $(n0 "$(get floor_all_rate)") |
| \`./writefloor 10000 1 40 1 20\` | bursts of 20 writes 1 ms apart, as a 20k msg/s publisher paced by Erlang's 1 ms timer makes a server write | $(get floor_burst_us) µs | |

\`./wakefloor SECONDS 1000\` times how late a thread asleep in \`epoll_wait\` wakes when another
thread writes its eventfd every millisecond, as the C-node thread wakes the event loop:

| when | p50 | p99 | max |
|---|---:|---:|---:|
| the machine idle (\`./wakefloor 3 1000\`) | $(get wake_idle_p50) µs | $(get wake_idle_p99) µs | $(get wake_idle_max) µs |
| during one more paced run like those of section 2 | $(get wake_load_p50) µs | $(get wake_load_p99) µs | $(get wake_load_max) µs |

What these and the tables of section 2 say about each target not met:

- **Flat out, delivered/s ≥ 0.95 × the publisher.** One message to one stream is at least
  one such write: $(n0 "$(get floor_rate)") writes per second from one thread,
  $(n0 "$(get floor_all_rate)") with every core writing and nothing else running. In
  section 2 the server ($(get writers) writer threads), the client and the publisher together
  need $(cpu_sum blast) µs of CPU per message, so the $(get cores) cores carry about
  $(n0 "$(cpu_ceiling blast)") messages per second at that cost, against the
  $(n0 "$(isnum "$(get blast_pub_rate)" && calc "0.95 * $(get blast_pub_rate)" %.0f)") asked; httpdcnode delivers $(n0 "$(get blast_delivered_per_s)"),
  $(isnum "$(cpu_ceiling blast)" && isnum "$(get blast_delivered_per_s)" && calc "100 * $(get blast_delivered_per_s) / $(cpu_ceiling blast)" %.0f) % of that. A publisher faster than what is delivered queues without bound (in the
  server's hand-off: the "applied" row above), so the flat-out latency is the age of that
  backlog.
- **Fan-out ≥ 400,000 deliveries/s, broadcast to 18,000 < 50 ms.** Each delivery is one
  write to its own socket: $(n0 "$(get floor_all_rate)") writes per second with every core
  writing means at least $(isnum "$(get floor_all_rate)" && calc "18000 * 1000 / $(get floor_all_rate)" %.0f) ms for 18,000
  streams and at most that many deliveries per second, whatever the server does
  ($(isnum "$(get floor_rate)" && calc "18000 * 1000 / $(get floor_rate)" %.0f) ms from one thread).
- **Paced p50 ≤ 0.1 ms.** Before the event loop sees a message it is already
  $(ms "$(get paced_received_p50)") old at the median ("the C-node thread had decoded it"):
  Erlang's 1 ms timer makes the publisher send its messages in bursts (the median message
  went out in a burst of $(get paced_burst_p50), as msggen counts them), its distribution sends them,
  and the C-node thread wakes. The loop and its writer threads then write the burst; at
  $(get floor_burst_us) µs per write in bursts, the median message of a burst of $(get paced_burst_p50) waits behind
  about $(isnum "$(get paced_burst_p50)" && calc "$(get paced_burst_p50) / 2 / $(get writers)" %.0f) writes of each of $(get writers) writers, $(isnum "$(get floor_burst_us)" && isnum "$(get paced_burst_p50)" && calc "$(get paced_burst_p50) / 2 / $(get writers) * $(get floor_burst_us)" %.0f) µs at best, and the client,
  woken by the first, reads them after that.
- **Paced p99 ≤ 1 ms.** When Erlang's timer wakes the publisher late it catches up in a
  larger burst: 1 % of the messages went out in bursts of $(get paced_burst_p99) or more (the largest
  $(get paced_burst_max)). Writing $(get paced_burst_p99) messages takes
  $(isnum "$(get floor_burst_us)" && isnum "$(get paced_burst_p99)" && calc "$(get paced_burst_p99) * $(get floor_burst_us)" %.0f) µs at the floor of one writer, about
  $(isnum "$(get floor_burst_us)" && isnum "$(get paced_burst_p99)" && calc "$(get paced_burst_p99) * $(get floor_burst_us) / $(get writers)" %.0f) µs with $(get writers) writer threads at best. Add the
  $(ms "$(get paced_received_p99)") a message can be old before the loop sees it (p99 of the
  first row of "where the time goes"): $(isnum "$(get floor_burst_us)" && isnum "$(get paced_burst_p99)" && isnum "$(get paced_received_p99)" && ms "$(calc "$(get paced_received_p99) + $(get paced_burst_p99) * $(get floor_burst_us) / $(get writers)" %.0f)") before the client's own wake-up.
  The rest is the tail of waking up on a loaded host: under the paced load a sleeping
  thread here wakes $(get wake_load_p99) µs late at p99 and up to $(get wake_load_max) µs, against
  $(get wake_idle_p99) µs idle (\`./wakefloor\`, above), and a message crosses three such
  wake-ups on its way (the C-node thread, the event loop, the client) besides Erlang's own.
  Identical runs differ by as much as the target (see "each run" in section 2).

EOF
    transport_section
    cat <<EOF
## Optimisations

What each change bought, and the command that shows it:

- **Writer threads** (\`--writers\`, \`src/core/write_pool.c\`): a drain that writes to 8 streams or
  more is spread over the event loop and its helper threads. Against the same runs with
  \`--writers 1\` (one flat-out run and one multicast, on a server of its own):

  | | \`--writers 1\` | \`--writers $(get writers)\` (sections 2, 3) |
  |---|---:|---:|
  | flat out, delivered/s | $(n0 "$(get single_1_delivered_per_s)") | $(n0 "$(get blast_delivered_per_s)") |
  | flat out, delivered/s ÷ publisher rate | $(get single_1_ratio) | $blast_ratio |
  | flat out, latency p99 | $(ms "$(get single_1_p99)") | $(ms "$(get blast_p99)") |
  | flat out, server CPU per delivery | $(get single_1_cpu_us) µs | $(get blast_cpu_us) µs |
  | multicast to 10,000, until the last delivery | $(ms "$(get single_mc_last_us)") | $(ms "$(get mc_last_us)") |

- **Streams leave evhttp** once their headers and welcome are flushed (\`src/transport/chunked.c\`):
  an idle stream is a 152-byte record, its libevent event and fd entry, not evhttp's
  ~2.7 KB of connection, request, bufferevent and header objects. Section 1 (server RSS
  slope): $(n0 "$(get mem_server_slope)") B per stream against 2,768 B for the origin C-node.
- **One \`writev\` per message** to an idle stream (size line, payload, CRLF), no
  bufferevent and no \`epoll_ctl\`: a buffer exists only while the socket would block.
- **\`TCP_NODELAY\` on streams**: without it Nagle's algorithm holds the second of two
  quick messages to one stream until the client's delayed ACK, tens of milliseconds.
- **Batched writes per drain** (\`src/core/batch.c\`): all messages the loop takes from the
  hand-off in one wake-up are grouped by stream, one \`writev\` each. Under a flat-out
  publisher many messages per stream wait in the ring, and one TCP send carries them; the
  server CPU per delivery in section 2 (flat out against paced) shows what that saves.
- **Buffered, poll()-based ei sockets** (\`src/erl/erl_socket.c\`): the C-node reads Erlang's
  distribution stream in 64 KB blocks, one \`recv\` for a burst of messages instead of two
  per message, and never calls \`select()\`, whose fd_set breaks on descriptors above 1023.
- **Copy once**: a message is decoded from the Erlang buffer straight into the hand-off
  ring and written to the sockets from there.
EOF
    if [[ -n $keep ]]; then printf '\n%s\n' "$keep"; fi
  } >"$f"
}
