# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`: the measures the phases share: CPU and run-queue
# time of the run's processes (/proc), memory, the master's presence
# samples, and the one-shot node that runs a command on the master
# (bench/erlang/million.erl).

# RUN_PIDS: the servers, the clients' processes (each coordinator and its
# workers) and the master, as they are now.
run_pids() {
  local cp
  mapfile -t cp < <(client_pids "${CPID[@]}")
  RUN_PIDS=("${SPID[@]}" "${cp[@]}" "$MASTER_PID")
}

# cpu_all: CPU ticks (1/100 s) used so far by the servers, the clients and the master.
cpu_all() {
  local p t=0
  run_pids
  for p in "${RUN_PIDS[@]}"; do t=$((t + $(cpu_ticks "$p"))); done
  echo "$t"
}

# sched_all: "WAIT_NS RUNS" summed over every thread of the servers, the
# clients and the master (/proc/PID/task/TID/schedstat: time on the CPU,
# time runnable but waiting for one, times run): how long the run's work
# waited for a core.
sched_all() {
  local p
  run_pids
  for p in "${RUN_PIDS[@]}"; do
    cat /proc/"$p"/task/*/schedstat 2>/dev/null
  done | awk '{ w += $2; r += $3 } END { printf "%.0f %.0f\n", w, r }'
}

# cpu_split: "SERVERS CLIENTS MASTER BUSY" CPU ticks (1/100 s) so far: the
# C-nodes', the load clients', the master's, and the machine's busy time
# (/proc/stat: all but idle and iowait), the rest of which is the publisher,
# the kernel's softirq work and the script itself.
cpu_split() {
  local p s=0 c=0 cp
  for p in "${SPID[@]}"; do s=$((s + $(cpu_ticks "$p"))); done
  mapfile -t cp < <(client_pids "${CPID[@]}")
  for p in "${cp[@]}"; do c=$((c + $(cpu_ticks "$p"))); done
  echo "$s $c $(cpu_ticks "$MASTER_PID") $(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat)"
}

# settle SECONDS: until the processes of the run used under 10 % of one core
# over each of 2 seconds in a row (what is left of the connect and its
# presence snapshots is done), at most SECONDS; SETTLE_S the time it took.
settle() {
  local t0 quiet=0 a b
  t0=$(now_ms)
  a=$(cpu_all)
  while (($(now_ms) - t0 < $1 * 1000)); do
    sleep 1
    b=$(cpu_all)
    if ((b - a < 10)); then quiet=$((quiet + 1)); else quiet=0; fi
    a=$b
    ((quiet >= 2)) && break
  done
  SETTLE_S=$(calc "($(now_ms) - $t0) / 1000" %.1f)
  SETTLE_QUIET=$((quiet >= 2))
}

# rss_sum PID...: RssAnon in kB, summed.
rss_sum() {
  local p files=()
  for p in "$@"; do files+=("/proc/$p/status"); done
  awk '$1 == "RssAnon:" { s += $2 } END { print s + 0 }' "${files[@]}" 2>/dev/null
}
mem_avail_kb() { awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo; }
# MemFree: what the machine gave out, reclaimable slab included.
mem_free_kb() { awk '$1 == "MemFree:" { print $2 }' /proc/meminfo; }

# mil CMD ARGS...: million:cli on a one-shot node; its JSON line in MIL.
MIL_SEQ=0
mil() {
  MIL_SEQ=$((MIL_SEQ + 1))
  timeout -k 5 "$(left 600)" erl +sbwt none +sbwtdcpu none +sbwtdio none -noshell \
    -sname "milldrv_$$_$MIL_SEQ@localhost" -setcookie "$COOKIE" -pa "$ROOT/tools/erlang/ebin" \
    -eval 'million:cli()' -extra "$@" --master "$MASTER" \
    >"$WORK/mil-$MIL_SEQ.out" 2>"$WORK/mil-$MIL_SEQ.err" </dev/null
  local rc=$?
  MIL=$(grep '^{' "$WORK/mil-$MIL_SEQ.out" | tail -n1)
  [[ $rc == 0 && -n $MIL ]] || { log "million $1 failed: $(tail -n2 "$WORK/mil-$MIL_SEQ.err")"; return 1; }
}
# The per_node list of a paced answer, space-separated.
per_node() { sed -n 's/.*"per_node":\[\([^]]*\)\].*/\1/p' <<<"$1" | tr ',' ' '; }

# presence_at N FROM_MS: the first sample time >= FROM_MS with count
# >= N (empty when none yet).
presence_at() {
  awk -v n="$1" -v from="$2" '$1 >= from && $2 >= n { print $1; exit }' "$WORK/presence.dat"
}
presence_now() { tail -n1 "$WORK/presence.dat" 2>/dev/null | cut -d' ' -f2; }
# wait_for's conditions: the master's count is N at least / is N / was N at
# least at some sample since FROM_MS.
presence_reached() { [[ $(presence_now) -ge $1 ]]; }
presence_is() { [[ $(presence_now) == "$1" ]]; }
presence_since() { [[ -n $(presence_at "$1" "$2") ]]; }

# TCP sockets in use: read with the memory, at the same moment (the clients'
# counts are up to a second old); two a stream, both ends being here.
tcp_inuse() { awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat; }
