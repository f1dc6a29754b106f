/* SPDX-License-Identifier: Apache-2.0 */
/* Where the masters' numbered streams stand, with the history: see
 * history_origins.h.
 *
 * The order of the stores, each one a commit a restart reads (a kill
 * stops the process between two of them, in program order):
 *   - a command: its kind and count, then at = 0, then applying = its
 *     last number (from then it counts: applying > applied); before each
 *     history slot of its list (a uid, or a topic's), at = the slot, its
 *     index and the low bit of its last id; the slot is given the message
 *     or the gap (history.c: its id changes with one store); at the end,
 *     applied = the last number (applying no longer counts). A restart
 *     finding applying > applied knows every slot before the index at
 *     names has it, and the one at names too if its last id changed since
 *     (its bit differs): one message or gap changes it by one;
 *   - a new run on a slot: check = 0 (the record names no stream), its
 *     fields, check; then any other record of the same master is cleared
 *     (two found after a kill in between agree: the older run is dropped).
 * What is kept per origin costs the loop a few stores per command and one
 * per slot of its list; nothing without a --history-file. */
#include "core/history_origins.h"
#include "core/history.h"
#include "core/history_layout.h"
#include "lib/log.h"

#include <string.h>

static struct history_origin *recs;     /* the head's, NULL: not kept */
static uint32_t max_slot;             /* the uids' slots, then the topics' */
static int recovered;                  /* a restart read them */

/* A command a kill cut short, found by the restart: when its master sends
 * it again (the same numbers, kind and count), the uids before index from
 * have it. from 0: none. */
struct cut_short {
    uint64_t last;
    uint32_t kind, nuids, from;
};
static struct cut_short cut[HISTORY_ORIGINS];

static void commit(_Atomic uint64_t *field, uint64_t v)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(field, v, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
}

static int valid(uint32_t k) { return recs[k].check && recs[k].check == history_origin_check(k, &recs[k]); }

static void recover(void);

void history_origins_start(uint32_t slots)
{
    recs = history_origin_records();
    max_slot = slots;
    recovered = 0;
    memset(cut, 0, sizeof cut);
    if (recs && history_resumed())
        recover();
}

void history_origins_stop(void)
{
    recs = NULL;
    recovered = 0;
}

/* How many uids of record o's command have the message, by its at. */
static uint32_t uids_done(const struct history_origin *o)
{
    uint64_t at = atomic_load(&o->at);
    uint32_t uid = (uint32_t)(at >> 32), index = (uint32_t)(at >> 1) & 0x7fffffffu;
    if (uid && uid <= max_slot && (history_last_seq(uid) & 1) != (at & 1))
        index++;
    return index;
}

static void recover(void)
{
    recovered = 1;
    for (uint32_t k = 0; k < HISTORY_ORIGINS; k++) {
        struct history_origin *o = &recs[k];
        if (!valid(k))
            continue;
        /* Killed between a new run's record and the clearing of its older
         * one: the newer run (or the further, for the same one) stays. */
        for (uint32_t j = 0; j < k; j++) {
            struct history_origin *p = &recs[j];
            if (!valid(j) || p->name_hash != o->name_hash)
                continue;
            int older = p->inc < o->inc || (p->inc == o->inc && atomic_load(&p->applied) <
                                                                 atomic_load(&o->applied));
            (older ? p : o)->check = 0;
            if (!older)
                break;
        }
        uint64_t applying = atomic_load(&o->applying);
        if (!o->check || applying <= atomic_load(&o->applied))
            continue;
        uint32_t done = uids_done(o);
        if (done >= o->nuids) {
            commit(&o->applied, applying);    /* every uid has it: all in */
            continue;
        }
        /* From now the uids' ids may change: at says how far, plainly. */
        commit(&o->at, (uint64_t)done << 1);
        if (done)
            cut[k] = (struct cut_short){.last = applying, .kind = o->kind, .nuids = o->nuids,
                                         .from = done};
        log_msg(LOG_INFO, "history: a numbered message (to %u uids) was being applied when the "
                          "process stopped: %u had it; the others get it when its master sends "
                          "it again", o->nuids, done);
    }
}

int history_origins_kept(void) { return recs != NULL; }

int history_origin_found(uint32_t k, uint64_t *name_hash, uint64_t *inc, uint64_t *applied)
{
    if (!recs || !recovered || k >= HISTORY_ORIGINS || !valid(k))
        return 0;
    *name_hash = recs[k].name_hash;
    *inc = recs[k].inc;
    *applied = atomic_load(&recs[k].applied);
    return 1;
}

void history_origin_run(uint32_t k, uint64_t name_hash, uint64_t inc, uint64_t base)
{
    if (!recs || k >= HISTORY_ORIGINS)
        return;
    struct history_origin *o = &recs[k];
    cut[k].from = 0;
    o->check = 0;
    atomic_signal_fence(memory_order_seq_cst);
    o->name_hash = name_hash;
    o->inc = inc;
    atomic_store_explicit(&o->applied, base, memory_order_relaxed);
    atomic_store_explicit(&o->applying, 0, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    o->check = history_origin_check(k, o);
    atomic_signal_fence(memory_order_seq_cst);
    for (uint32_t j = 0; j < HISTORY_ORIGINS; j++)
        if (j != k && recs[j].check && recs[j].name_hash == name_hash) {
            recs[j].check = 0;
            cut[j].from = 0;
        }
    atomic_signal_fence(memory_order_seq_cst);
}

uint32_t history_origin_begin(uint32_t k, uint64_t last, uint32_t kind, uint32_t nuids)
{
    if (!recs || k >= HISTORY_ORIGINS)
        return 0;
    struct history_origin *o = &recs[k];
    if (cut[k].from) {
        uint32_t from = cut[k].last == last && cut[k].kind == kind && cut[k].nuids == nuids
                            ? cut[k].from : 0;
        cut[k].from = 0;
        if (from)
            return from;                      /* the record says so already */
    }
    if (atomic_load(&o->applying) > atomic_load(&o->applied))
        commit(&o->applying, 0);              /* a command cut short, not coming again */
    o->kind = kind;
    o->nuids = nuids;
    commit(&o->at, 0);
    commit(&o->applying, last);
    return 0;
}

void history_origin_at(uint32_t k, uint32_t index, uint32_t uid)
{
    if (!recs || k >= HISTORY_ORIGINS)
        return;
    commit(&recs[k].at, (uint64_t)uid << 32 | (uint64_t)(index & 0x7fffffffu) << 1 |
                            (uid ? history_last_seq(uid) & 1 : 0));
}

void history_origin_end(uint32_t k, uint64_t last)
{
    if (!recs || k >= HISTORY_ORIGINS)
        return;
    if (last > atomic_load(&recs[k].applied))
        commit(&recs[k].applied, last);
}
