# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Shared helpers for scripts/bench.sh (sourced, not run): processes we start
# and end by pid, bounded waits, the server, the load client, the publisher,
# flat-JSON fields and a little arithmetic. Expects ROOT, BIN, WORK and DEADLINE
# (epoch seconds after which every wait gives up) to be set.

BENCH_PIDS=()        # every background process started here, ended by pid
PUB_SEQ=0            # publisher node names: benchpub_<pid>_<n>

log() { printf '%s bench: %s\n' "$(date +%T)" "$*" >&2; }

# Seconds left before DEADLINE, at most $1 when given.
left() {
  local l=$((DEADLINE - $(date +%s)))
  ((l < 1)) && l=1
  [[ -n ${1:-} ]] && ((l > $1)) && l=$1
  echo "$l"
}

# A TCP port free on 127.0.0.1 right now (bind port 0, read it, close).
free_port() {
  perl -MIO::Socket::INET -e \
    '$s = IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1", LocalPort => 0)
       or die "no port: $!\n"; print $s->sockport, "\n"'
}

# Value of "KEY": in one flat JSON object on stdin (numbers, strings unquoted).
jget() {
  sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" | head -n1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_for SECONDS WHAT CMD...: until CMD succeeds (bounded by DEADLINE too);
# with WAIT_ON_SERVER=1, gives up early when the server (SRV_PID) exits.
# Returns 1 on timeout.
wait_for() {
  local end=$(($(date +%s) + $(left "$1"))) what=$2
  shift 2
  while (($(date +%s) < end)); do
    "$@" && return 0
    if [[ ${WAIT_ON_SERVER:-0} == 1 ]] && ! alive "${SRV_PID:-0}"; then
      log "the server exited while waiting for $what"
      return 1
    fi
    sleep 0.1
  done
  log "timed out waiting for $what"
  return 1
}

alive() {
  local st
  [[ -r /proc/$1/stat ]] || return 1
  st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
  [[ $st != Z ]]
}

children_of() { cat /proc/"$1"/task/*/children 2>/dev/null; }

# Waits up to $2 seconds for pid $1 to exit; its status in WAIT_RC.
wait_exit() {
  local pid=$1 end=$(($(date +%s) + $2))
  while alive "$pid" && (($(date +%s) < end)); do sleep 0.05; done
  if alive "$pid"; then WAIT_RC=; return 1; fi
  wait "$pid" 2>/dev/null
  WAIT_RC=$?
  forget "$pid"
  return 0
}

forget() {
  local p keep=()
  for p in "${BENCH_PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  BENCH_PIDS=("${keep[@]}")
}

# SIGTERM to pid $1, up to $2 seconds (default 5) to exit, then SIGKILL to it
# and to the children it had (the load client's workers).
end_pid() {
  local pid=$1 grace=${2:-5} kids
  alive "$pid" || { wait "$pid" 2>/dev/null; WAIT_RC=$?; forget "$pid"; return 0; }
  kids=$(children_of "$pid")
  kill -TERM "$pid" 2>/dev/null
  wait_exit "$pid" "$grace" && return 0
  log "pid $pid did not stop on SIGTERM: SIGKILL"
  local k
  for k in $kids; do kill -KILL "$k" 2>/dev/null; done
  kill -KILL "$pid" 2>/dev/null
  wait_exit "$pid" 5
  WAIT_RC=137
}

end_all() {
  local p
  for p in "${BENCH_PIDS[@]}"; do end_pid "$p" 5; done
}

# --- the server ---------------------------------------------------------------

# start_server TAG [OPTION...]: starts ./httpdcnode on a free port, its admin
# listener on another, with no master (and the options given) and waits
# (bounded) until it answers /stats and its C-node name is in epmd.
# Sets SRV_PID SRV_PORT SRV_ADMIN_PORT SRV_NODE SRV_LOG.
start_server() {
  local tag=$1 try
  shift
  SRV_NODE="bench${tag}_$$"
  SRV_LOG="$WORK/server-$tag.log"
  for try in 1 2 3; do
    SRV_PORT=$(free_port) || return 1
    SRV_ADMIN_PORT=$(free_port) || return 1
    (exec "$BIN/httpdcnode" --listen "127.0.0.1:$SRV_PORT" \
       --admin-listen "127.0.0.1:$SRV_ADMIN_PORT" --name "$SRV_NODE@localhost" \
       --master "" --cookie "$COOKIE" -q "$@") 2>>"$SRV_LOG" &
    SRV_PID=$!
    BENCH_PIDS+=("$SRV_PID")
    local end=$(($(date +%s) + $(left 15)))
    while (($(date +%s) < end)); do
      alive "$SRV_PID" || break
      if stats >/dev/null && epmd -names 2>/dev/null | grep -q "^name $SRV_NODE at"; then
        SRV_NODE="$SRV_NODE@localhost"
        return 0
      fi
      sleep 0.05
    done
    end_pid "$SRV_PID" 3
    log "server did not come up (try $try); log: $(tail -n3 "$SRV_LOG" | tr '\n' ' ')"
  done
  return 1
}

stats() { curl -s --max-time 3 "http://127.0.0.1:$SRV_ADMIN_PORT/stats"; }
stat_of() { stats | jget "$1"; }

# GET /probe?reset=1 (server started with --probe-latency): the message ages
# at each hop since the last call, and a fresh start for the next.
probe_take() { curl -s --max-time 3 "http://127.0.0.1:$SRV_ADMIN_PORT/probe?reset=1"; }

# The object of one hop in probe_take's JSON: probe_hop HOP <<<"$json".
probe_hop() { sed -n "s/.*\"$1\":{\([^}]*\)}.*/\1/p"; }

# Ends the server; sets SRV_EXIT ("0" for a clean exit, "crashed before stop"
# when it had died already, or the status it ended with).
stop_server() {
  if ! alive "$SRV_PID"; then
    wait "$SRV_PID" 2>/dev/null
    SRV_EXIT="crashed before stop (status $?)"
    forget "$SRV_PID"
    return 1
  fi
  end_pid "$SRV_PID" 5
  SRV_EXIT=$WAIT_RC
  [[ $SRV_EXIT == 0 ]]
}

# wait_streams N SECONDS [CLIENT_PID]: until the server holds exactly N
# streams; gives up early when the server (or the client) exits.
wait_streams() {
  local want=$1 end=$(($(date +%s) + $(left "$2"))) cpid=${3:-} n=
  while (($(date +%s) < end)); do
    alive "$SRV_PID" || { log "server exited while waiting for $want streams"; return 1; }
    n=$(stat_of streams_open)
    [[ $n == "$want" ]] && return 0
    if [[ -n $cpid ]] && ! alive "$cpid"; then
      log "client exited at $n of $want streams"
      return 1
    fi
    sleep 0.05
  done
  log "timed out at ${n:-?} of $want streams"
  return 1
}

# --- the load client -----------------------------------------------------------

# start_client OUT ARGS...: ./httpclient in the background, JSON to OUT.json,
# progress to OUT.err; sets CLI_PID.
start_client() {
  local out=$1
  shift
  (exec "$BIN/httpclient" -p "$SRV_PORT" --json -q "$@") >"$out.json" 2>"$out.err" &
  CLI_PID=$!
  BENCH_PIDS+=("$CLI_PID")
}

# finish_client PID SECONDS: waits for the client to end by itself, else
# stops it (it still prints its summary). Returns 1 if it had to be stopped.
finish_client() {
  if wait_exit "$1" "$(left "$2")"; then return 0; fi
  end_pid "$1" 10
  return 1
}

# --- the publisher -------------------------------------------------------------

# publish SECONDS ARGS...: runs msggen against the server's C-node (reached by
# its published name); its JSON line in PUB, its stderr in pub-N.err;
# non-zero when it failed.
publish() {
  local bound=$1 rc
  shift
  PUB_SEQ=$((PUB_SEQ + 1))
  # In the background and waited for, so that a signal to this script is
  # handled at once (the trap then ends it by pid). Its schedulers do not
  # busy-wait when idle (+sbwt none...): on a machine it shares with the
  # server, that spinning took CPU the server needed (paced: 13 against
  # 5 us of the publisher's CPU per message).
  timeout -k 5 "$(left "$bound")" erl +sbwt none +sbwtdcpu none +sbwtdio none \
    -noshell -sname "benchpub_$$_$PUB_SEQ@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" -eval 'msggen:cli()' \
    -extra --node "$SRV_NODE" "$@" >"$WORK/pub-$PUB_SEQ.out" 2>"$WORK/pub-$PUB_SEQ.err" </dev/null &
  local pid=$!
  BENCH_PIDS+=("$pid")
  wait "$pid"
  rc=$?
  forget "$pid"
  PUB=$(grep '^{' "$WORK/pub-$PUB_SEQ.out" | tail -n1)
  [[ $rc -eq 0 && -n $PUB ]]
}

# The publisher's last error, with what a missing reply means.
pub_error() {
  local e
  e=$(tail -n1 "$WORK/pub-$PUB_SEQ.err" 2>/dev/null)
  [[ -n $e ]] || e="no output (killed at its time bound?)"
  case "$e" in
    *no_reply*) e="$e: the C-node did not answer within 10 s (the request after the last message)" ;;
  esac
  printf '%s\n' "$e"
}

# --- machine -------------------------------------------------------------------

# Kernel socket memory in bytes: TCP buffer pages (sockstat) + slab.
kernel_bytes() {
  local pages slab
  pages=$(awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1) }' \
            /proc/net/sockstat)
  slab=$(awk '$1 == "Slab:" { print $2 }' /proc/meminfo)
  echo $((${pages:-0} * $(getconf PAGESIZE) + ${slab:-0} * 1024))
}

# --- arithmetic ------------------------------------------------------------------

# Median of the arguments (numbers); empty when none.
median() {
  printf '%s\n' "$@" | grep -E '^-?[0-9.]+$' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# Least-squares slope of "x y" lines on stdin.
slope() {
  awk 'NF >= 2 { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
       END { d = n * sxx - sx * sx; if (n >= 2 && d != 0) printf "%.1f\n", (n * sxy - sx * sy) / d }'
}

# calc EXPR: awk arithmetic, printed with format $2 (default %.1f);
# max_ms(US) is microseconds as milliseconds, at least 0.001.
# utime + stime of a process, in clock ticks (all its threads).
cpu_ticks() {
  awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

calc() {
  awk "function max_ms(us) { return us < 1 ? 0.001 : us / 1000 }
       BEGIN { printf \"${2:-%.1f}\n\", $1 }"
}
