# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2153  # the run's state: globals set and read across these files
# `make bench-million`, phase 6b (MILLION_TOPIC=1): one topic, t:0, that
# every stream subscribed to when it opened (httpclient --topics 1). The
# master publishes to it through the application (httpdcnode:publish/2),
# TOPIC_CALLS times, each waited for at every stream: the last delivery
# against the broadcast's (phase 6); and as many multicasts
# (httpdcnode:multicast/2) of the same uids, every uid, each waited for too.
#
# What the master spends on a call is measured on the master (bench/erlang/
# million.erl), just before and just after it: its threads' time on a CPU
# (/proc/self/task/*/schedstat; all but the dirty I/O schedulers, which do
# the reading), its schedulers' busy time (scheduler_wall_time: finer, as
# it is read without I/O), and the calling process's reductions (exact);
# each less the same around a call that does nothing (noop: what the
# reading costs, what the master does meanwhile anyway), medians over the
# calls. The CPU read varies by some hundreds of us from one reading to the
# next (the spread of the noop's): a publish costs less than that, so its
# ratio to a multicast is given as at least the multicast's over it; the
# busy time is finer but counts a scheduler that the machine has put off
# (a busy machine). Both calls are asynchronous: what the master does for them is done
# in the call (the routing, each C-node's Erlang message encoded and
# queued), but for the multicast's acknowledgements, which come later (one
# small message a node).

TOPIC_NAME=t:0

# The master's count of the topic's streams (the samples' third column).
topic_now() { tail -n1 "$WORK/presence.dat" 2>/dev/null | cut -d' ' -f3; }
topic_reached() { [[ $(topic_now) -ge $1 ]]; }

# topic_call KIND: one call on the master, KIND publish, multicast_all or
# noop; a publish or a multicast waited for at every stream. Appends "KIND
# CPU_US BUSY_US REDUCTIONS CALL_US LAST_S DELIVERED" to topic.dat (LAST_S,
# DELIVERED 0 for a noop); non-zero when the call failed.
topic_call() {
  local kind=$1 t0 last=0 got=0 args=()
  [[ $kind == publish ]] && args=(--topic "$TOPIC_NAME")
  MSGS_TOTAL0=$(sumf msgs "${ERRS[@]}")
  mil "$kind" "${args[@]}" || return 1
  t0=$(jget t0_ms <<<"$MIL")
  if [[ $kind != noop ]]; then
    wait_for 120 "the $kind at every stream" settled "$OPEN_MAX"
    sleep 1.2                                   # one more progress line each
    got=$(grown)
    last=$(calc "($(maxf last_msg_ms "${ERRS[@]}") - $t0) / 1000" %.3f)
  fi
  echo "$kind $(jget cpu_us <<<"$MIL") $(jget busy_us <<<"$MIL") $(jget reductions <<<"$MIL")" \
    "$(jget call_us <<<"$MIL") $last $got" >>"$WORK/topic.dat"
  log "$kind: the master's CPU $(jget cpu_us <<<"$MIL") us, busy $(jget busy_us <<<"$MIL") us," \
      "$(jget reductions <<<"$MIL") reductions, the call $(jget call_us <<<"$MIL") us; the last delivery after $last s ($got delivered)"
}

# topic_med KIND COLUMN: the median of COLUMN (2 CPU_US ... 7 DELIVERED) over
# KIND's calls; topic_min the least.
topic_med() {
  local v
  mapfile -t v < <(awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$WORK/topic.dat")
  median "${v[@]}"
}
topic_min() { awk -v k="$1" -v c="$2" '$1 == k && (m == "" || $c < m) { m = $c } END { print m + 0 }' "$WORK/topic.dat"; }
# topic_each KIND COLUMN: COLUMN of KIND's calls, "/" between.
topic_each() { awk -v k="$1" -v c="$2" '$1 == k { printf "%s%s", n++ ? "/" : "", $c }' "$WORK/topic.dat"; }

# topic_net KIND COLUMN: the median of KIND's COLUMN less the noop's.
topic_net() { calc "$(topic_med "$1" "$2") - $(topic_med noop "$2")" %.0f; }
# topic_ratio A B: A / B, null unless B > 0.
topic_ratio() { if (($2 > 0)); then calc "$1 / $2" %.0f; else echo null; fi; }

phase_topic() {
  local k n delivered mc_delivered pub_cpu mc_cpu pub_busy mc_busy pub_red mc_red spread cpu_ratio busy_ratio red_ratio
  : >"$WORK/topic.dat"
  log "topic: $TOPIC_NAME, every stream subscribed: $TOPIC_CALLS publishes, and multicasts of the same $STREAMS uids"
  wait_for 60 "the master to know the topic's streams" topic_reached "$OPEN_MAX"
  put topic_subscribers "$(topic_now)"
  mil uids --uids "$STREAMS" || log "the uids for the multicast were not kept"
  for ((k = 1; k <= TOPIC_CALLS; k++)); do
    { topic_call noop && topic_call publish && topic_call multicast_all; } || break
  done
  n=$(grep -c '^multicast_all ' "$WORK/topic.dat")
  pub_cpu=null mc_cpu=null pub_busy=null mc_busy=null pub_red=null mc_red=null spread=null
  cpu_ratio=null busy_ratio=null red_ratio=null TOPIC_CPU_RATIO=null TOPIC_LAST=null TOPIC_VS_BCAST=null
  if ((n > 0)); then
    pub_cpu=$(topic_net publish 2) mc_cpu=$(topic_net multicast_all 2)
    pub_busy=$(topic_net publish 3) mc_busy=$(topic_net multicast_all 3)
    pub_red=$(topic_net publish 4) mc_red=$(topic_net multicast_all 4)
    # How much the CPU read around a call doing nothing varies.
    spread=$(awk '$1 == "noop" { if (n++ == 0 || $2 < lo) lo = $2; if ($2 > hi) hi = $2 } END { print hi - lo }' "$WORK/topic.dat")
    # The publish's CPU may be below what the reading tells apart (the
    # spread): the ratio is then at least the multicast's over that.
    cpu_ratio=null
    ((pub_cpu > spread)) && cpu_ratio=$(topic_ratio "$mc_cpu" "$pub_cpu")
    TOPIC_CPU_RATIO=$(topic_ratio "$mc_cpu" "$((pub_cpu > spread ? pub_cpu : (spread > 0 ? spread : 1)))")
    busy_ratio=$(topic_ratio "$mc_busy" "$pub_busy")
    red_ratio=$(topic_ratio "$mc_red" "$pub_red")
    TOPIC_LAST=$(topic_med publish 6)
    [[ $BCAST_S != null ]] && TOPIC_VS_BCAST=$(calc "$TOPIC_LAST / $BCAST_S" %.2f)
  fi
  delivered=$(topic_min publish 7)
  mc_delivered=$(topic_min multicast_all 7)
  put topic_publishes "$n"
  put topic_delivered_min "$delivered"
  put topic_last_delivery_s "$TOPIC_LAST"
  put topic_last_delivery_each_s "$(topic_each publish 6)"
  put topic_vs_broadcast "$TOPIC_VS_BCAST"
  put topic_multicast_delivered_min "$mc_delivered"
  put topic_multicast_last_delivery_s "$(topic_med multicast_all 6)"
  put topic_publish_master_cpu_us "$pub_cpu"
  put topic_multicast_master_cpu_us "$mc_cpu"
  put topic_multicast_vs_publish_master_cpu "$cpu_ratio"
  put topic_multicast_vs_publish_master_cpu_at_least "$TOPIC_CPU_RATIO"
  put topic_publish_master_cpu_each_us "$(topic_each publish 2)"
  put topic_multicast_master_cpu_each_us "$(topic_each multicast_all 2)"
  put topic_master_cpu_noop_us "$(topic_med noop 2)"
  put topic_master_cpu_noop_spread_us "$spread"
  put topic_publish_master_busy_us "$pub_busy"
  put topic_multicast_master_busy_us "$mc_busy"
  put topic_multicast_vs_publish_master_busy "$busy_ratio"
  put topic_publish_master_busy_each_us "$(topic_each publish 3)"
  put topic_multicast_master_busy_each_us "$(topic_each multicast_all 3)"
  put topic_master_busy_noop_us "$(topic_med noop 3)"
  put topic_publish_reductions "$pub_red"
  put topic_multicast_reductions "$mc_red"
  put topic_multicast_vs_publish_reductions "$red_ratio"
  put topic_publish_call_us "$(topic_med publish 5)"
  put topic_multicast_call_us "$(topic_med multicast_all 5)"
  check "topic publish" "$((n == TOPIC_CALLS && delivered == OPEN_MAX && mc_delivered == OPEN_MAX))" "$n publishes to $TOPIC_NAME, each reached $delivered streams at least, the last after $TOPIC_LAST s (median; the broadcast: $BCAST_S s, $TOPIC_VS_BCAST x); a multicast of the same $STREAMS uids $mc_delivered at least, the last after $(topic_med multicast_all 6) s; the master a publish / a multicast (medians, less a call doing nothing): CPU $pub_cpu / $mc_cpu us ($cpu_ratio x, at least $TOPIC_CPU_RATIO x; the call doing nothing read $(topic_med noop 2) us, give or take $spread), schedulers busy $pub_busy / $mc_busy us ($busy_ratio x), reductions $pub_red / $mc_red ($red_ratio x); the call $(topic_med publish 5) / $(topic_med multicast_all 5) us"
}
