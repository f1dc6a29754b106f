/* SPDX-License-Identifier: Apache-2.0 */
/* The stream core (src/core/stream.c) and the write batch (src/core/batch.c), on
 * real sockets and a real event loop: a stream's life, the deferred free
 * that lets a batch hold a stream closed under it, the welcome-ending case,
 * eviction, framing (WebSocket too), and --max-backlog-total. Both sources are included
 * to reach their statics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../src/core/stream.c"
#include "../../../src/core/batch.c"

#include "core/uidtable.h"
#include "transport/chunked.h"
#include "transport/ws.h"

static struct event_base *base;

static void configure(uint32_t max_backlog, uint64_t max_total, uint32_t max_conns)
{
    base = event_base_new();
    assert_non_null(base);
    assert_int_equal(uidtable_init(1000, NULL), 0);
    memset(&loop_stats, 0, sizeof loop_stats);
    /* The chunked transport's goodbye: the terminating chunk. */
    static int registered;
    if (!registered++)
        assert_int_equal(chunked_init(), 0);
    assert_int_equal(stream_configure(&(struct stream_config){
                         .base = base, .max_backlog = max_backlog,
                         .max_backlog_total = max_total, .max_conns_per_uid = max_conns}),
                     0);
}

static int teardown(void **state)
{
    (void)state;
    stream_unconfigure();
    uidtable_free();
    event_base_free(base);
    return 0;
}

/* A connected pair: [0] is the server's end (non-blocking), [1] the client's. */
static void socket_pair(int sv[2], int sndbuf)
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    if (sndbuf)
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
}

/* A LIVE stream of uid on sv[0]. */
static struct stream *live_stream(uint32_t uid, int sv[2], int sndbuf)
{
    socket_pair(sv, sndbuf);
    struct stream *s = stream_open(uid, FRAMING_CHUNKED, NULL, sv[0]);
    assert_non_null(s);
    assert_int_equal(stream_import(s), 0);
    assert_int_equal(s->state, STREAM_LIVE);
    return s;
}

/* What the client end holds now (non-blocking read). */
static size_t drain(int fd, char *buf, size_t size)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + got, size - got, MSG_DONTWAIT);
        if (n <= 0)
            return got;
        got += (size_t)n;
    }
}

static void deliver_as(struct stream *s, const char *text, int binary)
{
    batch_room(1);
    batch_add(s, text, (uint32_t)strlen(text), binary, 1);
}

static void deliver(struct stream *s, const char *text) { deliver_as(s, text, 0); }

static void messages_are_framed_per_stream(void **state)
{
    (void)state;
    configure(1 << 20, 1 << 30, 8);
    int a[2], b[2];
    struct stream *chunked = live_stream(1, a, 0);
    struct stream *raw = live_stream(2, b, 0);
    raw->framing = FRAMING_RAW;
    deliver(chunked, "hello");
    deliver(raw, "hello");
    deliver(chunked, "0123456789abcdef0");
    batch_flush();
    char buf[256];
    size_t n = drain(a[1], buf, sizeof buf);
    assert_int_equal(n, strlen("5\r\nhello\r\n11\r\n0123456789abcdef0\r\n"));
    assert_memory_equal(buf, "5\r\nhello\r\n11\r\n0123456789abcdef0\r\n", n);
    n = drain(b[1], buf, sizeof buf);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "hello", 5);
    stream_end(chunked);
    stream_end(raw);
    n = drain(a[1], buf, sizeof buf);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "0\r\n\r\n", 5);
    assert_int_equal(drain(b[1], buf, sizeof buf), 0);      /* raw: the end is the close */
    close(a[1]);
    close(b[1]);
}

/* The bug this guards against: a flush ending a stream that the caller
 * still held (a multicast listing a stuck client's uid past the batch).
 * The closed stream must stay a valid record until the reaper runs. */
static void a_stream_closed_by_a_flush_stays_valid_until_reaped(void **state)
{
    (void)state;
    configure(64 * 1024, 1 << 30, 8);
    int sv[2], ok[2];
    struct stream *stuck = live_stream(5, sv, 4096);
    struct stream *fine = live_stream(6, ok, 0);
    static char big[16 * 1024];
    memset(big, 'x', sizeof big - 1);
    /* More than the kernel and --max-backlog take: the flush closes it. */
    for (int i = 0; i < 64; i++) {
        batch_room(1);
        batch_add(stuck, big, sizeof big - 1, 0, 1);
    }
    batch_flush();
    assert_int_equal(loop_stats.slow_closed, 1);
    assert_int_equal(stuck->state, STREAM_CLOSED);
    assert_int_equal(loop_stats.streams_open, 1);           /* closed, though not freed yet */
    assert_ptr_equal(closed_streams, stuck);
    assert_null(uidtable_first(5));
    /* Still held: later deliveries to it are dropped, others go on. */
    deliver(stuck, "late");
    deliver(fine, "ok");
    batch_flush();
    char buf[64];
    assert_int_equal(drain(ok[1], buf, sizeof buf), 7);
    assert_memory_equal(buf, "2\r\nok\r\n", 7);
    assert_int_equal(loop_stats.slow_closed, 1);
    /* The reaper frees it after the current loop callback. */
    assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    assert_null(closed_streams);
    assert_int_equal(loop_stats.streams_open, 1);
    stream_end(fine);
    close(sv[1]);
    close(ok[1]);
}

/* Ended while its welcome was still going out (kick, eviction): it leaves
 * the uid table at once, and once imported gets what was queued, then the
 * terminating chunk, then the close. */
static void a_stream_ended_while_welcoming_ends_after_import(void **state)
{
    (void)state;
    configure(1 << 20, 1 << 30, 8);
    int sv[2];
    socket_pair(sv, 0);
    struct stream *s = stream_open(9, FRAMING_CHUNKED, NULL, sv[0]);
    deliver(s, "m1");
    batch_flush();                                  /* queued: not ours yet */
    assert_non_null(s->out);
    stream_end(s);
    assert_int_equal(s->state, STREAM_ENDING);
    assert_null(uidtable_first(9));
    assert_int_equal(stream_import(s), -1);
    assert_int_equal(s->state, STREAM_CLOSED);
    char buf[64];
    size_t n = drain(sv[1], buf, sizeof buf);
    assert_int_equal(n, 12);
    assert_memory_equal(buf, "2\r\nm1\r\n0\r\n\r\n", 12);
    assert_int_equal(recv(sv[1], buf, sizeof buf, 0), 0);   /* closed */
    close(sv[1]);
}

/* Closed while evhttp still holds it (too slow during its welcome): it is
 * ABANDONED, and freed only once evhttp releases it. */
static void a_stream_closed_while_welcoming_waits_for_release(void **state)
{
    (void)state;
    configure(4096, 1 << 30, 8);
    int sv[2];
    socket_pair(sv, 0);
    struct stream *s = stream_open(11, FRAMING_CHUNKED, NULL, sv[0]);
    static char big[5000];
    memset(big, 'y', sizeof big - 1);
    deliver(s, big);
    batch_flush();
    assert_int_equal(s->state, STREAM_ABANDONED);
    assert_int_equal(loop_stats.slow_closed, 1);
    assert_null(closed_streams);
    stream_release(s, 1);                           /* the client left meanwhile */
    assert_int_equal(loop_stats.client_closed, 0);  /* counted once, as slow */
    assert_ptr_equal(closed_streams, s);
    stream_reap();
    assert_int_equal(loop_stats.streams_open, 0);
    close(sv[1]);
}

static void the_oldest_stream_of_a_uid_is_evicted(void **state)
{
    (void)state;
    configure(1 << 20, 1 << 30, 2);
    int a[2], b[2], c[2];
    struct stream *first = live_stream(7, a, 0);
    live_stream(7, b, 0);
    live_stream(7, c, 0);
    assert_int_equal(loop_stats.evicted, 1);
    assert_int_equal(first->state, STREAM_CLOSED);
    assert_int_equal(uidtable_count(7), 2);
    char buf[16];
    assert_int_equal(drain(a[1], buf, sizeof buf), 5);      /* its terminating chunk */
    for (struct stream *s = uidtable_first(7), *next; s; s = next) {
        next = s->next;
        stream_end(s);
    }
    close(a[1]);
    close(b[1]);
    close(c[1]);
}

/* --max-backlog-total: the stream holding the most goes first. */
static void the_largest_backlog_goes_past_the_total(void **state)
{
    (void)state;
    configure(1 << 20, 96 * 1024, 8);
    int big_sv[2], small_sv[2];
    struct stream *big = live_stream(21, big_sv, 4096);   /* not looked at once freed */
    struct stream *small = live_stream(22, small_sv, 4096);
    static char chunk[8 * 1024];
    memset(chunk, 'z', sizeof chunk - 1);
    for (int i = 0; i < 10; i++)
        deliver(big, chunk);
    for (int i = 0; i < 4; i++)
        deliver(small, chunk);
    batch_flush();
    /* Checked before the copy: the total never passed its cap, and the one
     * that would hold the most was ended. */
    assert_true(loop_stats.backlog_bytes <= 96 * 1024);
    assert_int_equal(big->state, STREAM_CLOSED);
    assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);   /* the reaper */
    assert_null(uidtable_first(21));                /* big: closed, and freed since */
    assert_ptr_equal(uidtable_first(22), small);
    assert_int_equal(small->state, STREAM_LIVE);
    assert_int_equal(loop_stats.streams_open, 1);
    assert_int_equal(loop_stats.slow_closed, 1);
    assert_true(loop_stats.backlog_bytes <= 96 * 1024);
    stream_end(small);
    assert_int_equal(loop_stats.backlog_bytes, 0);
    close(big_sv[1]);
    close(small_sv[1]);
}

/* A WebSocket stream: a frame per message, text or binary as the message
 * is (valid UTF-8 or not: binary all the same when said so); the client's
 * ping answered (read by ws_reader.c through the stream's event), its
 * close answered with its code, and a kick's close 4001. */
static void websocket_streams_frame_answer_and_close(void **state)
{
    (void)state;
    configure(1 << 20, 1 << 30, 8);
    static struct ws_config opts;
    assert_int_equal(ws_init(&opts), 0);        /* the WebSocket's transport_ops */
    int a[2], b[2];
    struct stream *s = live_stream(31, a, 0);
    struct stream *t = live_stream(32, b, 0);
    s->framing = t->framing = FRAMING_WS;
    deliver(s, "caf\xc3\xa9");
    deliver_as(s, "caf\xe9", 1);
    deliver_as(s, "ok", 1);
    batch_flush();
    char buf[64];
    assert_int_equal(drain(a[1], buf, sizeof buf), 17);
    assert_memory_equal(buf, "\x81\x05" "caf\xc3\xa9" "\x82\x04" "caf\xe9" "\x82\x02" "ok", 17);
    /* A masked ping "hi" (mask 1,2,3,4), then a masked close 1001. */
    assert_int_equal(send(a[1], "\x89\x82\x01\x02\x03\x04" "\x69\x6b", 8, 0), 8);
    assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    assert_int_equal(drain(a[1], buf, sizeof buf), 4);
    assert_memory_equal(buf, "\x8a\x02hi", 4);
    assert_int_equal(send(a[1], "\x88\x82\x00\x00\x00\x00\x03\xe9", 8, 0), 8);
    assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
    assert_int_equal(drain(a[1], buf, sizeof buf), 4);
    assert_memory_equal(buf, "\x88\x02\x03\xe9", 4);
    assert_null(uidtable_first(31));                /* closed (and reaped: not looked at) */
    assert_int_equal(loop_stats.client_closed, 1);
    /* An unmasked frame: a protocol error, 1002. */
    assert_int_equal(send(b[1], "\x81\x01x", 3, 0), 3);
    assert_true(event_base_loop(base, EVLOOP_NONBLOCK) >= 0);   /* 1: no event left */
    assert_int_equal(drain(b[1], buf, sizeof buf), 4);
    assert_memory_equal(buf, "\x88\x02\x03\xea", 4);
    assert_int_equal(loop_stats.ws_bad_frames, 1);
    int c[2];
    struct stream *u = live_stream(33, c, 0);
    u->framing = FRAMING_WS_META;
    stream_end_why(u, END_KICKED);
    assert_int_equal(drain(c[1], buf, sizeof buf), 4);
    assert_memory_equal(buf, "\x88\x02\x0f\xa1", 4);
    close(a[1]);
    close(b[1]);
    close(c[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(messages_are_framed_per_stream, teardown),
        cmocka_unit_test_teardown(a_stream_closed_by_a_flush_stays_valid_until_reaped, teardown),
        cmocka_unit_test_teardown(a_stream_ended_while_welcoming_ends_after_import, teardown),
        cmocka_unit_test_teardown(a_stream_closed_while_welcoming_waits_for_release, teardown),
        cmocka_unit_test_teardown(the_oldest_stream_of_a_uid_is_evicted, teardown),
        cmocka_unit_test_teardown(the_largest_backlog_goes_past_the_total, teardown),
        cmocka_unit_test_teardown(websocket_streams_frame_answer_and_close, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
