# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Shared by scripts/soak.sh, scripts/storm.sh and scripts/bench-takeover.sh (sourced, not run; with
# bench/lib/lib.sh for the processes, the server and the waits): the
# options, the run's directory, its verdicts and the figures both read from
# the server and the clients. Expects RUN (the script's name: soak, storm),
# ROOT and WORK to be set; SRV_PID once the server runs.

# run_options ARGS...: none, or --help (prints the script's opening comment,
# from its line 3, after the shebang and the licence line).
run_options() {
  case "${1:-}" in
    "") ;;
    -h | --help) sed -n '3,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$RUN: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
}

# run_begin: START and LOAD0 noted, a fresh WORK with an empty CHECKS file, a
# COOKIE of this run; every process started is ended (by pid) on the way out.
run_begin() {
  START=$(date +%s)
  LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
  rm -rf "$WORK"
  mkdir -p "$WORK"
  COOKIE="${RUN}_$$_${RANDOM}${RANDOM}"
  CHECKS="$WORK/checks"
  : >"$CHECKS"
  trap end_all EXIT
  trap 'log "interrupted"; exit 130' INT
  trap 'log "terminated"; exit 143' TERM
}

# run_needs FILE...: each exists, or the run cannot start. Then epmd (shared
# by every run on the machine: started if needed, never stopped) and as many
# descriptors as allowed.
run_needs() {
  local f
  for f in "$@"; do
    [[ -e $f ]] || { echo "$RUN: $f missing: run 'make all' first" >&2; exit 1; }
  done
}
run_ready() {
  epmd -daemon
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
}

# check NAME OK TEXT: records one verdict.
check() {
  local v=FAIL
  [[ $2 == 1 ]] && v=PASS
  printf '%s %s: %s\n' "$v" "$1" "$3" | tee -a "$CHECKS"
}

# run_verdict: the closing lines; fails when a check failed.
run_verdict() {
  local p f
  echo "$RUN: report in $WORK/report.md, took $(($(date +%s) - START)) s"
  p=$(grep -c '^PASS' "$CHECKS")
  f=$(grep -c '^FAIL' "$CHECKS")
  echo "$RUN: $p passed, $f failed"
  ((f == 0))
}

fd_count() { ls -U "/proc/$SRV_PID/fd" 2>/dev/null | wc -l; }

# progress NAME FIELD: FIELD's value in client NAME's last progress line
# (httpclient prints one every second to NAME.err).
progress() {
  grep '^httpclient ' "$WORK/$1.err" 2>/dev/null | tail -n1 |
    awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) { print $(i + 1); exit } }'
}

streams_are() { [[ $(stat_of streams_open) == "$1" ]]; }
nodes_are() { [[ $(stat_of erl_nodes) == "$1" ]]; }
fds_are() { [[ $(fd_count) == "$1" ]]; }

# sum FIELD: FIELD of the last progress lines of the clients RUN_CLIENTS names,
# added up (a "4600/4500" field counts its first number); nothing, and
# status 1, while one has not reported yet.
sum() {
  local n v t=0
  for n in "${RUN_CLIENTS[@]}"; do
    v=$(progress "$n" "$1")
    v=${v%%/*}
    [[ -n $v ]] || return 1
    t=$((t + v))
  done
  echo "$t"
}
sum_is() { [[ $(sum "$1") == "$2" ]]; }
# each_at_least FIELD MIN: each client RUN_READERS names (by default each of
# RUN_CLIENTS) has FIELD >= MIN.
each_at_least() {
  local n v names=("${RUN_CLIENTS[@]}")
  [[ -n ${RUN_READERS+x} ]] && names=("${RUN_READERS[@]}")
  for n in "${names[@]}"; do
    v=$(progress "$n" "$1"); [[ -n $v ]] && ((v >= $2)) || return 1
  done
}

# run_erl CODE: a one-shot Erlang node against the server (bounded).
run_erl() {
  timeout -k 5 60 erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
    -sname "${RUN}cli_$$_$RANDOM@localhost" -setcookie "$COOKIE" -eval "$1" </dev/null
}

# run_publisher SECONDS RATE UIDS: bench/erlang/soak.erl sends RATE msg/s
# to random uids of UIDS (A-B) and a broadcast every 5 s, from its own node
# straight to the C-node SRV_NODE, for SECONDS, in the background (PUB_PID,
# its report WORK/publisher.json); returns once it is connected.
run_publisher() {
  (exec timeout -k 5 $(($1 + 60)) erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
     -sname "${RUN}pub_$$@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
     -eval 'soak:publish_cli()' -extra --node "$SRV_NODE" --seconds "$1" \
     --rate "$2" --uids "$3" --stable "1-1" --procs 2 --broadcast-ms 5000 --slow-uid 0) \
    >"$WORK/publisher.json" 2>"$WORK/publisher.err" </dev/null &
  PUB_PID=$!
  BENCH_PIDS+=("$PUB_PID")
  wait_for 30 "the publisher to connect" nodes_are 1
}
