/* SPDX-License-Identifier: Apache-2.0 */
/* Connection ids: unique, never reused, found while the stream lives and
 * not after; the tables stay right through growth and deletions (their
 * backward shifts); taken from the wall clock, so that a later run of the
 * node never gives an id of this one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/conn.h"
#include "core/stream.h"
#include "lib/clock.h"

#define N 5000

/* An id is the microsecond it was given at (a run started later gives
 * larger ones), or one past the last when ids come faster; below 2^53.
 * First: the other test gives ids faster than the clock. */
static void ids_from_the_wall_clock(void **state)
{
    (void)state;
    struct stream s[3];
    uint64_t before = clock_realtime_us();
    uint64_t a = conn_of(&s[0])->id, b = conn_of(&s[1])->id;
    uint64_t after = clock_realtime_us();
    assert_true(a >= before && a <= after);
    assert_true(b > a && b <= after + 1);
    assert_true(b < 1ull << 53);
    /* One given after a pause is the clock again, not last + 1. */
    while (clock_realtime_us() < after + 1000)
        ;
    uint64_t c = conn_of(&s[2])->id;
    assert_true(c >= after + 1000);
    for (int i = 0; i < 3; i++)
        conn_forget(&s[i]);
    conn_free();
}

static void ids_found_until_forgotten(void **state)
{
    (void)state;
    struct stream *s = calloc(N, sizeof *s);
    uint64_t *ids = calloc(N, sizeof *ids);
    assert_non_null(s);
    assert_non_null(ids);
    for (int i = 0; i < N; i++) {
        struct conn *c = conn_of(&s[i]);
        assert_non_null(c);
        ids[i] = c->id;
        assert_true(i == 0 || ids[i] > ids[i - 1]);
        c->tokens = (uint32_t)i;
    }
    /* The same entry again, with what its owner kept. */
    for (int i = 0; i < N; i++) {
        assert_true(conn_of(&s[i])->id == ids[i]);
        assert_int_equal(conn_of(&s[i])->tokens, (uint32_t)i);
        assert_ptr_equal(conn_find(ids[i]), &s[i]);
    }
    /* Every third forgotten: gone; the others still found. */
    for (int i = 0; i < N; i += 3)
        conn_forget(&s[i]);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            assert_null(conn_find(ids[i]));
        else
            assert_ptr_equal(conn_find(ids[i]), &s[i]);
    }
    /* A stream at a forgotten address gets a new id, never an old one. */
    uint64_t again = conn_of(&s[0])->id;
    assert_true(again > ids[N - 1]);
    assert_null(conn_find(ids[0]));
    assert_ptr_equal(conn_find(again), &s[0]);
    assert_null(conn_find(0));
    assert_null(conn_find(again + 1));
    for (int i = 0; i < N; i++)
        conn_forget(&s[i]);
    for (int i = 0; i < N; i++)
        assert_null(conn_find(ids[i]));
    conn_forget(&s[1]);             /* twice: nothing */
    conn_free();
    free(s);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_from_the_wall_clock),
        cmocka_unit_test(ids_found_until_forgotten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
