/* SPDX-License-Identifier: Apache-2.0 */
/* Message ids and history (src/core/history.c, included for its clock): ids,
 * what a returning client is replayed, and when it is told of a gap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../src/core/history.c"

static uint32_t fake_now = 1000;
static uint32_t fake_clock(void) { return fake_now; }

static void start(uint32_t per_uid, uint32_t ttl_s, size_t bytes)
{
    memset(&loop_stats, 0, sizeof loop_stats);
    fake_now = 1000;
    now_s = fake_clock;
    assert_int_equal(history_init(&(struct history_config){.max_users = 100, .per_uid = per_uid,
                                                           .ttl_s = ttl_s, .bytes = bytes}),
                     0);
}

static int teardown(void **state)
{
    (void)state;
    history_free();
    return 0;
}

static struct {
    struct history_replay r;
    uint64_t room[64];
} rep;

static struct history_replay *since(uint32_t uid, uint32_t seq)
{
    history_since(uid, 1, history_epoch(), seq, &rep.r, 64);
    return &rep.r;
}

static void append_as(uint32_t uid, int binary, const char *fmt, uint32_t n)
{
    char text[32];
    int len = snprintf(text, sizeof text, fmt, n);
    history_append(uid, text, (uint32_t)len, binary);
}

static void append_text(uint32_t uid, const char *fmt, uint32_t n) { append_as(uid, 0, fmt, n); }

/* The replay's messages, as "a,b,c" (a binary one as "bin:b"). */
static const char *replayed(const struct history_replay *r)
{
    static char out[4096];
    size_t k = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t len, seq;
        int binary;
        const char *m = history_message(r->pos[i], &len, &seq, &binary);
        k += (size_t)snprintf(out + k, sizeof out - k, "%s%s%.*s", i ? "," : "",
                              binary ? "bin:" : "", (int)len, m);
    }
    return out;
}

/* What a cursor gives from where it stands until it is caught up, as
 * "a,b,|gap|,c" (a gap where history_next says one). */
static const char *walk(uint32_t uid, struct history_cursor *c, int max)
{
    static char out[4096];
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < max; i++) {
        const char *data;
        uint32_t len, seq;
        int binary, r = history_next(uid, c, &data, &len, &seq, &binary);
        if (r == 0)
            break;
        if (r < 0)
            k += (size_t)snprintf(out + k, sizeof out - k, "%s|gap|", k ? "," : "");
        else
            k += (size_t)snprintf(out + k, sizeof out - k, "%s%s%.*s", k ? "," : "",
                                  binary ? "bin:" : "", (int)len, data);
    }
    return out;
}

static void a_cursor_steps_forward_and_reaches_live_messages(void **state)
{
    (void)state;
    start(32, 120, 1 << 20);
    for (uint32_t i = 1; i <= 5; i++)
        append_text(3, "m%u", i);
    struct history_cursor c;
    uint32_t first;
    assert_int_equal(history_resume(3, 1, history_epoch(), 2, &c, &first), 0);
    assert_int_equal(first, 3);
    assert_int_equal(c.seq, 3);
    const char *data;
    uint32_t len, seq;
    int binary;
    assert_int_equal(history_next(3, &c, &data, &len, &seq, &binary), 1);
    assert_int_equal(seq, 3);
    /* Messages that come during the replay are reached too, in order. */
    append_text(3, "m%u", 6);
    assert_string_equal(walk(3, &c, 100), "m4,m5,m6");
    assert_int_equal(history_next(3, &c, &data, &len, &seq, &binary), 0);   /* caught up */
    append_text(3, "m%u", 7);
    assert_string_equal(walk(3, &c, 100), "m7");
    /* A first connect, or nothing missed: the cursor is past the newest. */
    assert_int_equal(history_resume(3, 0, 0, 0, &c, &first), 0);
    assert_int_equal(c.seq, 8);
    assert_int_equal(history_resume(3, 1, history_epoch(), 7, &c, &first), 0);
    assert_int_equal(c.seq, 8);
}

static void a_cursor_overtaken_by_the_arena_tells_a_gap(void **state)
{
    (void)state;
    start(4096, 120, 65536);
    for (uint32_t i = 1; i <= 5; i++)
        append_text(4, "m%u", i);
    struct history_cursor c;
    uint32_t first;
    assert_int_equal(history_resume(4, 1, history_epoch(), 0, &c, &first), 0);
    assert_string_equal(walk(4, &c, 1), "m1");
    /* Others' messages push uid 4's oldest out while its client is slow. */
    for (uint32_t i = 0; i < 1500; i++)
        append_text(5, "filler %u", i);
    for (uint32_t i = 6; i <= 7; i++)
        append_text(4, "m%u", i);
    assert_true(loop_stats.history_evicted > 0);
    assert_string_equal(walk(4, &c, 100), "|gap|,m6,m7");
    /* Another epoch: a gap, then all that is kept. */
    assert_int_equal(history_resume(4, 1, history_epoch() + 1, 9, &c, &first), 1);
    assert_int_equal(first, 6);
    assert_string_equal(walk(4, &c, 100), "m6,m7");
}

static void a_cursor_more_than_history_behind_tells_a_gap(void **state)
{
    (void)state;
    start(3, 120, 1 << 20);
    for (uint32_t i = 1; i <= 3; i++)
        append_text(6, "m%u", i);
    struct history_cursor c;
    uint32_t first;
    assert_int_equal(history_resume(6, 1, history_epoch(), 0, &c, &first), 0);
    assert_string_equal(walk(6, &c, 1), "m1");
    for (uint32_t i = 4; i <= 8; i++)
        append_text(6, "m%u", i);
    /* --history 3: of m2..m8 only the newest three are given. */
    assert_string_equal(walk(6, &c, 100), "|gap|,m6,m7,m8");
}

static void a_busy_uid_pushes_out_its_own_messages_not_others(void **state)
{
    (void)state;
    start(4, 120, 65536);
    for (uint32_t i = 1; i <= 3; i++)
        append_as(2, i == 2, "quiet %u", i);
    /* Uid 1 sends over four arenas' worth: it keeps its newest 4, and uid
     * 2's messages, still of use, are moved ahead instead of pushed out,
     * a binary one still binary. */
    static char body[100];
    memset(body, 'b', sizeof body);
    for (uint32_t i = 0; i < 2000; i++)
        history_append(1, body, sizeof body, 0);
    assert_true(loop_stats.history_moved > 0);
    assert_true(loop_stats.history_bytes <= 65536);
    struct history_replay *r = since(2, 0);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "quiet 1,bin:quiet 2,quiet 3");
    r = since(1, 1990);
    assert_true(r->gap);                     /* 1991..1996 are gone: the newest 4 kept */
    assert_int_equal(r->n, 4);
    assert_int_equal(r->first_seq, 1997);
    /* Past the TTL they are of no use: pushed out, not moved. */
    fake_now += 121;
    uint64_t moved = loop_stats.history_moved;
    for (uint32_t i = 0; i < 2000; i++)
        history_append(1, body, sizeof body, 0);
    r = since(2, 0);
    assert_true(r->gap);
    assert_int_equal(r->n, 0);
    assert_true(loop_stats.history_moved - moved < 2000 * 4);
}

/* Uids 1..100, then 4 topics' slots (101..104), each bounded by
 * topic_bytes and topic_ttl_s (0: the uids' 120 s). */
static void start_topics(uint32_t per_topic, size_t topic_bytes, uint32_t topic_ttl_s,
                         size_t bytes)
{
    memset(&loop_stats, 0, sizeof loop_stats);
    fake_now = 1000;
    now_s = fake_clock;
    assert_int_equal(history_init(&(struct history_config){
                         .max_users = 100, .max_topics = 4, .per_uid = 32,
                         .per_topic = per_topic, .topic_bytes = topic_bytes, .ttl_s = 120,
                         .topic_ttl_s = topic_ttl_s, .bytes = bytes}),
                     0);
    history_topic_open(101, "hot", 3);
    history_topic_open(102, "quiet", 5);
}

static struct history_replay *since_slot(uint32_t slot, uint32_t seq)
{
    history_since(slot, 1, history_slot_epoch(slot), seq, &rep.r, 64);
    return &rep.r;
}

static void a_busy_topic_keeps_its_bytes_and_pushes_out_its_own(void **state)
{
    (void)state;
    start_topics(4096, 4096, 0, 65536);
    for (uint32_t i = 1; i <= 3; i++) {
        append_text(102, "quiet %u", i);
        append_text(2, "uid %u", i);
    }
    /* Topic "hot" gets thirty arenas of 1000-byte messages (1032 bytes
     * kept each): within its 4096 bytes it keeps its newest 3, and the
     * others' messages, still of use, are moved ahead instead of pushed
     * out. */
    static char body[1000];
    memset(body, 'h', sizeof body);
    for (uint32_t i = 0; i < 2000; i++)
        history_append(101, body, sizeof body, 0);
    assert_true(loop_stats.history_moved > 0);
    assert_true(loop_stats.topic_history_trimmed > 1900);
    struct history_replay *r = since_slot(102, 0);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "quiet 1,quiet 2,quiet 3");
    r = since(2, 0);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "uid 1,uid 2,uid 3");
    r = since_slot(101, 1990);
    assert_true(r->gap);                     /* 1991..1997 went: its newest 3 kept */
    assert_int_equal(r->n, 3);
    assert_int_equal(r->first_seq, 1998);
    /* A cursor that was further back finds the gap on its way. */
    struct history_cursor c = {.pos = 0, .seq = 1996};
    assert_int_equal(history_next(101, &c, &(const char *){0}, &(uint32_t){0},
                                  &(uint32_t){0}, &(int){0}), -1);
    assert_int_equal(c.seq, 1998);
    /* What a restart finds counts the same: the bytes from the kept entries. */
    uint32_t was = topic_units[0];
    memset(topic_units, 0, 4 * sizeof *topic_units);
    count_topic_bytes();
    assert_int_equal(topic_units[0], was);
    assert_int_equal(topic_units[1], 3 * 40 / 8);
}

static void a_topic_message_past_its_bytes_is_not_kept(void **state)
{
    (void)state;
    start_topics(32, 1024, 0, 1 << 20);
    static char body[1000];
    memset(body, 'x', sizeof body);
    append_text(101, "m%u", 1);
    history_append(101, body, sizeof body, 0);      /* 1032 bytes: past 1024 */
    append_text(101, "m%u", 3);
    struct history_replay *r = since_slot(101, 1);
    assert_true(r->gap);
    assert_string_equal(replayed(r), "m3");
    history_append(2, body, sizeof body, 0);        /* a uid's is */
    assert_false(since(2, 0)->gap);
}

static void a_topic_has_its_own_ttl(void **state)
{
    (void)state;
    start_topics(32, 1 << 20, 10, 1 << 20);
    append_text(101, "t%u", 1);
    append_text(3, "u%u", 1);
    fake_now += 11;
    struct history_replay *r = since_slot(101, 0);
    assert_true(r->gap);
    assert_int_equal(r->n, 0);
    r = since(3, 0);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "u1");
}

static void ids_count_per_uid_from_one(void **state)
{
    (void)state;
    start(32, 120, 1 << 20);
    assert_int_equal(history_append(1, "a", 1, 0), 1);
    assert_int_equal(history_append(1, "b", 1, 0), 2);
    assert_int_equal(history_append(2, "c", 1, 0), 1);
    assert_int_equal(history_last_seq(1), 2);
    assert_int_equal(strlen(history_epoch_hex()), 8);
    assert_int_equal(strspn(history_epoch_hex(), "0123456789abcdef"), 8);
    assert_int_equal(loop_stats.history_entries, 3);
}

static void a_returning_client_gets_what_it_missed(void **state)
{
    (void)state;
    start(32, 120, 1 << 20);
    for (uint32_t i = 1; i <= 5; i++)
        append_text(7, "m%u", i);
    append_text(8, "other%u", 1);
    struct history_replay *r = since(7, 2);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "m3,m4,m5");
    assert_int_equal(r->first_seq, 3);
    r = since(7, 5);                               /* up to date */
    assert_false(r->gap);
    assert_int_equal(r->n, 0);
    r = since(7, 0);                               /* saw nothing yet */
    assert_false(r->gap);
    assert_string_equal(replayed(r), "m1,m2,m3,m4,m5");
    history_since(7, 0, 0, 0, &rep.r, 64);         /* a first connect */
    assert_false(rep.r.gap);
    assert_int_equal(rep.r.n, 0);
}

static void past_the_per_uid_limit_is_a_gap(void **state)
{
    (void)state;
    start(4, 120, 1 << 20);
    for (uint32_t i = 1; i <= 10; i++)
        append_text(3, "m%u", i);
    struct history_replay *r = since(3, 2);
    assert_true(r->gap);
    assert_int_equal(r->first_seq, 7);
    assert_string_equal(replayed(r), "m7,m8,m9,m10");
    r = since(3, 6);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "m7,m8,m9,m10");
}

static void another_epoch_is_a_gap_with_all_that_is_kept(void **state)
{
    (void)state;
    start(32, 120, 1 << 20);
    append_text(4, "m%u", 1);
    append_text(4, "m%u", 2);
    history_since(4, 1, history_epoch() + 1, 1, &rep.r, 64);
    assert_true(rep.r.gap);
    assert_string_equal(replayed(&rep.r), "m1,m2");
    history_since(4, 1, history_epoch(), 9, &rep.r, 64);   /* an id from the future */
    assert_true(rep.r.gap);
    /* A uid with nothing kept: a gap with nothing to replay. */
    history_since(5, 1, history_epoch() + 1, 3, &rep.r, 64);
    assert_true(rep.r.gap);
    assert_int_equal(rep.r.first_seq, 0);
    assert_int_equal(rep.r.n, 0);
}

static void old_messages_expire(void **state)
{
    (void)state;
    start(32, 10, 1 << 20);
    append_text(6, "m%u", 1);
    fake_now += 6;
    append_text(6, "m%u", 2);
    fake_now += 6;                                  /* m1 is 12 s old, m2 6 s */
    struct history_replay *r = since(6, 0);
    assert_true(r->gap);
    assert_string_equal(replayed(r), "m2");
}

/* A small arena over many laps: the oldest go first, across uids, and what
 * is replayed is always the newest of each uid, intact. */
static void the_arena_wraps_and_keeps_the_newest(void **state)
{
    (void)state;
    start(1000, 120, 4096);
    for (uint32_t i = 1; i <= 3000; i++)
        append_text(1 + i % 3, i % 7 ? "message %u" : "a longer message number %u", i);
    assert_true(loop_stats.history_evicted > 2800);
    assert_true(loop_stats.history_bytes <= 4096);
    for (uint32_t uid = 1; uid <= 3; uid++) {
        struct history_replay *r = since(uid, 1);
        assert_true(r->gap);
        assert_true(r->n > 5);
        for (uint32_t i = 0; i < r->n; i++) {
            uint32_t len, seq;
            int binary;
            const char *m = history_message(r->pos[i], &len, &seq, &binary);
            assert_false(binary);
            /* message i went to uid 1 + i % 3: uid's seq-th one is i = */
            uint32_t n = uid == 1 ? 3 * seq : 3 * (seq - 1) + uid - 1;
            char want[64];
            int wl = snprintf(want, sizeof want,
                              n % 7 ? "message %u" : "a longer message number %u", n);
            assert_int_equal(len, (uint32_t)wl);
            assert_memory_equal(m, want, len);
            assert_int_equal(seq, history_last_seq(uid) - r->n + 1 + i);
        }
    }
}

/* A message too large to keep: a client that missed it hears of a gap. */
static void a_message_not_kept_makes_a_gap(void **state)
{
    (void)state;
    start(32, 120, 4096);
    static char big[2048];
    append_text(9, "m%u", 1);
    history_append(9, big, sizeof big, 0);
    append_text(9, "m%u", 3);
    struct history_replay *r = since(9, 1);
    assert_true(r->gap);
    assert_string_equal(replayed(r), "m3");
    r = since(9, 2);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "m3");
}

/* An id skipped (a message lost before it came): a client that had the
 * one before is told a gap, then gets what came after; one that had it
 * (it cannot have: the id named nothing) or later ones is not. */
static void a_skipped_id_is_a_gap(void **state)
{
    (void)state;
    start(32, 120, 4096);
    append_text(9, "m%u", 1);
    assert_int_equal(history_skip(9), 2);
    struct history_replay *r = since(9, 1);
    assert_true(r->gap);
    assert_int_equal(r->n, 0);
    append_text(9, "m%u", 3);
    assert_int_equal(history_last_seq(9), 3);
    r = since(9, 1);
    assert_true(r->gap);
    assert_int_equal(r->first_seq, 3);
    assert_string_equal(replayed(r), "m3");
    r = since(9, 2);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "m3");
    /* a cursor that reaches the skipped id meets it as a gap */
    struct history_cursor c;
    uint32_t first;
    append_text(10, "m%u", 1);
    history_resume(10, 1, history_epoch(), 0, &c, &first);
    history_skip(10);
    append_text(10, "m%u", 3);
    assert_string_equal(walk(10, &c, 10), "m1,|gap|,m3");
}

/* A payload sent to many uids is kept once; each uid's message lives as
 * long as the shared payload does. */
static void a_shared_payload_is_kept_once(void **state)
{
    (void)state;
    start(32, 120, 8192);
    static char big[1000];
    memset(big, 'x', sizeof big);
    uint64_t shared = history_share(big, sizeof big, 0);
    assert_true(shared != 0);
    for (uint32_t uid = 1; uid <= 50; uid++)
        assert_int_equal(history_append_shared(uid, shared), 1);
    assert_int_equal(loop_stats.history_entries, 50);
    assert_true(loop_stats.history_bytes < 32 + 1000 + 50 * 40 + 1);
    struct history_replay *r = since(17, 0);
    assert_false(r->gap);
    assert_int_equal(r->n, 1);
    uint32_t len, seq;
    int binary;
    assert_ptr_equal(history_message(r->pos[0], &len, &seq, &binary), entry_at(shared - 1) + 1);
    assert_int_equal(len, sizeof big);
    /* Pushed out by newer messages: the shared payload goes first, and with
     * it every uid's message. */
    for (uint32_t i = 0; i < 400; i++)
        append_text(99, "filler %u", i);
    r = since(17, 0);
    assert_true(r->gap);
    assert_int_equal(r->n, 0);
    assert_int_equal(history_append_shared(17, shared), 2);   /* gone: an id only */
}

/* A message is replayed as it went live, binary or text, whether kept
 * for its uid or shared by a multicast, and through the arena's laps. */
static void a_message_keeps_its_type(void **state)
{
    (void)state;
    start(32, 120, 4096);
    append_as(5, 0, "t%u", 1);
    append_as(5, 1, "b%u", 2);                 /* valid UTF-8, binary all the same */
    uint64_t bin = history_share("m3", 2, 1), text = history_share("m4", 2, 0);
    assert_int_equal(history_append_shared(5, bin), 3);
    assert_int_equal(history_append_shared(5, text), 4);
    assert_string_equal(replayed(since(5, 0)), "t1,bin:b2,bin:m3,m4");
    struct history_cursor c;
    uint32_t first;
    assert_int_equal(history_resume(5, 1, history_epoch(), 0, &c, &first), 0);
    assert_string_equal(walk(5, &c, 100), "t1,bin:b2,bin:m3,m4");
    /* Many laps of binary and text messages: the sizes stay right. */
    for (uint32_t i = 1; i <= 3000; i++)
        append_as(6, i % 2, "lap %u", i);
    assert_true(loop_stats.history_bytes <= 4096);
    struct history_replay *r = since(6, 2996);
    assert_false(r->gap);
    assert_string_equal(replayed(r), "bin:lap 2997,lap 2998,bin:lap 2999,lap 3000");
}

static void history_off_gives_ids_only(void **state)
{
    (void)state;
    start(0, 120, 1 << 20);
    assert_int_equal(history_append(2, "x", 1, 0), 1);
    assert_int_equal(history_append(2, "y", 1, 0), 2);
    assert_int_equal(loop_stats.history_entries, 0);
    struct history_replay *r = since(2, 1);
    assert_true(r->gap);
    assert_int_equal(r->n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(ids_count_per_uid_from_one, teardown),
        cmocka_unit_test_teardown(a_message_keeps_its_type, teardown),
        cmocka_unit_test_teardown(a_returning_client_gets_what_it_missed, teardown),
        cmocka_unit_test_teardown(past_the_per_uid_limit_is_a_gap, teardown),
        cmocka_unit_test_teardown(another_epoch_is_a_gap_with_all_that_is_kept, teardown),
        cmocka_unit_test_teardown(old_messages_expire, teardown),
        cmocka_unit_test_teardown(the_arena_wraps_and_keeps_the_newest, teardown),
        cmocka_unit_test_teardown(a_message_not_kept_makes_a_gap, teardown),
        cmocka_unit_test_teardown(a_skipped_id_is_a_gap, teardown),
        cmocka_unit_test_teardown(a_shared_payload_is_kept_once, teardown),
        cmocka_unit_test_teardown(history_off_gives_ids_only, teardown),
        cmocka_unit_test_teardown(a_cursor_steps_forward_and_reaches_live_messages, teardown),
        cmocka_unit_test_teardown(a_busy_uid_pushes_out_its_own_messages_not_others, teardown),
        cmocka_unit_test_teardown(a_busy_topic_keeps_its_bytes_and_pushes_out_its_own, teardown),
        cmocka_unit_test_teardown(a_topic_message_past_its_bytes_is_not_kept, teardown),
        cmocka_unit_test_teardown(a_topic_has_its_own_ttl, teardown),
        cmocka_unit_test_teardown(a_cursor_overtaken_by_the_arena_tells_a_gap, teardown),
        cmocka_unit_test_teardown(a_cursor_more_than_history_behind_tells_a_gap, teardown),
    };
    return cmocka_run_group_tests_name("history", tests, NULL, NULL);
}
