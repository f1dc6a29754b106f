/* SPDX-License-Identifier: Apache-2.0 */
/* The topic index (core/topic.c): both sides agree after any sequence of
 * joins and leaves, the bounds refuse what they should, a topic no stream
 * holds is given up (its index taken again, a new epoch), and a topic
 * joined and left a million times keeps its index small. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/history.h"
#include "core/stream.h"
#include "core/topic.h"
#include "obs/stats.h"

#define STREAMS 40
#define TOPICS 30

static struct event_base *base;
static struct stream streams[STREAMS];
static uint32_t changed, gone, members_told;

static void on_changed(uint32_t t) { (void)t; changed++; }
static void on_gone(uint32_t t) { (void)t; gone++; }
static void on_member(uint32_t t, const struct stream *s, int joined)
{
    (void)t;
    (void)s;
    members_told += joined ? 1 : 0;
}

static int start(uint32_t per_stream, uint32_t per_topic, uint32_t max_topics)
{
    memset(&loop_stats, 0, sizeof loop_stats);
    changed = gone = members_told = 0;
    base = event_base_new();
    if (history_init(&(struct history_config){.max_users = 100, .max_topics = max_topics,
                                              .per_uid = 4, .per_topic = 4, .ttl_s = 60,
                                              .bytes = 1 << 20}) != 0)
        return -1;
    return topic_init(&(struct topic_config){.base = base, .max_users = 100,
                                             .max_topics = max_topics, .per_stream = per_stream,
                                             .per_topic = per_topic, .linger_s = 0,
                                             .changed = on_changed, .gone = on_gone,
                                             .member = on_member});
}

static int setup(void **state)
{
    (void)state;
    return start(TOPICS, STREAMS, TOPICS);
}

static int teardown(void **state)
{
    (void)state;
    topic_free();
    history_free();
    event_base_free(base);
    return 0;
}

static void name_of(uint32_t i, char *out, size_t *len)
{
    *len = (size_t)snprintf(out, 16, "t:%u", i);
}

/* Both sides: every member of every topic names it among its stream's
 * subscriptions at its place, and the counts add up. */
static void check(const uint8_t in[STREAMS][TOPICS])
{
    uint32_t subs = 0;
    for (uint32_t i = 0; i < TOPICS; i++) {
        char name[16];
        size_t len;
        name_of(i, name, &len);
        uint32_t t = topic_find(name, len), want = 0;
        for (uint32_t k = 0; k < STREAMS; k++)
            want += in[k][i];
        if (!want) {
            assert_int_equal(t, 0);          /* given up at once: linger_s 0 */
            continue;
        }
        assert_int_not_equal(t, 0);
        assert_int_equal(topic_members(t), want);
        struct stream *const *m = topic_member_array(t);
        for (uint32_t p = 0; p < want; p++) {
            uint32_t k = (uint32_t)(m[p] - streams);
            assert_true(k < STREAMS && in[k][i]);
            uint32_t sub = topic_sub_of(m[p], t);
            assert_int_not_equal(sub, 0);
            assert_int_equal(topic_sub_at(sub)->pos, p);
        }
        subs += want;
    }
    for (uint32_t k = 0; k < STREAMS; k++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < TOPICS; i++)
            n += in[k][i];
        assert_int_equal(topic_stream_count(&streams[k]), n);
    }
    assert_int_equal(loop_stats.topic_subscriptions, subs);
}

static void both_sides_agree_after_any_joins_and_leaves(void **state)
{
    (void)state;
    static uint8_t in[STREAMS][TOPICS];
    memset(in, 0, sizeof in);
    srand(7);
    for (int op = 0; op < 200000; op++) {
        uint32_t k = (uint32_t)rand() % STREAMS, i = (uint32_t)rand() % TOPICS, t;
        char name[16];
        size_t len;
        name_of(i, name, &len);
        if (rand() % 3 == 0 && k % 7 == 0) {
            topic_leave_all(&streams[k]);    /* a stream closes */
            memset(in[k], 0, sizeof in[k]);
        } else if (in[k][i]) {
            assert_int_equal(topic_unsubscribe(&streams[k], topic_find(name, len)), 1);
            in[k][i] = 0;
        } else {
            assert_int_equal(topic_subscribe(&streams[k], name, len, &t), TOPIC_OK);
            in[k][i] = 1;
        }
        if (op % 10007 == 0)
            check(in);
    }
    check(in);
    for (uint32_t k = 0; k < STREAMS; k++)
        topic_leave_all(&streams[k]);
    assert_int_equal(loop_stats.topic_subscriptions, 0);
    assert_int_equal(loop_stats.topics, 0);
    assert_int_equal(gone, loop_stats.topics_given_up);
}

static void bounds_refuse(void **state)
{
    (void)state;
    uint32_t t;
    teardown(NULL);
    assert_int_equal(start(2, 2, 3), 0);
    assert_int_equal(topic_subscribe(&streams[0], "bad name", 8, &t), TOPIC_BAD_NAME);
    assert_int_equal(topic_subscribe(&streams[0], "", 0, &t), TOPIC_BAD_NAME);
    assert_int_equal(topic_subscribe(&streams[0], "a", 1, &t), TOPIC_OK);
    assert_int_equal(topic_subscribe(&streams[0], "a", 1, &t), TOPIC_OK);   /* again: as it was */
    assert_int_equal(topic_stream_count(&streams[0]), 1);
    assert_int_equal(topic_subscribe(&streams[0], "b", 1, &t), TOPIC_OK);
    assert_int_equal(topic_subscribe(&streams[0], "c", 1, &t), TOPIC_STREAM_FULL);
    assert_int_equal(topic_subscribe(&streams[1], "a", 1, &t), TOPIC_OK);
    assert_int_equal(topic_would_take("a", 1, NULL), TOPIC_FULL);
    assert_int_equal(topic_subscribe(&streams[2], "a", 1, &t), TOPIC_FULL);
    assert_int_equal(topic_subscribe(&streams[2], "c", 1, &t), TOPIC_OK);
    uint32_t fresh = 0;
    assert_int_equal(topic_would_take("d", 1, &fresh), TOPIC_NO_ROOM);
    assert_int_equal(topic_subscribe(&streams[3], "d", 1, &t), TOPIC_NO_ROOM);
    /* the stream's topics in the order joined */
    uint32_t first = topic_stream_first(&streams[0]);
    uint8_t len;
    assert_memory_equal(topic_name(topic_sub_at(first)->topic, &len), "a", 1);
    assert_memory_equal(topic_name(topic_sub_at(topic_stream_next(first))->topic, &len), "b", 1);
}

static void a_topic_given_up_is_made_again_with_a_new_epoch(void **state)
{
    (void)state;
    uint32_t t, t2;
    assert_int_equal(topic_subscribe(&streams[0], "x", 1, &t), TOPIC_OK);
    uint32_t epoch = history_slot_epoch(topic_slot(t));
    assert_int_not_equal(epoch, history_epoch());
    history_append(topic_slot(t), "m", 1, 0);
    assert_int_equal(history_last_seq(topic_slot(t)), 1);
    assert_int_equal(topic_unsubscribe(&streams[0], t), 1);
    assert_int_equal(topic_find("x", 1), 0);             /* linger_s 0: gone at once */
    assert_int_equal(gone, 1);
    assert_int_equal(topic_subscribe(&streams[1], "y", 1, &t2), TOPIC_OK);
    assert_int_equal(t2, t);                              /* its index taken again */
    assert_int_not_equal(history_slot_epoch(topic_slot(t2)), epoch);
    /* the slot's ids go on: what the other topic kept is never past them */
    assert_int_equal(history_last_seq(topic_slot(t2)), 1);
    char name[HISTORY_TOPIC_NAME_MAX];
    assert_int_equal(history_topic_name(topic_slot(t2), name), 1);
    assert_memory_equal(name, "y", 1);
}

static void a_million_joins_keep_the_index_small(void **state)
{
    (void)state;
    uint32_t t;
    size_t before = topic_index_bytes();
    for (int i = 0; i < 1000000; i++) {
        struct stream *s = &streams[i % 4];
        assert_int_equal(topic_subscribe(s, "busy", 4, &t), TOPIC_OK);
        assert_int_equal(topic_unsubscribe(s, t), 1);
    }
    for (int k = 0; k < 4; k++)
        assert_int_equal(topic_subscribe(&streams[k], "busy", 4, &t), TOPIC_OK);
    assert_int_equal(topic_members(t), 4);
    assert_int_equal(loop_stats.topic_joins, 1000004);
    assert_int_equal(loop_stats.topic_subscriptions, 4);
    /* records reused, arrays shrunk back: not a byte per join */
    assert_true(topic_index_bytes() - before < 2u << 20);
    assert_int_equal(members_told, 1000004);
    assert_true(changed >= 2000004);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(both_sides_agree_after_any_joins_and_leaves, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bounds_refuse, setup, teardown),
        cmocka_unit_test_setup_teardown(a_topic_given_up_is_made_again_with_a_new_epoch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_million_joins_keep_the_index_small, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
