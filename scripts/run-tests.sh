#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test, once everything is built (`make test` calls it from the
# repository root): each cmocka binary build/tests/<layer>/test_* (they
# mirror tests/unit/<layer>/), the layer check (scripts/check-layers.py),
# the docs' link check (scripts/check-docs.py), then every EUnit
# module build/tests/ebin/*_tests.beam over two Erlang test nodes, the Elixir
# wrapper's mix test (tools/elixir), then a tiny
# `make bench` (scripts/bench.sh --smoke), a 60-s `make soak`, a small
# `make storm`, a small `make bench-million`, a small `make bench-process` and a
# small `make cluster-sim`.
# Ends with one line "tests: N passed, M failed"; exits non-zero when a test
# failed or a runner crashed or ran out of time.
#   UNIT_TIMEOUT  seconds for one cmocka binary (default 120)
#   ERL_TIMEOUT   seconds for the whole Erlang run (default 900)
#   TEST_BUILD    where the cmocka binaries are, below tests/ (default build)
#   HTTPDCNODE_BINDIR  where httpdcnode and httpclient are (default .)
#   SANITIZE      the -fsanitize= list they were built with (make test
#                 SANITIZE=... sets these three): every sanitizer report
#                 counts as a failure and is printed at the end.
#   VALGRIND      a valgrind command (make check-all): the cmocka binaries
#                 and every server the Erlang tests start run under it, each
#                 valgrind log with errors counts as a failure and is printed.
#   HTTPDTEST_MODULES  only these EUnit modules (space-separated names)
#   EUNIT_SHARDS  test nodes running EUnit modules at once (default 2)
#   BENCH_SMOKE   0: no bench smoke
#   SOAK          0: no soak
#   STORM         0: no reconnect storm
#   MILLION       0: no small bench-million
#   BENCH_PROCESS 0: no small bench-process
#   CLUSTER_SIM   0: no small cluster-sim
#   ELIXIR        0: no mix test of the Elixir wrapper
set -uo pipefail
cd "$(dirname "$0")/.."

UNIT_TIMEOUT=${UNIT_TIMEOUT:-120}
ERL_TIMEOUT=${ERL_TIMEOUT:-900}
TEST_BUILD=${TEST_BUILD:-build}
export HTTPDCNODE_BINDIR=${HTTPDCNODE_BINDIR:-.}
export HTTPDCNODE_BIN=${HTTPDCNODE_BIN:-$PWD/$HTTPDCNODE_BINDIR/httpdcnode}
SANITIZE=${SANITIZE:-}
VALGRIND=${VALGRIND:-}

passed=0
failed=0

# Adds the closing line "NAME: P passed, F failed" of a script's output file
# to the totals; a run without one is a failure.
count_result() {
  local line
  line=$(grep -E "^$1: [0-9]+ passed, [0-9]+ failed\$" "$2" | tail -n1)
  if [[ -z $line ]]; then
    echo "run-tests: $1 ended without a result"
    failed=$((failed + 1))
    return
  fi
  [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]
  passed=$((passed + BASH_REMATCH[1]))
  failed=$((failed + BASH_REMATCH[2]))
}

# The seconds each phase took, printed at the end (the suite must stay
# within its time: see docs/testing.md).
phases=()
phase_at=0
phase() {
  [[ ${#phases[@]} -gt 0 ]] && phases[-1]+=" $((SECONDS - phase_at))"
  phases+=("$1")
  phase_at=$SECONDS
  echo "== $1"
}

# Erlang distribution needs epmd. It is shared by every run on the machine:
# start it if needed, never stop it.
epmd -daemon
# The tests hold thousands of sockets; the servers they start inherit this.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

work=$(mktemp -d "${TMPDIR:-/tmp}/httpdtest.XXXXXX")
: >"$work/started"
export HTTPDTEST_PIDDIR="$work/pids"
mkdir -p "$HTTPDTEST_PIDDIR"

# Every OS process the Erlang tests start is noted in $HTTPDTEST_PIDDIR
# (file name: pid, content: a node name on its command line) and forgotten
# when it exits. Whatever is left (the test node crashed or timed out) is
# ended here, by pid, after checking that the pid is still that process.
end_leftovers() {
  local f pid tag
  for f in "$HTTPDTEST_PIDDIR"/*; do
    [[ -f $f ]] || continue
    pid=${f##*/}
    tag=$(cat "$f")
    if [[ -n $tag && -r /proc/$pid/cmdline ]] &&
       tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$tag"; then
      echo "run-tests: ending leftover process $pid ($tag)"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}
trap '[[ -n ${csim_pid:-} ]] && kill "$csim_pid" 2>/dev/null; end_leftovers; rm -rf "$work"' EXIT

# Sanitized processes (the servers started by the Erlang tests, too) write
# their reports to $san instead of a stderr nobody reads, and stop at the
# first one; user-set *SAN_OPTIONS come after ours, so they win.
san="$work/sanitizer"
if [[ -n $SANITIZE ]]; then
  mkdir -p "$san"
  log="log_path=$san/report:log_exe_name=1"
  export ASAN_OPTIONS="$log:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export UBSAN_OPTIONS="$log:print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export TSAN_OPTIONS="$log:halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizer/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  # Timeouts in the Erlang tests are multiplied by this (httpdtest_os:scaled/1).
  export HTTPDTEST_TIME_SCALE=${HTTPDTEST_TIME_SCALE:-2}
  # A sanitizer's allocator keeps freed memory (quarantine): tests and the
  # soak do not judge the resident size then.
  export HTTPDTEST_SANITIZED=1
  echo "== sanitizers: $SANITIZE (reports in $san)"
fi
vg="$work/valgrind"
if [[ -n $VALGRIND ]]; then
  mkdir -p "$vg"
  VALGRIND="$VALGRIND --log-file=$vg/report.%p"
  export HTTPDTEST_SERVER_PREFIX=$VALGRIND
  export HTTPDTEST_TIME_SCALE=${HTTPDTEST_TIME_SCALE:-10}
  UNIT_TIMEOUT=$((UNIT_TIMEOUT * 5))
  echo "== under $VALGRIND"
fi

# --- C unit tests (cmocka) ---------------------------------------------------
shopt -s nullglob
phase "cmocka"
units=0
for t in "$TEST_BUILD"/tests/*/test_*; do
  [[ -f $t && -x $t ]] || continue
  units=$((units + 1))
  echo "== $t"
  # shellcheck disable=SC2086  # $VALGRIND: a command and its options
  timeout --kill-after=5 "$UNIT_TIMEOUT" $VALGRIND "$t" >"$work/unit.out" 2>&1
  rc=$?
  cat "$work/unit.out"
  # one summary per cmocka group; a binary may run several groups
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]\+\) test(s)\..*/\1/p' "$work/unit.out" |
      awk '{ s += $1 } END { print s + 0 }')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]\+\) test(s).*/\1/p' "$work/unit.out" |
      awk '{ s += $1 } END { print s + 0 }')
  if [[ $rc -ne 0 && $f -eq 0 ]]; then
    echo "run-tests: $t exited with status $rc"
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
done

echo "== $units cmocka binaries"
if [[ $units -eq 0 ]]; then
  echo "run-tests: no cmocka binary in $TEST_BUILD/tests/*/ (make test builds them)"
  failed=$((failed + 1))
fi

# --- The layers of src/, from the objects' symbols: one test -----------------
phase "layer check"
if scripts/check-layers.py "$TEST_BUILD"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# --- The docs: links resolve, the options are --help's: one test ------------
echo "== docs check"
if HTTPDCNODE_BIN=$HTTPDCNODE_BIN scripts/check-docs.py; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# --- Independent clients from the npm registry (tests/js), pinned by its lock
# file; installed again only when the lock file changed.
if [[ ! -d tests/js/node_modules || tests/js/package-lock.json -nt tests/js/node_modules ]]; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "run-tests: npm ci in tests/js failed: the tests of independent clients will fail"
  touch tests/js/node_modules 2>/dev/null || true
fi

# --- Erlang tests (EUnit), over EUNIT_SHARDS test nodes at once --------------
# The modules are dealt to the shards by their usual seconds (the heaviest
# first, each to the shard with the least so far); the two browser modules
# stay together (one Chromium at a time). Each shard's output is printed
# whole once all are done; the counts add up.
eunit_weight() {
  case $1 in
    browser_tests+chat_browser_tests) echo 110 ;;
    core_storm_tests|install_tests) echo 42 ;;
    proxy_tests|cluster_delivery_tests|core_ws_hostile_tests|cluster_reliability_tests) echo 27 ;;
    core_post_tests|chat_room_tests|core_inbox_tests|core_masters_tests) echo 20 ;;
    core_hostile_http_tests|core_reliability_tests|cluster_silent_tests|cookie_tests) echo 14 ;;
    client_ws_tests|core_master_tests|core_drain_tests|core_numbered_tests) echo 11 ;;
    core_hostile_erlang_tests|core_inbox_window_tests|client_eventsource_tests) echo 9 ;;
    core_input_total_tests|cluster_partition_tests|httpdcnode_inbox_tests) echo 9 ;;
    httpdcnode_inbox_pool_tests|core_conn_presence_tests|httpdcnode_reply_tests) echo 8 ;;
    *) echo 4 ;;
  esac
}
beams=(build/tests/ebin/*_tests.beam)
if [[ ${#beams[@]} -gt 0 ]]; then
  read -r -a mods <<<"${HTTPDTEST_MODULES:-$(printf '%s ' "${beams[@]##*/}" | sed 's/\.beam//g')}"
  units=()
  together=""
  for m in "${mods[@]}"; do
    case $m in
      browser_tests|chat_browser_tests) together+="${together:++}$m" ;;
      *) units+=("$m") ;;
    esac
  done
  [[ -n $together ]] && units+=("$together")
  shards=${EUNIT_SHARDS:-2}
  [[ ${#units[@]} -lt $shards ]] && shards=${#units[@]}
  declare -a load shard_mods
  for ((i = 0; i < shards; i++)); do load[i]=0; shard_mods[i]=""; done
  while read -r w u; do
    best=0
    for ((i = 1; i < shards; i++)); do ((load[i] < load[best])) && best=$i; done
    load[best]=$((load[best] + w))
    shard_mods[best]+="${u//+/ } "
  done < <(for u in "${units[@]}"; do echo "$(eunit_weight "$u") $u"; done | sort -rn)
  phase "EUnit"
  cookie="httpdtest_$$_${RANDOM}${RANDOM}"
  pids=()
  for ((i = 0; i < shards; i++)); do
    node="httpdtest_$$_$i@localhost"
    echo "== EUnit on $node: ${shard_mods[i]}"
    HTTPDTEST_MODULES="${shard_mods[i]}" timeout --kill-after=10 "$ERL_TIMEOUT" \
      erl -sname "$node" -setcookie "$cookie" -noshell \
          -pa build/tests/ebin -pa tools/erlang/ebin \
          -eval 'httpdtest_report:main().' </dev/null >"$work/erl.$i.out" 2>&1 &
    pids[i]=$!
  done
  for ((i = 0; i < shards; i++)); do
    wait "${pids[i]}"
    rc=$?
    echo "== EUnit shard $i (${shard_mods[i]% })"
    cat "$work/erl.$i.out"
    line=$(grep -E '^eunit-counts: [0-9]+ [0-9]+$' "$work/erl.$i.out" | tail -n1)
    if [[ -z $line ]]; then
      echo "run-tests: the Erlang test node of shard $i ended without results (status $rc)"
      failed=$((failed + 1))
      continue
    fi
    read -r _ p f <<<"$line"
    passed=$((passed + p))
    failed=$((failed + f))
    if [[ $rc -ne 0 && $f -eq 0 ]]; then
      echo "run-tests: the Erlang test node of shard $i exited with status $rc"
      failed=$((failed + 1))
    fi
  done
fi

# --- The Elixir wrapper (tools/elixir): its mix test, offline -----------------
# Against the real binary, with the EUnit helpers of build/tests/ebin; built
# in $TEST_BUILD/elixir, not in the tree. Counted from ExUnit's last line.
if [[ ${ELIXIR:-1} != 0 ]]; then
  phase "mix test (tools/elixir)"
  if ! command -v mix >/dev/null; then
    echo "run-tests: mix not found: install elixir (scripts/install-deps.sh does)"
    failed=$((failed + 1))
  else
    (cd tools/elixir && MIX_BUILD_ROOT="$PWD/../../$TEST_BUILD/elixir" \
       timeout --kill-after=10 300 mix test --warnings-as-errors) </dev/null 2>&1 |
      tee "$work/mix.out"
    rc=${PIPESTATUS[0]}
    if [[ $(grep -E '^([0-9]+ doctests?, )?[0-9]+ tests?, [0-9]+ failures?' "$work/mix.out" |
            tail -n1) =~ ([0-9]+)\ tests?,\ ([0-9]+)\ failures? ]]; then
      passed=$((passed + BASH_REMATCH[1] - BASH_REMATCH[2]))
      failed=$((failed + BASH_REMATCH[2]))
      if [[ $rc -ne 0 && ${BASH_REMATCH[2]} -eq 0 ]]; then
        echo "run-tests: mix test exited with status $rc"
        failed=$((failed + 1))
      fi
    else
      echo "run-tests: mix test ended without results (status $rc)"
      failed=$((failed + 1))
    fi
  fi
fi

# --- make bench, tiny: the benchmark tools still work end to end -----------
if [[ ${BENCH_SMOKE:-1} != 0 ]]; then
  phase "bench smoke"
  timeout --kill-after=10 120 scripts/bench.sh --smoke </dev/null 2>&1 | tee "$work/smoke.out"
  count_result "bench smoke" "$work/smoke.out"
fi

# --- cluster-sim, small: hosts in network namespaces, two faults (make cluster-sim: six) ---
# A silent partition between master m1 and C-node c1 under 200 msg/s through
# m1, then m1 frozen (SIGSTOP) while messages go through m2; tick time 4 s:
# each dropped link seen within 1.25 ticks + 2 s, no message twice, nothing
# lost while m1 is frozen. Report in build/cluster-sim/test/result.json. It
# waits out tick times most of its minute: it runs beside the soak and the
# storm (its own namespaces, ports and epmds), its result read after them.
csim_pid=""
if [[ ${CLUSTER_SIM:-1} != 0 ]]; then
  echo "== cluster-sim (small), beside the soak and the storm"
  CLUSTER_SIM_SMALL=1 NETDELAY="$TEST_BUILD/netdelay" timeout --kill-after=10 180 \
    scripts/cluster-sim.sh </dev/null >"$work/csim.out" 2>&1 &
  csim_pid=$!
fi

# --- soak, 60 s at a smaller scale (make soak runs the full one) -----------------
# 3,000 streams (500 stable), 100 disconnects/s (half resets), 5,000 msg/s to
# random uids + a broadcast a second, the master killed and restarted twice,
# one client that never reads. Report in build/soak/test/report.md.
if [[ ${SOAK:-1} != 0 ]]; then
phase "soak (60 s)"
SOAK_SECONDS=60 SOAK_STREAMS=3000 SOAK_STABLE=500 SOAK_CHURN=100 SOAK_RATE=5000 \
  SOAK_DIR="$PWD/build/soak/test" timeout --kill-after=10 300 scripts/soak.sh </dev/null 2>&1 |
  tee "$work/soak.out"
count_result "soak" "$work/soak.out"
fi

# --- reconnect storm, 2,000 streams (make storm runs 18,000) ---------------------
# 500 each chunked, SSE, WebSocket, long-poll, reconnecting with a full-jitter
# backoff (cap 5 s here); the server killed and restarted on the same ports:
# all back, no id error or duplicate, one gap per resumed id stream.
# Report in build/storm/test/report.md.
if [[ ${STORM:-1} != 0 ]]; then
phase "storm (2,000 streams)"
STORM_STREAMS=2000 STORM_RATE=200 STORM_WARM=3 STORM_AFTER=3 STORM_CAP=5000 STORM_BOUND=30 \
  STORM_DIR="$PWD/build/storm/test" timeout --kill-after=10 120 scripts/storm.sh </dev/null 2>&1 |
  tee "$work/storm.out"
count_result "storm" "$work/storm.out"
fi

# --- bench-million, 3 C-nodes x 2,000 streams (make bench-million: a million) ---
# Every phase at small scale: connect, presence, memory, paced sends, multicast,
# broadcast, a topic of every stream (MILLION_TOPIC=1), churn, a C-node killed
# and restarted. Report in
# build/bench-million/test/report.md.
if [[ ${MILLION:-1} != 0 ]]; then
phase "bench-million (6,000 streams)"
MILLION_STREAMS=6000 MILLION_PER_NODE=2000 MILLION_RATE=500 MILLION_PACED_S=5 MILLION_MCAST=1000 \
  MILLION_CHURN=100 MILLION_CHURN_S=5 MILLION_KILL_S=8 MILLION_NETNS=1 MILLION_PUBLISH=0 \
  MILLION_TOPIC=1 MILLION_TOPIC_CALLS=2 MILLION_DIR="$PWD/build/bench-million/test" \
  timeout --kill-after=10 180 scripts/bench-million.sh </dev/null 2>&1 | tee "$work/million.out"
count_result "bench-million" "$work/million.out"
fi

# --- bench-process at 20,000 streams (make bench-process: up to a million) ------
# The in-process driver: every phase ran and delivered what it should, memory
# per stream, bounded presence pieces; no timed check. Report in
# build/bench-process/test.
if [[ ${BENCH_PROCESS:-1} != 0 ]]; then
phase "bench-process (20,000 streams)"
BENCH_PROCESS_SIZES=20000 BENCH_PROCESS_REPEATS=1 BENCH_PROCESS_DIR="$PWD/build/bench-process/test" \
  BENCH_PROCESS_BIN="$TEST_BUILD/benchprocess" timeout --kill-after=10 120 scripts/bench-process.sh </dev/null 2>&1 |
  tee "$work/bproc.out"
count_result "bench-process" "$work/bproc.out"
fi

# --- cluster-sim, small: its end (it ran beside the soak and the storm) ----------
if [[ -n $csim_pid ]]; then
  phase "cluster-sim (small), its end"
  wait "$csim_pid"
  cat "$work/csim.out"
  count_result "cluster-sim" "$work/csim.out"
fi

end_leftovers

# --- sanitizer reports: each one is a failure ---------------------------------
if [[ -n $SANITIZE ]]; then
  for f in "$san"/*; do
    [[ -f $f ]] || continue
    echo "== sanitizer report ${f##*/} (report.EXECUTABLE.PID)"
    cat "$f"
    failed=$((failed + 1))
  done
  # In an ASan build UBSan ignores log_path: its reports are in the
  # servers' logs (their stderr) of this run.
  while IFS= read -r -d '' f; do
    grep -q 'runtime error:' "$f" || continue
    echo "== sanitizer report in $f"
    grep -A12 'runtime error:' "$f"
    failed=$((failed + 1))
  done < <(find build/tests/logs -name '*.log' -newer "$work/started" -print0 2>/dev/null)
fi
# --- valgrind logs: one with errors is a failure ----------------------------
if [[ -n $VALGRIND ]]; then
  for f in "$vg"/*; do
    [[ -f $f ]] || continue
    grep -qE 'ERROR SUMMARY: [1-9]' "$f" || continue
    echo "== valgrind report ${f##*/}: $(grep -m1 -o 'Command: .*' "$f")"
    cat "$f"
    failed=$((failed + 1))
  done
fi
phase "end"
for p in "${phases[@]::${#phases[@]}-1}"; do
  echo "run-tests: ${p##* } s: ${p% *}"
done
echo "run-tests: ${SECONDS} s"
echo "tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
