/* SPDX-License-Identifier: Apache-2.0 */
/* The inbox window of a master link (erl_send.c): past ERL_SEND_IN_WINDOW
 * unacknowledged client messages the rest are parked; a window full with
 * no acknowledgement for ERL_SEND_IN_STUCK_MS shows in in_windows_stuck;
 * a new inbox's {httpdcnode_in_reset, Name} empties the window (what it
 * held counted in in_reset_unacked) and what was parked goes, in order.
 * Only a reset naming our --inbox counts (erl_inbound.c). The link is a
 * real socketpair; what the C-node sends is read from its other end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cmd.h"
#include "core/outbound.h"
#include "erl/erl_inbound.h"
#include "erl/erl_link.h"
#include "erl/erl_send.h"
#include "lib/handoff.h"
#include "obs/stats.h"
#include "erl/erl_config.h"

static int pair[2];
static ei_cnode ec;
static struct handoff *outbox;
static struct erl_config opts;
static char got[1 << 20];     /* what the peer read, all of it */
static size_t got_len, seen;  /* bytes read; how far expect_in looked */

static int setup(void **state)
{
    (void)state;
    ei_init();
    assert_true(ei_connect_init(&ec, "unit", "cookie", 1) >= 0);
    outbox = handoff_new(1 << 20);
    assert_non_null(outbox);
    outbound_init(outbox);
    opts = (struct erl_config){.name = "unit@localhost", .presence = "", .inbox = "inbox"};
    erl_send_init(&ec, outbox, &opts);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    assert_int_equal(erl_link_add(pair[0], "m@localhost", 1), 0);
    memset(&cnode_stats, 0, sizeof cnode_stats);
    got_len = seen = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    erl_link_close_all();
    erl_send_free();
    close(pair[0]);
    close(pair[1]);
    handoff_free(outbox);
    return 0;
}

/* Client messages "m1".."mN" (from first) of uid 7 to the outbox, sent. */
static void client_messages(int first, int n)
{
    char data[16];
    for (int i = first; i < first + n; i++) {
        int len = snprintf(data, sizeof data, "m%d.", i);
        assert_int_equal(outbound_in(7, 1, data, (uint32_t)len, 0), 0);
    }
    erl_send_drain();
}

/* Distribution packets the peer has now (ticks apart). */
static int packets(void)
{
    ssize_t n;
    while ((n = recv(pair[1], got + got_len, sizeof got - got_len, MSG_DONTWAIT)) > 0)
        got_len += (size_t)n;
    assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    int count = 0;
    for (size_t at = 0; at + 4 <= got_len;) {
        uint32_t len = (uint32_t)(unsigned char)got[at] << 24 |
                       (uint32_t)(unsigned char)got[at + 1] << 16 |
                       (uint32_t)(unsigned char)got[at + 2] << 8 | (unsigned char)got[at + 3];
        count += len > 0;
        at += 4 + len;
    }
    return count;
}

/* Messages "mFIRST." .. "mLAST." came, in this order, after those seen before. */
static void expect_in(int first, int last)
{
    char want[16];
    for (int i = first; i <= last; i++) {
        int len = snprintf(want, sizeof want, "m%d.", i);
        const char *p = memmem(got + seen, got_len - seen, want, (size_t)len);
        if (!p)
            fail_msg("client message %s not sent (or out of order)", want);
        seen = (size_t)(p - got) + (size_t)len;
    }
}

static uint64_t stat(atomic_uint_fast64_t *c) { return atomic_load(c); }

static void a_reset_empties_the_window_and_sends_what_was_parked(void **state)
{
    (void)state;
    struct erl_link *l = erl_link_at(0);
    client_messages(1, 300);
    assert_int_equal(packets(), ERL_SEND_IN_WINDOW);
    expect_in(1, ERL_SEND_IN_WINDOW);
    assert_int_equal(l->in_unacked, ERL_SEND_IN_WINDOW);
    assert_false(erl_park_empty(&l->park));

    /* Full, but not for long: not stuck. Then as if 5 s had passed. */
    erl_send_check_windows();
    assert_int_equal(stat(&cnode_stats.in_windows_stuck), 0);
    l->in_full_ms -= ERL_SEND_IN_STUCK_MS;
    erl_send_check_windows();
    assert_int_equal(stat(&cnode_stats.in_windows_stuck), 1);

    /* The inbox died with them; the new one announces itself. */
    erl_send_in_reset(l);
    assert_int_equal(stat(&cnode_stats.in_resets), 1);
    assert_int_equal(stat(&cnode_stats.in_reset_unacked), ERL_SEND_IN_WINDOW);
    assert_int_equal(packets(), 300);
    expect_in(ERL_SEND_IN_WINDOW + 1, 300);
    assert_true(erl_park_empty(&l->park));
    assert_int_equal(l->in_unacked, 300 - ERL_SEND_IN_WINDOW);
    erl_send_check_windows();
    assert_int_equal(stat(&cnode_stats.in_windows_stuck), 0);

    /* Acks for more than the window holds (some reached the new inbox
     * before its announcement): never below empty. */
    erl_send_in_acked(l, 100);
    assert_int_equal(l->in_unacked, 0);
    client_messages(301, 10);
    assert_int_equal(packets(), 310);
    expect_in(301, 310);
    assert_int_equal(stat(&cnode_stats.in_park_dropped), 0);
}

/* A window full again after an ack is not stuck: the ack restarts the time. */
static void an_ack_restarts_the_stuck_time(void **state)
{
    (void)state;
    struct erl_link *l = erl_link_at(0);
    client_messages(1, ERL_SEND_IN_WINDOW + 10);
    l->in_full_ms -= ERL_SEND_IN_STUCK_MS;
    erl_send_in_acked(l, 5);                 /* 5 of the parked go: full again */
    assert_int_equal(l->in_unacked, ERL_SEND_IN_WINDOW);
    erl_send_check_windows();
    assert_int_equal(stat(&cnode_stats.in_windows_stuck), 0);
    /* A reset with nothing outstanding counts the reset only. */
    erl_send_in_acked(l, ERL_SEND_IN_WINDOW);
    assert_int_equal(l->in_unacked, 5);
    erl_send_in_acked(l, 5);
    erl_send_in_reset(l);
    assert_int_equal(stat(&cnode_stats.in_resets), 1);
    assert_int_equal(stat(&cnode_stats.in_reset_unacked), 0);
    assert_int_equal(packets(), ERL_SEND_IN_WINDOW + 10);
}

/* {httpdcnode_in_reset, Name} is ours only when Name is our --inbox. */
static void only_our_inbox_resets(void **state)
{
    (void)state;
    struct handoff *ring = handoff_new(1 << 16);
    erl_inbound_init(ring, 1000, 1024, "inbox");
    ei_x_buff x;
    const char *names[] = {"inbox", "other"};
    int want[] = {CMD_IN_RESET, 0};
    for (int i = 0; i < 2; i++) {
        ei_x_new_with_version(&x);
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_atom(&x, "httpdcnode_in_reset");
        ei_x_encode_atom(&x, names[i]);
        uint32_t acked = 0;
        assert_int_equal(erl_inbound_message(x.buff, x.index, "m@h", &acked), want[i]);
        ei_x_free(&x);
    }
    assert_int_equal(stat(&cnode_stats.bad_terms), 0);
    handoff_free(ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_reset_empties_the_window_and_sends_what_was_parked,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_ack_restarts_the_stuck_time, setup, teardown),
        cmocka_unit_test_setup_teardown(only_our_inbox_resets, setup, teardown),
    };
    return cmocka_run_group_tests_name("erl_send", tests, NULL, NULL);
}
