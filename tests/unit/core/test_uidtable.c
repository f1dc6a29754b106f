/* SPDX-License-Identifier: Apache-2.0 */
/* The uid table: lists per uid, counts, oldest, presence transitions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "obs/stats.h"
#include "core/stream.h"
#include "core/uidtable.h"

static int ups, downs;
static uint32_t last_uid;

static void on_presence(uint32_t uid, int online)
{
    last_uid = uid;
    if (online)
        ups++;
    else
        downs++;
}

static int setup(void **state)
{
    (void)state;
    ups = downs = 0;
    memset(&loop_stats, 0, sizeof loop_stats);
    return uidtable_init(100, on_presence);
}

static int teardown(void **state)
{
    (void)state;
    uidtable_free();
    return 0;
}

static void streams_of_a_uid_are_listed_newest_first(void **state)
{
    (void)state;
    struct stream a = {.uid = 7}, b = {.uid = 7}, c = {.uid = 7}, other = {.uid = 8};
    uidtable_add(&a);
    uidtable_add(&b);
    uidtable_add(&other);
    uidtable_add(&c);
    assert_ptr_equal(uidtable_first(7), &c);
    assert_ptr_equal(c.next, &b);
    assert_ptr_equal(b.next, &a);
    assert_int_equal(uidtable_count(7), 3);
    assert_int_equal(uidtable_count(8), 1);
    assert_int_equal(uidtable_count(9), 0);
    assert_ptr_equal(uidtable_oldest(7), &a);
    assert_int_equal(uidtable_next_online(0), 7);
    assert_int_equal(uidtable_next_online(7), 8);
    assert_int_equal(uidtable_next_online(8), 0);
    assert_int_equal(loop_stats.uids_online, 2);
}

static void removal_from_any_position(void **state)
{
    (void)state;
    struct stream a = {.uid = 3}, b = {.uid = 3}, c = {.uid = 3};
    uidtable_add(&a);
    uidtable_add(&b);
    uidtable_add(&c);
    uidtable_remove(&b);                         /* middle */
    assert_ptr_equal(uidtable_first(3), &c);
    assert_ptr_equal(c.next, &a);
    uidtable_remove(&c);                         /* head */
    assert_ptr_equal(uidtable_first(3), &a);
    uidtable_remove(&a);                         /* last */
    assert_null(uidtable_first(3));
    uidtable_remove(&a);                         /* twice: harmless */
    assert_int_equal(loop_stats.uids_online, 0);
}

static void online_walk_visits_exactly_the_online_uids(void **state)
{
    (void)state;
    static struct stream s[7];
    const uint32_t uids[] = {1, 63, 64, 65, 99, 100, 100};
    for (int i = 0; i < 7; i++) {
        s[i] = (struct stream){.uid = uids[i]};
        uidtable_add(&s[i]);
    }
    uidtable_remove(&s[1]);                          /* 63 goes offline */
    uint32_t seen[8], n = 0;
    for (uint32_t u = uidtable_next_online(0); u; u = uidtable_next_online(u))
        seen[n++] = u;
    assert_int_equal(n, 5);
    const uint32_t want[] = {1, 64, 65, 99, 100};
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(seen[i], want[i]);
    assert_int_equal(uidtable_next_online(100), 0);  /* the last uid of the table */
}

static void presence_fires_on_first_and_last_stream_only(void **state)
{
    (void)state;
    struct stream a = {.uid = 100}, b = {.uid = 100};
    uidtable_add(&a);
    assert_int_equal(ups, 1);
    assert_int_equal(last_uid, 100);
    uidtable_add(&b);
    assert_int_equal(ups, 1);
    uidtable_remove(&a);
    assert_int_equal(downs, 0);
    uidtable_remove(&b);
    assert_int_equal(downs, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(streams_of_a_uid_are_listed_newest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(removal_from_any_position, setup, teardown),
        cmocka_unit_test_setup_teardown(online_walk_visits_exactly_the_online_uids, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(presence_fires_on_first_and_last_stream_only, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("uidtable", tests, NULL, NULL);
}
