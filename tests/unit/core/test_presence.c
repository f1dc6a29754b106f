/* SPDX-License-Identifier: Apache-2.0 */
/* Uid presence: a first up is queued at once (a few a window, none in a
 * storm), ahead of whatever waits in the window; the rest nets out per
 * window against what the masters were told; a client message of a uid
 * not told yet sends its up first. A model master applies every record,
 * and after each window must hold what the uid table holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/outbound.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/uidtable.h"
#include "lib/handoff.h"
#include "obs/stats.h"

#define USERS 1000

static struct event_base *base;
static struct handoff *ring;
static struct stream streams[USERS + 1];   /* one per uid, the test's only */
static uint8_t master[USERS + 1];          /* the model master's view */
static uint32_t records, ups, downs;       /* taken since the last take() */
static uint32_t order[64];                 /* uid and +-: +uid up, the first 64 */

static int apply(void *body, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    const struct out_rec *r = body;
    assert_int_equal(r->kind, OUT_PRESENCE);
    const uint32_t *uids = (const uint32_t *)(r + 1);
    if (r->op == PRESENCE_SNAPSHOT)
        memset(master, 0, sizeof master);
    for (uint32_t i = 0; i < r->count; i++) {
        master[uids[i]] = r->op != PRESENCE_DOWN;
        if (ups + downs < 64)
            order[ups + downs] = r->op == PRESENCE_DOWN ? uids[i] | 1u << 31 : uids[i];
        r->op == PRESENCE_DOWN ? downs++ : ups++;
    }
    records++;
    return 0;
}

/* What the loop queued since the last take, applied to the master. */
static void take(void)
{
    records = ups = downs = 0;
    while (handoff_drain(ring, 100000, apply, NULL, NULL) > 0)
        ;
}

/* The window ends (the loop waits for its timer, 800 ms at most), then
 * what it sent is taken. */
static void window_ends(void)
{
    event_base_loop(base, EVLOOP_ONCE);
    take();
}

static void assert_master_in_sync(void)
{
    for (uint32_t u = 1; u <= USERS; u++)
        assert_int_equal(master[u], uidtable_first(u) != NULL);
}

static void up(uint32_t uid) { uidtable_add(&streams[uid]); }
static void down(uint32_t uid) { uidtable_remove(&streams[uid]); }

/* Uids 1..n come online at once; what was told at once is taken. */
static void storm_up(uint32_t n)
{
    for (uint32_t u = 1; u <= n; u++)
        up(u);
    take();
}

static int setup(void **state)
{
    (void)state;
    memset(&loop_stats, 0, sizeof loop_stats);
    memset(master, 0, sizeof master);
    for (uint32_t u = 0; u <= USERS; u++)
        streams[u] = (struct stream){.uid = u};
    base = event_base_new();
    ring = handoff_new(8u << 20);
    if (!base || !ring || uidtable_init(USERS, presence_changed) != 0 ||
        presence_init(base, 1, USERS) != 0)
        return -1;
    outbound_init(ring);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    presence_free();
    uidtable_free();
    handoff_free(ring);
    event_base_free(base);
    return 0;
}

static void first_up_goes_at_once(void **state)
{
    (void)state;
    up(5);
    take();                                /* no window passed */
    assert_int_equal(ups, 1);
    assert_int_equal(master[5], 1);
    window_ends();
    assert_int_equal(records, 0);          /* told already: nothing more */
    assert_master_in_sync();
}

/* A uid that flaps within a window is not mentioned; one that goes is,
 * and before the first up told at once after it. */
static void flaps_net_out_and_order_is_kept(void **state)
{
    (void)state;
    up(1);
    up(2);
    window_ends();
    take();
    down(1);
    up(1);                                 /* told online: waits, nets out */
    down(2);
    take();
    assert_int_equal(records, 0);
    up(3);                                 /* at once, after the down of 2 */
    take();
    assert_int_equal(downs, 1);
    assert_int_equal(ups, 1);
    assert_int_equal(order[0], 2u | 1u << 31);
    assert_int_equal(order[1], 3);
    window_ends();
    assert_int_equal(records, 0);
    assert_master_in_sync();
    /* up at once then down in one window: the down goes with the window */
    up(4);
    down(4);
    take();
    assert_int_equal(master[4], 1);
    window_ends();
    assert_int_equal(downs, 1);
    assert_master_in_sync();
}

/* A storm: a few ups at once, the rest with the window in a message or
 * two; a storm's next window is longer and tells nothing at once. */
static void a_storm_costs_a_few_messages(void **state)
{
    (void)state;
    storm_up(500);
    uint32_t at_once = records;
    assert_true(at_once > 0 && at_once <= 16);
    window_ends();
    assert_int_equal(records, 1);          /* the other ups, one message */
    assert_int_equal(ups, 500 - at_once);
    assert_master_in_sync();
    up(600);                               /* after a busy window: waits */
    take();
    assert_int_equal(records, 0);
    window_ends();
    assert_int_equal(ups, 1);
    up(601);                               /* that window was quiet: at once */
    take();
    assert_int_equal(ups, 1);
    for (uint32_t u = 1; u <= 500; u++)
        down(u);
    window_ends();
    assert_int_equal(records, 1);
    assert_int_equal(downs, 500);
    assert_master_in_sync();
}

/* In a storm a uid's up waits, but not behind its own client message. */
static void a_client_message_sends_its_up_first(void **state)
{
    (void)state;
    storm_up(100);
    uint32_t waiting = 100 - ups;
    assert_true(waiting > 0);
    presence_known(100);                  /* the last: it waits */
    take();
    assert_int_equal(master[100], 1);
    assert_int_equal(ups, waiting);       /* those before it too, once */
    presence_known(100);                  /* told: nothing */
    presence_known(900);                  /* offline: nothing */
    take();
    assert_int_equal(records, 0);
    window_ends();
    assert_int_equal(ups, 0);
    assert_master_in_sync();
}

/* A snapshot after the window's changes leaves the master right, and the
 * next changes are told against it. */
static void snapshot_then_changes(void **state)
{
    (void)state;
    up(7);
    up(8);
    down(7);
    assert_int_equal(presence_snapshot(), 1);
    take();
    assert_master_in_sync();
    down(8);
    up(9);
    window_ends();
    assert_master_in_sync();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(first_up_goes_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(flaps_net_out_and_order_is_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(a_storm_costs_a_few_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(a_client_message_sends_its_up_first, setup, teardown),
        cmocka_unit_test_setup_teardown(snapshot_then_changes, setup, teardown),
    };
    return cmocka_run_group_tests_name("presence", tests, NULL, NULL);
}
