/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's Server-Sent Events parser (tools/httpclient/sse_parser.c):
 * fields, line endings, ids, the gap event and the stamp (with its message
 * number), fed in pieces of
 * every size; what is not UTF-8 is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/sse_parser.c"

#define MAX_EVENTS 16

struct seen {
    int n;
    struct sse_event ev[MAX_EVENTS];
};

static void on_event(void *ctx, const struct sse_event *ev)
{
    struct seen *s = ctx;
    if (s->n < MAX_EVENTS)
        s->ev[s->n] = *ev;
    s->n++;
}

static const char stream[] =
    "retry: 3000\n\n"
    "id: 4fb91385:1\ndata: t=1700000000123456789;n=77;hello\n\n"
    ": heartbeat\n\n"
    "id: 4fb91385:2\r\ndata: line1\r\ndata: t=5;line2\r\n\r\n"
    "event: gap\ndata: {\"last\":\"4fb91385:2\",\"first\":\"4fb91385:9\"}\n\n"
    "id:4fb91385:9\rdata:t=42;n=5\r\r"
    "id: zz\ndata: x\n\n"
    "event: other\ndata: y\n\n"
    "data\n\n"
    "event: message\nid: ABCDEF01:4294967295\ndata: t=7;\xe2\x82\xac\n\n";

static void check_events(const struct seen *s)
{
    assert_int_equal(s->n, 9);
    /* retry alone */
    assert_int_equal(s->ev[0].type, SSE_NONE);
    assert_true(s->ev[0].has_retry);
    assert_false(s->ev[0].has_id);
    /* a stamped message with its id */
    assert_int_equal(s->ev[1].type, SSE_MESSAGE);
    assert_true(s->ev[1].has_id);
    assert_int_equal(s->ev[1].epoch, 0x4fb91385u);
    assert_int_equal(s->ev[1].seq, 1);
    assert_true(s->ev[1].has_ts);
    assert_true(s->ev[1].ts == 1700000000123456789ull);
    assert_true(s->ev[1].has_n);                /* msggen --seq's message number */
    assert_int_equal(s->ev[1].n, 77);
    assert_false(s->ev[1].has_retry);
    /* the heartbeat is not reported; CRLF lines; a stamp on the second line is none */
    assert_int_equal(s->ev[2].type, SSE_MESSAGE);
    assert_int_equal(s->ev[2].seq, 2);
    assert_false(s->ev[2].has_ts);
    /* the gap */
    assert_int_equal(s->ev[3].type, SSE_GAP);
    assert_false(s->ev[3].has_id);
    /* CR line endings, no space after the colon */
    assert_int_equal(s->ev[4].type, SSE_MESSAGE);
    assert_int_equal(s->ev[4].seq, 9);
    assert_true(s->ev[4].has_ts);
    assert_int_equal(s->ev[4].ts, 42);
    assert_false(s->ev[4].has_n);               /* the line ended before its ';' */
    /* a malformed id */
    assert_int_equal(s->ev[5].type, SSE_MESSAGE);
    assert_false(s->ev[5].has_id);
    assert_true(s->ev[5].bad_id);
    /* another event name */
    assert_int_equal(s->ev[6].type, SSE_OTHER);
    /* a data field without a colon: a message with no id */
    assert_int_equal(s->ev[7].type, SSE_MESSAGE);
    assert_false(s->ev[7].has_id);
    assert_false(s->ev[7].bad_id);
    /* event: message, upper-case hex, the largest sequence, UTF-8 */
    assert_int_equal(s->ev[8].type, SSE_MESSAGE);
    assert_int_equal(s->ev[8].epoch, 0xabcdef01u);
    assert_true(s->ev[8].seq == 4294967295u);
    assert_int_equal(s->ev[8].ts, 7);
}

static void whole_stream_in_one_piece(void **state)
{
    (void)state;
    struct sse_parser p;
    struct seen s = {0};
    ssep_init(&p);
    assert_int_equal(ssep_feed(&p, stream, sizeof stream - 1, on_event, &s), SSE_OK);
    check_events(&s);
}

static void same_events_for_every_piece_size(void **state)
{
    (void)state;
    for (size_t step = 1; step < sizeof stream; step++) {
        struct sse_parser p;
        struct seen s = {0};
        ssep_init(&p);
        for (size_t i = 0; i < sizeof stream - 1; i += step) {
            size_t n = sizeof stream - 1 - i < step ? sizeof stream - 1 - i : step;
            assert_int_equal(ssep_feed(&p, stream + i, n, on_event, &s), SSE_OK);
        }
        check_events(&s);
    }
}

static void same_events_for_every_split_point(void **state)
{
    (void)state;
    for (size_t cut = 0; cut < sizeof stream; cut++) {
        struct sse_parser p;
        struct seen s = {0};
        ssep_init(&p);
        assert_int_equal(ssep_feed(&p, stream, cut, on_event, &s), SSE_OK);
        assert_int_equal(ssep_feed(&p, stream + cut, sizeof stream - 1 - cut, on_event, &s), SSE_OK);
        check_events(&s);
    }
}

static void an_event_waits_for_its_blank_line(void **state)
{
    (void)state;
    const char text[] = "id: 00000001:3\ndata: t=9;";
    struct sse_parser p;
    struct seen s = {0};
    ssep_init(&p);
    assert_int_equal(ssep_feed(&p, text, sizeof text - 1, on_event, &s), SSE_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(ssep_feed(&p, "\n", 1, on_event, &s), SSE_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(ssep_feed(&p, "\n", 1, on_event, &s), SSE_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.ev[0].seq, 3);
    assert_int_equal(s.ev[0].ts, 9);
}

/* Names that only look like the ones that count, and values that are not. */
static void near_misses_are_not_fields(void **state)
{
    (void)state;
    const char text[] = "ids: 00000001:3\ndatum: t=1;\nretry: 3x\nevent: gas\n\n"
                        "retry:\n\nevent: messages\n\n";
    struct sse_parser p;
    struct seen s = {0};
    ssep_init(&p);
    assert_int_equal(ssep_feed(&p, text, sizeof text - 1, on_event, &s), SSE_OK);
    /* "event: gas" makes the first block an event of another name; the
     * empty retry is no retry and reports nothing. */
    assert_int_equal(s.n, 2);
    assert_int_equal(s.ev[0].type, SSE_OTHER);
    assert_false(s.ev[0].has_id);
    assert_false(s.ev[0].has_retry);
    assert_false(s.ev[0].has_ts);
    assert_int_equal(s.ev[1].type, SSE_OTHER);
}

static void ids_that_are_not_epoch_seq_are_bad(void **state)
{
    (void)state;
    const char *bad[] = {"id: 4fb9138:1\ndata: x\n\n", "id: 4fb91385-1\ndata: x\n\n",
                         "id: 4fb91385:\ndata: x\n\n", "id: 4fb91385:1a\ndata: x\n\n",
                         "id: 4fb91385:4294967296\ndata: x\n\n", "id: g0000000:1\ndata: x\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sse_parser p;
        struct seen s = {0};
        ssep_init(&p);
        assert_int_equal(ssep_feed(&p, bad[i], strlen(bad[i]), on_event, &s), SSE_OK);
        assert_int_equal(s.n, 1);
        assert_false(s.ev[0].has_id);
        assert_true(s.ev[0].bad_id);
    }
}

static void what_is_not_utf8_is_an_error(void **state)
{
    (void)state;
    const char *bad[] = {"data: \xff\n\n", "data: \xc0\x80\n\n", "data: \xed\xa0\x80\n\n",
                         "data: \xf4\x90\x80\x80\n\n", "data: \xe2\x82" "A\n\n",
                         "\x80", "data: \xe0\x80\x80\n\n", "data: \xf5\x80\x80\x80\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sse_parser p;
        struct seen s = {0};
        ssep_init(&p);
        assert_int_equal(ssep_feed(&p, bad[i], strlen(bad[i]), on_event, &s), SSE_ERROR);
        assert_int_equal(s.n, 0);
        /* Once broken, it stays broken. */
        assert_int_equal(ssep_feed(&p, "data: x\n\n", 9, on_event, &s), SSE_ERROR);
    }
    const char good[] = "data: \xf0\x9f\x98\x80 \xed\x9f\xbf \xf4\x8f\xbf\xbf\n\n";
    struct sse_parser p;
    struct seen s = {0};
    ssep_init(&p);
    assert_int_equal(ssep_feed(&p, good, sizeof good - 1, on_event, &s), SSE_OK);
    assert_int_equal(s.n, 1);
}

static void the_state_is_small(void **state)
{
    (void)state;
    assert_true(sizeof(struct sse_parser) <= 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_stream_in_one_piece),
        cmocka_unit_test(same_events_for_every_piece_size),
        cmocka_unit_test(same_events_for_every_split_point),
        cmocka_unit_test(an_event_waits_for_its_blank_line),
        cmocka_unit_test(near_misses_are_not_fields),
        cmocka_unit_test(ids_that_are_not_epoch_seq_are_bad),
        cmocka_unit_test(what_is_not_utf8_is_an_error),
        cmocka_unit_test(the_state_is_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
