/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's long-poll answer parser (tools/httpclient/poll_parser.c):
 * the messages of a JSON answer, their ids and stamps, the gap flag, fed in
 * pieces of every size; what is not one JSON object of that shape is an
 * error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/poll_parser.c"

#define MAX_MSGS 16

struct seen {
    int n;
    struct poll_message m[MAX_MSGS];
    int answers;
    int gap;
};

static void on_message(void *ctx, const struct poll_message *m)
{
    struct seen *s = ctx;
    if (s->n < MAX_MSGS)
        s->m[s->n] = *m;
    s->n++;
}

static void on_answer(void *ctx, int gap)
{
    struct seen *s = ctx;
    s->answers++;
    s->gap = gap;
}

static const struct poll_callbacks cbs = {on_message, on_answer};

/* What the server sends, with an unknown member (nested containers, a
 * number, null) in the way. */
static const char answer[] =
    "{\"x\":[1,-2.5e3,{\"y\":null,\"messages\":[7]}],"
    "\"messages\":[{\"id\":\"4fb91385:8\",\"data\":\"t=1700000000123456789;hel\\\"lo\"},"
    " {\"data_base64\":\"/wA=\", \"id\" : \"4fb91385:9\"},\n"
    "{\"id\":\"4fb91385:10\",\"data\":\"t\\u003d5;x\"},{\"id\":\"zz\",\"data\":\"t=3;\"},{}],"
    "\"gap\":true,\"first\":\"4fb91385:8\"}\n";

static void check(const struct seen *s)
{
    assert_int_equal(s->n, 5);
    assert_true(s->m[0].has_id);
    assert_int_equal(s->m[0].epoch, 0x4fb91385u);
    assert_int_equal(s->m[0].seq, 8);
    assert_true(s->m[0].has_ts);
    assert_true(s->m[0].ts == 1700000000123456789ull);
    /* base64 data: no stamp; the id after it */
    assert_true(s->m[1].has_id);
    assert_int_equal(s->m[1].seq, 9);
    assert_false(s->m[1].has_ts);
    /* an escaped stamp is no stamp */
    assert_int_equal(s->m[2].seq, 10);
    assert_false(s->m[2].has_ts);
    /* a bad id; a message without one */
    assert_false(s->m[3].has_id);
    assert_true(s->m[3].bad_id);
    assert_true(s->m[3].has_ts);
    assert_int_equal(s->m[3].ts, 3);
    assert_false(s->m[4].has_id);
    assert_false(s->m[4].bad_id);
    assert_int_equal(s->answers, 1);
    assert_int_equal(s->gap, 1);
}

static void whole_answer_in_one_piece(void **state)
{
    (void)state;
    struct poll_parser p;
    struct seen s = {0};
    pollp_init(&p);
    assert_int_equal(pollp_feed(&p, answer, sizeof answer - 1, &cbs, &s), POLL_DONE);
    check(&s);
}

static void same_events_for_every_piece_size(void **state)
{
    (void)state;
    for (size_t step = 1; step < sizeof answer; step++) {
        struct poll_parser p;
        struct seen s = {0};
        enum poll_result r = POLL_ERROR;
        pollp_init(&p);
        for (size_t i = 0; i < sizeof answer - 1; i += step) {
            size_t n = sizeof answer - 1 - i < step ? sizeof answer - 1 - i : step;
            r = pollp_feed(&p, answer + i, n, &cbs, &s);
            assert_int_not_equal(r, POLL_ERROR);
        }
        assert_int_equal(r, POLL_DONE);
        check(&s);
    }
}

static void an_empty_answer_and_a_false_gap(void **state)
{
    (void)state;
    const char text[] = "{\"messages\":[],\"gap\":false}";
    struct poll_parser p;
    struct seen s = {0};
    pollp_init(&p);
    assert_int_equal(pollp_feed(&p, text, sizeof text - 2, &cbs, &s), POLL_MORE);
    assert_int_equal(s.answers, 0);
    assert_int_equal(pollp_feed(&p, "}", 1, &cbs, &s), POLL_DONE);
    assert_int_equal(s.answers, 1);
    assert_int_equal(s.gap, 0);
    assert_int_equal(s.n, 0);
    /* Whitespace may follow, nothing else. */
    assert_int_equal(pollp_feed(&p, " \r\n", 3, &cbs, &s), POLL_DONE);
    assert_int_equal(pollp_feed(&p, "{", 1, &cbs, &s), POLL_ERROR);
}

static void malformed_answers_are_errors(void **state)
{
    (void)state;
    const char *bad[] = {
        "[]", "\"x\"", "{\"messages\":{}}", "{\"messages\":[1]}", "{\"messages\":[[]]}",
        "{\"gap\":tru}", "{\"gap\":trueish}", "{\"a\":\"x\ny\"}", "{\"a\":1,}", "{]",
        "{\"a\" 1}", "{\"a\":\"\\q\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":[1 2]}",
        "{\"a\":[[[[[[[[[]]]]]]]]]}", "{a:1}", "{\"a\":}", "{} {}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct poll_parser p;
        struct seen s = {0};
        pollp_init(&p);
        assert_int_equal(pollp_feed(&p, bad[i], strlen(bad[i]), &cbs, &s), POLL_ERROR);
        /* Once broken, it stays broken. */
        assert_int_equal(pollp_feed(&p, "{}", 2, &cbs, &s), POLL_ERROR);
    }
}

/* A gap answer's "next" is where the loop polls from; only when it is the
 * last id of the answer (the server writes it after the messages). */
static void the_next_id_of_an_answer(void **state)
{
    (void)state;
    struct poll_parser p;
    struct seen s = {0};
    uint32_t epoch = 0, seq = 0;
    const char text[] = "{\"messages\":[{\"id\":\"4fb91385:9\",\"data\":\"x\"}],"
                        "\"gap\":true,\"next\":\"0000abcd:7\"}";
    pollp_init(&p);
    assert_int_equal(pollp_feed(&p, text, sizeof text - 1, &cbs, &s), POLL_DONE);
    assert_int_equal(pollp_next(&p, &epoch, &seq), 1);
    assert_int_equal(epoch, 0xabcdu);
    assert_int_equal(seq, 7);
    assert_int_equal(s.m[0].seq, 9);

    const char before[] = "{\"next\":\"0000abcd:7\",\"messages\":[{\"id\":\"4fb91385:9\"}]}";
    pollp_init(&p);
    assert_int_equal(pollp_feed(&p, before, sizeof before - 1, &cbs, &s), POLL_DONE);
    assert_int_equal(pollp_next(&p, &epoch, &seq), 0);

    const char bad[] = "{\"messages\":[],\"gap\":true,\"next\":\"nope\"}";
    pollp_init(&p);
    assert_int_equal(pollp_feed(&p, bad, sizeof bad - 1, &cbs, &s), POLL_DONE);
    assert_int_equal(pollp_next(&p, &epoch, &seq), 0);
}

static void the_state_is_small(void **state)
{
    (void)state;
    assert_true(sizeof(struct poll_parser) <= 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_answer_in_one_piece),
        cmocka_unit_test(same_events_for_every_piece_size),
        cmocka_unit_test(an_empty_answer_and_a_false_gap),
        cmocka_unit_test(malformed_answers_are_errors),
        cmocka_unit_test(the_next_id_of_an_answer),
        cmocka_unit_test(the_state_is_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
