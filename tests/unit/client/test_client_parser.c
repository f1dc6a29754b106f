/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's HTTP response parser (tools/httpclient/resp_parser.c):
 * status, headers, chunk framing and the "t=<ns>;" stamp, fed in pieces of
 * every size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/resp_parser.c"

#define MAX_EVENTS 16

/* What the callbacks saw. */
struct seen {
    int headers;
    unsigned status;
    int chunked;
    int stop_on_non_200;
    int nchunks;
    int has_ts[MAX_EVENTS];
    uint64_t ts[MAX_EVENTS];
};

static int on_headers(void *ctx, unsigned status, int chunked)
{
    struct seen *s = ctx;
    s->headers++;
    s->status = status;
    s->chunked = chunked;
    return s->stop_on_non_200 && status != 200;
}

static void on_chunk(void *ctx, int has_ts, uint64_t ts)
{
    struct seen *s = ctx;
    if (s->nchunks < MAX_EVENTS) {
        s->has_ts[s->nchunks] = has_ts;
        s->ts[s->nchunks] = ts;
    }
    s->nchunks++;
}

static const struct resp_callbacks cbs = {on_headers, on_chunk, NULL};

static const char stream[] =
    "HTTP/1.1 200 OK\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "\r\n"
    "1e\r\nWelcome, Url: '/test/7' Id: 7\n\r\n"
    "1b\r\nt=1700000000123456789;hello\r\n"
    "5\r\nplain\r\n"
    "4\r\nt=5;\r\n"
    "0\r\n\r\n";

static void check_stream_events(const struct seen *s)
{
    assert_int_equal(s->headers, 1);
    assert_int_equal(s->status, 200);
    assert_int_equal(s->chunked, 1);
    assert_int_equal(s->nchunks, 4);
    assert_int_equal(s->has_ts[0], 0);
    assert_int_equal(s->has_ts[1], 1);
    assert_true(s->ts[1] == 1700000000123456789ull);
    assert_int_equal(s->has_ts[2], 0);
    assert_int_equal(s->has_ts[3], 1);
    assert_int_equal(s->ts[3], 5);
}

/* Feeds text in pieces of size step; returns the last result. */
static enum rp_result feed_in_steps(struct resp_parser *p, struct seen *s, const char *text,
                                    size_t len, size_t step)
{
    enum rp_result r = RP_MORE;
    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;
        r = rp_feed(p, text + i, n, &cbs, s);
        if (r != RP_MORE && i + n < len)
            break;
    }
    return r;
}

static void whole_stream_in_one_piece(void **state)
{
    (void)state;
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(rp_feed(&p, stream, sizeof stream - 1, &cbs, &s), RP_DONE);
    check_stream_events(&s);
}

static void same_events_for_every_piece_size(void **state)
{
    (void)state;
    for (size_t step = 1; step < sizeof stream; step++) {
        struct resp_parser p;
        struct seen s = {0};
        rp_init(&p);
        assert_int_equal(feed_in_steps(&p, &s, stream, sizeof stream - 1, step), RP_DONE);
        check_stream_events(&s);
    }
}

static void same_events_for_every_split_point(void **state)
{
    (void)state;
    for (size_t cut = 0; cut < sizeof stream; cut++) {
        struct resp_parser p;
        struct seen s = {0};
        rp_init(&p);
        enum rp_result want = cut == sizeof stream - 1 ? RP_DONE : RP_MORE;
        assert_int_equal(rp_feed(&p, stream, cut, &cbs, &s), want);
        rp_feed(&p, stream + cut, sizeof stream - 1 - cut, &cbs, &s);
        check_stream_events(&s);
    }
}

static void an_open_stream_wants_more_and_fails_on_eof(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n";
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(rp_feed(&p, text, sizeof text - 1, &cbs, &s), RP_MORE);
    assert_int_equal(s.nchunks, 1);
    assert_int_equal(rp_eof(&p), RP_ERROR);
}

static void a_non_200_status_can_stop_the_parse(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 40\r\n\r\n"
                        "User id not found, try /test/123 instead";
    struct resp_parser p;
    struct seen s = {0};
    s.stop_on_non_200 = 1;
    rp_init(&p);
    assert_int_equal(rp_feed(&p, text, sizeof text - 1, &cbs, &s), RP_STOPPED);
    assert_int_equal(s.status, 404);
    assert_int_equal(s.nchunks, 0);
}

static void content_length_body_ends_after_its_bytes(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 20\r\n\r\n"
                        "Max uid allowed is 9";
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(feed_in_steps(&p, &s, text, sizeof text - 1, 7), RP_DONE);
    assert_int_equal(s.status, 503);
    assert_int_equal(s.chunked, 0);
    assert_int_equal(s.nchunks, 0);
}

static void a_body_without_length_ends_with_the_close(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\nWelcome, t=1;";
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(rp_feed(&p, text, sizeof text - 1, &cbs, &s), RP_MORE);
    assert_int_equal(s.chunked, 0);
    assert_int_equal(rp_eof(&p), RP_DONE);
}

static void header_names_and_chunked_match_in_any_case(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.1 200 OK\r\nX-Transfer-Encoding: chunked\r\n"
                        "TRANSFER-ENCODING:  gzip, ChUnKeD\r\n\r\n2\r\nok\r\n";
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(rp_feed(&p, text, sizeof text - 1, &cbs, &s), RP_MORE);
    assert_int_equal(s.chunked, 1);
    assert_int_equal(s.nchunks, 1);
}

static void chunk_extensions_and_trailers_are_skipped(void **state)
{
    (void)state;
    const char text[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "A;name=value\r\nt=42;abcde\r\n0\r\nTrailer: x\r\n\r\n";
    struct resp_parser p;
    struct seen s = {0};
    rp_init(&p);
    assert_int_equal(rp_feed(&p, text, sizeof text - 1, &cbs, &s), RP_DONE);
    assert_int_equal(s.nchunks, 1);
    assert_int_equal(s.has_ts[0], 1);
    assert_int_equal(s.ts[0], 42);
}

/* Chunk data that is not exactly "t=<1..19 digits>;..." carries no stamp. */
static void only_a_well_formed_stamp_counts(void **state)
{
    (void)state;
    const char *bodies[] = {"t=123", "t=;x", "x=1;", "T=1;", "t=12a;", "t 1;",
                            "t=12345678901234567890;", "t=-1;"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char text[256];
        int n = snprintf(text, sizeof text,
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n",
                         strlen(bodies[i]), bodies[i]);
        struct resp_parser p;
        struct seen s = {0};
        rp_init(&p);
        assert_int_equal(rp_feed(&p, text, (size_t)n, &cbs, &s), RP_MORE);
        assert_int_equal(s.nchunks, 1);
        assert_int_equal(s.has_ts[0], 0);
    }
}

static void a_large_chunk_is_one_chunk(void **state)
{
    (void)state;
    static char big[70000];
    const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\nt=9;";
    struct resp_parser p;
    struct seen s = {0};
    memset(big, 'x', sizeof big);
    rp_init(&p);
    assert_int_equal(rp_feed(&p, head, sizeof head - 1, &cbs, &s), RP_MORE);
    /* 0x10000 bytes of data, 4 of them already given, then CRLF. */
    assert_int_equal(rp_feed(&p, big, 0x10000 - 4 - 1000, &cbs, &s), RP_MORE);
    assert_int_equal(s.nchunks, 0);
    assert_int_equal(rp_feed(&p, big, 1000, &cbs, &s), RP_MORE);
    assert_int_equal(s.nchunks, 1);
    assert_int_equal(s.ts[0], 9);
    assert_int_equal(rp_feed(&p, "\r\n0\r\n\r\n", 7, &cbs, &s), RP_DONE);
}

static void malformed_responses_are_errors(void **state)
{
    (void)state;
    const char *bad[] = {
        "HTTX/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct resp_parser p;
        struct seen s = {0};
        rp_init(&p);
        assert_int_equal(rp_feed(&p, bad[i], strlen(bad[i]), &cbs, &s), RP_ERROR);
        /* Once broken, it stays broken. */
        assert_int_equal(rp_feed(&p, "0\r\n\r\n", 5, &cbs, &s), RP_ERROR);
    }
}

/* Bodies that are not chunked reach on_body whole, in the pieces they came
 * in, and nothing of the head does. */
struct body {
    char text[64];
    size_t len;
};

static void on_body(void *ctx, const char *data, size_t len)
{
    struct body *b = ctx;
    assert_true(b->len + len < sizeof b->text);
    memcpy(b->text + b->len, data, len);
    b->len += len;
}

static void bodies_reach_on_body(void **state)
{
    (void)state;
    static const struct resp_callbacks body_cbs = {NULL, NULL, on_body};
    const char by_length[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT";
    const char by_close[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nretry: 3000\n\n";
    for (size_t step = 1; step < sizeof by_close; step++) {
        struct resp_parser p;
        struct body b = {{0}, 0};
        enum rp_result r = RP_MORE;
        rp_init(&p);
        for (size_t i = 0; i < sizeof by_length - 1 && r == RP_MORE; i += step) {
            size_t n = sizeof by_length - 1 - i < step ? sizeof by_length - 1 - i : step;
            r = rp_feed(&p, by_length + i, n, &body_cbs, &b);
        }
        assert_int_equal(r, RP_DONE);
        assert_int_equal(b.len, 5);
        assert_memory_equal(b.text, "hello", 5);

        memset(&b, 0, sizeof b);
        rp_init(&p);
        for (size_t i = 0; i < sizeof by_close - 1; i += step) {
            size_t n = sizeof by_close - 1 - i < step ? sizeof by_close - 1 - i : step;
            assert_int_equal(rp_feed(&p, by_close + i, n, &body_cbs, &b), RP_MORE);
        }
        assert_int_equal(rp_eof(&p), RP_DONE);
        assert_int_equal(b.len, 13);
        assert_memory_equal(b.text, "retry: 3000\n\n", 13);
    }
}

static void the_state_is_small(void **state)
{
    (void)state;
    assert_true(sizeof(struct resp_parser) <= 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_stream_in_one_piece),
        cmocka_unit_test(same_events_for_every_piece_size),
        cmocka_unit_test(same_events_for_every_split_point),
        cmocka_unit_test(an_open_stream_wants_more_and_fails_on_eof),
        cmocka_unit_test(a_non_200_status_can_stop_the_parse),
        cmocka_unit_test(content_length_body_ends_after_its_bytes),
        cmocka_unit_test(a_body_without_length_ends_with_the_close),
        cmocka_unit_test(header_names_and_chunked_match_in_any_case),
        cmocka_unit_test(chunk_extensions_and_trailers_are_skipped),
        cmocka_unit_test(only_a_well_formed_stamp_counts),
        cmocka_unit_test(a_large_chunk_is_one_chunk),
        cmocka_unit_test(malformed_responses_are_errors),
        cmocka_unit_test(bodies_reach_on_body),
        cmocka_unit_test(the_state_is_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
