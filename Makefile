# httpdcnode: comet push server with an Erlang C-node bridge.
# `make` builds the server, the load client and the Erlang modules.
# `make test` installs missing Debian packages first, then builds and runs every test.

CC      ?= cc
PREFIX  ?= /usr/local
VERSION := 0.1.0

# erl_interface is found from the installed Erlang, never from a hard-coded OTP path.
# Recursive (=) so that `make deps` works before Erlang is installed.
EI_DIR   = $(shell erl -noshell -eval 'io:format("~s",[code:lib_dir(erl_interface)]),halt().' 2>/dev/null)
EV_CFLAGS = $(shell pkg-config --cflags libevent libevent_pthreads)
EV_LIBS   = $(shell pkg-config --libs libevent libevent_pthreads)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes

# SANITIZE=address,undefined (or thread): everything is built with
# -fsanitize=$(SANITIZE) in its own directory, binaries in $(BUILD)/bin, so
# sanitized objects never mix with the plain ones in build/ and at the root.
comma := ,
ifeq ($(strip $(SANITIZE)),)
BUILD := build
BINP  :=
CFLAGS ?= -O2 -g
else
BUILD := build-$(subst $(comma),-,$(strip $(SANITIZE)))
BINP  := $(BUILD)/bin/
CFLAGS ?= -O1 -g
SAN_FLAGS := -fsanitize=$(strip $(SANITIZE)) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(SAN_FLAGS) -Iinclude $(EV_CFLAGS) \
             -I$(EI_DIR)/include -DHTTPDCNODE_VERSION='"$(VERSION)"'
LDLIBS_SERVER = $(EV_LIBS) -L$(EI_DIR)/lib -lei -lpthread

# Server sources: everything in src/ except main.c also goes into the unit tests.
SRV_LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c))
SRV_LIB_OBJ := $(SRV_LIB_SRC:src/%.c=$(BUILD)/%.o)

CLIENT_SRC := $(wildcard tools/httpclient/*.c)
CLIENT_OBJ := $(CLIENT_SRC:tools/httpclient/%.c=$(BUILD)/client/%.o)

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ERL_SRC   := $(wildcard tools/erlang/src/*.erl)
ERL_BEAM  := $(ERL_SRC:tools/erlang/src/%.erl=tools/erlang/ebin/%.beam)
ERL_APP   := $(wildcard tools/erlang/src/*.app.src)
ERL_APPF  := $(ERL_APP:tools/erlang/src/%.app.src=tools/erlang/ebin/%.app)
TERL_SRC  := $(wildcard tests/erlang/*.erl)
TERL_BEAM := $(TERL_SRC:tests/erlang/%.erl=build/tests/ebin/%.beam)

SERVER := $(BINP)httpdcnode
CLIENT := $(BINP)httpclient

.PHONY: all deps test check-all unit-test erl-test bench run install clean check-ei

all: check-ei $(SERVER) $(if $(CLIENT_SRC),$(CLIENT)) $(BINP)writefloor $(BINP)wakefloor \
     $(ERL_BEAM) $(ERL_APPF)

check-ei:
	@test -n "$(EI_DIR)" || { echo "Erlang (erl) not found: run 'make deps' or 'scripts/install-deps.sh' first"; exit 1; }

$(BUILD)/%.o: src/%.c $(wildcard include/*.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/client/%.o: tools/httpclient/%.c $(wildcard tools/httpclient/*.h) | $(BUILD)
	@mkdir -p $(BUILD)/client
	$(CC) $(ALL_CFLAGS) -Itools/httpclient -c -o $@ $<

$(SERVER): $(BUILD)/main.o $(SRV_LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_SERVER)

# The latency histogram is shared with the server's probe.
$(CLIENT): $(CLIENT_OBJ) $(BUILD)/histogram.o
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(EV_LIBS) -lm

# The host's floor for one small loopback write (make bench reports it).
$(BINP)writefloor: tools/writefloor/writefloor.c | $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN_FLAGS) -o $@ $<

# How late a sleeping thread wakes here, idle and under load (make bench).
$(BINP)wakefloor: tools/wakefloor/wakefloor.c | $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(SAN_FLAGS) -o $@ $<

$(BUILD):
	@mkdir -p $(BUILD)/tests build/tests/ebin $(BINP)

tools/erlang/ebin/%.beam: tools/erlang/src/%.erl
	@mkdir -p tools/erlang/ebin
	erlc -Wall -o tools/erlang/ebin $<

tools/erlang/ebin/%.app: tools/erlang/src/%.app.src
	@mkdir -p tools/erlang/ebin
	cp $< $@

build/tests/ebin/%.beam: tests/erlang/%.erl | $(BUILD)
	erlc -Wall -o build/tests/ebin $<

$(BUILD)/tests/%: tests/unit/%.c $(SRV_LIB_OBJ) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -Itools/httpclient -o $@ $< $(SRV_LIB_OBJ) $(LDLIBS_SERVER) -lcmocka

# Client tests #include the client's sources: rebuild them when those change.
$(filter $(BUILD)/tests/test_client_%,$(UNIT_BIN)): $(CLIENT_SRC) $(wildcard tools/httpclient/*.h)

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

bench: deps
	$(MAKE) all
	scripts/bench.sh

# Starts epmd, the server in the background and an Erlang master shell in the foreground.
run: deps
	$(MAKE) all
	scripts/run.sh

install: httpdcnode
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 httpdcnode $(DESTDIR)$(PREFIX)/bin/httpdcnode

clean:
	rm -rf build build-* httpdcnode httpclient writefloor wakefloor tools/erlang/ebin/*.beam tools/erlang/ebin/*.app
