# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`: the kernel's floors the broadcast is held against:
# the machine's write floor before the run, while it is quiet, and the
# kernel alone at the run's scale after it.

# write_floor: the machine's write floor, while it is quiet: one writer over
# 10,000 sockets, its reader on the other core (writefloor), times the
# streams, shared by the cores.
write_floor() {
  FLOOR=$(timeout 60 "$BIN/writefloor" 10000 5 40 1 2>/dev/null | tail -n1)
  US_PER_WRITE=$(jget us_per_write <<<"$FLOOR")
  WRITE_FLOOR_S=$(calc "${US_PER_WRITE:-0} * $STREAMS / 1000000 / $CORES" %.3f)
  put write_floor_us_per_write "${US_PER_WRITE:-null}"
  put write_floor_s "$WRITE_FLOOR_S"
  log "write floor: $US_PER_WRITE us per write, $WRITE_FLOOR_S s for $STREAMS on $CORES cores"
}

# The kernel alone at this scale. The write floor above is one writer over
# 10,000 sockets with its reader on the other core. At a million, every write
# meets a socket cold in the caches and its reader shares the same cores:
# writefloor over as many sockets, one writer and its reader per C-node, one
# 40-byte write to each, timed to the last byte read. What a broadcast costs
# the kernel and the readers alone.
phase_kernel_alone() {
  log "the kernel alone: writefloor over $STREAMS sockets, $NODES writers each with its reader"
  SCALE=$(timeout "$(left 180)" "$BIN/writefloor" "$STREAMS" 1 40 "$NODES" 2>>"$WORK/writefloor.err" | tail -n1)
  SCALE_S=$(jget all_read_s <<<"$SCALE")
  SCALE_S=${SCALE_S:-null}
  put write_floor_at_scale_s "$SCALE_S"
  put write_floor_at_scale_writers "$NODES"
  SCALE_RATIO=null
  [[ $SCALE_S != null && $BCAST_S != null ]] && SCALE_RATIO=$(calc "$BCAST_S / $SCALE_S" %.2f)
  put broadcast_vs_write_floor_at_scale "$SCALE_RATIO"
  check "the kernel alone" "$([[ $SCALE_S != null ]] && echo 1 || echo 0)" "writefloor: one 40-byte write to each of $STREAMS sockets from $NODES processes, each with its reader, on the same $CORES cores: every byte read after $SCALE_S s (the broadcast: $SCALE_RATIO x that)$([[ $SCALE_S == null ]] && echo "; $(tail -n2 "$WORK/writefloor.err" | tr '\n' ' ')")"
}
