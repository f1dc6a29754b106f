#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make cluster-sim: the cluster across hosts simulated on this machine, with
# the kernel's own network faults, and every message checked.
#
# Each host is a network namespace with its own address on one bridge (the
# bridge in a namespace of its own: nothing of the machine's own network is
# touched): masters m1 (10.77.0.1) and m2 (.2) with the application, long
# names (m1@10.77.0.1), net_ticktime TICK; C-nodes c1 (.11) and c2 (.12)
# (--master m1,m2 --presence httpdcnode_presence --erl-tick-seconds TICK);
# nginx (examples/nginx.conf.example, plain HTTP, bodies not re-chunked: the
# load client reads SSE as the C-nodes send it) on fe (.20); the SSE
# clients (tools/httpclient --record) on cl (.31); the controller (hidden
# Erlang node, bench/erlang/simctl.erl) on ctl (.40). Each host runs
# its own epmd. Messages come from msggen on a master through the
# application (httpdcnode:send/2), each numbered ("n=N;"), so the checker
# (scripts/cluster-sim-check.py) knows what each client should have got.
#
# Faults, on the bridge's namespace (iptables FORWARD, which bridged
# packets pass): drop (iptables -j DROP both ways between two hosts, or all
# of a host's traffic: a silent partition), cut (the same between the two
# masters), loss (-m statistic 1 %), latency (tc netem 20 ms +- 5 ms where
# the kernel has netem, else tools/netdelay on an NFQUEUE queue: the same
# delay, order kept), freeze (SIGSTOP of every process of a host).
#
# Per scenario: sent, delivered, lost_without_gap, duplicated, out_of_order,
# gaps (told), detection_s (the fault seen: the C-node dropped the link, or
# the masters each other), convergence_s (from the heal until presence, or
# the subscriptions, agree again; null when they never did within the bound).
# Result: OUT/result.json; a BENCHMARKS.md section (between
# <!-- cluster-sim --> markers, full run only).
#
# The machine is restored when the run ends or is killed: every namespace
# (with its bridge, veths and rules) is deleted and every process in it
# ended, by a trap; after a SIGKILL of the runner, the next run removes what
# it left (namespaces hsimPID-*, PID no longer a cluster-sim) first.
#
# Environment:
#   CLUSTER_SIM_SMALL=1  the small run of make test: two short scenarios
#                        (silent partition master-C-node, frozen master),
#                        TICK 4; asserts detection within 1.25 TICK + 2 s (times
#                        $HTTPDTEST_TIME_SCALE for the 2 s) and 0
#                        duplicated; lost_without_gap only reported
#   CLUSTER_SIM_TICK     net_ticktime and --erl-tick-seconds (default 8; small 4)
#   CLUSTER_SIM_RATE     the small run's msg/s (default 200)
#   CLUSTER_SIM_DIR      output directory (default build/cluster-sim; small:
#                        build/cluster-sim/test)
#   HTTPDCNODE_BINDIR    where httpdcnode and httpclient are (default .)
#   NETDELAY             the netdelay binary (default build/netdelay)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUN=cluster-sim

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '3,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "$RUN: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

SMALL=${CLUSTER_SIM_SMALL:-0}
BIN=${HTTPDCNODE_BINDIR:-.}
NETDELAY=${NETDELAY:-build/netdelay}
if [[ $SMALL == 1 ]]; then
  TICK=${CLUSTER_SIM_TICK:-4}
  OUT=${CLUSTER_SIM_DIR:-$ROOT/build/cluster-sim/test}
else
  TICK=${CLUSTER_SIM_TICK:-8}
  OUT=${CLUSTER_SIM_DIR:-$ROOT/build/cluster-sim}
fi
PFX="hsim$$"
NET=10.77.0
declare -A ADDR=([m1]=1 [m2]=2 [c1]=11 [c2]=12 [fe]=20 [cl]=31 [ctl]=40)
HOSTS=(m1 m2 c1 c2 fe cl ctl)
M1="m1@$NET.1" M2="m2@$NET.2" C1="c1@$NET.11" C2="c2@$NET.12"
MASTERS="$M1,$M2"
START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
now_ms() { date +%s%3N; }
ns() { echo "$PFX-$1"; }
# (backgrounded, call ip netns exec itself: $! is then the process, which
# ip netns exec becomes, not a subshell)
inns() { local h=$1; shift; ip netns exec "$(ns "$h")" "$@"; }

# --- restoring the machine ---------------------------------------------------
# Ends every process in the namespaces of prefix $1 (all of them ours: only
# this script makes hsim* namespaces), then deletes the namespaces.
teardown_prefix() {
  local p=$1 n pids left i
  local names
  names=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$p-" || true)
  [[ -z $names ]] && return 0
  for n in $names; do
    pids=$(ip netns pids "$n" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [[ -n ${pids// /} ]] && { kill -CONT $pids 2>/dev/null; kill -TERM $pids 2>/dev/null; }
  done
  for i in $(seq 1 30); do
    left=0
    for n in $names; do [[ -n $(ip netns pids "$n" 2>/dev/null) ]] && left=1; done
    ((left == 0)) && break
    sleep 0.1
  done
  for n in $names; do
    pids=$(ip netns pids "$n" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [[ -n ${pids// /} ]] && kill -KILL $pids 2>/dev/null
  done
  for n in $names; do ip netns del "$n" 2>/dev/null; done
}

# What a run killed by SIGKILL left: its runner is gone (or is not a cluster-sim).
clean_stale() {
  local n id
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^hsim[0-9]+-sw$' || true); do
    id=${n#hsim}
    id=${id%%-*}
    if [[ -r /proc/$id/cmdline ]] && tr '\0' ' ' <"/proc/$id/cmdline" | grep -q cluster-sim; then
      continue
    fi
    log "removing the namespaces and processes a killed run ($id) left"
    teardown_prefix "hsim$id"
  done
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  teardown_prefix "$PFX"
  exit "$rc"
}

# --- the hosts ---------------------------------------------------------------
make_hosts() {
  ip netns add "$(ns sw)" || die "ip netns add: this needs root"
  inns sw ip link set lo up
  inns sw ip link add br0 type bridge
  inns sw ip link set br0 up
  # bridged IPv4 goes through this namespace's iptables (faults live there)
  inns sw sysctl -q -w net.bridge.bridge-nf-call-iptables=1 || die "no br_netfilter"
  local h
  for h in "${HOSTS[@]}"; do
    ip netns add "$(ns "$h")"
    ip -n "$(ns sw)" link add "v-$h" type veth peer name eth0 netns "$(ns "$h")"
    ip -n "$(ns sw)" link set "v-$h" master br0
    ip -n "$(ns sw)" link set "v-$h" up
    ip -n "$(ns "$h")" addr add "$NET.${ADDR[$h]}/24" dev eth0
    ip -n "$(ns "$h")" link set eth0 up
    ip -n "$(ns "$h")" link set lo up
  done
}

# ctl ARGS...: one simctl command from the controller host; its JSON line.
# Each its own node name: several may run at once, from subshells.
ctl() {
  inns ctl timeout 120 erl -name "ctl_${BASHPID}_$RANDOM@$NET.40" -hidden -setcookie "$COOKIE" -noshell \
    -kernel net_ticktime "$TICK" -pa "$ROOT/tools/erlang/ebin" \
    -eval 'simctl:cli()' -extra "$@" 2>>"$OUT/logs/ctl.log"
}

start_master() {
  local h=$1
  mkdir -p "$OUT/run/$h"
  inns "$h" erl -name "$h@$NET.${ADDR[$h]}" -setcookie "$COOKIE" -noshell \
    -kernel net_ticktime "$TICK" -pa "$ROOT/tools/erlang/ebin" \
    -mnesia dir "\"$OUT/run/$h/mnesia\"" </dev/null >>"$OUT/logs/$h.log" 2>&1 &
}

start_cnode() {
  local h=$1
  inns "$h" "$BIN/httpdcnode" --listen 0.0.0.0:8000 --name "$h@$NET.${ADDR[$h]}" \
    --master "$MASTERS" --cookie-file "$OUT/cookie" --presence httpdcnode_presence \
    --erl-tick-seconds "$TICK" --history 4096 --history-bytes 268435456 \
    </dev/null >>"$OUT/logs/$h.log" 2>&1 &
}

start_nginx() {
  local dir=$OUT/run/fe
  mkdir -p "$dir"
  sed -e "s|@STATE_DIR@|$dir|g" -e "s|listen @LISTEN@ ssl http2;|listen $NET.20:8080;|" \
      -e '/^ *ssl_/d' -e '/^ *http2_/d' \
      -e 's|^\( *\)proxy_buffering off;|&\n\1chunked_transfer_encoding off;|' \
      -e "s|@NODE1@|$NET.11:8000|" -e "s|@NODE2@|$NET.12:8000|" \
      examples/nginx.conf.example >"$dir/nginx.conf"
  inns fe nginx -c "$dir/nginx.conf" -p "$dir" -g 'daemon off; master_process off;' \
    </dev/null >>"$OUT/logs/fe.log" 2>&1 &
}

# cstat HOST KEY: a counter of the C-node on HOST (asked inside its namespace,
# so that it answers whatever fault cuts it off).
cstat() {
  inns "$1" curl -s -m 2 http://127.0.0.1:8001/stats |
    python3 -c "import json,sys; print(json.load(sys.stdin).get('$2', ''))" 2>/dev/null
}

wait_for() {   # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local until=$(($(date +%s) + $1)) what=$2
  shift 2
  until "$@"; do
    (($(date +%s) >= until)) && die "$what: not within the bound"
    sleep 0.2
  done
}

epmd_has() { inns "$1" epmd -names 2>/dev/null | grep -q "^name $2 "; }
masters_linked() { [[ $(cstat "$1" erl_masters) == 2 ]]; }

# --- faults (iptables in the bridge's namespace) ------------------------------
fw() { inns sw iptables -w "$@"; }
drop_between() { fw -I FORWARD -s "$NET.${ADDR[$1]}" -d "$NET.${ADDR[$2]}" -j DROP
                 fw -I FORWARD -s "$NET.${ADDR[$2]}" -d "$NET.${ADDR[$1]}" -j DROP; }
isolate() { fw -I FORWARD -s "$NET.${ADDR[$1]}" -j DROP; fw -I FORWARD -d "$NET.${ADDR[$1]}" -j DROP; }
heal() { fw -F FORWARD; }
loss() { fw -I FORWARD -m statistic --mode random --probability "$1" -j DROP; }
freeze() { local p; p=$(ip netns pids "$(ns "$1")" | tr '\n' ' '); kill -"$2" $p; }

LAT_TOOL=""
latency_on() {   # latency_on MS JITTER
  local h
  if [[ -z $LAT_TOOL ]]; then
    if inns sw tc qdisc add dev "v-m1" root netem delay 1ms 2>/dev/null; then
      inns sw tc qdisc del dev "v-m1" root; LAT_TOOL=netem
    else
      LAT_TOOL=netdelay
    fi
  fi
  if [[ $LAT_TOOL == netem ]]; then
    # on every port of the bridge, towards each host: each packet delayed once
    for h in "${HOSTS[@]}"; do inns sw tc qdisc add dev "v-$h" root netem delay "$1ms" "$2ms"; done
  else
    [[ -x $NETDELAY ]] || die "$NETDELAY missing (make all)"
    ip netns exec "$(ns sw)" "$NETDELAY" --queue 7 --delay "$1" --jitter "$2" 2>>"$OUT/logs/netdelay.log" &
    NETDELAY_PID=$!
    sleep 0.3
    fw -I FORWARD -j NFQUEUE --queue-num 7
  fi
}
latency_off() {
  local h
  heal
  if [[ $LAT_TOOL == netem ]]; then
    for h in "${HOSTS[@]}"; do inns sw tc qdisc del dev "v-$h" root 2>/dev/null; done
  elif [[ -n ${NETDELAY_PID:-} ]]; then
    kill -TERM "$NETDELAY_PID"; wait "$NETDELAY_PID" 2>/dev/null; NETDELAY_PID=""
  fi
}

# --- one scenario -------------------------------------------------------------
SCEN=()        # the scenarios' JSON objects
CHECKS=()      # "PASS|FAIL name: text"
UIDBASE=1000

check() { local v=FAIL; [[ $2 == 1 ]] && v=PASS; CHECKS+=("$v $1: $3"); log "$v $1: $3"; }

# scenario NAME FAULT RATE SECONDS CLIENTS FAULT_FN HEAL_FN DETECT_FN CONVERGE_FN
#   FAULT_FN at a third of SECONDS; HEAL_FN after FAULT_LEN (global) seconds;
#   DETECT_FN (polled during the fault) succeeds once the fault is seen;
#   CONVERGE_FN prints the seconds from the heal until things agree (or null).
scenario() {
  local name=$1 fault=$2 rate=$3 secs=$4 nclients=$5 f_on=$6 f_off=$7 detect=$8 converge=$9
  local first=$((UIDBASE + 1)) last=$((UIDBASE + nclients)) dir=$OUT/$name
  UIDBASE=$((UIDBASE + 1000))
  mkdir -p "$dir"
  rm -f "$dir/record"
  log "== $name: $fault, $rate msg/s for $secs s, $nclients SSE clients (uids $first-$last)"
  ip netns exec "$(ns cl)" "$BIN/httpclient" --proto sse --host "$NET.20" -p 8080 -n "$nclients" --uid-base "$first" \
    --hold 100000 --max-time 600 --reconnect-lost 300 --reconnect-cap 3000 --record "$dir/record" \
    --json -q >"$dir/client.json" 2>"$dir/client.err" &
  local cpid=$!
  local on
  on=$(ctl online "$MASTERS" "$first" "$last" 30000)
  [[ $on == *'"timeout"'* || -z $on ]] && die "$name: clients not online on both masters: $on"
  local count=$((rate * secs))
  ctl load "${LOADM:-$M1}" "$first" "$last" "$rate" "$count" "${PROCS:-1}" >"$dir/load.json" &
  local lpid=$!
  local t_fault t_heal detection=null convergence=null
  sleep $((secs / 3))
  if [[ $f_on != none ]]; then
    t_fault=$(now_ms)
    $f_on
    local end=$((t_fault + FAULT_LEN * 1000))
    while (($(now_ms) < end)); do
      if [[ $detection == null && $detect != none ]] && $detect; then
        detection=$(python3 -c "print(round(($(now_ms) - $t_fault) / 1000, 2))")
        log "   fault seen after $detection s"
      fi
      # DETECT2 (optional): the same fault seen from the other side
      if [[ -n ${DETECT2:-} && -z ${SCEN_EXTRA:-} ]] && $DETECT2; then
        SCEN_EXTRA="{\"master_detection_s\": $(python3 -c "print(round(($(now_ms) - $t_fault) / 1000, 2))")}"
        log "   seen by the master: $SCEN_EXTRA"
      fi
      sleep 0.2
    done
    $f_off
    t_heal=$(now_ms)
    log "   healed after $FAULT_LEN s"
    [[ $converge != none ]] && convergence=$($converge "$t_heal" "$first" "$last")
  fi
  # the load ends by itself (its count); bounded in any case
  local until=$(($(date +%s) + secs + 120))
  while kill -0 "$lpid" 2>/dev/null && (($(date +%s) < until)); do sleep 0.5; done
  kill -0 "$lpid" 2>/dev/null && { kill "$lpid"; log "   the load did not end in time"; }
  wait "$lpid" 2>/dev/null
  local sent
  sent=$(python3 -c "import json; print(json.load(open('$dir/load.json'))['sent'])" 2>/dev/null)
  [[ -z $sent ]] && { log "   no result from the load: $(cat "$dir/load.json")"; sent=0; }
  # done once every message sent arrived; else once nothing more arrives for
  # QUIET s (3; a scenario whose fault leaves TCP backing off its
  # retransmissions sets more), 90 s at most
  local prev=-1 cur got stable=0 quiet=$((${QUIET:-3} * 5))
  until=$(($(date +%s) + 90))
  while (($(date +%s) < until && stable < quiet)); do
    cur=$(wc -l <"$dir/record" 2>/dev/null || echo 0)
    got=$(grep -c '^m ' "$dir/record" 2>/dev/null || true)
    ((${got:-0} >= sent)) && break
    if [[ $cur == "$prev" ]]; then stable=$((stable + 1)); else stable=0; fi
    prev=$cur
    sleep 0.2
  done
  kill -TERM "$cpid" 2>/dev/null
  wait "$cpid" 2>/dev/null
  # what each part counted, for the report and for looking into a loss
  local h
  for h in c1 c2; do inns "$h" curl -s -m 2 http://127.0.0.1:8001/stats >"$dir/$h.stats"; done
  ctl app_stats "$M1" >"$dir/m1.app_stats"
  ctl app_stats "$M2" >"$dir/m2.app_stats"
  local chk
  chk=$(python3 scripts/cluster-sim-check.py --record "$dir/record" --load "$first-$last:$sent")
  [[ -n ${DETECT2:-} && -z ${SCEN_EXTRA:-} ]] && SCEN_EXTRA='{"master_detection_s": null}'
  local extra=${SCEN_EXTRA:-}
  SCEN_EXTRA=""
  local json
  json=$(python3 - "$name" "$fault" "$detection" "$convergence" "$dir/client.json" "$chk" "$rate" "$extra" "$dir/load.json" "$dir" <<'EOF'
import json, sys
name, fault, det, conv, client, chk, rate, extra, load, d = sys.argv[1:]
c = json.loads(chk)
def read(f):
    try:
        return json.load(open(f))
    except (OSError, ValueError):
        return {}
cl, ld = read(client), read(load)
o = {"name": name, "fault": fault, "sent": c["sent"], "delivered": c["delivered"],
     "lost": c["lost"], "lost_without_gap": c["lost_without_gap"], "duplicated": c["duplicated"],
     "out_of_order": c["out_of_order"], "gaps": c["gaps"], "unexpected": c["unexpected"],
     "lost_at_end": c.get("lost_at_end", 0),
     "detection_s": None if det == "null" else float(det),
     "convergence_s": None if conv in ("null", "") else float(conv),
     "rate": int(rate), "lat_p50_ms": round(cl.get("lat_p50_us", 0) / 1000, 2),
     "lat_p99_ms": round(cl.get("lat_p99_us", 0) / 1000, 2),
     "load_burst_p99": ld.get("burst_p99"), "load_burst_max": ld.get("burst_max"),
     # what the masters dropped past their bound, and the numbers the C-nodes
     # then saw skipped (told as gaps): the account of the lost behind gaps
     "held_dropped": sum(read(f"{d}/{m}.app_stats").get("held_dropped", 0) for m in ("m1", "m2")),
     "seq_skipped": sum(read(f"{d}/{h}.stats").get("seq_skipped", 0) for h in ("c1", "c2"))}
if extra:
    o.update(json.loads(extra))
print(json.dumps(o))
EOF
)
  log "   $json"
  SCEN+=("$json")
  LAST_JSON=$json
}

# --- what each fault does, how it is seen, when it is over --------------------
FAULT_LEN=20
part_m1_c1() { drop_between m1 c1; }
seen_c1_dropped_m1() { [[ $(cstat c1 erl_silent_masters) -gt ${SILENT0:-0} ]]; }
seen_m1_dropped_c1() { [[ $(ctl sees "$M1" "$C1") == *'"sees":false'* ]]; }
cut_masters() { drop_between m1 m2; }
# Once the masters dropped each other: a subscription written on each side
# (publisher PUB, a uid nobody is): on m1 SUB_NEW1 added and SUB_OLD removed,
# on m2 SUB_NEW2 added.
PUB=900000
seen_masters_apart() {
  [[ $(ctl sees "$M1" "$M2") == *'"sees":false'* ]] || return 1
  ctl subs "$M1" add "$SUB_NEW1" "$PUB" >/dev/null
  ctl subs "$M1" remove "$SUB_OLD" "$PUB" >/dev/null
  ctl subs "$M2" add "$SUB_NEW2" "$PUB" >/dev/null
}
isolate_c1() { isolate c1; }
seen_c1_alone() { [[ $(cstat c1 erl_masters) == 0 ]]; }
freeze_m1() { freeze m1 STOP; }
thaw_m1() { freeze m1 CONT; }
seen_m1_dropped() { [[ $(cstat c1 erl_silent_masters) -gt ${SILENT0:-0} && $(cstat c2 erl_silent_masters) -gt ${SILENT2:-0} ]]; }

# since_heal T_HEAL JSON: seconds from the heal to a simctl wait's at_ms
# (null when it timed out).
since_heal() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    r = json.loads(sys.argv[2])
except ValueError:
    r = {}
print("null" if r.get("timeout") or "at_ms" not in r else round((r["at_ms"] - int(sys.argv[1])) / 1000, 2))
EOF
}

# converge_online T_HEAL FIRST LAST: seconds from the heal until both masters
# have every uid online again (null past 60 s).
converge_online() { since_heal "$1" "$(ctl online "$MASTERS" "$2" "$3" 60000)"; }

# After the cut: how long until both masters answer the merge rule's
# result (the latest write wins: SUB_NEW1 and SUB_NEW2, not SUB_OLD); then
# router:send from each master while the clients still record.
converge_subs() {
  local r dir=$OUT/master_master_cut
  r=$(ctl subscribers "$MASTERS" "$PUB" "$SUB_NEW1,$SUB_NEW2" 20000)
  printf '%s' "$r" >"$dir/subscribers.json"
  ctl route "$M1" "$PUB" 5 >"$dir/route_m1.json"
  ctl route "$M2" "$PUB" 5 >"$dir/route_m2.json"
  since_heal "$1" "$r"
}

# --- the run ---------------------------------------------------------------------
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, iptables)"
for f in "$BIN/httpdcnode" "$BIN/httpclient" tools/erlang/ebin/simctl.beam tools/erlang/ebin/msggen.beam; do
  [[ -e $f ]] || die "$f missing: run 'make all' first"
done
command -v nginx >/dev/null || die "nginx missing (scripts/install-deps.sh)"
clean_stale
trap finish EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM
rm -rf "$OUT/logs" "$OUT/run"
mkdir -p "$OUT/logs" "$OUT/run"
COOKIE="sim_$$_${RANDOM}${RANDOM}"
(umask 077; printf '%s' "$COOKIE" >"$OUT/cookie")

log "hosts: $(ns '*'), $NET.0/24 on a bridge; tick time $TICK s"
make_hosts
for h in m1 m2 c1 c2 ctl; do inns "$h" epmd -daemon; done
start_master m1
start_master m2
wait_for 20 "master m1 up" epmd_has m1 m1
wait_for 20 "master m2 up" epmd_has m2 m2
start_cnode c1
start_cnode c2
start_nginx
wait_for 20 "c1 linked to both masters" masters_linked c1
wait_for 20 "c2 linked to both masters" masters_linked c2
r=$(ctl start_app "$MASTERS" "$C1,$C2" 30000) || die "the application did not start: $r"
log "application up on both masters: $r"

SILENT0=$(cstat c1 erl_silent_masters)
SILENT2=$(cstat c2 erl_silent_masters)
if [[ $SMALL == 1 ]]; then
  # what a judgement may be late by, plus the polling: 2 s, longer on a slow run
  SLACK=$(python3 -c "print(round(2 * float('${HTTPDTEST_TIME_SCALE:-1}'), 1))")
  FAULT_LEN=$((TICK * 3))
  DETECT2=seen_m1_dropped_c1 scenario master_cnode_partition drop "${CLUSTER_SIM_RATE:-200}" $((FAULT_LEN + 9)) 40 part_m1_c1 heal seen_c1_dropped_m1 converge_online
  det=$(python3 -c "import json; print(json.loads('''$LAST_JSON''')['detection_s'])")
  dup=$(python3 -c "import json; print(json.loads('''$LAST_JSON''')['duplicated'])")
  check "partition detected" "$(python3 -c "print(int('$det' != 'None' and float('$det') <= 1.25 * $TICK + $SLACK))")" \
    "c1 dropped its link to m1 $det s into the silent partition (bound 1.25 x $TICK + $SLACK s)"
  check "partition no duplicate" "$([[ $dup == 0 ]] && echo 1 || echo 0)" "$dup duplicated"
  SILENT0=$(cstat c1 erl_silent_masters)
  SILENT2=$(cstat c2 erl_silent_masters)
  LOADM=$M2 scenario master_frozen freeze 200 $((FAULT_LEN + 9)) 40 freeze_m1 thaw_m1 seen_m1_dropped converge_online
  det=$(python3 -c "import json; print(json.loads('''$LAST_JSON''')['detection_s'])")
  dup=$(python3 -c "import json; print(json.loads('''$LAST_JSON''')['duplicated'])")
  lwg=$(python3 -c "import json; print(json.loads('''$LAST_JSON''')['lost_without_gap'])")
  check "freeze detected" "$(python3 -c "print(int('$det' != 'None' and float('$det') <= 1.25 * $TICK + $SLACK))")" \
    "both C-nodes dropped their links to the frozen m1 within $det s (bound 1.25 x $TICK + $SLACK s)"
  check "freeze nothing lost" "$([[ $dup == 0 && $lwg == 0 ]] && echo 1 || echo 0)" \
    "messages through m2 while m1 was frozen: $lwg lost without a gap, $dup duplicated"
else
  FAULT_LEN=30
  DETECT2=seen_m1_dropped_c1 scenario master_cnode_partition drop 1000 60 100 part_m1_c1 heal seen_c1_dropped_m1 converge_online
  FAULT_LEN=20
  SCEN_EXTRA=""
  # the subscription the cut changes, written (and copied to m2) before it
  SUB_OLD=$((UIDBASE + 1)) SUB_NEW1=$((UIDBASE + 2)) SUB_NEW2=$((UIDBASE + 3))
  ctl subs "$M1" add "$SUB_OLD" "$PUB" >/dev/null
  ctl subscribers "$MASTERS" "$PUB" "$SUB_OLD" 10000 >/dev/null
  scenario master_master_cut cut 1000 45 100 cut_masters heal seen_masters_apart converge_subs
  SCEN[-1]=$(python3 - "${SCEN[-1]}" "$OUT/master_master_cut" "$SUB_OLD" "$SUB_NEW1" "$SUB_NEW2" <<'EOF'
import json, sys
o, d = json.loads(sys.argv[1]), sys.argv[2]
old, new1, new2 = (int(x) for x in sys.argv[3:6])
def load(f):
    try:
        return json.load(open(f"{d}/{f}"))
    except (OSError, ValueError):
        return {}
s = load("subscribers.json")
o["subscribers_after_heal"] = {"m1": s.get("a"), "m2": s.get("b"), "want": s.get("want")}
# the router's messages (no number) each subscriber's stream got
got = {}
for line in open(f"{d}/record"):
    p = line.split()
    if p[0] == "m" and p[3] == "-1":
        got[int(p[1])] = got.get(int(p[1]), 0) + 1
routes = [load("route_m1.json"), load("route_m2.json")]
sends = sum(r.get("sends", 0) for r in routes)
o["router_after_heal"] = {"sends": sends, "reached": sum(r.get("reached", 0) for r in routes),
                          "added_on_m1_got": got.get(new1, 0), "added_on_m2_got": got.get(new2, 0),
                          "removed_on_m1_got": got.get(old, 0)}
# each router send must reach both subscribers added during the cut
o["sent"] += 2 * sends
o["delivered"] += min(sends, got.get(new1, 0)) + min(sends, got.get(new2, 0))
o["lost_without_gap"] += max(0, sends - got.get(new1, 0)) + max(0, sends - got.get(new2, 0))
print(json.dumps(o))
EOF
)
  FAULT_LEN=30
  SILENT0=$(cstat c1 erl_silent_masters)
  # what c1 wrote into its streams while cut off comes once TCP retransmits,
  # its backoff grown through the blackout: up to ~25 s after the heal
  QUIET=40 scenario cnode_isolated drop 1000 60 100 isolate_c1 heal seen_c1_alone converge_online
  FAULT_LEN=20
  SILENT0=$(cstat c1 erl_silent_masters)
  SILENT2=$(cstat c2 erl_silent_masters)
  LOADM=$M2 scenario master_frozen freeze 1000 45 100 freeze_m1 thaw_m1 seen_m1_dropped converge_online
  FAULT_LEN=20
  lossy() { loss 0.01; }
  scenario loss_1pct loss 1000 45 100 lossy heal none none
  PROCS=2 scenario latency_0ms latency 20000 15 200 none none none none
  base=$LAST_JSON
  # on for the whole of the load: every message measured crosses it
  latency_on 20 5
  PROCS=2 scenario latency_20ms latency 20000 15 200 none none none none
  latency_off
  SCEN[-1]=$(python3 - "${SCEN[-1]}" "$base" "$LAT_TOOL" <<'EOF'
import json, sys
o, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
o["latency_tool"] = sys.argv[3]
o["against_0ms"] = {"lat_p50_ms": b["lat_p50_ms"], "lat_p99_ms": b["lat_p99_ms"]}
print(json.dumps(o))
EOF
)
fi

# --- the report -------------------------------------------------------------------
printf '%s\n' "${SCEN[@]}" | python3 -c '
import json, sys
s = [json.loads(l) for l in sys.stdin if l.strip()]
json.dump({"tick_s": '"$TICK"', "loadavg_start": "'"$LOAD0"'",
           "loadavg_end": "'"$(cut -d' ' -f1-3 /proc/loadavg)"'", "scenarios": s},
          open("'"$OUT"'/result.json", "w"), indent=1)'
log "result: $OUT/result.json"
# The BENCHMARKS.md section (full run): replaced between its markers.
if [[ $SMALL != 1 ]]; then
  python3 - "$OUT/result.json" "$(git rev-parse --short HEAD 2>/dev/null)" >"$OUT/section.md" <<'EOF2'
import json, sys, time
r = json.load(open(sys.argv[1]))
def f(v, unit=""):
    return "—" if v is None else f"{v}{unit}"
print("<!-- cluster-sim -->")
print("## 11. A cluster across simulated hosts (`make cluster-sim`)\n")
print(f"Measured by `make cluster-sim` (`scripts/cluster-sim.sh`) on "
      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {sys.argv[2]}: each host a "
      f"network namespace on one bridge (masters m1, m2 with the application; C-nodes c1, c2; "
      f"nginx; the SSE clients; the controller), `net_ticktime` and `--erl-tick-seconds` "
      f"{r['tick_s']}. Messages through the application (`httpdcnode:send/2`, msggen `--via app "
      f"--seq`), each numbered; the checker compares them with what every client received "
      f"(`httpclient --record`). lost without gap: never received, and the client was told of no "
      f"gap there. detection: the fault seen (the C-node dropped the link, or the masters each "
      f"other); convergence: from the heal until presence (the subscriptions, for the cut) agreed "
      f"again. Raw figures: `build/cluster-sim/result.json`. The machine's load average "
      f"(1, 5, 15 min) was {r['loadavg_start']} at the start and {r['loadavg_end']} at the end: "
      f"every host shares its 2 cores (and so does whatever else runs on it), which the "
      f"latencies show.\n")
print("| scenario | fault | msg/s | sent | delivered | lost without gap | duplicated | out of order | gaps told | detection | convergence | p50 / p99 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in r["scenarios"]:
    print(f"| {s['name']} | {s['fault']} | {s['rate']:,} | {s['sent']:,} | {s['delivered']:,} | "
          f"{s['lost_without_gap']:,} | {s['duplicated']} | {s['out_of_order']} | {s['gaps']} | "
          f"{f(s['detection_s'], ' s')} | {f(s['convergence_s'], ' s')} | "
          f"{s['lat_p50_ms']} / {s['lat_p99_ms']} ms |")
print()
for s in r["scenarios"]:
    if "subscribers_after_heal" in s:
        a, r = s["subscribers_after_heal"], s["router_after_heal"]
        print(f"{s['name']}: subscriptions to one publisher written on both "
              f"sides while apart (on m1 one added and one removed, on m2 one added). After the heal "
              f"`get_subscribers` was [{a['m1']}] on m1 and [{a['m2']}] on m2; the latest write "
              f"wins says [{a['want']}]. {r['sends']} `router:send` after the heal (half on each "
              f"master): the one added on m1 got {r['added_on_m1_got']}, the one added on m2 "
              f"{r['added_on_m2_got']}, the one removed on m1 {r['removed_on_m1_got']} (should be "
              f"0); the missing ones count in lost without gap.\n")
    if "master_detection_s" in s:
        m = s["master_detection_s"]
        side = (f"m1 dropped its side {m} s in (what it wrote waited its `net_ticktime` "
                f"unacknowledged: the `TCP_USER_TIMEOUT` the application sets on its links to "
                f"C-nodes), so c1's first dial after the heal found it free" if m is not None else
                "m1 never dropped its side while the partition lasted: it kept writing into the "
                "dead link (with 20 msg/s through it, tick 4 s, it dropped it after 3.5 s)"
                if s["lost_without_gap"] else
                "m1 never dropped its side while the partition lasted")
        if s["lost_without_gap"] == 0:
            what = (f"What m1 wrote into the dead link went unacknowledged: after its "
                    f"`ack_timeout_ms` m1 sent it again through m2, and what followed that way, "
                    f"so its sender never waited on the dead link (its largest burst "
                    f"{s['load_burst_max']} messages); c1 dropped the copies it had, and no "
                    f"message was lost.")
        else:
            what = (f"The sender on m1 waited once the dead link's buffers were full (Erlang "
                    f"suspends a process that sends to a busy distribution port), for every uid "
                    f"alike, until c1's redial after the heal replaced the link: its largest "
                    f"burst was {s['load_burst_max']} messages. The messages lost are those that "
                    f"filled the dead link; no client was told of them (the C-node never saw "
                    f"them, so no id was given).")
        print(f"{s['name']}: c1 dropped its side of the link {s['detection_s']} s into the "
              f"partition (`--erl-tick-seconds`); {side}. {what}\n")
    if s.get("lost_at_end"):
        print(f"{s['name']}: of the {s['lost_without_gap']:,} lost without a gap, "
              f"{s['lost_at_end']:,} are after the last message their client received: they had "
              f"not arrived when the run ended (the load over, and nothing more coming for the "
              f"scenario's quiet time), none missing between two received. What a node writes to its clients while "
              f"cut off waits on TCP's retransmission backoff, which after a long blackout may go "
              f"on well past the heal.\n")
    if s["gaps"] and s["lost"] and not s["lost_without_gap"]:
        print(f"{s['name']}: the {s['lost']:,} messages not delivered are all behind the "
              f"{s['gaps']:,} gaps told. The masters keep what they cannot deliver to a node for at "
              f"most `unacked_max_ms` (30 s) and `unacked_max_bytes`, and send it once the node "
              f"is back; the cut lasted as long, so the oldest of it went (`held_dropped` "
              f"{s['held_dropped']:,} on the masters) and a gap for their uids took their place"
              + (f"; and the node gave up numbers it never got (`seq_skipped` "
                 f"{s['seq_skipped']:,}) and told every uid a gap" if s["seq_skipped"] else
                 f"; the node gave up no number (`seq_skipped` 0): it waited for the masters "
                 f"that held the rest until they were linked again")
              + f". The p99 latency is that of what was kept: sent during the cut, "
              f"delivered after the heal.\n")
    if "against_0ms" in s:
        b = s["against_0ms"]
        print(f"{s['name']}: 20 ms ± 5 ms on every packet between hosts ({s['latency_tool']}), "
              f"for the whole load: p50 / p99 {s['lat_p50_ms']} / {s['lat_p99_ms']} ms against "
              f"{b['lat_p50_ms']} / {b['lat_p99_ms']} ms without. A message crosses three hops "
              f"(m1 to the C-node, to nginx, to the client: 60 ms at least); the rest is queueing: "
              f"msggen sent in bursts (p99 {s['load_burst_p99']}, at most {s['load_burst_max']} "
              f"messages at once: the 2 cores carry every host, the delay included), and each burst "
              f"crosses TCP windows with a 40-ms round trip.\n")
print("<!-- /cluster-sim -->")
EOF2
  # shellcheck source=bench/section.sh
  source bench/lib/section.sh
  benchmarks_section cluster-sim "$OUT/section.md" "$OUT"
  log "BENCHMARKS.md section 11 written"
fi
p=0; f=0
for c in "${CHECKS[@]}"; do [[ $c == PASS* ]] && p=$((p + 1)) || f=$((f + 1)); done
echo "$RUN: took $(($(date +%s) - START)) s"
echo "$RUN: $p passed, $f failed"
((f == 0))
