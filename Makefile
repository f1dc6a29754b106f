# SPDX-License-Identifier: Apache-2.0
# httpdcnode: comet push server with an Erlang C-node bridge.
# `make` builds the server, the load client and the Erlang modules.
# `make test` installs missing Debian packages first, then builds and runs every test.
# `make fuzz FUZZ_SECONDS=N` runs each libFuzzer harness of tests/fuzz for N seconds.

CC      ?= cc
PREFIX  ?= /usr/local
VERSION := 0.1.0

# erl_interface is found from the installed Erlang, never from a hard-coded OTP path.
# Recursive (=) so that `make deps` works before Erlang is installed.
EI_DIR   = $(shell erl -noshell -eval 'io:format("~s",[code:lib_dir(erl_interface)]),halt().' 2>/dev/null)
EV_CFLAGS = $(shell pkg-config --cflags libevent libevent_pthreads)
EV_LIBS   = $(shell pkg-config --libs libevent libevent_pthreads)
# libcrypto (OpenSSL 3): the HMAC of subscriber tokens, the SHA-1 and base64
# of the WebSocket handshake; wslay (WebSocket frame parsing) ships no .pc
# file in Debian.
CRYPTO_CFLAGS = $(shell pkg-config --cflags libcrypto)
CRYPTO_LIBS   = $(shell pkg-config --libs libcrypto)
# jansson: the JSON of subscriber JWTs.
JANSSON_CFLAGS = $(shell pkg-config --cflags jansson)
JANSSON_LIBS   = $(shell pkg-config --libs jansson)
WSLAY_LIBS    = -lwslay
# zlib: permessage-deflate (--ws-deflate).
ZLIB_CFLAGS = $(shell pkg-config --cflags zlib)
ZLIB_LIBS   = $(shell pkg-config --libs zlib)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes

# SANITIZE=address,undefined (or thread): everything is built with
# -fsanitize=$(SANITIZE) in its own directory, binaries in $(BUILD)/bin, so
# sanitized objects never mix with the plain ones in build/ and at the root.
comma := ,
ifeq ($(strip $(SANITIZE)),)
BUILD := build
BINP  :=
CFLAGS ?= -O2 -g
# Debian's hardening, as in its packages (lintian checks the package's binary);
# _FORTIFY_SOURCE only where it works, in an optimised build.
HARDEN_CFLAGS   = $(if $(filter -O1 -O2 -O3 -Os -Og,$(CFLAGS)),-D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
else
BUILD := build-$(subst $(comma),-,$(strip $(SANITIZE)))
BINP  := $(BUILD)/bin/
CFLAGS ?= -O1 -g
SAN_FLAGS := -fsanitize=$(strip $(SANITIZE)) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(HARDEN_CFLAGS) $(SAN_FLAGS) -Iinclude $(EV_CFLAGS) $(CRYPTO_CFLAGS) $(JANSSON_CFLAGS) $(ZLIB_CFLAGS) \
             -I$(EI_DIR)/include -DHTTPDCNODE_VERSION='"$(VERSION)"'
LDLIBS_SERVER = $(EV_LIBS) $(CRYPTO_LIBS) $(JANSSON_LIBS) $(ZLIB_LIBS) $(WSLAY_LIBS) -L$(EI_DIR)/lib -lei -lpthread

# Server sources, by layer (src/<layer>/, headers in include/<layer>/):
# everything but main.c also goes into the unit tests. Objects mirror
# the folders: $(BUILD)/core/stream.o for src/core/stream.c.
SRV_LAYERS  := lib core http transport erl auth obs upgrade
SRV_LIB_SRC := src/options.c src/server.c $(foreach d,$(SRV_LAYERS),$(wildcard src/$(d)/*.c))
SRV_LIB_OBJ := $(SRV_LIB_SRC:src/%.c=$(BUILD)/%.o) $(BUILD)/web_assets.o

CLIENT_SRC := $(wildcard tools/httpclient/*.c)
CLIENT_OBJ := $(CLIENT_SRC:tools/httpclient/%.c=$(BUILD)/client/%.o)

# Unit tests mirror the source tree: tests/unit/core/test_stream.c for
# src/core/stream.c (tests/unit/client/ for tools/httpclient).
UNIT_SRC  := $(wildcard tests/unit/*/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ERL_SRC   := $(wildcard tools/erlang/src/*.erl)
ERL_BEAM  := $(ERL_SRC:tools/erlang/src/%.erl=tools/erlang/ebin/%.beam)
# Tools beside the application, not in its .app (the load generator msggen):
# built into the same ebin/ for the scripts.
ERL_TOOL  := $(wildcard bench/erlang/*.erl)
ERL_BEAM  += $(ERL_TOOL:bench/erlang/%.erl=tools/erlang/ebin/%.beam)
# Examples beside the application, not in its .app either (chat_room, the
# demo page's chat handler that `make run` starts): the same ebin/.
ERL_EXAMPLE := $(wildcard examples/erlang/*.erl)
ERL_BEAM  += $(ERL_EXAMPLE:examples/erlang/%.erl=tools/erlang/ebin/%.beam)
ERL_APP   := $(wildcard tools/erlang/src/*.app.src)
ERL_APPF  := $(ERL_APP:tools/erlang/src/%.app.src=tools/erlang/ebin/%.app)
# The integration tests, a folder per area (tests/erlang/core/, transport/, ...,
# lib/ their helpers), all built into the one build/tests/ebin/.
TERL_SRC  := $(wildcard tests/erlang/*/*.erl)
TERL_BEAM := $(addprefix build/tests/ebin/,$(notdir $(TERL_SRC:.erl=.beam)))
# The application's own pure tests (also what `rebar3 eunit` runs in tools/erlang).
TAPP_SRC  := $(wildcard tools/erlang/test/*.erl)
TERL_BEAM += $(TAPP_SRC:tools/erlang/test/%.erl=build/tests/ebin/%.beam)

SERVER := $(BINP)httpdcnode
CLIENT := $(BINP)httpclient

.PHONY: all deps docs test check-all unit-test erl-test bench bench-million bench-process bench-takeover bench-topics fuzz soak storm run ws-echo install deb clean check-ei cluster-sim

all: check-ei $(SERVER) $(if $(CLIENT_SRC),$(CLIENT)) $(BINP)writefloor $(BINP)wakefloor $(BUILD)/netdelay \
     $(BUILD)/benchprocess $(ERL_BEAM) $(ERL_APPF)

# docs/configuration.md's table of options, made from the binary's
# (src/options.c's table); scripts/check-docs.py fails when they differ.
docs: $(SERVER)
	HTTPDCNODE_BIN=./$(SERVER) scripts/check-docs.py --fix

check-ei:
	@test -n "$(EI_DIR)" || { echo "Erlang (erl) not found: run 'make deps' or 'scripts/install-deps.sh' first"; exit 1; }

# Each object depends on the headers it includes (-MMD writes them down).
$(BUILD)/%.o: src/%.c | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# web/ is built into the server (GET / and /httpdcnode.js, src/http/web.c): each
# file becomes a byte array web_<name> and its length web_<name>_len.
WEB_FILES := web/index.html web/httpdcnode.js
$(BUILD)/web_assets.c: $(WEB_FILES) | $(BUILD)
	@{ echo '/* Generated from web/ by the Makefile: do not edit. */'; \
	   echo '#include <stddef.h>'; \
	   for f in $(WEB_FILES); do \
	     n=web_$$(basename $$f | tr -c 'a-zA-Z0-9\n' _); \
	     echo "extern const unsigned char $${n}[]; extern const size_t $${n}_len;"; \
	     echo "const unsigned char $${n}[] = {"; xxd -i <$$f || exit 1; echo "};"; \
	     echo "const size_t $${n}_len = sizeof $${n};"; \
	   done; } >$@.tmp && mv $@.tmp $@

$(BUILD)/web_assets.o: $(BUILD)/web_assets.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/client/%.o: tools/httpclient/%.c | $(BUILD)
	@mkdir -p $(BUILD)/client
	$(CC) $(ALL_CFLAGS) -Itools/httpclient -MMD -MP -c -o $@ $<

$(SERVER): $(BUILD)/main.o $(SRV_LIB_OBJ)
	$(CC) $(ALL_CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(LDLIBS_SERVER)

# The latency histogram is shared with the server's probe.
$(CLIENT): $(CLIENT_OBJ) $(BUILD)/lib/histogram.o
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(EV_LIBS) $(WSLAY_LIBS) -lm

# The host's floor for one small loopback write (make bench reports it).
$(BINP)writefloor: tools/writefloor/writefloor.c | $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN_FLAGS) -o $@ $<

# How late a sleeping thread wakes here, idle and under load (make bench).
$(BINP)wakefloor: tools/wakefloor/wakefloor.c | $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(SAN_FLAGS) -o $@ $<

# Latency between the simulated hosts of make cluster-sim where the kernel
# has no netem: packets held in an NFQUEUE queue (libnetfilter-queue).
$(BUILD)/netdelay: tools/netdelay/netdelay.c | $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN_FLAGS) -o $@ $< $$(pkg-config --libs libnetfilter_queue) -lnfnetlink

# The server's own code paths for N streams in one process, on shared sinks
# (make bench-process): linked with the server's objects, close() wrapped
# so that a sink is not closed with a stream (see its opening comment).
$(BUILD)/benchprocess: tools/benchprocess/benchprocess.c $(SRV_LIB_OBJ) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(SRV_LIB_OBJ) -Wl,--wrap=close $(LDLIBS_SERVER)

$(BUILD):
	@mkdir -p $(BUILD)/tests build/tests/ebin $(BINP)

tools/erlang/ebin/%.beam: tools/erlang/src/%.erl
	@mkdir -p tools/erlang/ebin
	erlc -Wall -o tools/erlang/ebin $<

tools/erlang/ebin/%.beam: bench/erlang/%.erl
	@mkdir -p tools/erlang/ebin
	erlc -Wall -o tools/erlang/ebin $<

# After the behaviour they implement, which erlc checks them against.
tools/erlang/ebin/%.beam: examples/erlang/%.erl tools/erlang/ebin/httpdcnode_handler.beam
	erlc -Wall -pa tools/erlang/ebin -o tools/erlang/ebin $<

tools/erlang/ebin/%.app: tools/erlang/src/%.app.src
	@mkdir -p tools/erlang/ebin
	cp $< $@

vpath %.erl $(sort $(dir $(TERL_SRC)))
build/tests/ebin/%.beam: %.erl | $(BUILD)
	@mkdir -p build/tests/ebin
	erlc -Wall -o build/tests/ebin $<

build/tests/ebin/%.beam: tools/erlang/test/%.erl | build
	@mkdir -p build/tests/ebin
	erlc -Wall -o build/tests/ebin $<

# A unit test may #include the server sources it tests, to reach their
# statics (h2o's t/00unit does so): name them here and their objects are
# left out of its link.
core/test_stream_INCLUDES := core/stream core/batch
core/test_history_INCLUDES := core/history
core/test_history_file_INCLUDES := core/history
core/test_history_origins_INCLUDES := core/history
core/test_expiry_INCLUDES := core/expiry
$(BUILD)/tests/%: tests/unit/%.c $(SRV_LIB_OBJ) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itools/httpclient -MMD -MP -o $@ $< \
	    $(filter-out $($*_INCLUDES:%=$(BUILD)/%.o),$(SRV_LIB_OBJ)) $(LDLIBS_SERVER) -lcmocka

# Client tests #include the client's sources: rebuild them when those change.
$(filter $(BUILD)/tests/client/%,$(UNIT_BIN)): $(CLIENT_SRC) $(wildcard tools/httpclient/*.h)

# libFuzzer harnesses (clang), each with the sources it exercises.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all $(WARN) -Iinclude
FUZZ_BIN     := build/fuzz/fuzz_term build/fuzz/fuzz_uid build/fuzz/fuzz_uri build/fuzz/fuzz_resp \
                build/fuzz/fuzz_history build/fuzz/fuzz_jwt

build/fuzz/fuzz_term: tests/fuzz/fuzz_term.c tests/fuzz/guarded.h src/erl/erl_term.c include/erl/erl_term.h \
                      include/core/cmd.h src/lib/utf8.c include/lib/utf8.h | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(EI_DIR)/include -o $@ $< src/erl/erl_term.c src/lib/utf8.c \
	    -L$(EI_DIR)/lib -lei -lpthread

build/fuzz/fuzz_uid: tests/fuzz/fuzz_uid.c src/http/uid.c include/http/uid.h | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< src/http/uid.c

build/fuzz/fuzz_uri: tests/fuzz/fuzz_uri.c src/http/uid.c include/http/uid.h | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(EV_CFLAGS) -o $@ $< src/http/uid.c $(EV_LIBS)

# The history against a model; history.c is included for its clock, the
# file it may live in (map, checks) and the records of a hand-over (carry)
# are built beside it.
HISTORY_SRC := src/core/history.c src/core/history_map.c src/core/history_check.c src/lib/carry.c
build/fuzz/fuzz_history: tests/fuzz/fuzz_history.c $(HISTORY_SRC) $(wildcard include/core/history*.h) | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(filter-out src/core/history.c,$(HISTORY_SRC))

# Both token forms, JWTs through jansson; signed JSON reaches the claims.
FUZZ_AUTH_SRC := src/auth/auth_token.c src/auth/auth_jwt.c src/auth/auth_key.c
build/fuzz/fuzz_jwt: tests/fuzz/fuzz_jwt.c tests/fuzz/guarded.h $(FUZZ_AUTH_SRC) \
                     $(wildcard include/auth/*.h) | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(CRYPTO_CFLAGS) $(JANSSON_CFLAGS) -o $@ $< $(FUZZ_AUTH_SRC) \
	    $(CRYPTO_LIBS) $(JANSSON_LIBS)

build/fuzz/fuzz_resp: tests/fuzz/fuzz_resp.c $(wildcard tools/httpclient/resp_parser.*) | build
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $<

deps:
	scripts/install-deps.sh

# The one command that passes the tests on a fresh Debian 12 machine.
test: deps
	$(MAKE) all
	$(MAKE) $(UNIT_BIN) $(TERL_BEAM)
	TEST_BUILD=$(BUILD) HTTPDCNODE_BINDIR=$(or $(BINP),.) SANITIZE=$(SANITIZE) scripts/run-tests.sh

# Long, not in CI: the suite plain, then under TSan (.ci/run does ASan+UBSan),
# then valgrind (memcheck) over the unit tests and core_tests' servers.
VALGRIND_CMD := valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
check-all: deps
	$(MAKE) test SANITIZE=
	$(MAKE) test SANITIZE=thread
	VALGRIND="$(VALGRIND_CMD)" HTTPDTEST_MODULES=core_tests BENCH_SMOKE=0 scripts/run-tests.sh

# Each harness for FUZZ_SECONDS; fails on any crash (inputs in build/fuzz/artifacts).
fuzz: deps
	$(MAKE) check-ei $(FUZZ_BIN)
	scripts/fuzz.sh $(FUZZ_SECONDS)

bench: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/bench.sh

# A bounded soak test with faults (SOAK_SECONDS, default 600): scripts/soak.sh --help.
soak: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/soak.sh

# A reconnect storm: 18,000 streams, the server killed and restarted (STORM_STREAMS,
# under 5 min): scripts/storm.sh --help.
storm: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/storm.sh

bench-takeover: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/bench-takeover.sh

# A million streams over ceil(1,000,000 / 19,000) C-nodes routed by one master,
# each phase measured (about 5 min, 15 at the most; MILLION_STREAMS for fewer):
# scripts/bench-million.sh --help. Report in build/bench-million.
bench-million: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/bench-million.sh

# Topics (BENCHMARKS.md 14): memory per subscription, fan-out, resume, the
# master's CPU per publish; JSON in build/bench-topics.
bench-topics: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) scripts/bench-topics.sh

# The server's code paths at 10,000, 100,000 and 1,000,000 streams in one
# process, each figure per stream checked flat (under a minute, 290 MiB at
# the peak): scripts/bench-process.sh --help. Report in build/bench-process.
bench-process: deps
	$(MAKE) all
	BENCH_PROCESS_BIN=$(BUILD)/benchprocess BENCH_PROCESS_DOC=1 scripts/bench-process.sh

# A cluster across simulated hosts (network namespaces on a bridge): masters,
# C-nodes, nginx and clients each on a host of its own, with faults
# (silent partitions, latency, loss, a frozen host); every message checked
# (about 10 min; CLUSTER_SIM_SMALL=1 for the small run of make test):
# scripts/cluster-sim.sh --help. Report in build/cluster-sim.
cluster-sim: deps
	$(MAKE) all
	HTTPDCNODE_BINDIR=$(or $(BINP),.) NETDELAY=$(BUILD)/netdelay scripts/cluster-sim.sh

# Starts epmd, the server in the background and an Erlang master shell in the foreground.
# PORT, NAME, MASTER, COOKIE, PUBLIC=1: see scripts/run.sh.
run: deps
	$(MAKE) all
	scripts/run.sh

# A WebSocket echo server on 127.0.0.1:9001 for an outside conformance suite
# (docs/testing.md); Ctrl-C stops it. PORT, ADMIN_PORT: see scripts/ws-echo.sh.
ws-echo: deps
	$(MAKE) all
	scripts/ws-echo.sh

# make install: PREFIX (default /usr/local) and DESTDIR, as usual. The unit
# goes where systemd looks for PREFIX's units, its ExecStart naming the
# binary installed; the Erlang application where erl finds it by itself for
# PREFIX=/usr (else ERL_LIBS=PREFIX/lib/erlang/lib); the browser client in
# DATADIR; the examples and the docs in DOCDIR. These directories may be
# given on make's command line, never from the environment (erl sets BINDIR).
BINDIR     = $(PREFIX)/bin
MANDIR     = $(PREFIX)/share/man
DATADIR    = $(PREFIX)/share/httpdcnode
DOCDIR     = $(PREFIX)/share/doc/httpdcnode
UNITDIR    = $(PREFIX)/lib/systemd/system
ERLLIBDIR  = $(PREFIX)/lib/erlang/lib
APP_EBIN  := $(ERL_SRC:tools/erlang/src/%.erl=tools/erlang/ebin/%.beam) $(ERL_APPF)
MANPAGE   := $(BUILD)/httpdcnode.1
EXAMPLES  := $(ERL_EXAMPLE) examples/nginx.conf.example sysctl.conf.example

# The manual is --help's text (help2man) with scripts/httpdcnode.h2m's sections,
# dated by the last commit.
$(MANPAGE): $(SERVER) scripts/httpdcnode.h2m
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) help2man --no-info --section=1 --include=scripts/httpdcnode.h2m --output=$@ $(abspath $(SERVER))

install: $(SERVER) $(APP_EBIN) $(MANPAGE)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(ERLLIBDIR)/httpdcnode-$(VERSION)/ebin $(DESTDIR)$(DATADIR) \
	    $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/examples
	install -m 755 $(SERVER) $(DESTDIR)$(BINDIR)/httpdcnode
	install -m 644 $(MANPAGE) $(DESTDIR)$(MANDIR)/man1/httpdcnode.1
	sed 's|^ExecStart=/usr/local/bin/httpdcnode|ExecStart=$(BINDIR)/httpdcnode|' \
	    scripts/httpdcnode.service >$(DESTDIR)$(UNITDIR)/httpdcnode.service
	chmod 644 $(DESTDIR)$(UNITDIR)/httpdcnode.service
	install -m 644 $(APP_EBIN) $(DESTDIR)$(ERLLIBDIR)/httpdcnode-$(VERSION)/ebin
	install -m 644 web/httpdcnode.js $(DESTDIR)$(DATADIR)
	install -m 644 README.md LICENSE $(DESTDIR)$(DOCDIR)
	install -m 644 docs/*.md $(DESTDIR)$(DOCDIR)/docs
	install -m 644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples

# make deb: a Debian package of what make install installs (PREFIX=/usr),
# built with dpkg-deb and checked with lintian (scripts/deb.sh), in
# $(BUILD)/deb. DEB_MAINTAINER defaults to git's user.
DEB_DIR        := $(BUILD)/deb
DEB_MAINTAINER ?= $(shell git config user.name) <$(shell git config user.email)>
deb: $(SERVER) $(APP_EBIN) $(MANPAGE)
	rm -rf $(DEB_DIR)
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_DIR))/root PREFIX=/usr \
	    UNITDIR=/lib/systemd/system
	scripts/deb.sh $(DEB_DIR) $(VERSION) "$(DEB_MAINTAINER)"

clean:
	rm -rf build build-* httpdcnode httpclient writefloor wakefloor tools/erlang/ebin/*.beam tools/erlang/ebin/*.app

-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(BUILD)/tests/*/*.d)
