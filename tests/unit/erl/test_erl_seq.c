/* SPDX-License-Identifier: Apache-2.0 */
/* erl_seq: a master's numbered messages applied once, in order; held
 * until their turn, holes given up, acknowledgements once the loop has
 * applied, a new run of the master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "erl/erl_seq.h"
#include "lib/carry.h"
#include "obs/stats.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

static struct {
    int calls;
    char via[64], origin[64];
    uint64_t inc, seq;
    int fail;
} acks;

static int fake_ack(const char *via, const char *ack_to, const char *origin, uint64_t inc,
                    uint64_t seq)
{
    (void)ack_to;
    if (acks.fail)
        return -1;
    acks.calls++;
    strcpy(acks.via, via);
    strcpy(acks.origin, origin);
    acks.inc = inc;
    acks.seq = seq;
    return 0;
}

static uint64_t stat(atomic_uint_fast64_t *c) { return atomic_load(c); }

static int setup(void **state)
{
    (void)state;
    memset(&acks, 0, sizeof acks);
    memset(&cnode_stats, 0, sizeof cnode_stats);
    erl_seq_init(fake_ack, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    erl_seq_free();
    return 0;
}

static const char term[] = "a term";
static int64_t now = 1000;
static uint64_t records;            /* the inbox's, as handoff_committed counts */

static enum erl_seq_verdict admit(const char *master, uint64_t inc, uint64_t seq, uint64_t last,
                                  struct erl_seq_origin **o)
{
    return erl_seq_admit(master, inc, seq, last, "via@host", term, sizeof term, o, now);
}

/* Applies what admit let through, then what was held behind it; returns
 * how many were applied. */
static int apply(struct erl_seq_origin *o, uint64_t last)
{
    int n = 1;
    erl_seq_committed(o, last, ++records);
    struct erl_seq_held *h;
    while ((h = erl_seq_take_due(o)) != NULL) {
        erl_seq_committed(o, h->last, ++records);
        free(h);
        n++;
    }
    return n;
}

static void once_and_in_order(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    assert_non_null(erl_seq_base("m@h", 7, 0, "outq", "m@h", now));
    assert_int_equal(admit("m@h", 7, 1, 1, &o), ERL_SEQ_APPLY);
    assert_int_equal(apply(o, 1), 1);
    assert_int_equal(admit("m@h", 7, 1, 1, &o), ERL_SEQ_DUPLICATE);
    /* 3 and 4 before 2: held, then applied after it, in order */
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_HELD);
    assert_int_equal(admit("m@h", 7, 3, 3, &o), ERL_SEQ_HELD);
    assert_int_equal(admit("m@h", 7, 3, 3, &o), ERL_SEQ_DUPLICATE);    /* held already */
    assert_null(erl_seq_take_due(o));
    assert_int_equal(admit("m@h", 7, 2, 2, &o), ERL_SEQ_APPLY);
    assert_int_equal(apply(o, 2), 3);
    assert_int_equal(o->next, 5);
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_DUPLICATE);
    assert_int_equal(stat(&cnode_stats.seq_duplicates), 3);
    assert_int_equal(stat(&cnode_stats.seq_reordered), 2);
    /* another master's numbers are its own */
    assert_non_null(erl_seq_base("n@h", 1, 0, "outq", "n@h", now));
    assert_int_equal(admit("n@h", 1, 1, 1, &o), ERL_SEQ_APPLY);
}

/* A gap for numbers 4..6 is applied when 5 is due (4 came alone before):
 * the numbers after it are due next, and 5 is a duplicate. */
static void a_range_of_numbers(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    erl_seq_base("m@h", 7, 3, "outq", "m@h", now);
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_APPLY);
    apply(o, 4);
    assert_int_equal(admit("m@h", 7, 4, 6, &o), ERL_SEQ_APPLY);
    apply(o, 6);
    assert_int_equal(o->next, 7);
    assert_int_equal(admit("m@h", 7, 5, 5, &o), ERL_SEQ_DUPLICATE);
}

/* Before its run's base nothing of a master is applied: it waits. */
static void nothing_before_the_base(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    assert_int_equal(admit("m@h", 9, 11, 11, &o), ERL_SEQ_HELD);
    assert_int_equal(admit("m@h", 9, 12, 12, &o), ERL_SEQ_HELD);
    o = erl_seq_base("m@h", 9, 10, "outq", "m@h", now);
    struct erl_seq_held *h = erl_seq_take_due(o);
    assert_non_null(h);
    assert_int_equal(h->seq, 11);
    assert_memory_equal(h->term, term, sizeof term);
    erl_seq_committed(o, 11, ++records);
    free(h);
    h = erl_seq_take_due(o);
    assert_non_null(h);
    assert_int_equal(h->seq, 12);
    erl_seq_committed(o, 12, ++records);
    free(h);
    assert_null(erl_seq_take_due(o));
    assert_int_equal(o->next, 13);
    /* a base the node is past changes nothing */
    erl_seq_base("m@h", 9, 5, "outq", "m@h", now);
    assert_int_equal(o->next, 13);
}

/* What the loop has applied is acknowledged, by the way the last message
 * came, ERL_SEQ_ACK_MS after the last acknowledgement at most. */
static void acknowledged_once_applied(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    erl_seq_base("m@h", 7, 0, "outq", "base@h", now);
    erl_seq_ack(now, records);                      /* the base is answered: 0 */
    assert_int_equal(acks.calls, 1);
    assert_int_equal(acks.seq, 0);
    assert_string_equal(acks.via, "base@h");
    for (uint64_t s = 1; s <= 3; s++) {
        assert_int_equal(admit("m@h", 7, s, s, &o), ERL_SEQ_APPLY);
        apply(o, s);
    }
    now += ERL_SEQ_ACK_MS;
    erl_seq_ack(now, records - 3);                  /* the loop has none of them */
    assert_int_equal(acks.calls, 1);
    assert_true(erl_seq_wait_ms(now) >= 0);
    erl_seq_ack(now, records - 2);                  /* 1 applied: the mark was at 1 */
    assert_int_equal(acks.calls, 2);
    assert_int_equal(acks.seq, 1);
    assert_string_equal(acks.via, "via@host");
    erl_seq_ack(now, records);                      /* 3: but not before ACK_MS */
    assert_int_equal(acks.calls, 2);
    now += ERL_SEQ_ACK_MS;
    erl_seq_ack(now, records);
    assert_int_equal(acks.calls, 3);
    assert_int_equal(acks.seq, 3);
    assert_int_equal(stat(&cnode_stats.seq_acks), 3);
    /* nothing new: no acknowledgement, nothing to wait for */
    now += ERL_SEQ_ACK_MS;
    erl_seq_ack(now, records);
    assert_int_equal(acks.calls, 3);
    assert_int_equal(erl_seq_wait_ms(now), -1);
    /* a duplicate is acknowledged again: its master has not heard */
    assert_int_equal(admit("m@h", 7, 2, 2, &o), ERL_SEQ_DUPLICATE);
    now += ERL_SEQ_ACK_MS;
    erl_seq_ack(now, records);
    assert_int_equal(acks.calls, 4);
    assert_int_equal(acks.seq, 3);
    /* no way to the master: tried again, later */
    acks.fail = 1;
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_APPLY);
    apply(o, 4);
    erl_seq_ack(now, records);
    now += ERL_SEQ_ACK_MS;
    erl_seq_ack(now, records);
    assert_true(erl_seq_wait_ms(now) > ERL_SEQ_ACK_MS);
    acks.fail = 0;
    now += 1000;
    erl_seq_ack(now, records);
    assert_int_equal(acks.seq, 4);
    /* the hello's applied number */
    uint64_t inc, seq;
    assert_true(erl_seq_applied_for("m@h", &inc, &seq));
    assert_int_equal(inc, 7);
    assert_int_equal(seq, 4);
    assert_false(erl_seq_applied_for("other@h", &inc, &seq));
}

/* A hole nothing fills in ERL_SEQ_HOLE_MS is given up, counted. */
static void a_hole_given_up(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    erl_seq_base("m@h", 7, 0, "outq", "m@h", now);
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_HELD);
    uint64_t skipped = 0;
    assert_null(erl_seq_hole_expired(now + ERL_SEQ_HOLE_MS - 1, &skipped));
    assert_int_equal(erl_seq_wait_ms(now), 0);     /* the base is answered first */
    erl_seq_ack(now, records);
    assert_int_equal(erl_seq_wait_ms(now), ERL_SEQ_HOLE_MS);
    assert_ptr_equal(erl_seq_hole_expired(now + ERL_SEQ_HOLE_MS, &skipped), o);
    assert_int_equal(skipped, 3);
    assert_int_equal(stat(&cnode_stats.seq_skipped), 3);
    struct erl_seq_held *h = erl_seq_take_due(o);
    assert_non_null(h);
    assert_int_equal(h->seq, 4);
    free(h);
}

static int m_linked;
static int fake_linked(const char *master) { return strcmp(master, "m@h") != 0 || m_linked; }

/* A hole whose own master is not linked waits ERL_SEQ_HOLE_UNLINKED_MS;
 * once it links again, ERL_SEQ_HOLE_MS from then, within the bound. */
static void a_hole_of_an_unlinked_master(void **state)
{
    (void)state;
    erl_seq_init(fake_ack, fake_linked);
    m_linked = 0;
    struct erl_seq_origin *o;
    erl_seq_base("m@h", 7, 0, "outq", "other@h", now);
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_HELD);
    erl_seq_ack(now, records);
    uint64_t skipped = 0;
    assert_int_equal(erl_seq_wait_ms(now), ERL_SEQ_HOLE_UNLINKED_MS);
    assert_null(erl_seq_hole_expired(now + ERL_SEQ_HOLE_UNLINKED_MS - 1, &skipped));
    /* linked again 20 s in: 10 s from then */
    m_linked = 1;
    erl_seq_master_linked("m@h", now + 20000);
    assert_null(erl_seq_hole_expired(now + 20000 + ERL_SEQ_HOLE_MS - 1, &skipped));
    assert_int_equal(erl_seq_wait_ms(now + 20000), ERL_SEQ_HOLE_MS);
    /* what it sends again fills it */
    assert_int_equal(admit("m@h", 7, 1, 3, &o), ERL_SEQ_APPLY);
    assert_int_equal(apply(o, 3), 2);
    assert_int_equal(stat(&cnode_stats.seq_skipped), 0);
    /* a later hole, the link 35 s old: ERL_SEQ_HOLE_MS from the hole */
    now += 35000;
    assert_int_equal(admit("m@h", 7, 6, 6, &o), ERL_SEQ_HELD);
    assert_ptr_equal(erl_seq_hole_expired(now + ERL_SEQ_HOLE_MS, &skipped), o);
    assert_int_equal(skipped, 1);
    free(erl_seq_take_due(o));
    now -= 35000;
}

/* A new run of a master: what its old run left held is given up. */
static void a_new_run(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    erl_seq_base("m@h", 7, 0, "outq", "m@h", now);
    assert_int_equal(admit("m@h", 7, 1, 1, &o), ERL_SEQ_APPLY);
    apply(o, 1);
    assert_int_equal(admit("m@h", 7, 3, 3, &o), ERL_SEQ_HELD);
    assert_non_null(erl_seq_base("m@h", 8, 0, "outq", "m@h", now));
    assert_int_equal(stat(&cnode_stats.seq_skipped), 1);
    assert_int_equal(admit("m@h", 8, 1, 1, &o), ERL_SEQ_APPLY);
    assert_int_equal(o->inc, 8);
    apply(o, 1);
    /* the old run's, late: dropped, counted; its base changes nothing */
    assert_int_equal(admit("m@h", 7, 4, 4, &o), ERL_SEQ_STALE);
    assert_int_equal(stat(&cnode_stats.seq_skipped), 2);
    assert_null(erl_seq_base("m@h", 7, 10, "outq", "m@h", now));
    assert_int_equal(admit("m@h", 8, 2, 2, &o), ERL_SEQ_APPLY);
}

/* More masters than slots: the one heard of longest ago with nothing
 * held makes room; with every slot holding messages, unnumbered. */
static void slots(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    char name[32];
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        snprintf(name, sizeof name, "m%d@h", i);
        now++;
        assert_non_null(erl_seq_base(name, 1, 0, "outq", name, now));
        assert_int_equal(admit(name, 1, 5, 5, &o), ERL_SEQ_HELD);
    }
    assert_int_equal(admit("late@h", 1, 1, 1, &o), ERL_SEQ_UNTRACKED);
    assert_null(o);
    assert_int_equal(stat(&cnode_stats.seq_untracked), 1);
    erl_seq_free();                                  /* held messages gone */
    assert_non_null(erl_seq_base("late@h", 1, 0, "outq", "late@h", now));
}

static uint64_t hash_of(const char *name) { return XXH3_64bits(name, strlen(name)); }

/* A restart with a --history-file: each stream the file kept goes on from
 * it, in its slot (the file's record), before any base; the hello tells
 * the master; a master not in the file, or a new run, is told to the loop. */
static void a_restart_goes_on_where_the_file_stood(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    struct cmd_seq_run run;
    uint64_t inc, seq;
    erl_seq_restore(3, hash_of("m@h"), 7, 10);
    erl_seq_restore(5, hash_of("r@h"), 3, 20);
    erl_seq_restore(6, hash_of("gone@h"), 1, 4);
    assert_int_equal(erl_seq_active(), 0);           /* none heard of yet */
    assert_int_equal(erl_seq_applied_for("m@h", &inc, &seq), 1);
    assert_true(inc == 7 && seq == 10);
    assert_int_equal(admit("m@h", 7, 10, 10, &o), ERL_SEQ_DUPLICATE);
    assert_int_equal(admit("m@h", 7, 11, 11, &o), ERL_SEQ_APPLY);
    assert_int_equal(erl_seq_slot(o), 3);
    assert_int_equal(erl_seq_run_untold(o, &run), 0);  /* the file's record is its own */
    /* Passed on by another master before its own hello: the file's numbers go on. */
    assert_int_equal(admit("r@h", 3, 22, 22, &o), ERL_SEQ_HELD);
    assert_int_equal(admit("r@h", 3, 20, 20, &o), ERL_SEQ_DUPLICATE);
    assert_int_equal(admit("r@h", 3, 21, 21, &o), ERL_SEQ_APPLY);
    assert_int_equal(apply(o, 21), 2);
    assert_int_equal(erl_seq_slot(o), 5);
    /* An older base changes nothing. */
    assert_non_null(erl_seq_base("r@h", 3, 15, "outq", "r@h", now));
    assert_int_equal(o->next, 23);
    /* A master the file does not know: a free slot, not one kept; told to the loop once. */
    assert_int_equal(erl_seq_applied_for("new@h", &inc, &seq), 0);
    o = erl_seq_base("new@h", 2, 40, "outq", "new@h", now);
    assert_non_null(o);
    assert_true(erl_seq_slot(o) != 3 && erl_seq_slot(o) != 5 && erl_seq_slot(o) != 6);
    assert_int_equal(erl_seq_run_untold(o, &run), 1);
    assert_true(run.name_hash == hash_of("new@h") && run.inc == 2 && run.base == 40);
    assert_int_equal(erl_seq_run_untold(o, &run), 0);
    /* The kept master's next run: told to the loop, from its base. */
    assert_int_equal(admit("m@h", 8, 1, 1, &o), ERL_SEQ_HELD);
    assert_non_null(erl_seq_base("m@h", 8, 0, "outq", "m@h", now));
    assert_int_equal(erl_seq_slot(o), 3);
    assert_int_equal(erl_seq_run_untold(o, &run), 1);
    assert_true(run.name_hash == hash_of("m@h") && run.inc == 8 && run.base == 0);
    assert_int_equal(erl_seq_active(), 3);
}

/* Slots kept for masters not heard of since the restart go before any in use. */
static void kept_slots_go_first(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    char name[32];
    erl_seq_restore(0, hash_of("gone@h"), 1, 4);
    for (int i = 1; i < ERL_SEQ_ORIGINS; i++) {
        snprintf(name, sizeof name, "m%d@h", i);
        assert_non_null(erl_seq_base(name, 1, 0, "outq", name, now));
    }
    o = erl_seq_base("late@h", 1, 0, "outq", "late@h", now);
    assert_non_null(o);
    assert_int_equal(erl_seq_slot(o), 0);
    assert_int_equal(erl_seq_applied_for("gone@h", &(uint64_t){0}, &(uint64_t){0}), 0);
}

/* A hot upgrade: each origin in its slot (its record in the history file),
 * kept ones too, as they were. */
static void handed_over_in_their_slots(void **state)
{
    (void)state;
    struct erl_seq_origin *o;
    struct cmd_seq_run run;
    uint64_t inc, seq;
    erl_seq_restore(2, hash_of("m@h"), 7, 10);
    erl_seq_restore(4, hash_of("gone@h"), 1, 4);
    assert_int_equal(admit("m@h", 7, 11, 11, &o), ERL_SEQ_APPLY);
    apply(o, 11);
    assert_non_null(erl_seq_base("n@h", 3, 5, "outq", "n@h", now));
    assert_int_equal(admit("n@h", 3, 8, 8, &o), ERL_SEQ_HELD);
    int n_slot = (int)erl_seq_slot(o);
    uint64_t was = erl_seq_instance();
    struct carry_out out;
    carry_out_init(&out);
    assert_int_equal(erl_seq_carry_export(&out), 0);
    erl_seq_free();
    struct carry_in all, rec;
    uint16_t version;
    carry_in_init(&all, out.buf, out.len);
    assert_int_equal(carry_find(&all, ERL_SEQ_CARRY_TAG, &version, &rec), 1);
    assert_int_equal(version, ERL_SEQ_CARRY_VERSION);
    assert_int_equal(erl_seq_carry_take(&rec, version), 0);
    carry_out_free(&out);
    assert_true(erl_seq_instance() == was);
    assert_int_equal(erl_seq_active(), 2);
    assert_int_equal(admit("m@h", 7, 12, 12, &o), ERL_SEQ_APPLY);
    assert_int_equal(erl_seq_slot(o), 2);
    assert_int_equal(erl_seq_run_untold(o, &run), 0);
    assert_int_equal(admit("n@h", 3, 6, 6, &o), ERL_SEQ_APPLY);
    assert_int_equal((int)erl_seq_slot(o), n_slot);
    assert_int_equal(apply(o, 6), 1);               /* 8 still waits for 7 */
    assert_int_equal(admit("n@h", 3, 7, 7, &o), ERL_SEQ_APPLY);
    assert_int_equal(apply(o, 7), 2);
    assert_int_equal(erl_seq_applied_for("gone@h", &inc, &seq), 1);   /* kept for it */
    assert_true(inc == 1 && seq == 4);
    assert_int_equal(admit("gone@h", 1, 5, 5, &o), ERL_SEQ_APPLY);
    assert_int_equal(erl_seq_slot(o), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(once_and_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(a_range_of_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(nothing_before_the_base, setup, teardown),
        cmocka_unit_test_setup_teardown(acknowledged_once_applied, setup, teardown),
        cmocka_unit_test_setup_teardown(a_hole_given_up, setup, teardown),
        cmocka_unit_test_setup_teardown(a_hole_of_an_unlinked_master, setup, teardown),
        cmocka_unit_test_setup_teardown(a_new_run, setup, teardown),
        cmocka_unit_test_setup_teardown(slots, setup, teardown),
        cmocka_unit_test_setup_teardown(a_restart_goes_on_where_the_file_stood, setup, teardown),
        cmocka_unit_test_setup_teardown(kept_slots_go_first, setup, teardown),
        cmocka_unit_test_setup_teardown(handed_over_in_their_slots, setup, teardown),
    };
    return cmocka_run_group_tests_name("erl_seq", tests, NULL, NULL);
}
