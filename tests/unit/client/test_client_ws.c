/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's WebSocket parser (tools/httpclient/ws_parser.c, frames
 * through wslay): the handshake answer, then frames (lengths, fragments,
 * control frames between them, the id prefix, the gap frame, the stamp, the
 * close), fed in pieces of every size; what RFC 6455 forbids a server to
 * send is an error; pings are answered with masked pongs of the same
 * payload, the close with a masked close of its code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/ws_parser.c"

#define MAX_MSGS 16
#define MAX_SENT 8

/* A frame the client sent, unmasked again. */
struct sent {
    unsigned first;
    uint8_t mask[4];
    size_t len;
    uint8_t payload[125];
};

struct seen {
    int n;
    struct ws_message m[MAX_MSGS];
    int nsent;
    struct sent sent[MAX_SENT];
};

static void on_message(void *ctx, const struct ws_message *m)
{
    struct seen *s = ctx;
    if (s->n < MAX_MSGS)
        s->m[s->n] = *m;
    s->n++;
}

/* Each frame the client sends: masked, short, whole in one call. */
static void on_send(void *ctx, const uint8_t *f, size_t len)
{
    struct seen *s = ctx;
    assert_true(len >= 6);
    assert_true(f[1] & 0x80);                   /* masked */
    size_t n = f[1] & 0x7fu;
    assert_true(n <= 125);
    assert_int_equal(len, 6 + n);
    if (s->nsent < MAX_SENT) {
        struct sent *o = &s->sent[s->nsent];
        o->first = f[0];
        memcpy(o->mask, f + 2, 4);
        o->len = n;
        for (size_t i = 0; i < n; i++)
            o->payload[i] = f[6 + i] ^ f[2 + i % 4];
    }
    s->nsent++;
}

static const struct ws_callbacks cbs = {on_message, on_send};

static const char head[] =
    "HTTP/1.1 101 Switching Protocols\r\n"
    "Upgrade: WebSocket\r\n"
    "Connection: keep-alive, Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    "Sec-WebSocket-Protocol: ws+meta.httpdcnode\r\n"
    "\r\n";

/* Appends a server frame (unmasked) to buf at *len. */
static void frame(uint8_t *buf, size_t *len, unsigned first, const void *payload, size_t n)
{
    buf[(*len)++] = (uint8_t)first;
    if (n < 126) {
        buf[(*len)++] = (uint8_t)n;
    } else if (n <= 0xffff) {
        buf[(*len)++] = 126;
        buf[(*len)++] = (uint8_t)(n >> 8);
        buf[(*len)++] = (uint8_t)n;
    } else {
        buf[(*len)++] = 127;
        for (int i = 7; i >= 0; i--)
            buf[(*len)++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    memcpy(buf + *len, payload, n);
    *len += n;
}

static uint8_t g_stream[2048];
static size_t g_len;

static const char long_ping[] = "a ping of 24 bytes, long";

/* The head, a text message, a binary one of 200 bytes (16-bit length), a
 * text one in two fragments with two pings between, a pong, a close (1000). */
static void build_stream(void)
{
    static const char text1[] = "id: 4fb91385:1\n\nt=99;hello \xe2\x82\xac";
    uint8_t bin[200];
    memset(bin, 0xff, sizeof bin);
    memcpy(bin, "id: 4fb91385:2\n\nt=7;", 20);
    g_len = 0;
    memcpy(g_stream, head, sizeof head - 1);
    g_len = sizeof head - 1;
    frame(g_stream, &g_len, 0x81, text1, sizeof text1 - 1);
    frame(g_stream, &g_len, 0x82, bin, sizeof bin);
    frame(g_stream, &g_len, 0x01, "x-other: 1\nid: 4fb9", 19);
    frame(g_stream, &g_len, 0x89, "p", 1);
    frame(g_stream, &g_len, 0x89, long_ping, sizeof long_ping - 1);
    frame(g_stream, &g_len, 0x80, "1385:3\n\nt=5;x", 13);
    frame(g_stream, &g_len, 0x8a, "", 0);
    frame(g_stream, &g_len, 0x88, "\x03\xe8" "bye", 5);
}

static void check(const struct seen *s)
{
    assert_int_equal(s->n, 3);
    assert_true(s->m[0].text);
    assert_true(s->m[0].has_id);
    assert_int_equal(s->m[0].epoch, 0x4fb91385u);
    assert_int_equal(s->m[0].seq, 1);
    assert_true(s->m[0].has_ts);
    assert_int_equal(s->m[0].ts, 99);
    assert_false(s->m[1].text);
    assert_int_equal(s->m[1].seq, 2);
    assert_int_equal(s->m[1].ts, 7);
    assert_true(s->m[2].text);
    assert_true(s->m[2].has_id);
    assert_int_equal(s->m[2].seq, 3);
    assert_int_equal(s->m[2].ts, 5);
    for (int i = 0; i < 3; i++)
        assert_false(s->m[i].gap);
    /* Two pongs with the pings' payloads, then the close answered. */
    assert_int_equal(s->nsent, 3);
    assert_int_equal(s->sent[0].first, 0x8a);
    assert_int_equal(s->sent[0].len, 1);
    assert_memory_equal(s->sent[0].payload, "p", 1);
    assert_int_equal(s->sent[1].first, 0x8a);
    assert_int_equal(s->sent[1].len, sizeof long_ping - 1);
    assert_memory_equal(s->sent[1].payload, long_ping, sizeof long_ping - 1);
    assert_int_equal(s->sent[2].first, 0x88);
    assert_int_equal(s->sent[2].len, 2);
    assert_int_equal(s->sent[2].payload[0] << 8 | s->sent[2].payload[1], 1000);
}

static void whole_stream_in_one_piece(void **state)
{
    (void)state;
    struct ws_parser p;
    struct seen s = {0};
    int up = 0;
    build_stream();
    ws_parser_init(&p);
    assert_int_equal(ws_parser_feed(&p, (const char *)g_stream, g_len, &cbs, &s, &up), WS_CLOSED);
    assert_true(up);
    assert_int_equal(ws_parser_close_code(&p), 1000);
    check(&s);
}

static void same_events_for_every_piece_size(void **state)
{
    (void)state;
    build_stream();
    for (size_t step = 1; step <= g_len; step++) {
        struct ws_parser p;
        struct seen s = {0};
        enum ws_result r = WS_MORE;
        int up, ups = 0;
        ws_parser_init(&p);
        for (size_t i = 0; i < g_len && r == WS_MORE; i += step) {
            size_t n = g_len - i < step ? g_len - i : step;
            r = ws_parser_feed(&p, (const char *)g_stream + i, n, &cbs, &s, &up);
            ups += up;
        }
        assert_int_equal(r, WS_CLOSED);
        assert_int_equal(ups, 1);
        assert_int_equal(ws_parser_close_code(&p), 1000);
        check(&s);
    }
}

static void a_long_frame_and_a_close_without_code(void **state)
{
    (void)state;
    static uint8_t buf[70400], payload[70000];
    size_t len = sizeof head - 1;
    struct ws_parser p;
    struct seen s = {0};
    memcpy(buf, head, len);
    memset(payload, 'a', sizeof payload);
    memcpy(payload, "id: 00000001:9\n\nt=1;", 20);
    frame(buf, &len, 0x81, payload, sizeof payload);
    frame(buf, &len, 0x88, "", 0);
    ws_parser_init(&p);
    assert_int_equal(ws_parser_feed(&p, (const char *)buf, len, &cbs, &s, NULL), WS_CLOSED);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.m[0].seq, 9);
    assert_int_equal(ws_parser_close_code(&p), 1005);
    /* A close without a code is answered with one without a code. */
    assert_int_equal(s.nsent, 1);
    assert_int_equal(s.sent[0].first, 0x88);
    assert_int_equal(s.sent[0].len, 0);
}

static void other_statuses_are_reported(void **state)
{
    (void)state;
    const char *answers[] = {"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n",
                             "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n\r\n"};
    const unsigned want[] = {404, 426};
    for (size_t i = 0; i < 2; i++) {
        struct ws_parser p;
        struct seen s = {0};
        ws_parser_init(&p);
        assert_int_equal(ws_parser_feed(&p, answers[i], strlen(answers[i]), &cbs, &s, NULL), WS_STATUS);
        assert_int_equal(ws_parser_status(&p), want[i]);
    }
}

static void a_handshake_missing_a_header_is_an_error(void **state)
{
    (void)state;
    const char *bad[] = {
        /* no protocol */
        "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        /* a wrong accept */
        "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kZGzzzgoo+xOo\r\n"
        "Sec-WebSocket-Protocol: ws+meta.httpdcnode\r\n\r\n",
        /* another protocol */
        "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
        "Sec-WebSocket-Protocol: ws+meta.other\r\n\r\n",
        /* no Connection: upgrade */
        "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: close\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
        "Sec-WebSocket-Protocol: ws+meta.httpdcnode\r\n\r\n",
        /* not HTTP */
        "HTTX/1.1 101 x\r\n\r\n",
        "HTTP/1.1 10 x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ws_parser p;
        struct seen s = {0};
        int up = 0;
        ws_parser_init(&p);
        assert_int_equal(ws_parser_feed(&p, bad[i], strlen(bad[i]), &cbs, &s, &up), WS_ERROR);
        assert_false(up);
    }
}

/* Each: bytes after a good handshake that a server must not send. */
static void forbidden_frames_are_errors(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"\x81\x85\x01\x02\x03\x04hello", 11},          /* masked */
        {"\xc1\x01x", 3},                               /* RSV1 */
        {"\x83\x01x", 3},                               /* opcode 3 */
        {"\x80\x01x", 3},                               /* a continuation of nothing */
        {"\x01\x01x\x81\x01y", 6},                      /* a message inside another */
        {"\x89\x7e\x00\x7e", 4},                        /* a control frame of 126 bytes */
        {"\x09\x01p", 3},                               /* a fragmented ping */
        {"\x81\x7e\x00\x05hello", 9},                   /* 16-bit length for 5 bytes */
        {"\x82\x7f\x00\x00\x00\x00\x00\x00\x01\x00", 10}, /* 64-bit length for 256 */
        {"\x82\x7f\x00\x00\x01\x00\x00\x00\x00\x00", 10}, /* 2^40 bytes */
        {"\x81\x02\xc3\x28", 4},                        /* text that is not UTF-8 */
        {"\x81\x02" "a\xe2", 4},                        /* UTF-8 cut at the message's end */
        {"\x8b\x00", 2},                               /* control opcode 0xb */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ws_parser p;
        struct seen s = {0};
        ws_parser_init(&p);
        assert_int_equal(ws_parser_feed(&p, head, sizeof head - 1, &cbs, &s, NULL), WS_MORE);
        assert_int_equal(ws_parser_feed(&p, bad[i].bytes, bad[i].len, &cbs, &s, NULL), WS_ERROR);
        assert_int_equal(s.n, 0);
        /* Once broken, it stays broken. */
        assert_int_equal(ws_parser_feed(&p, "\x81\x00", 2, &cbs, &s, NULL), WS_ERROR);
    }
}

static void a_message_without_the_id_prefix_has_no_id(void **state)
{
    (void)state;
    const char *frames[] = {"\x81\x05hello", "\x81\x0fid: 4fb91385:1\n", "\x81\x0cid: 4fb9:1\n\nx"};
    for (size_t i = 0; i < 3; i++) {
        struct ws_parser p;
        struct seen s = {0};
        ws_parser_init(&p);
        ws_parser_feed(&p, head, sizeof head - 1, &cbs, &s, NULL);
        assert_int_equal(ws_parser_feed(&p, frames[i], 2 + (size_t)(unsigned char)frames[i][1], &cbs, &s,
                                 NULL), WS_MORE);
        assert_int_equal(s.n, 1);
        assert_false(s.m[0].has_id);
        assert_true(s.m[0].bad_id);
    }
}

static void the_close_frame_is_masked(void **state)
{
    (void)state;
    uint8_t f[WS_CLOSE_FRAME_LEN], g[WS_CLOSE_FRAME_LEN];
    assert_int_equal(ws_parser_close_frame(f, 1000), WS_CLOSE_FRAME_LEN);
    assert_int_equal(f[0], 0x88);
    assert_int_equal(f[1], 0x82);
    assert_int_equal((f[6] ^ f[2]) << 8 | (f[7] ^ f[3]), 1000);
    /* Another frame, another mask. */
    assert_int_equal(ws_parser_close_frame(g, 1000), WS_CLOSE_FRAME_LEN);
    assert_memory_not_equal(f + 2, g + 2, 4);
    assert_int_equal((g[6] ^ g[2]) << 8 | (g[7] ^ g[3]), 1000);
}

/* Feeds bytes after a good handshake, step bytes at a time. */
static enum ws_result feed_steps(struct ws_parser *p, struct seen *s, const uint8_t *b, size_t len,
                                 size_t step)
{
    enum ws_result r = ws_parser_feed(p, head, sizeof head - 1, &cbs, s, NULL);
    assert_int_equal(r, WS_MORE);
    for (size_t i = 0; i < len && r == WS_MORE; i += step)
        r = ws_parser_feed(p, (const char *)b + i, len - i < step ? len - i : step, &cbs, s, NULL);
    return r;
}

/* The server's gap frame (src/transport/ws.c ws_replay_gap): a gap, not a message without
 * an id; its JSON may gain fields. Then the messages after it. */
static void the_gap_frame_is_a_gap(void **state)
{
    (void)state;
    static const char *const gaps[] = {
        "event: gap\n\n{\"last\":\"4fb91385:1\",\"first\":\"4fb91385:5\"}",
        "event: gap\n\n{\"last\":null,\"first\":null,\"next\":\"4fb91385:4\"}",
        "id: 4fb91385:4\nevent: gap\n\n{}",
        "event:gap\n\n{}",
    };
    static const char m5[] = "id: 4fb91385:5\n\nm5";
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        uint8_t buf[256];
        size_t len = 0;
        frame(buf, &len, 0x81, gaps[g], strlen(gaps[g]));
        frame(buf, &len, 0x81, m5, sizeof m5 - 1);
        for (size_t step = 1; step <= len; step++) {
            struct ws_parser p;
            struct seen s = {0};
            ws_parser_init(&p);
            assert_int_equal(feed_steps(&p, &s, buf, len, step), WS_MORE);
            assert_int_equal(s.n, 2);
            assert_true(s.m[0].gap);
            assert_false(s.m[0].bad_id);
            assert_false(s.m[1].gap);
            assert_true(s.m[1].has_id);
            assert_int_equal(s.m[1].seq, 5);
        }
    }
}

/* Other events are not gaps: another event (a topic's joined, refused,
 * left) is no message; a line that is no event field leaves a message
 * with a bad id. */
static void only_event_gap_is_a_gap(void **state)
{
    (void)state;
    static const char *const others[] = {"event: gaps\n\n{}", "event: ga\n\n{}",
                                         "event: message\n\n{}", "event: joined\n\n{}",
                                         "x-event: gap\n\n{}"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        uint8_t buf[64];
        size_t len = 0;
        struct ws_parser p;
        struct seen s = {0};
        frame(buf, &len, 0x81, others[i], strlen(others[i]));
        ws_parser_init(&p);
        assert_int_equal(feed_steps(&p, &s, buf, len, len), WS_MORE);
        assert_int_equal(s.n, 1);
        assert_false(s.m[0].gap);
        int event = others[i][0] == 'e';   /* any other event's name */
        assert_int_equal(s.m[0].other, event);
        assert_int_equal(s.m[0].bad_id, !event);
    }
}

/* A topic's id (httpclient --topics): t:N@EPOCH:SEQ, N read beside the id. */
static void a_topic_id_names_its_topic(void **state)
{
    (void)state;
    static const char msg[] = "id: t:4093@0badc0de:17\n\nhello";
    uint8_t buf[64];
    size_t len = 0;
    struct ws_parser p;
    struct seen s = {0};
    frame(buf, &len, 0x81, msg, strlen(msg));
    ws_parser_init(&p);
    assert_int_equal(feed_steps(&p, &s, buf, len, 1), WS_MORE);
    assert_int_equal(s.n, 1);
    assert_true(s.m[0].has_id);
    assert_int_equal(s.m[0].topic, 4094);
    assert_int_equal(s.m[0].epoch, 0x0badc0de);
    assert_int_equal(s.m[0].seq, 17);
}

/* "event: conn" (the answer of a {conn, Conn, Data}) is a reply: no id
 * wanted, its body's stamp read; a near miss is another event, or a
 * gap if "event: gap" came first.
 * Fed whole and a byte at a time. */
static void event_conn_is_a_reply(void **state)
{
    (void)state;
    static const char *const replies[] = {"event: conn\n\nt=1234;", "event:conn\n\nt=1234;x"};
    static const char *const others[] = {"event: connx\n\nt=1234;", "event: con\n\nt=1234;",
                                         "event: gap\nevent: conn\n\n{}"};
    for (size_t step = 1; step <= 64; step += 63) {
        for (size_t i = 0; i < 2; i++) {
            uint8_t buf[64];
            size_t len = 0;
            struct ws_parser p;
            struct seen s = {0};
            frame(buf, &len, 0x81, replies[i], strlen(replies[i]));
            ws_parser_init(&p);
            assert_int_equal(feed_steps(&p, &s, buf, len, step), WS_MORE);
            assert_int_equal(s.n, 1);
            assert_true(s.m[0].reply);
            assert_false(s.m[0].gap);
            assert_false(s.m[0].bad_id);
            assert_false(s.m[0].has_id);
            assert_true(s.m[0].has_ts);
            assert_int_equal(s.m[0].ts, 1234);
        }
        for (size_t i = 0; i < 3; i++) {
            uint8_t buf[64];
            size_t len = 0;
            struct ws_parser p;
            struct seen s = {0};
            frame(buf, &len, 0x81, others[i], strlen(others[i]));
            ws_parser_init(&p);
            assert_int_equal(feed_steps(&p, &s, buf, len, step), WS_MORE);
            assert_int_equal(s.n, 1);
            assert_false(s.m[0].reply);
            assert_true(i == 2 ? s.m[0].gap : s.m[0].other);
        }
    }
}

/* Pings of every size, alone or between a message's fragments, cut at
 * every byte: each answered at once with a pong of its payload, masked. */
static void every_ping_gets_its_pong(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 9, 10, 11, 124, 125};
    uint8_t payload[125];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint8_t buf[256];
        size_t len = 0;
        frame(buf, &len, 0x01, "id: 00000001:1\n\nab", 19);
        frame(buf, &len, 0x89, payload, sizes[k]);
        frame(buf, &len, 0x80, "c", 1);
        for (size_t step = 1; step <= len; step++) {
            struct ws_parser p;
            struct seen s = {0};
            ws_parser_init(&p);
            assert_int_equal(feed_steps(&p, &s, buf, len, step), WS_MORE);
            assert_int_equal(s.n, 1);
            assert_int_equal(s.m[0].seq, 1);
            assert_int_equal(s.nsent, 1);
            assert_int_equal(s.sent[0].first, 0x8a);
            assert_int_equal(s.sent[0].len, sizes[k]);
            assert_memory_equal(s.sent[0].payload, payload, sizes[k]);
        }
    }
}

/* A close whose code and reason come in pieces is answered with the code. */
static void a_close_is_answered_with_its_code(void **state)
{
    (void)state;
    static const char close1001[] = "\x03\xe9going away, as the heartbeat says";
    uint8_t buf[64];
    size_t len = 0;
    frame(buf, &len, 0x88, close1001, sizeof close1001 - 1);
    for (size_t step = 1; step <= len; step++) {
        struct ws_parser p;
        struct seen s = {0};
        ws_parser_init(&p);
        assert_int_equal(feed_steps(&p, &s, buf, len, step), WS_CLOSED);
        assert_int_equal(ws_parser_close_code(&p), 1001);
        assert_int_equal(s.nsent, 1);
        assert_int_equal(s.sent[0].first, 0x88);
        assert_int_equal(s.sent[0].len, 2);
        assert_int_equal(s.sent[0].payload[0] << 8 | s.sent[0].payload[1], 1001);
        /* Nothing more is read, nor answered. */
        assert_int_equal(ws_parser_feed(&p, "\x89\x00", 2, &cbs, &s, NULL), WS_CLOSED);
        assert_int_equal(s.nsent, 1);
    }
}

/* A long ping cut by the read's end holds a buffer: released with the
 * connection (the leak sanitizer of make test SANITIZE=address checks). */
static void a_cut_long_ping_is_released(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = 0;
    struct ws_parser p;
    struct seen s = {0};
    frame(buf, &len, 0x89, long_ping, sizeof long_ping - 1);
    ws_parser_init(&p);
    assert_int_equal(feed_steps(&p, &s, buf, len - 3, len), WS_MORE);
    assert_int_equal(s.nsent, 0);
    ws_parser_release(&p);
    assert_false(ws_parser_open(&p));
}

static void the_state_is_small(void **state)
{
    (void)state;
    assert_true(sizeof(struct ws_parser) <= 48);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_stream_in_one_piece),
        cmocka_unit_test(same_events_for_every_piece_size),
        cmocka_unit_test(a_long_frame_and_a_close_without_code),
        cmocka_unit_test(other_statuses_are_reported),
        cmocka_unit_test(a_handshake_missing_a_header_is_an_error),
        cmocka_unit_test(forbidden_frames_are_errors),
        cmocka_unit_test(a_message_without_the_id_prefix_has_no_id),
        cmocka_unit_test(the_close_frame_is_masked),
        cmocka_unit_test(the_gap_frame_is_a_gap),
        cmocka_unit_test(only_event_gap_is_a_gap),
        cmocka_unit_test(a_topic_id_names_its_topic),
        cmocka_unit_test(event_conn_is_a_reply),
        cmocka_unit_test(every_ping_gets_its_pong),
        cmocka_unit_test(a_close_is_answered_with_its_code),
        cmocka_unit_test(a_cut_long_ping_is_released),
        cmocka_unit_test(the_state_is_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
