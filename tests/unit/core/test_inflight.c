/* SPDX-License-Identifier: Apache-2.0 */
/* inflight: past the bound the largest holders are shed, largest first,
 * until the rest fit; the holder that asked is told when it is one of
 * them; a doomed holder's bytes no longer count against the bound until
 * it drops them; the table stays right as holders come and go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/inflight.h"
#include "obs/stats.h"

#define N 8

static struct inflight h[N];
static int shed_order[N * 4], nshed;
static int drop_when_shed;          /* ws-like: the shed holder drops at once */

static void on_shed(void *owner)
{
    int i = (int)(intptr_t)owner;
    shed_order[nshed++] = i;
    if (drop_when_shed)
        inflight_drop(&h[i]);
}

static int setup(void **state)
{
    (void)state;
    memset(h, 0, sizeof h);
    nshed = 0;
    drop_when_shed = 1;
    inflight_configure(1000);
    inflight_on_shed(INFLIGHT_WS, on_shed);
    inflight_on_shed(INFLIGHT_HTTP, on_shed);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    inflight_free();
    return 0;
}

static int add(int i, uint32_t n, enum inflight_kind kind)
{
    return inflight_add(&h[i], (void *)(intptr_t)i, kind, n);
}

static void largest_first_until_it_fits(void **state)
{
    (void)state;
    assert_int_equal(add(0, 300, INFLIGHT_WS), 0);
    assert_int_equal(add(1, 500, INFLIGHT_WS), 0);
    assert_int_equal(add(2, 100, INFLIGHT_WS), 0);
    assert_int_equal(loop_stats.input_bytes, 900);
    /* 1,150: 1 (500) goes and the rest (650) fits */
    assert_int_equal(add(3, 250, INFLIGHT_WS), 0);
    assert_int_equal(nshed, 1);
    assert_int_equal(shed_order[0], 1);
    assert_int_equal(inflight_bytes(&h[1]), 0);
    assert_int_equal(loop_stats.input_bytes, 650);
    /* 2 grows to be the largest: it is told, the others stay */
    assert_int_equal(add(2, 400, INFLIGHT_WS), -1);
    assert_int_equal(nshed, 1);
    assert_int_equal(inflight_bytes(&h[0]), 300);
    assert_int_equal(inflight_bytes(&h[3]), 250);
    inflight_drop(&h[2]);
    assert_int_equal(loop_stats.input_bytes, 550);
    /* the table after holders left from its middle and its end */
    inflight_drop(&h[0]);
    assert_int_equal(inflight_bytes(&h[3]), 250);
    assert_int_equal(add(4, 10, INFLIGHT_WS), 0);
    assert_int_equal(inflight_bytes(&h[4]), 10);
    inflight_drop(&h[3]);
    inflight_drop(&h[4]);
    assert_int_equal(loop_stats.input_bytes, 0);
    inflight_drop(&h[4]);               /* dropping twice is harmless */
}

static void doomed_wait_to_be_taken(void **state)
{
    (void)state;
    drop_when_shed = 0;                 /* http-like: freed later */
    assert_int_equal(add(0, 600, INFLIGHT_HTTP), 0);
    assert_int_equal(add(1, 300, INFLIGHT_HTTP), 0);
    assert_int_equal(add(2, 300, INFLIGHT_WS), 0);
    assert_int_equal(nshed, 1);
    assert_int_equal(shed_order[0], 0);
    /* 0's bytes are still held but count no more: 1 and 2 fit */
    assert_int_equal(inflight_bytes(&h[0]), 600);
    assert_int_equal(add(1, 100, INFLIGHT_HTTP), 0);
    assert_int_equal(nshed, 1);
    /* what a doomed holder adds is refused, and doomed too */
    assert_int_equal(add(0, 50, INFLIGHT_HTTP), -1);
    assert_int_equal(nshed, 1);
    assert_ptr_equal(inflight_take_doomed(INFLIGHT_HTTP), (void *)(intptr_t)0);
    assert_null(inflight_take_doomed(INFLIGHT_HTTP));
    assert_int_equal(inflight_bytes(&h[0]), 0);
    assert_int_equal(loop_stats.input_bytes, 700);
    /* a holder that asks and is the largest is doomed, not shed by callback */
    assert_int_equal(add(1, 400, INFLIGHT_HTTP), -1);
    assert_int_equal(nshed, 1);
    assert_ptr_equal(inflight_take_doomed(INFLIGHT_HTTP), (void *)(intptr_t)1);
    inflight_drop(&h[2]);
    assert_int_equal(loop_stats.input_bytes, 0);
}

static void no_bound_sheds_nothing(void **state)
{
    (void)state;
    inflight_configure(0);
    for (int i = 0; i < N; i++)
        assert_int_equal(add(i, 1u << 30, INFLIGHT_WS), 0);
    assert_int_equal(nshed, 0);
    for (int i = 0; i < N; i++)
        inflight_drop(&h[i]);
    assert_int_equal(loop_stats.input_bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(largest_first_until_it_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(doomed_wait_to_be_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(no_bound_sheds_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
