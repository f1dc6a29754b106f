#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make run`: epmd, the server in the background, and an Erlang master node
# in the foreground with a shell. Quitting the shell (q(). or Ctrl-C twice)
# stops the server.
#
# The cookie is on no command line (anyone on the host can read those with
# ps): it is made at random on first use and kept in RUN_DIR/cookie (mode
# 0600); each run writes the cookie it uses to RUN_DIR/home/.erlang.cookie
# (0600), which the server reads with --cookie-file and the master finds
# through HOME=RUN_DIR/home. epmd (when this script starts it) and the
# master listen on 127.0.0.1 only.
#
# Settings, from the environment (or `make run VAR=...`):
#   COOKIE    use this cookie instead of the random one. Give it in the
#             environment (COOKIE=... make run): a make argument shows in ps.
#   PORT      HTTP port (8000)         NAME    C-node name (c1@localhost)
#   LISTEN_ADDR  the address HTTP listens on (0.0.0.0; 127.0.0.1: this host only)
#   SERVER_ARGS  more options for the server, split on spaces
#   ADMIN_PORT  /stats, /metrics and /probe, on 127.0.0.1 only (8001)
#   MASTER    master node name (httpdmaster@localhost)
#   INBOX_HANDLER  the module that handles what clients send (chat_room,
#             the demo page's chat, examples/erlang): the master's
#             application runs it as the inbox httpdcnode_inbox and the
#             server sends there (--inbox); it also decides who joins which
#             topic (--topic-auth handler: its authorize_join) and hears of
#             WebSockets that end (--presence-conns). Empty: no inbox, the
#             server refuses client messages and takes any topic.
#   INBOX_WORKERS  processes that run the handler (4): each uid's messages
#             go to one of them, in order (httpdcnode_inbox, workers => N)
#   PUBLIC=1  epmd and the master listen on every address, for nodes on
#             other hosts (use names with a host name then, not @localhost)
#   RUN_DIR   cookie, log and pids (build/run)
#   HTTPDCNODE_BIN  the server binary (./httpdcnode; the tests give the one
#             of the build under test, e.g. build-address-undefined/bin/)
#
#   scripts/run.sh               as `make run`
#   scripts/run.sh --background  start all three without a shell, write their
#                                pids to RUN_DIR/pids and return (for tests)
#   scripts/run.sh --stop        end what --background started, by pid
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-8000}
LISTEN_ADDR=${LISTEN_ADDR:-0.0.0.0}
read -r -a server_args <<<"${SERVER_ARGS:-}"
ADMIN_PORT=${ADMIN_PORT:-8001}
NAME=${NAME:-c1@localhost}
MASTER=${MASTER:-httpdmaster@localhost}
PUBLIC=${PUBLIC:-}
RUN_DIR=${RUN_DIR:-build/run}
RUN_DIR=$(mkdir -p "$RUN_DIR" && cd "$RUN_DIR" && pwd)
MASTER_HOME=$RUN_DIR/home
COOKIE_FILE=$MASTER_HOME/.erlang.cookie
LOG=$RUN_DIR/httpdcnode.log
PIDS=$RUN_DIR/pids
EPMD_PORT=${ERL_EPMD_PORT:-4369}
SERVER_BIN=${HTTPDCNODE_BIN:-./httpdcnode}
INBOX_HANDLER=${INBOX_HANDLER-chat_room}
INBOX_WORKERS=${INBOX_WORKERS:-4}
INBOX=httpdcnode_inbox

die() { echo "run: $*" >&2; exit 1; }

# The inbox needs the application and the handler's beam; it goes into an
# Erlang term, so a plain module name only.
inbox_args=()
if [[ -n $INBOX_HANDLER ]]; then
  [[ $INBOX_HANDLER =~ ^[a-z][a-zA-Z0-9_]*$ ]] || die "INBOX_HANDLER '$INBOX_HANDLER' is not a module name"
  [[ $INBOX_WORKERS =~ ^[1-9][0-9]{0,3}$ && $INBOX_WORKERS -le 1024 ]] ||
    die "INBOX_WORKERS '$INBOX_WORKERS' is not a number from 1 to 1024"
  if [[ -f tools/erlang/ebin/httpdcnode.app && -f tools/erlang/ebin/$INBOX_HANDLER.beam ]]; then
    inbox_args=(--inbox "$INBOX" --topic-auth handler --presence-conns)
  else
    echo "run: note: tools/erlang/ebin has no httpdcnode.app or $INBOX_HANDLER.beam (run make):" \
         "no inbox, clients cannot send" >&2
  fi
fi

# The random cookie, made once; printf is a shell builtin, so the cookie is
# never an argument of a process.
make_cookie_files() {
  umask 077
  chmod 700 "$RUN_DIR"
  mkdir -p "$MASTER_HOME"
  chmod 700 "$MASTER_HOME"
  if [[ ! -s $RUN_DIR/cookie ]]; then
    printf '%s\n' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$RUN_DIR/cookie.new"
    mv "$RUN_DIR/cookie.new" "$RUN_DIR/cookie"
  fi
  chmod 600 "$RUN_DIR/cookie"
  if [[ -n ${COOKIE:-} ]]; then
    printf '%s\n' "$COOKIE" >"$COOKIE_FILE.new"
  else
    cp "$RUN_DIR/cookie" "$COOKIE_FILE.new"
  fi
  chmod 600 "$COOKIE_FILE.new"
  mv "$COOKIE_FILE.new" "$COOKIE_FILE"
}

epmd_running() { epmd -port "$EPMD_PORT" -names >/dev/null 2>&1; }

# Starts epmd on loopback unless PUBLIC=1. With --background it stays a
# child whose pid is noted; otherwise a daemon that outlives this run, as
# other nodes may use it.
start_epmd() {
  if epmd_running; then
    if [[ -z $PUBLIC ]] && ss -Htln "sport = :$EPMD_PORT" |
         awk '{ print $4 }' | grep -vqE '^(127\.0\.0\.1|\[::1\]):'; then
      echo "run: note: the epmd already running listens on more than loopback" \
           "(started elsewhere); stop it (epmd -kill) to have this script start one on 127.0.0.1" >&2
    fi
    return
  fi
  local addr=()
  [[ -z $PUBLIC ]] && addr=(ERL_EPMD_ADDRESS=127.0.0.1)
  if [[ $1 == background ]]; then
    env "${addr[@]}" epmd -port "$EPMD_PORT" </dev/null >>"$LOG" 2>&1 &
    echo "epmd $!" >>"$PIDS"
  else
    env "${addr[@]}" epmd -port "$EPMD_PORT" -daemon
  fi
  for _ in $(seq 50); do epmd_running && return; sleep 0.1; done
  die "epmd did not start on port $EPMD_PORT"
}

start_server() {
  "$SERVER_BIN" --listen "$LISTEN_ADDR:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
    --name "$NAME" --master "$MASTER" \
    --cookie-file "$COOKIE_FILE" --presence httpdcnode_presence "${inbox_args[@]}" \
    "${server_args[@]}" </dev/null >>"$LOG" 2>&1 &
  server=$!
  echo "server $server" >>"$PIDS"
  # Wait (bounded) for the HTTP port, and say why if the server died.
  for _ in $(seq 100); do
    if ! kill -0 "$server" 2>/dev/null; then
      echo "run: the server exited:" >&2
      cat "$LOG" >&2
      exit 1
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return
    sleep 0.1
  done
  die "the server did not listen on port $PORT within 10 s (log $LOG)"
}

# The master's arguments: no cookie (it reads HOME/.erlang.cookie).
master_args() {
  master_argv=(-sname "$MASTER" -pa tools/erlang/ebin)
  [[ -z $PUBLIC ]] && master_argv+=(-kernel inet_dist_use_interface '{127,0,0,1}')
  if [[ -f tools/erlang/ebin/httpdcnode.app ]]; then
    [[ ${#inbox_args[@]} -gt 0 ]] && master_argv+=(-httpdcnode inbox "{$INBOX, $INBOX_HANDLER, [], #{workers => $INBOX_WORKERS}}")
    master_argv+=(-eval 'application:ensure_all_started(httpdcnode)')
  fi
}

master_registered() { epmd -port "$EPMD_PORT" -names 2>/dev/null | grep -q "^name ${MASTER%@*} at"; }

# A second C-node for the hint: next to this one's name (c2 on its host),
# its ports two above, linked to the master as this one is.
other_cnode() {
  local host=${NAME#*@} inbox=""
  other_name=c2@$host
  [[ $other_name == "$NAME" ]] && other_name=c3@$host
  [[ ${#inbox_args[@]} -gt 0 ]] && inbox=" --inbox $INBOX"
  other_cmd="$SERVER_BIN --cookie-file $COOKIE_FILE --name $other_name \\
                  --listen $LISTEN_ADDR:$((PORT + 2)) --admin-listen 127.0.0.1:$((ADMIN_PORT + 2)) \\
                  --master $MASTER --presence httpdcnode_presence$inbox"
}

# What to open and type; $1 background: the master has no shell here.
print_help() {
  local iface="" shell="Then type in the Erlang shell below:" quit="Quit the shell with q(). to stop the server."
  [[ -z $PUBLIC ]] && iface=" -kernel inet_dist_use_interface '{127,0,0,1}'"
  if [[ ${1:-} == background ]]; then
    shell="Then, on a node attached to $MASTER (below):"
    quit="Stop everything with $0 --stop."
  fi
  other_cnode
  cat <<MSG
httpdcnode is running (pid $server, log $LOG).
  Open   http://localhost:$PORT/test/123   in a browser (or: curl -N localhost:$PORT/test/123)
  or the demo page   http://localhost:$PORT/?uid=1   and in another tab ?uid=2: join a room, chat
  Counters: curl 127.0.0.1:$ADMIN_PORT/stats   Prometheus: curl 127.0.0.1:$ADMIN_PORT/metrics
  $shell
     {any, '$NAME'} ! {123, <<"Hello Libevent World\n">>}.
  or, with the bundled application:
     httpdcnode:send(123, <<"Hello\n">>).     httpdcnode:online(123).     httpdcnode:stats().
  $quit
  The cookie is in $COOKIE_FILE. Attach another node with it
  (HOME makes erl read it from there, so it stays out of ps):
     HOME=$MASTER_HOME erl -sname mynode@localhost$iface
  or another C-node, which the master's application routes to as well:
     $other_cmd
MSG
}

# --stop: each pid noted, the last started first, while it is still the
# process started (its command line names what it was): TERM, then KILL
# after 5 s.
still_ours() {
  [[ -r /proc/$1/cmdline ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qE '(epmd|httpdcnode|beam)'
}

stop_noted() {
  [[ -f $PIDS ]] || return 0
  local role pid
  while read -r role pid; do
    still_ours "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do still_ours "$pid" || break; sleep 0.1; done
    if still_ours "$pid"; then
      echo "run: $role (pid $pid) ignored TERM; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done < <(tac "$PIDS")
  rm -f "$PIDS"
}

case ${1:-} in
  --stop) stop_noted; exit 0 ;;
  --background|"") ;;
  *) die "unknown argument '$1' (--background or --stop)" ;;
esac

[[ -x $SERVER_BIN ]] || die "$SERVER_BIN is not built: run make first"
master_registered 2>/dev/null && die "a node $MASTER is already running; stop it first"
make_cookie_files
: >"$PIDS"
master_args

if [[ ${1:-} == --background ]]; then
  start_epmd background
  master_registered && die "a node $MASTER is already running; stop it first"
  start_server
  HOME=$MASTER_HOME erl "${master_argv[@]}" -noinput </dev/null >>"$LOG" 2>&1 &
  echo "master $!" >>"$PIDS"
  for _ in $(seq 150); do master_registered && break; sleep 0.1; done
  master_registered || die "the master $MASTER did not register with epmd within 15 s (log $LOG)"
  print_help background
  echo "run: started in the background; pids in $PIDS; stop with $0 --stop"
  exit 0
fi

start_epmd daemon
master_registered && die "a node $MASTER is already running; stop it first"
start_server
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
print_help
HOME=$MASTER_HOME erl "${master_argv[@]}"
