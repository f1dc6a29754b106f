/* SPDX-License-Identifier: Apache-2.0 */
/* erl_park: records come out in the order parked, byte for byte, per
 * link; the total over every link stops at ERL_PARK_MAX (a push past it
 * keeps nothing) and comes back down as records are taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "erl/erl_park.h"

static void take_expect(struct erl_park *p, uint32_t want, size_t size)
{
    struct erl_parked *r = erl_park_take(p);
    assert_non_null(r);
    assert_int_equal(r->size, size);
    uint32_t got;
    memcpy(&got, r->rec, sizeof got);
    assert_int_equal(got, want);
    erl_park_free(r);
}

static void fifo_per_link_in_order(void **state)
{
    (void)state;
    struct erl_park a = {0}, b = {0};
    assert_true(erl_park_empty(&a));
    assert_null(erl_park_take(&a));
    unsigned char rec[100] = {0};
    for (uint32_t i = 1; i <= 10; i++) {
        memcpy(rec, &i, sizeof i);
        assert_int_equal(erl_park_push(i % 2 ? &a : &b, rec, 4 + i), 0);
    }
    assert_false(erl_park_empty(&a));
    assert_int_equal(erl_park_total(), 10 * sizeof(struct erl_parked) + 10 * 4 + 55);
    for (uint32_t i = 1; i <= 9; i += 2)
        take_expect(&a, i, 4 + i);
    assert_true(erl_park_empty(&a));
    assert_null(erl_park_head(&a));
    /* a emptied and used again: its tail was reset */
    uint32_t k = 99;
    assert_int_equal(erl_park_push(&a, &k, sizeof k), 0);
    take_expect(&a, 99, sizeof k);
    for (uint32_t i = 2; i <= 10; i += 2)
        take_expect(&b, i, 4 + i);
    assert_int_equal(erl_park_total(), 0);
}

static void the_cap_is_over_every_link(void **state)
{
    (void)state;
    struct erl_park a = {0}, b = {0};
    static unsigned char rec[4096];
    const size_t cost = sizeof(struct erl_parked) + sizeof rec;
    size_t n = 0;
    while (erl_park_push(n % 2 ? &b : &a, rec, sizeof rec) == 0)
        n++;
    assert_int_equal(n, ERL_PARK_MAX / cost);
    assert_true(erl_park_total() <= ERL_PARK_MAX);
    assert_true(erl_park_total() + cost > ERL_PARK_MAX);
    /* a smaller one may still fit; one as large as the cap never */
    assert_int_equal(erl_park_push(&a, rec, ERL_PARK_MAX + 1), -1);
    /* room again once one is taken, for either link */
    erl_park_free(erl_park_take(&a));
    assert_int_equal(erl_park_push(&b, rec, sizeof rec), 0);
    assert_int_equal(erl_park_push(&b, rec, sizeof rec), -1);
    erl_park_clear(&a);
    erl_park_clear(&b);
    assert_true(erl_park_empty(&a) && erl_park_empty(&b));
    assert_int_equal(erl_park_total(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_per_link_in_order),
        cmocka_unit_test(the_cap_is_over_every_link),
    };
    return cmocka_run_group_tests_name("erl_park", tests, NULL, NULL);
}
