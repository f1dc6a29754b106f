/* SPDX-License-Identifier: Apache-2.0 */
/* The token expiry side table (src/core/expiry.c, included to reach its
 * statics): streams tracked from the exp their request gave, found again
 * through the hash when they close (past its growth), and ended by the
 * wheel walk only once their exp has passed. Streams here are WELCOMING
 * records without a socket (fd -1): ending one makes it ENDING, closing
 * one goes through stream_close, as for any stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../../src/core/expiry.c"
#include "core/framing.h"
#include "core/stream.h"

#include "core/uidtable.h"

#define N 3000                      /* past the first hash growth (1024) */

static struct event_base *base;
static struct stream *streams[N + 1];

static int setup(void **state)
{
    (void)state;
    base = event_base_new();
    assert_non_null(base);
    assert_int_equal(uidtable_init(N + 10, NULL), 0);
    memset(&loop_stats, 0, sizeof loop_stats);
    assert_int_equal(stream_configure(&(struct stream_config){
                         .base = base, .max_backlog = 1 << 20, .max_backlog_total = 1 << 30,
                         .max_conns_per_uid = 8}), 0);
    assert_int_equal(expiry_init(base, 1, stream_end_why), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    expiry_free();
    stream_unconfigure();
    uidtable_free();
    event_base_free(base);
    return 0;
}

/* Every slot of the wheel, as a tick would after a long time. */
static void walk_all(int64_t now)
{
    for (uint32_t slot = 0; slot < WHEEL_SLOTS; slot++)
        expire_slot(slot, now);
}

static void tracked_found_and_ended_at_exp(void **state)
{
    (void)state;
    int64_t base_exp = 2000000000;
    for (uint32_t i = 1; i <= N; i++) {
        /* every third without a token; exps spread over 5000 s (wrapping the wheel) */
        expiry_next_stream(i % 3 == 0 ? 0 : base_exp + i * 5 / 3);
        streams[i] = stream_open(i, FRAMING_SSE, NULL, -1);
        assert_non_null(streams[i]);
    }
    assert_int_equal(expiry_tracked(), N - N / 3);
    /* A token's exp is for the next stream only. */
    struct stream *plain = stream_open(N + 1, FRAMING_SSE, NULL, -1);
    assert_int_equal(expiry_tracked(), N - N / 3);
    stream_release(plain, 0);
    /* Half close: each is found through the hash and dropped. */
    for (uint32_t i = 1; i <= N; i += 2)
        stream_release(streams[i], 0);
    uint32_t left = 0;
    for (uint32_t i = 2; i <= N; i += 2)
        left += i % 3 != 0;
    assert_int_equal(expiry_tracked(), left);
    /* Before the earliest exp nothing ends. */
    walk_all(base_exp);
    assert_int_equal(loop_stats.token_expired, 0);
    /* Up to the middle: those whose exp passed, and only those. */
    int64_t mid = base_exp + N * 5 / 6;
    walk_all(mid);
    for (uint32_t i = 2; i <= N; i += 2) {
        int due = i % 3 != 0 && base_exp + i * 5 / 3 <= mid;
        assert_int_equal(streams[i]->state == STREAM_ENDING, due);
    }
    uint64_t ended = loop_stats.token_expired;
    assert_true(ended > 0 && ended < left);
    /* Walked again: an ending stream is not ended twice. */
    walk_all(mid);
    assert_int_equal(loop_stats.token_expired, ended);
    walk_all(base_exp + 6000);
    assert_int_equal(loop_stats.token_expired, left);
    for (uint32_t i = 2; i <= N; i += 2)
        stream_release(streams[i], 0);
    assert_int_equal(expiry_tracked(), 0);
    for (uint32_t slot = 0; slot < WHEEL_SLOTS; slot++)
        assert_int_equal(wheel[slot], 0);
}

/* Off (--no-token-expiry): nothing is tracked. */
static void off_tracks_nothing(void **state)
{
    (void)state;
    expiry_free();
    assert_int_equal(expiry_init(base, 0, stream_end_why), 0);
    expiry_next_stream(2000000000);
    struct stream *s = stream_open(1, FRAMING_WS, NULL, -1);
    assert_int_equal(expiry_tracked(), 0);
    stream_release(s, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tracked_found_and_ended_at_exp, setup, teardown),
        cmocka_unit_test_setup_teardown(off_tracks_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
