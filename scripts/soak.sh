#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make soak`: a bounded soak test of httpdcnode with faults, on loopback only.
# Needs `make all` done.
#
# One server (--master and --presence pointing at a master node that runs the
# httpdcnode application) holds SOAK_STREAMS streams from ./httpclient:
#   - stable uids 1..SOAK_STABLE, one stream each, never touched by the churn;
#   - churn uids after them: SOAK_CHURN disconnects a second (half resets,
#     half clean closes), each reconnected at once;
#   - one client that never reads (the server must end it at --max-backlog,
#     slow_closed, without slowing the others).
# For SOAK_SECONDS, bench/erlang/soak.erl publishes SOAK_RATE msg/s to
# random uids of the whole range, a broadcast every second and a stream of
# large messages for the non-reader, straight to the C-node from its own node.
# The master is killed (SIGKILL) and restarted at 1/3 and 2/3 of the run; after
# each start every stable uid must be online in its presence table again.
# The server's RSS and descriptors are sampled every SOAK_SAMPLE seconds.
#
# Checks, each printed PASS/FAIL with its figures: the server never died and
# exits 0 on SIGTERM; the stable streams received exactly what was sent to
# them (unicasts to stable uids + every broadcast once per stable stream);
# RSS and descriptors flat after warm-up (the last third of the samples
# within 5% of their mean); descriptors back to the starting count once every
# client left; the non-reader ended as slow_closed; the churn happened (90%
# of the planned disconnects at least, half resets, every reconnection
# welcomed within 10 s); every master start saw all stable uids. Writes $SOAK_DIR/report.md (default build/soak) and ends
# with "soak: P passed, F failed"; exits non-zero when a check failed.
#
#   SOAK_SECONDS  load and faults (default 600)     SOAK_STREAMS  (default 18000)
#   SOAK_STABLE   stable uids (default 2000)        SOAK_CHURN    disconnects/s (default 200)
#   SOAK_RATE     msg/s to random uids (default 20000)
#   SOAK_SAMPLE   seconds between samples (default 10)
#   SOAK_DIR      where the report and logs go (default build/soak)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
RUN=soak
source scripts/lib-run.sh
run_options "$@"

SECONDS_RUN=${SOAK_SECONDS:-600}
STREAMS=${SOAK_STREAMS:-18000}
STABLE=${SOAK_STABLE:-2000}
CHURN=${SOAK_CHURN:-200}
RATE=${SOAK_RATE:-20000}
SAMPLE=${SOAK_SAMPLE:-10}
WORK=${SOAK_DIR:-$ROOT/build/soak}
for v in SECONDS_RUN STREAMS STABLE CHURN RATE SAMPLE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "soak: ${v/SECONDS_RUN/SOAK_SECONDS} must be a number" >&2; exit 2; }
done
# Streams: the stable ones, the churning ones and the non-reader.
CHURN_CONNS=$((STREAMS - STABLE - 1))
((SECONDS_RUN >= 30 && STABLE >= 1 && CHURN_CONNS >= 1 && SAMPLE >= 1)) || {
  echo "soak: want SOAK_SECONDS >= 30 and SOAK_STREAMS > SOAK_STABLE + 1" >&2; exit 2; }
SLOW_UID=$((STREAMS))
CHURN_PROCS=3
SRC=127.0.20.1-127.0.20.8           # local addresses of the clients (bench uses 127.0.1x.*)
MAX_BACKLOG=262144                  # the non-reader is ended once this much waits for it
HISTORY_BYTES=4194304               # full within seconds (see start_server below)

# The server and client under test (a sanitized build sets HTTPDCNODE_BINDIR).
BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1
source bench/lib/lib.sh
log() { printf '%s soak: %s\n' "$(date +%T)" "$*" >&2; }

run_begin
DEADLINE=$((START + SECONDS_RUN + 360))
MASTER="soakmaster_$$@localhost"

run_needs "$BIN/httpdcnode" "$BIN/httpclient" tools/erlang/ebin/soak.beam tools/erlang/ebin/msggen.beam \
         tools/erlang/ebin/httpdcnode.app
run_ready

# --- pieces ------------------------------------------------------------------------

rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$SRV_PID/status" 2>/dev/null; }

# Runs in the background: "seconds rss_kb fds cpu%" every SAMPLE seconds (the
# server's CPU over the period before, all threads, 100 = one core), or
# "seconds dead" once the server is gone.
sampler() {
  local t0=$1 sp= ticks0 ticks1 hz
  hz=$(getconf CLK_TCK)
  trap 'kill "$sp" 2>/dev/null; exit 0' TERM
  ticks0=$(cpu_ticks "$SRV_PID")
  while :; do
    if alive "$SRV_PID"; then
      ticks1=$(cpu_ticks "$SRV_PID")
      printf '%s %s %s %s\n' $(($(date +%s) - t0)) "$(rss_kb)" "$(fd_count)" \
        $(((ticks1 - ticks0) * 100 / hz / SAMPLE)) >>"$WORK/samples"
      ticks0=$ticks1
    else
      printf '%s dead\n' $(($(date +%s) - t0)) >>"$WORK/samples"
    fi
    sleep "$SAMPLE" &
    sp=$!
    wait "$sp"
  done
}

# client NAME ARGS...: httpclient (of $BIN) in the background, JSON to NAME.json,
# progress lines (every second) to NAME.err; sets CLI_PID.
client() {
  local name=$1
  shift
  (exec "$BIN/httpclient" -p "$SRV_PORT" --src "$SRC" --json "$@") \
    >"$WORK/$name.json" 2>"$WORK/$name.err" &
  CLI_PID=$!
  BENCH_PIDS+=("$CLI_PID")
}

WAIT_ON_SERVER=1     # wait_for (bench/lib/lib.sh) gives up when the server exits

welcomed_at_least() { local w; w=$(progress "$1" welcomed); [[ -n $w ]] && ((w >= $2)); }
msgs_are() { [[ $(progress "$1" msgs) == "$2" ]]; }
presence_lines() { grep -c '^presence: ok' "$WORK/master-$1.log" 2>/dev/null; }
presence_done() { grep -q '^presence: ' "$WORK/master-$1.log" 2>/dev/null; }

# start_master N: the master node (httpdcnode application, presence) under
# the name the server was given; it prints "presence: ..." once every stable
# uid is online at the server again. Sets MASTER_PID (the beam's own pid).
start_master() {
  (exec erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell -sname "$MASTER" \
     -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" -eval 'soak:master_cli()' \
     -extra --node "$SRV_NODE" --stable "1-$STABLE" --timeout-ms "$2") \
    >"$WORK/master-$1.log" 2>&1 </dev/null &
  MASTER_PID=$!
  BENCH_PIDS+=("$MASTER_PID")
}

# fault N: SIGKILL to the master, until the server saw it go; a new master;
# until it reports every stable uid online. Records fault-N.* figures.
fault() {
  local n=$1 t0 t1
  log "fault $n: kill -KILL master (pid $MASTER_PID)"
  # (braces: bash's "Killed" notice for the job goes to /dev/null too)
  { kill -KILL "$MASTER_PID"; wait_exit "$MASTER_PID" 10; } 2>/dev/null
  t0=$(date +%s%N)
  # The publisher's connection stays: one Erlang node left.
  wait_for 30 "the server to see the master go" nodes_are 1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000)) >"$WORK/fault-$n.noticed_ms"
  start_master "$((n + 1))" 30000
  wait_for 60 "presence after restart $n" presence_done "$((n + 1))"
  echo $((($(date +%s%N) - t1) / 1000000)) >"$WORK/fault-$n.back_ms"
  log "fault $n: $(cat "$WORK/master-$((n + 1)).log" | grep '^presence' | head -n1)"
}

# within_pct COLUMN PCT: the last third of the samples (at least 2) all within
# PCT% of their mean; prints "mean=... min=... max=... n=..." and returns 1 if not.
within_pct() {
  awk -v c="$1" -v pct="$2" '$2 != "dead" { v[++n] = $c }
    END { k = int((n + 2) / 3); if (k < 2) k = 2; if (k > n) k = n
      s = 0; for (i = n - k + 1; i <= n; i++) s += v[i]; m = s / k
      lo = hi = v[n]; bad = 0
      for (i = n - k + 1; i <= n; i++) {
        if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i]
        if (v[i] < m * (1 - pct / 100) || v[i] > m * (1 + pct / 100)) bad = 1 }
      printf "last %d of %d samples: mean %.0f, min %d, max %d (%.1f%% .. +%.1f%%)\n",
        k, n, m, lo, hi, (lo - m) * 100 / m, (hi - m) * 100 / m
      exit (n < 2 || bad) }' "$WORK/samples"
}

# --- the run -----------------------------------------------------------------------

log "$STREAMS streams ($STABLE stable, $CHURN_CONNS churning at $CHURN/s, 1 non-reader)," \
    "$RATE msg/s + 1 broadcast/s for $SECONDS_RUN s, master killed twice; in $WORK"
# The history arena is touched as it fills (up to --history-bytes) and then
# stays flat: a small one is full within seconds, so that the flatness check
# looks at the server, not at the arena warming up.
start_server soak --master "$MASTER" --presence httpdcnode_presence \
  --max-backlog "$MAX_BACKLOG" --history-bytes "$HISTORY_BYTES" ||
  { log "the server did not start"; exit 1; }
log "server pid $SRV_PID, node $SRV_NODE, port $SRV_PORT, admin port $SRV_ADMIN_PORT"
start_master 1 180000
wait_for 60 "the server to connect to the master" nodes_are 1 || exit 1
# The server with its master and no clients: the count to come back to.
FD0=$(fd_count)
RSS0=$(rss_kb)

client stable -n "$STABLE" -P 1 --uid-base 1 --hold 86400 --max-time "$(left)"
STABLE_PID=$CLI_PID
client slow -n 1 -P 1 --uid-base "$SLOW_UID" --no-read --hold 86400 --max-time "$(left)"
SLOW_PID=$CLI_PID
wait_for 120 "$((STABLE + 1)) streams" streams_are "$((STABLE + 1))" || exit 1
client churn -n "$CHURN_CONNS" -P "$CHURN_PROCS" --uid-base "$((STABLE + 1))" --churn "$CHURN" \
  --churn-reset 50 --hold 86400 --max-time "$(left)"
CHURN_PID=$CLI_PID
wait_for 180 "$CHURN_CONNS churning streams" welcomed_at_least churn "$CHURN_CONNS" || exit 1
wait_for 120 "the first presence" presence_done 1
log "all $STREAMS streams up; $(grep '^presence' "$WORK/master-1.log")"

T0=$(date +%s)
sampler "$T0" &
SAMPLER_PID=$!
BENCH_PIDS+=("$SAMPLER_PID")
(exec timeout -k 5 $((SECONDS_RUN + 120)) erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
   -sname "soakpub_$$@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
   -eval 'soak:publish_cli()' -extra --node "$SRV_NODE" --seconds "$SECONDS_RUN" \
   --rate "$RATE" --uids "1-$((STREAMS - 1))" --stable "1-$STABLE" --procs 4 \
   --broadcast-ms 1000 --slow-uid "$SLOW_UID" --slow-rate 20 --slow-pad 32768) \
  >"$WORK/publisher.json" 2>"$WORK/publisher.err" </dev/null &
PUB_PID=$!
BENCH_PIDS+=("$PUB_PID")

for n in 1 2; do
  at=$((T0 + SECONDS_RUN * n / 3))
  while (($(date +%s) < at)) && alive "$PUB_PID"; do sleep 0.2; done
  fault "$n"
done

log "waiting for the publisher (its $SECONDS_RUN s and the final sync)"
wait_exit "$PUB_PID" "$(left $((SECONDS_RUN + 130)))" || end_pid "$PUB_PID" 5
PUB_RC=$WAIT_RC
PUB=$(grep '^{' "$WORK/publisher.json" | tail -n1)
EXPECTED=$(jget expected_stable <<<"$PUB")
log "publisher: $PUB"
end_pid "$SAMPLER_PID" 5

# Every stable message is in the kernel or the client by now: wait for the
# count (progress every second), then end the clients.
[[ -n $EXPECTED ]] && wait_for 30 "the stable streams to count $EXPECTED" msgs_are stable "$EXPECTED"
STATS_LOADED=$(stats)
end_pid "$STABLE_PID" 10
end_pid "$CHURN_PID" 10
end_pid "$SLOW_PID" 10
wait_for 60 "0 streams" streams_are 0
# The publisher node is gone; the master stays connected, as at the start.
wait_for 30 "the master alone connected" nodes_are 1
wait_for 30 "$FD0 descriptors" fds_are "$FD0"
FD_END=$(fd_count)
RSS_END=$(rss_kb)
STATS_END=$(stats)
printf '%s\n' "$STATS_END" >"$WORK/stats-end.json"
SRV_ALIVE=0
alive "$SRV_PID" && SRV_ALIVE=1
end_pid "$MASTER_PID" 5
stop_server
SRV_STATUS=$SRV_EXIT

# --- verdicts ----------------------------------------------------------------------

sj() { jget "$2" <"$WORK/$1.json"; }
st() { jget "$1" <<<"$STATS_END"; }
deaths=$(grep -c dead "$WORK/samples")
crash_ok=0
[[ $SRV_ALIVE == 1 && $deaths == 0 && $SRV_STATUS == 0 ]] && crash_ok=1
check crashes $crash_ok "$((1 - crash_ok)) (alive at every sample and at the end: $SRV_ALIVE; exit status on SIGTERM: $SRV_STATUS)"

got=$(sj stable msgs)
ok=0
[[ -n $EXPECTED && $got == "$EXPECTED" && $PUB_RC == 0 ]] && ok=1
check "stable delivery" $ok "sent $EXPECTED, delivered $got ($(jget sent_stable <<<"$PUB") unicasts to stable uids + $(jget broadcasts <<<"$PUB") broadcasts x $STABLE stable streams; publisher status $PUB_RC, synced $(jget synced <<<"$PUB"))"

ok=0
[[ $(sj stable welcomed) == "$STABLE" && $(sj stable failed) == 0 && $(sj stable closed_by_server) == 0 && $(sj stable stream_errors) == 0 ]] && ok=1
check "stable streams intact" $ok "welcomed $(sj stable welcomed) of $STABLE, failed $(sj stable failed), closed by server $(sj stable closed_by_server), malformed $(sj stable stream_errors)"

txt=$(within_pct 2 5)
ok=$?
if [[ -n ${HTTPDTEST_SANITIZED:-} ]]; then
  check "RSS flat" 1 "not judged under a sanitizer (its allocator keeps freed memory): VmRSS kB, $txt"
else
  check "RSS flat" $((ok == 0)) "VmRSS kB, $txt"
fi
txt=$(within_pct 3 5)
ok=$?
check "descriptors flat" $((ok == 0)) "$txt"
check "descriptors back" $([[ $FD_END == "$FD0" ]] && echo 1 || echo 0) "$FD0 at the start (server + master, no client), $FD_END after every client left"

ok=0
[[ $(st slow_closed) == 1 ]] && ok=1
check "non-reader ended" $ok "slow_closed $(st slow_closed) (want 1), at --max-backlog $MAX_BACKLOG; $(jget slow_sent <<<"$PUB") large messages sent to it"

planned=$((CHURN * SECONDS_RUN))
cc=$(sj churn churn_closed)
cr=$(sj churn churn_reset)
ok=0
# Each client process alternates resets and closes: half, give or take one each.
[[ -n $cc ]] && ((cc >= planned * 9 / 10 && cr * 2 >= cc - CHURN_PROCS && cr * 2 <= cc + CHURN_PROCS)) &&
  [[ $(sj churn failed) == 0 ]] && ok=1
check churn $ok "$cc disconnects ($cr resets, the rest clean closes; about $planned planned), each reconnected: failed $(sj churn failed), closed by server $(sj churn closed_by_server)"

ok=0
pl=0
for n in 1 2 3; do pl=$((pl + $(presence_lines "$n"))); done
[[ $pl == 3 && -e $WORK/fault-2.back_ms ]] && ok=1
check "master restarts" $ok "2 kills; presence complete after start 1, 2, 3: $pl of 3 ($(for n in 1 2; do printf 'restart %s: master gone from /stats after %s ms, all stable uids online %s ms after that; ' "$n" "$(cat "$WORK/fault-$n.noticed_ms" 2>/dev/null)" "$(cat "$WORK/fault-$n.back_ms" 2>/dev/null)"; done)erl_connects $(st erl_connects))"

write_soak_report() {
  local f="$WORK/report.md"
  {
    echo "# Soak test, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores; load average" \
         "$LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo
    echo "$STREAMS streams: $STABLE stable, $CHURN_CONNS churning ($CHURN disconnects/s, half resets," \
         "in $CHURN_PROCS client processes), 1 non-reader. $RATE msg/s to random uids 1..$((STREAMS - 1))," \
         "1 broadcast/s, 20 x 32 KiB/s to the non-reader, for $SECONDS_RUN s; master killed and" \
         "restarted at 1/3 and 2/3."
    echo
    echo "## Checks"
    echo
    sed 's/^/- /' "$CHECKS"
    echo
    echo "## Server samples (every $SAMPLE s)"
    echo
    echo "| s | VmRSS kB | descriptors | server CPU % (since the sample before) |"
    echo "| ---: | ---: | ---: | ---: |"
    echo "| before clients | $RSS0 | $FD0 | |"
    awk '{ printf "| %s | %s | %s | %s |\n", $1, $2, ($3 == "" ? "-" : $3), $4 }' "$WORK/samples"
    echo "| after clients | $RSS_END | $FD_END | |"
    echo
    echo "## Publisher"
    echo
    echo '```'
    echo "$PUB"
    echo '```'
    echo
    echo "## Clients"
    echo
    echo '```'
    for c in stable churn slow; do echo "$c: $(cat "$WORK/$c.json")"; done
    echo '```'
    echo
    echo "## Server counters at the end (GET /stats)"
    echo
    echo '```'
    echo "$STATS_END"
    echo '```'
    echo
    echo "Under load, before the clients left:"
    echo
    echo '```'
    echo "$STATS_LOADED"
    echo '```'
  } >"$f"
}
write_soak_report

echo "soak: samples (s rss_kB fds cpu%): $(tr '\n' ';' <"$WORK/samples")"
echo "soak: server counters: $STATS_END"
echo "soak: load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
run_verdict
