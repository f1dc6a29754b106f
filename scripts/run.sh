#!/usr/bin/env bash
# `make run`: epmd, the server in the background, and an Erlang master node
# httpdmaster@localhost in the foreground with a shell. Quitting the shell
# (q(). or Ctrl-C twice) stops the server.
# Settings: COOKIE (default secretcookie), PORT (8000), NAME (c1@localhost),
# ADMIN_PORT (8001: /stats, /metrics and /probe on 127.0.0.1 only).
set -euo pipefail
cd "$(dirname "$0")/.."

COOKIE=${COOKIE:-secretcookie}
PORT=${PORT:-8000}
ADMIN_PORT=${ADMIN_PORT:-8001}
NAME=${NAME:-c1@localhost}
MASTER=httpdmaster@localhost
LOG=build/run/httpdcnode.log
mkdir -p build/run

epmd -daemon

if erl_call -sname "$MASTER" -c "$COOKIE" -a 'erlang node []' >/dev/null 2>&1; then
  echo "run: a node $MASTER is already running; stop it first" >&2
  exit 1
fi

./httpdcnode --listen "0.0.0.0:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" --name "$NAME" \
  --master "$MASTER" --cookie "$COOKIE" --presence httpdcnode_presence 2>"$LOG" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT

# Wait (bounded) for the HTTP port, and say why if the server died.
for _ in $(seq 100); do
  if ! kill -0 "$server" 2>/dev/null; then
    echo "run: the server exited:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done

cat <<MSG
httpdcnode is running (pid $server, log $LOG).
  Open   http://localhost:$PORT/test/123   in a browser (or: curl -N localhost:$PORT/test/123)
  Counters: curl 127.0.0.1:$ADMIN_PORT/stats   Prometheus: curl 127.0.0.1:$ADMIN_PORT/metrics
  Then type in the Erlang shell below:
     {any, '$NAME'} ! {123, <<"Hello Libevent World">>}.
  or, with the bundled application:
     httpdcnode:send(123, <<"Hello">>).     httpdcnode:online(123).     httpdcnode:stats().
  Quit the shell with q(). to stop the server.
MSG

start_app=()
if [ -f tools/erlang/ebin/httpdcnode.app ]; then
  start_app=(-eval 'application:ensure_all_started(httpdcnode)')
fi
erl -sname "$MASTER" -setcookie "$COOKIE" -pa tools/erlang/ebin "${start_app[@]}"
