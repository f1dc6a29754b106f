#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages that building and testing need, only those missing.
# Idempotent: a machine that has everything runs no apt-get at all.
set -euo pipefail

packages=(
  build-essential pkg-config libevent-dev   # server and load client
  libssl-dev libwslay-dev                   # libcrypto (token HMAC, WebSocket handshake), WebSocket frames
  libjansson-dev                            # the JSON of subscriber JWTs
  libxxhash-dev                             # the checks of a --history-file (XXH3, inlined)
  zlib1g-dev                                # WebSocket permessage-deflate (--ws-deflate)
  erlang-nox erlang-dev                     # erl, epmd, erlc, ei (erl_interface)
  libcmocka-dev                             # C unit tests
  curl                                      # HTTP checks in the tests
  xxd                                       # web/ built into the server (Makefile)
  chromium                                  # the demo page in a real browser (tests)
  nginx openssl                             # examples/nginx.conf.example in front of C-nodes, its test certificate
  iproute2 procps                           # ss (CLOSE-WAIT checks), ps/pgrep in scripts
  iptables                                  # a test drops a client's packets (vanished peer); make cluster-sim's faults
  libnetfilter-queue-dev                    # make cluster-sim: latency where the kernel has no netem (tools/netdelay)
  gnuplot-nox                               # plots in `make bench`
  prometheus                                # a real Prometheus scrapes /metrics in a test
  clang libclang-rt-14-dev                  # libFuzzer harnesses (`make fuzz`)
  valgrind                                  # make check-all
  help2man lintian                          # make install's manual, make deb's check (dpkg-dev: build-essential)
  elixir                                    # mix test of the Elixir wrapper (tools/elixir)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node.js and npm run the independent browser-protocol clients of the tests
# (tests/js). Checked by command: a Node.js from elsewhere (with its own npm)
# will do, and Debian's npm package would conflict with it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to apt-get install ${missing[*]}; run as root or install them by hand" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
