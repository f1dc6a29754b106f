# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 2: until the master's presence count (sampled
# every 50 ms by bench/erlang/million.erl) is every uid open.

phase_presence() {
  wait_for 120 "the master to know every uid" presence_reached "$OPEN_MAX"
  T_PRES=$(presence_at "$OPEN_MAX" "$T0")
  if [[ -n $T_PRES ]]; then PRESENCE_S=$(calc "($T_PRES - $T0) / 1000" %.2f)
  else PRESENCE_S=null; fi
  put presence_s "$PRESENCE_S"
  check "presence" "$([[ -n $T_PRES ]] && echo 1 || echo 0)" "the master knew all $OPEN_MAX uids $PRESENCE_S s after the first connect (its count sampled every 50 ms: $(presence_now); the clients' count of open streams comes once a second)"
}
