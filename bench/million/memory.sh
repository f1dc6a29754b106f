# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 3: memory at the peak, every stream open:
# the servers' and the clients' RssAnon, the kernel's Slab + TCP pages, the
# master's, and MemFree, each against what it was before the first stream.

phase_memory() {
  local cp
  mapfile -t cp < <(client_pids "${CPID[@]}")
  SRV_KB=$(rss_sum "${SPID[@]}")
  CLI_KB=$(rss_sum "${cp[@]}")
  MASTER_KB=$(rss_sum "$MASTER_PID")
  KERN=$(kernel_bytes)
  AVAIL=$(mem_free_kb)
  N=$((OPEN_MAX > 0 ? OPEN_MAX : 1))
  SRV_MARG=$(((SRV_KB - SRV_KB0) * 1024 / N))
  SRV_ALL=$((SRV_KB * 1024 / N))
  KERN_SOCK=$(((KERN - KERN0) / (2 * N)))
  CLI_PER=$((CLI_KB * 1024 / N))
  MASTER_PER=$(((MASTER_KB - MASTER_KB0) * 1024 / N))
  MACHINE_PER=$(((AVAIL0 - AVAIL) * 1024 / N))
  put server_private_bytes_per_stream "$SRV_MARG"
  put server_private_bytes_per_stream_with_fixed "$SRV_ALL"
  put server_fixed_bytes_per_process $((SRV_KB0 * 1024 / NODES))
  put kernel_bytes_per_socket "$KERN_SOCK"
  put client_bytes_per_stream "$CLI_PER"
  put master_bytes_per_uid "$MASTER_PER"
  put machine_bytes_per_connection "$MACHINE_PER"
  log "memory at $N: servers $SRV_MARG B/stream ($SRV_ALL with fixed costs), kernel $KERN_SOCK B/socket," \
      "client $CLI_PER B/stream, master $MASTER_PER B/uid, machine $MACHINE_PER B/connection"
}
