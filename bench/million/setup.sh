# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million` (scripts/bench-million.sh, which sources this): what
# the machine allows. The checks' and figures' records, the kernel's limits
# raised as root and put back (restore_sysctls, also from the driver's EXIT
# trap, so a run killed puts them back too), and the network namespace the
# run moves into.

check() {
  local v=FAIL
  [[ $2 == 1 ]] && v=PASS
  printf '%s %s: %s\n' "$v" "$1" "$3" | tee -a "$CHECKS"
}
target() {
  local v=missed
  [[ $2 == 1 ]] && v=met
  printf 'TARGET %s %s: %s\n' "$v" "$1" "$3" | tee -a "$CHECKS"
}
put() { printf '%s %s\n' "$1" "$2" >>"$RESULT"; }
sysv() { tr '\t' ' ' 2>/dev/null <"/proc/sys/${1//.//}"; }
stop() { echo "bench-million: $*" >&2; log "stopped by the set-up"; exit 1; }

RESTORE=()                         # "key value" of the sysctls changed

restore_sysctls() {
  local kv
  for kv in "${RESTORE[@]}"; do sysctl -q -w "${kv%% *}=${kv#* }" >/dev/null 2>&1; done
  RESTORE=()
}

# raise KEY VALUE WHY: sets a sysctl as root (remembered, put back at the
# end) or stops naming it.
raise() {
  local old
  old=$(sysv "$1")
  if [[ $(id -u) == 0 ]] && sysctl -q -w "$1=$2" >/dev/null 2>&1; then
    RESTORE+=("$1 $old")
    echo "set $1 = $2 (was $old): $3" | tee -a "$WORK/setup.txt" >&2
  else
    stop "$1 is $old; $3: set it to $2 (as root: sysctl -w $1='$2')"
  fi
}

# A broadcast leaves a message queued on every socket for a moment: pages
# from tcp_mem, one each at worst. A machine-wide setting, not seen inside
# a network namespace: the outer run sets it.
tcp_mem_room() {
  local m0 m1 m2
  read -r m0 m1 m2 < <(sysv net.ipv4.tcp_mem)
  ((m2 >= 2 * STREAMS)) ||
    raise net.ipv4.tcp_mem "$m0 $((m1 > STREAMS ? m1 : STREAMS)) $((2 * STREAMS))" \
      "a message queued on each of $STREAMS sockets at once must not meet the limit"
}

setup() {
  local need hard fmax used lo hi range avail
  need=$((PER + 300))               # streams + the server's own descriptors
  hard=$(ulimit -Hn)
  [[ $hard == unlimited ]] || ((hard >= need)) ||
    stop "open files per process: the hard limit is $hard, a C-node needs $need for $PER streams: lower MILLION_PER_NODE or raise nofile"
  ulimit -n "$hard" 2>/dev/null
  echo "open files per process: $(ulimit -n) (hard $hard), need $need" >>"$WORK/setup.txt"
  read -r used _ _ </proc/sys/fs/file-nr
  fmax=$(sysv fs.file-max)
  ((fmax >= used + 2 * STREAMS + 100000)) ||
    raise fs.file-max $((used + 2 * STREAMS + 200000)) "both ends of $STREAMS streams are on this machine"
  read -r lo hi < <(sysv net.ipv4.ip_local_port_range)
  range=$((hi - lo + 1))
  # Each client process connects to one server port: PER connections per
  # source address fit when the range holds them with room for TIME_WAIT.
  SRC_PER_CLIENT=$(((PER * 4 / 3 + range - 1) / range))
  ((SRC_PER_CLIENT < 2)) && SRC_PER_CLIENT=2
  echo "local port range $lo-$hi: $SRC_PER_CLIENT source addresses per client process" >>"$WORK/setup.txt"
  (($(sysv net.core.somaxconn) >= 4096)) || raise net.core.somaxconn 4096 "connect bursts of thousands"
  (($(sysv net.ipv4.tcp_max_syn_backlog) >= 4096)) ||
    raise net.ipv4.tcp_max_syn_backlog 4096 "connect bursts of thousands"
  [[ -r /proc/sys/net/ipv4/tcp_mem ]] && tcp_mem_room
  # Conntrack counts only when a rule makes it track: then its table caps
  # the connections (both directions of one are one entry).
  if [[ -r /proc/sys/net/netfilter/nf_conntrack_count ]]; then
    if (($(sysv net.netfilter.nf_conntrack_count) > 0)); then
      (($(sysv net.netfilter.nf_conntrack_max) >= STREAMS + 100000)) ||
        raise net.netfilter.nf_conntrack_max $((STREAMS + 200000)) "conntrack tracks loopback here"
    else
      echo "conntrack: loaded, tracking nothing (count 0): no limit" >>"$WORK/setup.txt"
    fi
  fi
  avail=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
  # ~10.1 KB of kernel per connection (both ends) + ~1 KB of processes.
  ((avail * 1024 >= STREAMS * 12000)) ||
    stop "memory: $((avail / 1024)) MiB available, $STREAMS streams need ~$((STREAMS * 12000 / 1048576)) MiB"
  echo "memory available $((avail / 1024)) MiB, fs.file-max $(sysv fs.file-max), somaxconn $(sysv net.core.somaxconn)" >>"$WORK/setup.txt"
}


# --- a network namespace of its own --------------------------------------------------
# The kernel finds each packet's socket in one hash table (ehash), sized at
# boot: 262,144 buckets here, so the 2,000,000 sockets of a million streams
# (both ends on this machine) hang in chains about 8 long, walked for every
# packet, each link a cache miss. A network namespace made after
# net.ipv4.tcp_child_ehash_entries is set (Linux 6.1) has a table of that
# size: the run goes on inside one whose table has a bucket for every 1.5
# sockets or more. MILLION_NETNS: auto (when the machine's table has fewer
# buckets than sockets), 1 (always), 0 (never).
run_in_netns() {
  local want=1024 inner rc
  while ((want < 3 * STREAMS && want < 16777216)); do want=$((want * 2)); done
  if ! [[ $(id -u) == 0 && -w /proc/sys/net/ipv4/tcp_child_ehash_entries ]] ||
     ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
    stop "a network namespace with a TCP hash table of $want buckets needs root, unshare, ip and net.ipv4.tcp_child_ehash_entries (Linux 6.1); MILLION_NETNS=0 runs without one"
  fi
  tcp_mem_room
  raise net.ipv4.tcp_child_ehash_entries "$want" \
    "a network namespace of its own, its TCP hash table sized to $((2 * STREAMS)) sockets"
  # shellcheck disable=SC2016  # $0 is the inner bash's: the script it runs
  MILLION_IN_NETNS=1 MILLION_EHASH_MACHINE=$EHASH unshare --net -- bash -c 'ip link set lo up && exec bash "$0"' \
    "$ROOT/scripts/bench-million.sh" &
  inner=$!
  # A background job ignores SIGINT: both are passed on as TERM.
  trap 'kill -TERM $inner 2>/dev/null' INT TERM
  wait "$inner"
  rc=$?
  while alive "$inner"; do wait "$inner"; rc=$?; done
  restore_sysctls
  exit "$rc"
}

# netns: the run goes on in a network namespace of its own (NETNS: auto, 1,
# 0), as this script run again inside it; the TCP hash table's size is
# recorded either way.
netns() {
  if [[ -z ${MILLION_IN_NETNS:-} && $NETNS != 0 ]]; then
    EHASH=$(sysv net.ipv4.tcp_ehash_entries)
    if [[ $NETNS == 1 ]] || ((${EHASH#-} < 2 * STREAMS)); then
      run_in_netns
    fi
    echo "TCP hash table: $EHASH buckets for $((2 * STREAMS)) sockets: enough" >>"$WORK/setup.txt"
  fi
  [[ -n ${MILLION_IN_NETNS:-} ]] &&
    echo "network namespace of its own (loopback only): TCP hash table of $(sysv net.ipv4.tcp_ehash_entries) buckets" >>"$WORK/setup.txt"
  EHASH_HERE=$(sysv net.ipv4.tcp_ehash_entries)
  put tcp_hash_buckets "${EHASH_HERE#-}"
  put tcp_hash_buckets_machine "${MILLION_EHASH_MACHINE:-${EHASH_HERE#-}}"
}
