#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make ws-echo`: a WebSocket echo server to run a conformance suite
# against (docs/testing.md, "An outside WebSocket conformance suite"):
# scripts/run.sh with the example handler ws_echo as the inbox, so each
# message a client sends on ws://127.0.0.1:PORT/ws/N comes back on its
# connection. Everything on this host only: HTTP on 127.0.0.1, epmd and the
# master as run.sh starts them without PUBLIC. The server's bounds are the
# ones the conformance cases of `make test` use (ws_conformance_tests):
# messages up to 64 KiB, 1000 a second per connection.
#
# Its own node names, ports and RUN_DIR, so it runs beside `make run`.
# Settings, from the environment: PORT (9001), ADMIN_PORT (9002), RUN_DIR
# (build/ws-echo), NAME (wsecho@localhost), MASTER (wsecho_master@localhost),
# HTTPDCNODE_BIN (./httpdcnode); the rest is as scripts/run.sh says.
#
#   scripts/ws-echo.sh               start, print the URL, stop on Ctrl-C
#   scripts/ws-echo.sh --background  start and return (stop with --stop)
#   scripts/ws-echo.sh --stop        end what --background started
set -euo pipefail
cd "$(dirname "$0")/.."

export PORT=${PORT:-9001}
export ADMIN_PORT=${ADMIN_PORT:-9002}
export RUN_DIR=${RUN_DIR:-build/ws-echo}
export LISTEN_ADDR=127.0.0.1
export NAME=${NAME:-wsecho@localhost}
export MASTER=${MASTER:-wsecho_master@localhost}
export INBOX_HANDLER=ws_echo
export SERVER_ARGS="--max-client-message 65536 --client-rate 1000"
unset PUBLIC

case ${1:-} in
  --stop) exec scripts/run.sh --stop ;;
  --background|"") ;;
  *) echo "ws-echo: unknown argument '$1' (--background or --stop)" >&2; exit 1 ;;
esac

[[ -f tools/erlang/ebin/ws_echo.beam ]] || { echo "ws-echo: run make first" >&2; exit 1; }
scripts/run.sh --background >/dev/null
cat <<MSG
WebSocket echo server: ws://127.0.0.1:$PORT/ws/1 (any uid 1.. in place of 1)
  Counters: curl 127.0.0.1:$ADMIN_PORT/stats    Log: $RUN_DIR/httpdcnode.log
MSG
if [[ ${1:-} == --background ]]; then
  echo "  Stop it with: $0 --stop"
  exit 0
fi
echo "  Ctrl-C stops it."
sleeper=
trap '[[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null; scripts/run.sh --stop' EXIT
trap 'exit 0' INT TERM
while :; do
  sleep 3600 &
  sleeper=$!
  wait "$sleeper"
done
