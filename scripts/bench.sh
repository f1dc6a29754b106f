#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench`: measures httpdcnode on loopback and writes BENCHMARKS.md and
# bench/*.png at the repository root. Needs `make all` done.
#
#   scripts/bench.sh           the full run (5-7 minutes here; at most 9.5),
#                              then scripts/bench-cluster.sh, which writes the
#                              cluster section (1-2 minutes; at most 5)
#   scripts/bench.sh --smoke   a tiny run (300 streams, 3,300 messages, one
#                              multicast, the plots; then 1,000 messages to
#                              100 streams of --proto sse, ws and poll,
#                              ids checked; 200 WebSocket clients sending
#                              up for 2 s, 0 lost) that writes nothing in the
#                              repository; exits non-zero only when something is
#                              broken (loss, a crash, a tool failing), never on
#                              timings; and scripts/bench-cluster.sh --smoke.
#                              Last line: "bench smoke: P passed, F failed".
#                              BENCH_KEEP=1 keeps its files (in $TMPDIR).
#   scripts/bench.sh --inbox   only the "client -> Erlang" section (25-40 s;
#                              at most 2.5 minutes): 10,000 WebSocket clients
#                              sending up to the --inbox of a master, requests
#                              answered with {conn, ...}, then POST /send/N if
#                              the server has it; writes that section of
#                              BENCHMARKS.md alone (the full run writes it too;
#                              raw figures in build/bench-inbox/)
#   BENCH_INBOX_RATE=R         messages/s sent up in that section (20000),
#   BENCH_INBOX_CLIENTS=N      from N clients (10000)
#   BENCH_CLUSTER=0            no cluster run: the full run keeps the cluster
#                              section of BENCHMARKS.md as it was
#   HTTPDCNODE_BINDIR          where the binaries are (default: the root; a
#                              `make SANITIZE=...` build has them in build-*/bin)
#
# Each server holds at most 18,000 streams; the load client runs as 2 worker
# processes; the publisher is tools/erlang msggen on its own Erlang node,
# reaching the C-node by its published name (the server runs with no master;
# in the client -> Erlang section it has one, running inbox_bench's inbox).
# Node names carry this script's pid and ports are picked free, so runs on the
# same machine do not collide. Everything started here is ended by pid, also
# on failure or interruption. A slow machine gives slow figures, not a failure:
# the full run, too, exits non-zero only when something broke (messages lost,
# a crash, a tool failing) and the report says what.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BIN=$(cd "${HTTPDCNODE_BINDIR:-.}" && pwd) || exit 1

mode=full
case "${1:-}" in
  "") ;;
  --smoke) mode=smoke ;;
  --inbox) mode=inbox ;;
  -h | --help) sed -n '3,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

source bench/lib/lib.sh
source bench/lib/phases.sh
source bench/lib/transports.sh
source bench/lib/report.sh
source bench/lib/report_transports.sh
source bench/lib/plots.sh
source bench/lib/inbox.sh

START=$(date +%s)
if [[ $mode == smoke ]]; then
  DEADLINE=$((START + 50))
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/httpdbench.XXXXXX")
else
  DEADLINE=$((START + 570))
  [[ $mode == inbox ]] && DEADLINE=$((START + 150))
  WORK="$ROOT/build/bench"
  [[ $mode == inbox ]] && WORK="$ROOT/build/bench-inbox"
  rm -rf "$WORK"
  mkdir -p "$WORK"
fi
: >"$WORK/results"
: >"$WORK/broken"
COOKIE="bench_$$_${RANDOM}${RANDOM}"

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  end_all
  if [[ $mode == smoke ]]; then
    if [[ -s $WORK/broken || -n ${BENCH_KEEP:-} ]]; then
      echo "bench smoke: logs kept in $WORK" >&2
    else
      rm -rf "$WORK"
    fi
  fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

for f in "$BIN"/{httpdcnode,httpclient,writefloor,wakefloor} tools/erlang/ebin/{msggen,inbox_bench,httpdcnode_inbox}.beam; do
  [[ -e $f ]] || { echo "bench: $f missing: run 'make all' first" >&2; exit 1; }
done
# Erlang distribution needs epmd; it is shared by every run: start, never stop.
epmd -daemon
# The servers and clients started here inherit this.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (($(ulimit -n) < 19500)); then
  log "open files limit is $(ulimit -n); the 18,000-stream steps need 19,500"
fi

# The "client -> Erlang" figures of the full and the --inbox run.
INBOX_ARGS=(inbox "${BENCH_INBOX_CLIENTS:-10000}" 20 "${BENCH_INBOX_RATE:-20000}" 100 200 4000 10)
if [[ $mode == inbox ]]; then
  phase_inbox "${INBOX_ARGS[@]}"
  if ((INBOX_OK)); then
    inbox_section inbox >"$WORK/inbox-section.md"
    put_inbox_section "$WORK/inbox-section.md"
    log "wrote the section \"$INBOX_HEAD\" of BENCHMARKS.md in $(($(date +%s) - START)) s"
    exit 0
  fi
  log "broken, BENCHMARKS.md left as it was (raw figures in $WORK):"
  sed 's/^/  /' "$WORK/broken" >&2
  exit 1
fi

if [[ $mode == smoke ]]; then
  phase_smoke
  phase_inbox smoke_inbox 200 2 400 20 20 200 2
  if [[ ${BENCH_CLUSTER:-1} != 0 ]]; then
    scripts/bench-cluster.sh --smoke >"$WORK/cluster-smoke.out" 2>&1 </dev/null ||
      broken "scripts/bench-cluster.sh --smoke: $(grep 'BROKEN' "$WORK/cluster-smoke.out" | head -n3 | tr '\n' ' ')$(tail -n1 "$WORK/cluster-smoke.out")"
  fi
  if [[ -s $WORK/broken ]]; then
    sed 's/^/bench smoke: /' "$WORK/broken" >&2
    echo "bench smoke: 0 passed, 1 failed"
    exit 1
  fi
  echo "bench smoke: 1 passed, 0 failed"
  exit 0
fi

machine_facts
phase_memory
phase_push 3 200000 20000 10
phase_one_writer 200000
phase_connect 100
phase_floor
phase_transports 200000
phase_inbox "${INBOX_ARGS[@]}"
put duration_s $(($(date +%s) - START))

# write_report writes the whole file: the cluster section is put back after it.
OLD_CLUSTER=$(scripts/bench-cluster.sh --print-section)
print_inbox_section >"$WORK/inbox-old.md"
mkdir -p bench
make_plots "$WORK" bench || broken "gnuplot failed: $(tail -n3 "$WORK/gnuplot.err" | tr '\n' ' ')"
write_report BENCHMARKS.md
# write_report keeps only the bench-million block after it: this section
# again, the last run's when this one broke.
if ((INBOX_OK)); then
  inbox_section inbox >"$WORK/inbox-section.md"
  put_inbox_section "$WORK/inbox-section.md"
elif [[ -s $WORK/inbox-old.md ]]; then
  put_inbox_section "$WORK/inbox-old.md"
fi
log "wrote BENCHMARKS.md and bench/*.png in $(get duration_s) s (raw figures in build/bench/)"
if [[ ${BENCH_CLUSTER:-1} != 0 ]]; then
  # Its own processes, bound and section (figures in build/bench-cluster/).
  scripts/bench-cluster.sh </dev/null || broken "scripts/bench-cluster.sh failed (see its section in BENCHMARKS.md)"
else
  [[ -z $OLD_CLUSTER ]] || printf '%s\n' "$OLD_CLUSTER" | scripts/bench-cluster.sh --put-section
fi
if [[ -s $WORK/broken ]]; then
  log "some measurements are missing or show breakage:"
  sed 's/^/  /' "$WORK/broken" >&2
  exit 1
fi
exit 0
