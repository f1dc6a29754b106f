#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cluster section of BENCHMARKS.md ("## 7. Cluster"): two masters running
# the httpdcnode application (env `masters'), three C-nodes
# (--master M1,M2 --presence httpdcnode_presence, each on its own ports), each
# holding CLUSTER_STREAMS streams from one ./httpclient (--proto sse: ids
# checked; --reconnect-lost, so that they come back after a restart). On
# loopback only. Called by scripts/bench.sh after its other sections
# (BENCH_CLUSTER=0 skips it there and keeps the section of the last run);
# runnable alone. Needs `make all` done.
#
# Measured, each from real processes, times in the Erlang of the masters
# (bench/lib/benchcl.erl, compiled into the work directory):
#   1. routed async sends: CLUSTER_MSGS httpdcnode:send/2 calls from one
#      process on master 1, uids in turn: the calls per second, the time until
#      the C-nodes acknowledged (stats/0 after the last) and until their
#      deliveries counted them all; the clients' counts against what was sent.
#   2. httpdcnode:multicast_sync/3 to every uid, CLUSTER_MULTICASTS times: the
#      time to the reply (median, min, max) and the connections it reports.
#   3. C-node 3 killed (SIGKILL) and started again on its ports: the time from
#      the restart until it holds all its streams again, and until each master
#      lists all its uids again.
#   4. master 2 killed (SIGKILL) and a new one started under its name: the time
#      from its launch until its links to the three C-nodes are up, and until
#      its presence lists every uid.
# Figures, never timed asserts: exits non-zero only when something broke
# (messages lost, a process died, a step that did not finish within its
# bound); the report says what. Bounded: every wait gives up by 5 minutes
# after the start. Everything started here is ended by pid, also on failure
# or interruption; node names carry this script's pid, ports are picked free.
#
#   scripts/bench-cluster.sh            the full run; writes the section into
#                                       BENCHMARKS.md (raw figures and logs in
#                                       build/bench-cluster/)
#   scripts/bench-cluster.sh --smoke    100 streams per C-node, nothing
#                                       written in the repository; last line
#                                       "bench-cluster smoke: P passed, F failed"
#   scripts/bench-cluster.sh --print-section   the section now in BENCHMARKS.md
#   scripts/bench-cluster.sh --put-section     the section on stdin into
#                                       BENCHMARKS.md (in place of the old one,
#                                       else before "## Optimisations")
#   CLUSTER_STREAMS     streams per C-node (default 18000; 100 with --smoke)
#   CLUSTER_MSGS        routed sends (default 10 x CLUSTER_STREAMS: 180,000)
#   CLUSTER_MULTICASTS  multicast_sync runs (default 5)
#   CLUSTER_PROTO       the clients' --proto: sse (default) or chunked
#   HTTPDCNODE_BINDIR   where the binaries are (default: the root)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
SECTION_HEAD="## 7. Cluster"
REPORT="$ROOT/BENCHMARKS.md"

# print_section: the cluster section of BENCHMARKS.md, up to the next "## ".
print_section() {
  [[ -e $REPORT ]] || return 0
  awk -v h="$SECTION_HEAD" '$0 == h { on = 1; print; next }
    on && /^## / { exit } on { print }' "$REPORT"
}

# put_section FILE: FILE's text in place of the section, else before
# "## Optimisations", else at the end.
put_section() {
  local tmp="$REPORT.cluster.$$"
  [[ -e $REPORT ]] || : >"$REPORT"
  awk -v h="$SECTION_HEAD" -v f="$1" '
    function put() { last = ""; while ((getline l < f) > 0) { print l; last = l }
      close(f); if (last != "") print ""; done = 1 }
    $0 == h { put(); skip = 1; next }
    skip && /^## / { skip = 0 }
    skip { next }
    !done && $0 == "## Optimisations" { put() }
    { print }
    END { if (!done) { print ""; put() } }' "$REPORT" >"$tmp" && mv "$tmp" "$REPORT"
}

mode=full
case "${1:-}" in
  "") ;;
  --smoke) mode=smoke ;;
  --print-section) print_section; exit 0 ;;
  --put-section)
    t=$(mktemp "${TMPDIR:-/tmp}/clsection.XXXXXX")
    cat >"$t"
    [[ -s $t ]] && put_section "$t"
    rm -f "$t"
    exit 0 ;;
  -h | --help) sed -n '3,46p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-cluster: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

if [[ $mode == smoke ]]; then
  STREAMS=${CLUSTER_STREAMS:-100}
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/httpdbenchcl.XXXXXX")
else
  STREAMS=${CLUSTER_STREAMS:-18000}
  WORK="$ROOT/build/bench-cluster"
  rm -rf "$WORK"
  mkdir -p "$WORK"
fi
MSGS=${CLUSTER_MSGS:-$((10 * STREAMS))}
REPS=${CLUSTER_MULTICASTS:-5}
PROTO=${CLUSTER_PROTO:-sse}
for v in STREAMS MSGS REPS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench-cluster: CLUSTER_$v must be a number" >&2; exit 2; }
done
((STREAMS >= 1 && STREAMS <= 18000 && MSGS >= 1 && REPS >= 1)) ||
  { echo "bench-cluster: want CLUSTER_STREAMS in 1..18000 (one client process each), CLUSTER_MSGS and CLUSTER_MULTICASTS >= 1" >&2; exit 2; }
[[ $PROTO == sse || $PROTO == chunked ]] || { echo "bench-cluster: CLUSTER_PROTO is sse or chunked" >&2; exit 2; }
TOTAL=$((3 * STREAMS))
BACKOFF=200 CAP_MS=2000        # the clients' --reconnect-lost and --reconnect-cap

BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
log() { printf '%s bench-cluster: %s\n' "$(date +%T)" "$*" >&2; }

START=$(date +%s)
# shellcheck disable=SC2034  # read by left() in lib.sh
DEADLINE=$((START + 300))
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
COOKIE="benchcl_$$_${RANDOM}${RANDOM}"
: >"$WORK/broken"
: >"$WORK/results"
put() { printf '%s=%s\n' "$1" "$2" >>"$WORK/results"; }
get() { sed -n "s/^$1=//p" "$WORK/results" 2>/dev/null | tail -n1; }
broken() { log "BROKEN: $*"; printf '%s\n' "$*" >>"$WORK/broken"; }

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  end_all
  if [[ $mode == smoke ]]; then
    if [[ -s $WORK/broken || -n ${BENCH_KEEP:-} ]]; then log "logs kept in $WORK"; else rm -rf "$WORK"; fi
  fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

for f in "$BIN/httpdcnode" "$BIN/httpclient" tools/erlang/ebin/httpdcnode.app; do
  [[ -e $f ]] || { echo "bench-cluster: $f missing: run 'make all' first" >&2; exit 1; }
done
mkdir -p "$WORK/ebin"
erlc -o "$WORK/ebin" bench/lib/benchcl.erl 2>"$WORK/erlc.err" ||
  { echo "bench-cluster: bench/lib/benchcl.erl: $(head -n3 "$WORK/erlc.err")" >&2; exit 1; }
( umask 077 && printf '%s\n' "$COOKIE" >"$WORK/cookie" )
epmd -daemon
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (($(ulimit -n) < STREAMS + 1000)); then
  log "open files limit is $(ulimit -n); $STREAMS streams per C-node need $((STREAMS + 1000))"
fi


# The nodes: M1 M2 the masters, C1 C2 C3 the C-nodes (short names @localhost).
MNAME=("" "benchclm1_$$" "benchclm2_$$")
MASTERS="${MNAME[1]}@localhost,${MNAME[2]}@localhost"
CNAME=("" "benchclc1_$$" "benchclc2_$$" "benchclc3_$$")
CNODES="${CNAME[1]}@localhost,${CNAME[2]}@localhost,${CNAME[3]}@localhost"
ERL=(erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell -setcookie "$COOKIE"
     -pa "$ROOT/tools/erlang/ebin" -pa "$WORK/ebin")
MPID=() CPID=() CLI_PIDS=() CPORT=() CADMIN=()
MSEQ=0 DSEQ=0

# start_master I [ARGS...]: master I (its name taken again when it was
# killed a moment ago: erl then exits at once and is tried again), until it
# prints "started"; its output in MLOG. Sets MPID[I].
start_master() {
  local i=$1 end=$(($(date +%s) + $(left 30)))
  shift
  while (($(date +%s) < end)); do
    MSEQ=$((MSEQ + 1))
    MLOG="$WORK/master-$i.$MSEQ.log"
    (exec "${ERL[@]}" -sname "${MNAME[$i]}@localhost" -mnesia dir "\"$WORK/mnesia-$i.$MSEQ\"" \
       -eval 'benchcl:master()' -extra --masters "$MASTERS" "$@") >"$MLOG" 2>&1 </dev/null &
    MPID[$i]=$!
    BENCH_PIDS+=("${MPID[$i]}")
    while alive "${MPID[$i]}" && (($(date +%s) < end)); do
      grep -q '"event":"started"' "$MLOG" && return 0
      sleep 0.05
    done
    wait_exit "${MPID[$i]}" 5 || end_pid "${MPID[$i]}" 3
    sleep 0.2
  done
  broken "master $i did not start: $(tail -n3 "$MLOG" | tr '\n' ' ')"
  return 1
}

cstats() { curl -s --max-time 3 "http://127.0.0.1:${CADMIN[$1]}/stats"; }
cstat() { cstats "$1" | jget "$2"; }

# start_cnode I: C-node I on its ports, until it answers /stats and its name
# is in epmd (a killed one's may linger there a moment). Sets CPID[I].
start_cnode() {
  local i=$1 end=$(($(date +%s) + $(left 30)))
  while (($(date +%s) < end)); do
    (exec "$BIN/httpdcnode" --listen "127.0.0.1:${CPORT[$i]}" --admin-listen "127.0.0.1:${CADMIN[$i]}" \
       --name "${CNAME[$i]}@localhost" --master "$MASTERS" --presence httpdcnode_presence \
       --cookie-file "$WORK/cookie" --drain-seconds 0 -q) 2>>"$WORK/cnode-$i.log" &
    CPID[$i]=$!
    BENCH_PIDS+=("${CPID[$i]}")
    while alive "${CPID[$i]}" && (($(date +%s) < end)); do
      if cstats "$i" >/dev/null && epmd -names 2>/dev/null | grep -q "^name ${CNAME[$i]} at"; then
        return 0
      fi
      sleep 0.02
    done
    wait_exit "${CPID[$i]}" 5 || end_pid "${CPID[$i]}" 3
    sleep 0.1
  done
  broken "C-node $i did not start: $(tail -n3 "$WORK/cnode-$i.log" | tr '\n' ' ')"
  return 1
}

# start_client I: CLUSTER_STREAMS streams to C-node I, uids
# (I-1)*STREAMS+1.., from 8 source addresses of its own (127.0.4I.*).
start_client() {
  local i=$1
  (exec "$BIN/httpclient" -p "${CPORT[$i]}" --src "127.0.4$i.1-127.0.4$i.8" --json --proto "$PROTO" \
     -n "$STREAMS" -P 1 --uid-base $((1 + (i - 1) * STREAMS)) --reconnect-lost "$BACKOFF" \
     --reconnect-cap "$CAP_MS" --pending 200 --hold 86400 --max-time "$(left)") \
    >"$WORK/client-$i.json" 2>"$WORK/client-$i.err" &
  CLI_PIDS[$i]=$!
  BENCH_PIDS+=("${CLI_PIDS[$i]}")
}

# progress I FIELD: FIELD in client I's last progress line (every second).
progress() {
  grep '^httpclient ' "$WORK/client-$1.err" 2>/dev/null | tail -n1 |
    awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) { print $(i + 1); exit } }'
}
# csum FIELD: summed over the clients (fails while one has not reported).
csum() {
  local i v t=0
  for i in 1 2 3; do
    v=$(progress "$i" "$1")
    v=${v%%/*}
    [[ -n $v ]] || return 1
    t=$((t + v))
  done
  echo "$t"
}
csum_is() { [[ $(csum "$1") == "$2" ]]; }
streams_of_is() { [[ $(cstat "$1" streams_open) == "$2" ]]; }
all_alive() {
  local p
  for p in "${MPID[@]}" "${CPID[@]}" "${CLI_PIDS[@]}"; do
    alive "$p" || return 1
  done
}

# wait_for SECONDS WHAT CMD...: until CMD succeeds (bounded; gives up early
# when a master, a C-node or a client died). Returns 1 on timeout.
wait_for() {
  local end=$(($(date +%s) + $(left "$1"))) what=$2
  shift 2
  while (($(date +%s) < end)); do
    "$@" && return 0
    all_alive || { broken "a master, C-node or client died while waiting for $what"; return 1; }
    sleep 0.1
  done
  broken "timed out waiting for $what"
  return 1
}

# driver OUT SECONDS CMD ARGS...: benchcl:cli() on a node of its own, its
# JSON lines to OUT (in the background: DRV_PID; drive waits for it).
driver_bg() {
  local out=$1 bound=$2
  shift 2
  DSEQ=$((DSEQ + 1))
  (exec timeout -k 5 "$(left "$bound")" "${ERL[@]}" -sname "benchcld${DSEQ}_$$@localhost" \
     -eval 'benchcl:cli()' -extra "$@") >"$out" 2>"$out.err" </dev/null &
  DRV_PID=$!
  BENCH_PIDS+=("$DRV_PID")
}
drive() {
  driver_bg "$@"
  wait "$DRV_PID"
  local rc=$?
  forget "$DRV_PID"
  ((rc == 0)) || { broken "driver $3 failed: $(tail -n1 "$1.err")"; return 1; }
}
# field FILE KEY [N]: KEY of the Nth JSON line of FILE (default the first).
field() { sed -n "${3:-1}p" "$1" | jget "$2"; }
# list_of FILE KEY: the numbers of KEY's list in FILE's first line, one a line.
list_of() { head -n1 "$1" | sed -n "s/.*\"$2\":\[\([^]]*\)\].*/\1/p" | tr ',' '\n'; }

# --- the section, the end --------------------------------------------------------

# ms2s MS: seconds with 2 decimals (n/a when empty).
ms2s() { isnum "${1:-}" && calc "$1 / 1000" %.2f || echo "n/a"; }
us2s() { isnum "${1:-}" && (($1 >= 0)) && calc "$1 / 1e6" %.2f || echo "n/a"; }
isnum() { [[ ${1:-} =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; }
n0() {
  isnum "${1:-}" || { echo "n/a"; return; }
  awk -v v="$1" 'BEGIN { s = sprintf("%.0f", v < 0 ? -v : v); o = ""
    while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) }
    print (v < 0 && s o != "0" ? "-" : "") s o }'
}
rate() { isnum "${2:-}" && (($2 > 0)) && n0 "$(calc "$1 * 1e6 / $2" %.0f)" || echo "n/a"; }

# shellcheck disable=SC2046  # mc_us is a list of numbers, split on purpose
write_section() {
  local mc us_med us_min us_max
  us_med=$(median $(get mc_us))
  us_min=$(printf '%s\n' $(get mc_us) | sort -n | head -n1)
  us_max=$(printf '%s\n' $(get mc_us) | sort -n | tail -n1)
  mc=$(get mc_conns)
  # "54,000 each run" when they all say so, else the list.
  [[ -z $(tr ' ' '\n' <<<"$mc" | grep -v "^$TOTAL\$" | grep .) ]] && mc="$(n0 "$TOTAL") each run"
  cat <<EOF
$SECTION_HEAD

Measured by \`scripts/bench-cluster.sh\` (\`make bench\` runs it last; \`BENCH_CLUSTER=0\` keeps
this section as it is) on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null),
in $(get duration_s) s. Load average $LOAD0 at the start, $(get load_end) at the end, on $(nproc) cores:
the five nodes, the three load clients and the driver share them.

Two masters, each \`erl -sname M -eval 'benchcl:master()'\` (\`bench/lib/benchcl.erl\`: the
httpdcnode application with env \`masters\` = both), and three C-nodes,
\`./httpdcnode --master M1,M2 --presence httpdcnode_presence --drain-seconds 0\` on ports of
their own (the node names carry the script's pid). Each C-node holds $(n0 "$STREAMS") streams of one
\`./httpclient --proto $PROTO -n $STREAMS -P 1 --reconnect-lost $BACKOFF --reconnect-cap $CAP_MS\`
(8 source addresses each): $(n0 "$TOTAL") uids in all,
one stream each. All $(n0 "$TOTAL") were up $(ms2s "$(get connect_ms)") s after the clients started (their progress lines: 1 s resolution). Times are taken
by the masters' Erlang (system time, ms) or by the script.

| | measured |
|---|---:|
| routed \`httpdcnode:send/2\` from one process on master 1: calls per second | $(rate "$MSGS" "$(get sends_send_us)") msg/s ($(n0 "$MSGS") in $(us2s "$(get sends_send_us)") s) |
| the same, until the C-nodes answered \`stats/0\` after the last | $(rate "$MSGS" "$(get sends_synced_us)") msg/s |
| the same, until the C-nodes' \`deliveries\` counted all | $(rate "$MSGS" "$(get sends_delivered_us)") msg/s ($(us2s "$(get sends_delivered_us)") s) |
| routed sends: sent / counted by the clients / lost | $(n0 "$MSGS") / $(n0 "$(get sends_received)") / $(n0 "$(calc "$MSGS - 0$(get sends_received)" %.0f)") |
| \`multicast_sync\` to all $(n0 "$TOTAL") uids ($REPS runs): time to the reply, median (min, max) | $(ms "$us_med") ($(ms "$us_min"), $(ms "$us_max")) |
| \`multicast_sync\`: connections it reported, each run / counted by the clients, all runs | ${mc% } / $(n0 "$(get mc_received)") of $(n0 $((REPS * TOTAL))) |
| C-node 3 killed (SIGKILL), restarted on its ports: down for | $(get cr_down_ms) ms |
| its $(n0 "$STREAMS") streams back (the clients' backoff $BACKOFF ms, full jitter, cap $CAP_MS ms), from the restart | $(ms2s "$(get cr_streams_ms)") s |
| both masters list all its uids again, from the restart: master 1 / master 2 | $(ms2s "$(get cr_m1_ms)") s / $(ms2s "$(get cr_m2_ms)") s |
| master 2 killed (SIGKILL), a new one started under its name: its VM up, from the launch | $(ms2s "$(get mr_boot_ms)") s |
| its links to the 3 C-nodes up, from the launch | $(ms2s "$(get mr_links_ms)") s |
| its presence lists all $(n0 "$TOTAL") uids, from the launch / from its links being up | $(ms2s "$(get mr_full_ms)") s / $(get mr_after_links_ms) ms |
| the clients: id errors / duplicates / gaps (C-node 3's resumed into its new epoch) | $(get ids) / $(get cli1_gaps) + $(get cli2_gaps) + $(get cli3_gaps) |
| latency p50 / p99 at client 1 (C-node 1: the sends and the multicasts, now - \`t=\`) | $(ms "$(get cli1_lat_p50_us)") / $(ms "$(get cli1_lat_p99_us)") |

The steps, in order: the sends (uids 1..$(n0 "$TOTAL") in turn, payload \`t=<ns>;\`), each followed by
waits on the clients' counts; \`multicast_sync(Uids, Msg, 30000)\` $REPS times one after the other;
C-node 3's restart (each master polls its presence table every 2 ms); master 2's replacement
(it polls its links and presence every 2 ms). The C-nodes reconnect to a master every 0.1–3 s
while it is gone, so the new master's links come up within that. Raw figures in
\`build/bench-cluster/results\`.
EOF
  if [[ -s $WORK/broken ]]; then
    printf '\n**Broken in this run** (the figures above that it touched are missing or wrong):\n\n'
    sed 's/^/- /' "$WORK/broken"
  fi
}

ms() {
  isnum "${1:-}" || { echo "n/a"; return; }
  awk -v v="$1" 'BEGIN { m = v / 1000; printf (m < 10 ? "%.3f ms\n" : "%.1f ms\n"), m }'
}

# finish: ends every process started here (clients first, for their
# summaries; then the C-nodes; then the masters), judges what was
# measured, writes the section and exits: also after a step that broke.
finish() {
  local i k c ide=0 dup=0
  for i in 1 2 3; do [[ -n ${CLI_PIDS[$i]:-} ]] && end_pid "${CLI_PIDS[$i]}" 10; done
  for i in 1 2 3; do
    for k in welcomed failed id_errors dup gaps retries lat_p50_us lat_p99_us; do
      put "cli${i}_$k" "$(jget "$k" <"$WORK/client-$i.json" 2>/dev/null)"
    done
  done
  for i in 1 2 3; do
    [[ -n ${CPID[$i]:-} ]] || continue
    alive "${CPID[$i]}" || broken "C-node $i died"
    end_pid "${CPID[$i]}" 10
    [[ $WAIT_RC == 0 ]] || broken "C-node $i exited with status $WAIT_RC on SIGTERM"
  done
  for i in 1 2; do
    [[ -n ${MPID[$i]:-} ]] || continue
    alive "${MPID[$i]}" || broken "master $i died"
    end_pid "${MPID[$i]}" 5
  done
  put duration_s $(($(date +%s) - START))
  put load_end "$(cut -d' ' -f1-3 /proc/loadavg)"

  # (a step that did not run is broken already)
  if [[ -n $(get sends_send_us) ]]; then
    [[ $(get sends_received) == "$MSGS" ]] ||
      broken "routed sends: the clients counted $(get sends_received) of $MSGS"
    [[ $(get sends_delivered) == "$MSGS" ]] ||
      broken "routed sends: the C-nodes delivered $(get sends_delivered) of $MSGS"
  fi
  [[ -z $(get mc_us) || $(get mc_received) == $((REPS * TOTAL)) ]] ||
    broken "multicast_sync: the clients counted $(get mc_received) of $((REPS * TOTAL))"
  for c in $(get mc_conns); do
    [[ $c == "$TOTAL" ]] || { broken "a multicast_sync reported $c connections of $TOTAL"; break; }
  done
  for i in 1 2 3; do
    ide=$((ide + $(get "cli${i}_id_errors" | grep -E '^[0-9]+$' || echo 0)))
    dup=$((dup + $(get "cli${i}_dup" | grep -E '^[0-9]+$' || echo 0)))
  done
  [[ $PROTO == chunked ]] || ((ide == 0 && dup == 0)) || broken "id errors $ide, duplicates $dup (want 0)"
  put ids "$ide / $dup"

  write_section >"$WORK/section.md"
  if [[ $mode == full ]]; then
    put_section "$WORK/section.md"
    log "wrote the section \"$SECTION_HEAD\" of BENCHMARKS.md in $(get duration_s) s (raw figures in $WORK)"
  else
    cat "$WORK/section.md" >&2
  fi
  if [[ -s $WORK/broken ]]; then
    log "some measurements are missing or show breakage:"
    sed 's/^/  /' "$WORK/broken" >&2
    [[ $mode == smoke ]] && echo "bench-cluster smoke: 0 passed, 1 failed"
    exit 1
  fi
  [[ $mode == smoke ]] && echo "bench-cluster smoke: 1 passed, 0 failed"
  exit 0
}

# --- the run -----------------------------------------------------------------------

log "2 masters, 3 C-nodes x $STREAMS $PROTO streams, $MSGS routed sends, $REPS multicasts; in $WORK"
for i in 1 2 3; do
  CPORT[$i]=$(free_port) && CADMIN[$i]=$(free_port) || finish
done
# One master, then the other: the second joins the first's mnesia table.
start_master 1 || finish
start_master 2 || finish
for i in 1 2 3; do start_cnode "$i" || finish; done
for i in 1 2 3; do start_client "$i"; done
T_CONN0=$(now_ms)
wait_for 180 "$TOTAL streams up" csum_is up "$TOTAL" || finish
T_CONN1=$(now_ms)
put connect_ms $((T_CONN1 - T_CONN0))
drive "$WORK/presence0.out" 60 wait_count "$MASTERS" "$TOTAL" 30000 || finish
for n in 1 2; do
  [[ $(field "$WORK/presence0.out" ok $((n + 1))) == true ]] ||
    { broken "master $n lists $(field "$WORK/presence0.out" count $((n + 1))) of $TOTAL uids"; finish; }
done
log "$TOTAL streams up in $((T_CONN1 - T_CONN0)) ms; both masters list every uid"

# 1. Routed async sends from one process on master 1.
drive "$WORK/sends.out" 200 sends "${MNAME[1]}@localhost" "$MSGS" 1 "$TOTAL" || finish
for k in send_us synced_us delivered_us delivered; do put "sends_$k" "$(field "$WORK/sends.out" "$k")"; done
wait_for 30 "the clients to count $MSGS messages" csum_is msgs "$MSGS"
put sends_received "$(csum msgs)"
log "sends: $(cat "$WORK/sends.out"); the clients counted $(get sends_received)"

# 2. multicast_sync to every uid.
drive "$WORK/multicast.out" 200 multicast "${MNAME[1]}@localhost" 1 "$TOTAL" "$REPS" || finish
put mc_us "$(list_of "$WORK/multicast.out" us | tr '\n' ' ')"
put mc_conns "$(list_of "$WORK/multicast.out" conns | tr '\n' ' ')"
wait_for 30 "the clients to count the multicasts" csum_is msgs $((MSGS + REPS * TOTAL))
put mc_received $(($(csum msgs) - MSGS))
log "multicast_sync: $(cat "$WORK/multicast.out")"

# 3. C-node 3 killed and started again: its clients come back, both masters
# must list its uids again.
driver_bg "$WORK/cnode_restart.out" 120 wait_node "$MASTERS" "${CNAME[3]}@localhost" "$STREAMS" 90000
WAITER=$DRV_PID
wait_for 30 "the presence waiters" grep -q '"event":"ready"' "$WORK/cnode_restart.out" || finish
log "kill -KILL C-node 3 (pid ${CPID[3]})"
{ kill -KILL "${CPID[3]}"; wait_exit "${CPID[3]}" 10; } 2>/dev/null
T_KILL=$(now_ms)
start_cnode 3 || finish
T_UP=$(now_ms)
wait_for 90 "C-node 3 to hold $STREAMS streams again" streams_of_is 3 "$STREAMS"
T_STREAMS=$(now_ms)
wait "$WAITER"
rc=$?
forget "$WAITER"
put cr_down_ms $((T_UP - T_KILL))
put cr_streams_ms $((T_STREAMS - T_UP))
for n in 1 2; do
  if [[ $rc == 0 && $(field "$WORK/cnode_restart.out" ok $((n + 1))) == true ]]; then
    put "cr_m${n}_ms" $(($(field "$WORK/cnode_restart.out" back_ms $((n + 1))) - T_UP))
  else
    broken "master $n did not list C-node 3's $STREAMS uids again: $(sed -n "$((n + 1))p" "$WORK/cnode_restart.out") $(tail -n1 "$WORK/cnode_restart.out.err")"
  fi
done
log "C-node restart: streams back after $(get cr_streams_ms) ms, presence on the masters after $(get cr_m1_ms) / $(get cr_m2_ms) ms"

# 4. master 2 killed; a new one under its name. It reports when its links to
# the C-nodes are up and when its presence holds every uid.
log "kill -KILL master 2 (pid ${MPID[2]})"
{ kill -KILL "${MPID[2]}"; wait_exit "${MPID[2]}" 10; } 2>/dev/null
# (from the first launch: erl is tried again while the killed one's name is
# still in epmd)
T_MLAUNCH=$(now_ms)
start_master 2 --cnodes "$CNODES" --expect "$TOTAL" || finish
wait_for 60 "the new master's full presence" grep -q '"event":"\(full\|timeout\)"' "$MLOG" || finish
FULL=$(grep '"event":"full"' "$MLOG" | head -n1)
if [[ -n $FULL ]]; then
  put mr_links_ms $(($(jget links_ms <<<"$FULL") - T_MLAUNCH))
  put mr_full_ms $(($(jget full_ms <<<"$FULL") - T_MLAUNCH))
  put mr_after_links_ms $(($(jget full_ms <<<"$FULL") - $(jget links_ms <<<"$FULL")))
  put mr_boot_ms $(($(jget vm_ms <<<"$FULL") - T_MLAUNCH))
else
  broken "the new master 2 did not list all $TOTAL uids: $(grep '"event"' "$MLOG" | tail -n1)"
fi
log "master restart: links up $(get mr_links_ms) ms after the launch, full presence $(get mr_full_ms) ms ($(get mr_after_links_ms) ms after the links)"

finish
