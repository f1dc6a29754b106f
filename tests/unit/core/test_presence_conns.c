/* SPDX-License-Identifier: Apache-2.0 */
/* Connection presence (--presence-conns): off, a stream gets no conn id
 * and nothing is queued; on, its open and end are one record each, the
 * end's reason the one its ending gave, told once; past
 * OUTBOUND_CONN_MAX queued records new ones are dropped and counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"
#include "core/framing.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/stream.h"
#include "lib/handoff.h"
#include "obs/stats.h"
#include "transport/chunked.h"
#include "transport/poll.h"
#include "transport/sse.h"
#include "transport/ws.h"

static struct handoff *ring;
static struct out_conn got[4];
static size_t ngot;

static int take(void *body, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    const struct out_rec *r = body;
    assert_int_equal(r->kind, OUT_CONN);
    if (ngot < 4)
        got[ngot] = *(const struct out_conn *)(r + 1);
    ngot++;
    atomic_fetch_sub(&outbound_conn_pending, 1);
    return 0;
}

static size_t drain_all(void)
{
    ngot = 0;
    while (handoff_drain(ring, 100000, take, NULL, NULL) > 0)
        ;
    return ngot;
}

static int setup(void **state)
{
    (void)state;
    ring = handoff_new(8u << 20);
    outbound_init(ring);
    memset(&loop_stats, 0, sizeof loop_stats);
    return ring ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    presence_conns_enable(0);
    conn_free();
    handoff_free(ring);
    return 0;
}

/* A connected loopback TCP pair: *client and the accepted side (returned). */
static int tcp_pair(int *client)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&a, sizeof a), 0);
    int s = accept(l, NULL, NULL);
    close(l);
    assert_true(s >= 0);
    return s;
}

static void off_costs_nothing(void **state)
{
    (void)state;
    struct stream s = {.uid = 5, .framing = FRAMING_SSE};
    presence_conn_up(&s, -1, NULL);
    assert_int_equal(conn_id_of(&s), 0);
    presence_conn_down(&s, END_CLIENT);
    assert_int_equal(drain_all(), 0);
}

static void up_then_down_with_reason(void **state)
{
    (void)state;
    presence_conns_enable(1);
    int client, fd = tcp_pair(&client);
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    getsockname(client, (struct sockaddr *)&me, &len);
    struct stream s = {.uid = 7, .framing = FRAMING_WS};
    presence_conn_up(&s, fd, NULL);
    uint64_t id = conn_id_of(&s);
    assert_true(id != 0);
    assert_int_equal(drain_all(), 1);
    assert_true(got[0].up && got[0].conn == id && got[0].uid == 7);
    assert_string_equal(got[0].transport, "ws");
    assert_int_equal(got[0].family, 4);
    assert_int_equal(got[0].port, ntohs(me.sin_port));
    assert_memory_equal(got[0].addr, "\x7f\x00\x00\x01", 4);

    presence_conn_down(&s, END_KICKED);
    assert_int_equal(conn_id_of(&s), 0);      /* its id names nothing now */
    assert_null(conn_find(id));
    presence_conn_down(&s, END_KICKED);        /* told once */
    assert_int_equal(drain_all(), 1);
    assert_false(got[0].up);
    assert_true(got[0].conn == id);
    assert_string_equal(got[0].reason, "kick");

    /* A long-poll answered: finished. */
    struct stream p = {.uid = 8, .framing = FRAMING_POLL};
    presence_conn_up(&p, fd, NULL);
    presence_conn_down(&p, END_FINISHED);
    assert_int_equal(drain_all(), 2);
    assert_string_equal(got[0].transport, "poll");
    assert_string_equal(got[1].reason, "finished");
    close(fd);
    close(client);
}

static void a_storm_is_bounded(void **state)
{
    (void)state;
    presence_conns_enable(1);
    static struct stream s[OUTBOUND_CONN_MAX + 10];
    for (int i = 0; i < OUTBOUND_CONN_MAX + 10; i++) {
        s[i] = (struct stream){.uid = 1, .framing = FRAMING_CHUNKED};
        presence_conn_up(&s[i], -1, NULL);
    }
    assert_int_equal(loop_stats.conn_events_dropped, 10);
    assert_int_equal(drain_all(), OUTBOUND_CONN_MAX);
    assert_int_equal(got[0].family, 0);        /* no socket: peer unknown */
    /* Taken by the C-node thread: room again. */
    presence_conn_down(&s[0], END_CLIENT);
    assert_int_equal(drain_all(), 1);
    assert_int_equal(loop_stats.conn_events_dropped, 10);
}

int main(void)
{
    /* The transports name themselves (transport_ops.h). */
    static struct ws_config ws;
    if (chunked_init() != 0 || sse_init() != 0 || poll_init(30, 65536) != 0 || ws_init(&ws) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(off_costs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(up_then_down_with_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(a_storm_is_bounded, setup, teardown),
    };
    return cmocka_run_group_tests_name("presence_conns", tests, NULL, NULL);
}
