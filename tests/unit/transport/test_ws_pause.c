/* SPDX-License-Identifier: Apache-2.0 */
/* A WebSocket not read because Erlang is behind (ws_reader.c's pause) is
 * not judged dead for the pongs it could not read: the pause, and its
 * end, restart the count of unanswered pings; after it two heartbeats
 * without a pong still end it (ws_dead). Real sockets, a real event loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/outbound.h"
#include "core/stream.h"
#include "core/framing.h"
#include "core/uidtable.h"
#include "obs/stats.h"
#include "transport/ws.h"
#include "transport/ws_reader.h"

static struct event_base *base;
static struct ws_config opts;

static int setup(void **state)
{
    (void)state;
    base = event_base_new();
    assert_non_null(base);
    assert_int_equal(uidtable_init(1000, NULL), 0);
    memset(&loop_stats, 0, sizeof loop_stats);
    assert_int_equal(stream_configure(&(struct stream_config){
                         .base = base, .max_backlog = 1 << 20, .max_backlog_total = 1 << 30,
                         .max_conns_per_uid = 8}),
                     0);
    opts.client = (struct client_msg_config){.inbox = 1, .max_message = 4096, .rate = 50};
    return ws_init(&opts);
}

static int teardown(void **state)
{
    (void)state;
    atomic_store(&outbound_in_pending, 0);
    ws_free();
    stream_unconfigure();
    uidtable_free();
    event_base_free(base);
    return 0;
}

/* What the client end holds now (non-blocking read), thrown away. */
static size_t drain(int fd)
{
    char buf[256];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        got += (size_t)n;
    return got;
}

static void paused_pings_are_not_held_against_it(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    struct stream *s = stream_open(41, FRAMING_CHUNKED, NULL, sv[0]);
    assert_non_null(s);
    assert_int_equal(stream_import(s), 0);
    s->framing = FRAMING_WS;
    assert_int_equal(ws_reader_heartbeat(s), 0);        /* a ping, not answered */
    assert_int_equal(drain(sv[1]), 2);
    /* Erlang is behind: the next read pauses the stream (a client ping
     * makes it readable; its pong waits with the rest). */
    atomic_store(&outbound_in_pending, 4u << 20);
    assert_int_equal(send(sv[1], "\x89\x80\x01\x02\x03\x04", 6, 0), 6);
    assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    assert_true(ws_reader_paused(s));
    assert_int_equal(loop_stats.client_paused, 1);
    for (int i = 0; i < 4; i++)                          /* 4 heartbeats paused */
        assert_int_equal(ws_reader_heartbeat(s), 0);
    /* Erlang catches up: read again within a few WS_RESUME_MS. */
    atomic_store(&outbound_in_pending, 0);
    for (int i = 0; i < 200 && ws_reader_paused(s); i++)
        event_base_loop(base, EVLOOP_ONCE);
    assert_false(ws_reader_paused(s));
    event_base_loop(base, EVLOOP_NONBLOCK);              /* reads the client's ping */
    drain(sv[1]);
    /* Two heartbeats to answer from here, then it is dead. */
    assert_int_equal(ws_reader_heartbeat(s), 0);
    assert_int_equal(ws_reader_heartbeat(s), 0);
    assert_int_equal(loop_stats.ws_dead, 0);
    assert_int_equal(ws_reader_heartbeat(s), -1);
    assert_int_equal(loop_stats.ws_dead, 1);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(paused_pings_are_not_held_against_it, setup, teardown),
    };
    return cmocka_run_group_tests_name("ws_pause", tests, NULL, NULL);
}
