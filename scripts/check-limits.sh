#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reads this host's limits and says how many httpdcnode connections it can
# hold, and what to change (see sysctl.conf.example). Reads only; changes nothing.
set -euo pipefail

KERNEL_BYTES_PER_CONN=4700     # idle TCP socket on this kernel, measured
SERVER_BYTES_PER_CONN=250      # httpdcnode heap per idle stream (make bench)
TARGET=${1:-1000000}

read_sysctl() { cat "/proc/sys/${1//.//}" 2>/dev/null || echo "?"; }

nofile_soft=$(ulimit -Sn)
nofile_hard=$(ulimit -Hn)
file_max=$(read_sysctl fs.file-max)
nr_open=$(read_sysctl fs.nr_open)
read -r port_lo port_hi < <(read_sysctl net.ipv4.ip_local_port_range)
somaxconn=$(read_sysctl net.core.somaxconn)
ehash=$(read_sysctl net.ipv4.tcp_ehash_entries)
ehash=${ehash#-}
read -r tcp_mem_min tcp_mem_pressure tcp_mem_max < <(read_sysctl net.ipv4.tcp_mem)
# Sockets holding unsent output need pages from tcp_mem: 1M streams each
# with one page queued is 1M pages.
mem_avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)

echo "open files (ulimit -n):   soft $nofile_soft, hard $nofile_hard (httpdcnode raises soft to hard)"
echo "fs.file-max:              $file_max"
echo "fs.nr_open:               $nr_open"
echo "local port range:         $port_lo-$port_hi ($((port_hi - port_lo + 1)) per client source address)"
echo "net.core.somaxconn:       $somaxconn"
echo "net.ipv4.tcp_mem (pages): $tcp_mem_min $tcp_mem_pressure $tcp_mem_max"
echo "TCP hash table (buckets): $ehash"
echo "memory available:         $((mem_avail_kb / 1024)) MiB"
echo

by_fd=$((nofile_hard - 32))
by_mem=$((mem_avail_kb * 1024 / (KERNEL_BYTES_PER_CONN + SERVER_BYTES_PER_CONN)))
can=$by_fd
limit="open files (hard limit)"
if [ "$by_mem" -lt "$can" ]; then can=$by_mem; limit="memory"; fi
echo "This host can hold about $can connections per server process (bound: $limit)."

if [ "$can" -ge "$TARGET" ]; then
  echo "That covers the target of $TARGET."
  exit 0
fi
echo "To reach $TARGET:"
[ "$nofile_hard" -lt $((TARGET + 1024)) ] &&
  echo "  - raise the open-files hard limit: 'nofile $((TARGET + 1024))' in /etc/security/limits.conf or LimitNOFILE= for a service"
[ "$nr_open" != "?" ] && [ "$nr_open" -lt $((TARGET + 1024)) ] &&
  echo "  - fs.nr_open >= $((TARGET + 1024)) (the ceiling for nofile)"
[ "$file_max" != "?" ] && [ "$file_max" -lt $((TARGET * 2)) ] &&
  echo "  - fs.file-max >= $((TARGET * 2)) (server and, on one box, the load client)"
[ "$by_mem" -lt "$TARGET" ] &&
  echo "  - memory: $TARGET connections need ~$((TARGET * (KERNEL_BYTES_PER_CONN + SERVER_BYTES_PER_CONN) / 1048576)) MiB"
[ "$tcp_mem_max" -lt "$TARGET" ] &&
  echo "  - net.ipv4.tcp_mem max >= $TARGET pages, so every stream can hold a page of output"
[ "$somaxconn" != "?" ] && [ "$somaxconn" -lt 4096 ] &&
  echo "  - net.core.somaxconn >= 4096 for connect bursts"
buckets=1
while [ "$buckets" -lt "$TARGET" ]; do buckets=$((buckets * 2)); done
[ "$ehash" != "?" ] && [ "$ehash" -lt "$TARGET" ] &&
  echo "  - a TCP hash table of $buckets buckets (boot with thash_entries=$buckets; it has $ehash): every packet walks its socket's chain"
echo "  See sysctl.conf.example for every setting and why."
