/* SPDX-License-Identifier: Apache-2.0 */
/* The hand-off ring: order, wrap-around, backpressure, a real second thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "lib/handoff.h"

struct seen {
    uint32_t next;     /* sequence number expected next */
    int errors;
};

static int check_seq(void *body, size_t size, void *ctx)
{
    struct seen *s = ctx;
    uint32_t seq;
    memcpy(&seq, body, sizeof seq);
    /* The body is seq repeated to fill size bytes: every byte checked. */
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t v;
        memcpy(&v, (char *)body + i, 4);
        if (v != seq)
            s->errors++;
    }
    if (seq != s->next)
        s->errors++;
    s->next++;
    return 0;
}

static int put(struct handoff *h, uint32_t seq, size_t size, int timeout_ms)
{
    char *p = handoff_reserve(h, size, timeout_ms);
    if (!p)
        return -1;
    for (size_t i = 0; i + 4 <= size; i += 4)
        memcpy(p + i, &seq, 4);
    handoff_commit(h);
    return 0;
}

static int readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void records_come_out_in_order_across_wraps(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(4096);
    struct seen seen = {0, 0};
    uint32_t seq = 0;
    /* Sizes that do not divide the ring, so records wrap at every offset. */
    for (int round = 0; round < 500; round++) {
        for (int k = 0; k < 3; k++, seq++)
            assert_int_equal(put(h, seq, 4 + (size_t)((seq * 52) % 900), 0), 0);
        while (handoff_drain(h, 2, check_seq, NULL, &seen) > 0)
            ;
    }
    assert_int_equal(seen.next, seq);
    assert_int_equal(seen.errors, 0);
    handoff_free(h);
}

/* Records are counted as committed and as applied: a record is applied
 * once its drain returned past it, not while apply runs. */
static uint64_t seen_consumed;

static int note_consumed(void *body, size_t size, void *ctx)
{
    (void)body;
    (void)size;
    seen_consumed = handoff_consumed(ctx);
    return 0;
}

static void records_are_counted_committed_and_applied(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(4096);
    for (uint32_t seq = 0; seq < 5; seq++)
        assert_int_equal(put(h, seq, 100, 0), 0);
    assert_int_equal(handoff_committed(h), 5);
    assert_int_equal(handoff_consumed(h), 0);
    assert_int_equal(handoff_drain(h, 2, note_consumed, NULL, h), 2);
    assert_int_equal(seen_consumed, 0);
    assert_int_equal(handoff_consumed(h), 2);
    while (handoff_drain(h, 10, note_consumed, NULL, h) > 0)
        ;
    assert_int_equal(seen_consumed, 2);
    assert_int_equal(handoff_consumed(h), 5);
    handoff_free(h);
}

static void a_full_ring_times_out_and_frees_up_when_drained(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(4096);
    struct seen seen = {0, 0};
    uint32_t seq = 0;
    while (put(h, seq, 1000, 0) == 0)
        seq++;
    assert_true(seq >= 3 && seq <= 4);
    assert_null(handoff_reserve(h, 1000, 20));            /* bounded wait */
    assert_int_equal(handoff_drain(h, 1, check_seq, NULL, &seen), 1);
    assert_int_equal(put(h, seq++, 1000, 0), 0);
    while (handoff_drain(h, 100, check_seq, NULL, &seen) > 0)
        ;
    assert_int_equal(seen.next, seq);
    assert_int_equal(seen.errors, 0);
    assert_null(handoff_reserve(h, handoff_max_record(h) + 1, 0));
    handoff_free(h);
}

static void the_eventfd_wakes_an_idle_consumer_only(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(4096);
    struct seen seen = {0, 0};
    int fd = handoff_wakeup_fd(h);
    assert_false(readable(fd));
    put(h, 0, 8, 0);
    assert_true(readable(fd));                 /* idle at start: woken */
    handoff_clear_wakeup(h);
    put(h, 1, 8, 0);
    assert_false(readable(fd));                /* not idle yet: no syscall spent */
    while (handoff_drain(h, 10, check_seq, NULL, &seen) > 0)
        ;
    put(h, 2, 8, 0);
    assert_true(readable(fd));                 /* found empty: woken again */
    handoff_free(h);
}

#define THREAD_RECORDS 200000

static void *producer(void *arg)
{
    struct handoff *h = arg;
    for (uint32_t seq = 0; seq < THREAD_RECORDS; seq++)
        while (put(h, seq, 4 + (seq % 301) * 4, 100) != 0)
            ;
    return NULL;
}

static void a_producer_thread_and_a_consumer_agree(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(16384);   /* small: the producer often waits */
    struct seen seen = {0, 0};
    pthread_t t;
    pthread_create(&t, NULL, producer, h);
    int fd = handoff_wakeup_fd(h);
    while (seen.next < THREAD_RECORDS) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_true(poll(&p, 1, 5000) == 1);    /* a lost wakeup would hang here */
        handoff_clear_wakeup(h);
        while (handoff_drain(h, 64, check_seq, NULL, &seen) > 0)
            ;
    }
    pthread_join(t, NULL);
    assert_int_equal(seen.errors, 0);
    handoff_free(h);
}

static void close_releases_a_waiting_producer(void **state)
{
    (void)state;
    struct handoff *h = handoff_new(4096);
    while (put(h, 0, 1000, 0) == 0)
        ;
    handoff_close(h);
    assert_null(handoff_reserve(h, 8, 10000));   /* returns at once */
    handoff_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_come_out_in_order_across_wraps),
        cmocka_unit_test(a_full_ring_times_out_and_frees_up_when_drained),
        cmocka_unit_test(records_are_counted_committed_and_applied),
        cmocka_unit_test(the_eventfd_wakes_an_idle_consumer_only),
        cmocka_unit_test(a_producer_thread_and_a_consumer_agree),
        cmocka_unit_test(close_releases_a_waiting_producer),
    };
    return cmocka_run_group_tests_name("handoff", tests, NULL, NULL);
}
