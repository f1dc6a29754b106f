/* SPDX-License-Identifier: Apache-2.0 */
/* erl_link_tick_all: a tick the socket takes only in part must be
 * completed, or the link shut down and marked broken; never half a tick
 * followed by other bytes. The socket's short count is made by the send()
 * below, which the link table calls instead of libc's (this binary's
 * definition wins at link time); the bytes go through a real socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "erl/erl_link.h"
#include "obs/stats.h"

static size_t take_next;    /* the next send takes at most this many bytes (0: all) */
static int pretend;         /* ...and reports them taken without writing them */

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    if (take_next > 0 && len > take_next) {
        len = take_next;
        take_next = 0;
        if (pretend)
            return (ssize_t)len;
    }
    return sendto(fd, buf, len, flags, NULL, 0);
}

static int pair[2];

static int setup(void **state)
{
    (void)state;
    ei_init();
    take_next = 0;
    pretend = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    assert_int_equal(erl_link_add(pair[0], "peer@localhost", 0), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    erl_link_close_all();     /* not ei's sockets: ei leaves the fds to us */
    close(pair[0]);
    close(pair[1]);
    return 0;
}

/* Reads what the peer has, up to max bytes. */
static ssize_t peer_read(char *buf, size_t max)
{
    ssize_t n = recv(pair[1], buf, max, MSG_DONTWAIT);
    return n < 0 && errno == EAGAIN ? 0 : n;
}

static void a_partial_tick_is_completed(void **state)
{
    (void)state;
    char buf[16];
    take_next = 1;
    erl_link_tick_all();
    assert_int_equal(peer_read(buf, sizeof buf), 4);
    assert_memory_equal(buf, "\0\0\0\0", 4);
    assert_false(erl_link_at(0)->broken);

    erl_link_tick_all();                 /* the next tick is whole too */
    assert_int_equal(peer_read(buf, sizeof buf), 4);
}

static void a_partial_tick_that_cannot_be_completed_breaks_the_link(void **state)
{
    (void)state;
    /* Fill the send buffer for real: the rest of the tick finds no room. */
    static char junk[4096];
    size_t filled = 0;
    ssize_t n;
    while ((n = sendto(pair[0], junk, sizeof junk, MSG_DONTWAIT, NULL, 0)) > 0)
        filled += (size_t)n;
    assert_true(filled > 0);

    take_next = 2;
    pretend = 1;
    erl_link_tick_all();
    assert_true(erl_link_at(0)->broken);

    /* Shut down: nothing follows what was queued; the peer sees the end. */
    static char back[1 << 16];
    size_t got = 0;
    while ((n = recv(pair[1], back, sizeof back, MSG_DONTWAIT)) > 0)
        got += (size_t)n;
    assert_int_equal(n, 0);                  /* EOF, not EAGAIN */
    assert_int_equal(got, filled);
}

/* The same pair as a master's link (nothing read from it: not ei's socket). */
static int setup_master(void **state)
{
    (void)state;
    ei_init();
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    assert_int_equal(erl_link_add(pair[0], "master@localhost", 1), 0);
    return 0;
}

static void a_silent_master_is_judged_dead_at_the_last_judgement(void **state)
{
    (void)state;
    uint64_t before = atomic_load(&cnode_stats.erl_silent_masters);
    for (int i = 1; i < ERL_LINK_QUIET_JUDGEMENTS; i++) {
        assert_int_equal(erl_link_judge_masters(), 0);
        assert_false(erl_link_at(0)->broken);
    }
    assert_int_equal(erl_link_judge_masters(), 1);
    assert_true(erl_link_at(0)->broken);
    assert_true(erl_link_at(0)->silent);
    assert_int_equal(atomic_load(&cnode_stats.erl_silent_masters), before + 1);
    assert_int_equal(erl_link_judge_masters(), 0);      /* judged once */
}

static void bytes_unread_in_the_kernel_keep_a_master_alive(void **state)
{
    (void)state;
    for (int i = 1; i < ERL_LINK_QUIET_JUDGEMENTS; i++)
        erl_link_judge_masters();
    assert_int_equal(write(pair[1], "\0\0\0\0", 4), 4);   /* a tick, not read yet */
    assert_int_equal(erl_link_judge_masters(), 0);
    assert_false(erl_link_at(0)->broken);
    /* Still unread: it spoke, but that was then; silence counts anew. */
    for (int i = 1; i < ERL_LINK_QUIET_JUDGEMENTS; i++)
        assert_int_equal(erl_link_judge_masters(), 0);
}

static void a_node_that_is_not_a_master_is_not_judged(void **state)
{
    (void)state;
    for (int i = 0; i < 3 * ERL_LINK_QUIET_JUDGEMENTS; i++)
        assert_int_equal(erl_link_judge_masters(), 0);
    assert_false(erl_link_at(0)->broken);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_partial_tick_is_completed, setup, teardown),
        cmocka_unit_test_setup_teardown(a_partial_tick_that_cannot_be_completed_breaks_the_link,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_silent_master_is_judged_dead_at_the_last_judgement,
                                        setup_master, teardown),
        cmocka_unit_test_setup_teardown(bytes_unread_in_the_kernel_keep_a_master_alive,
                                        setup_master, teardown),
        cmocka_unit_test_setup_teardown(a_node_that_is_not_a_master_is_not_judged, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("erl_link", tests, NULL, NULL);
}
