/* SPDX-License-Identifier: Apache-2.0 */
/* The masters' numbered streams: see erl_seq.h. */
#include "erl/erl_seq.h"
#include "core/history.h"
#include "lib/carry.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

_Static_assert(ERL_SEQ_ORIGINS == HISTORY_ORIGINS, "the history keeps a record per origin slot");

static struct erl_seq_origin origins[ERL_SEQ_ORIGINS];
static size_t held_bytes;          /* all origins */
static erl_seq_ack_fn ack_fn;
static erl_seq_linked_fn linked_fn;
static uint64_t instance;
static int64_t now_cache;          /* the clock as the last call gave it */
static struct log_ratelimit hole_rl, full_rl;

void erl_seq_init(erl_seq_ack_fn send_ack, erl_seq_linked_fn linked)
{
    ack_fn = send_ack;
    linked_fn = linked;
    if (getrandom(&instance, sizeof instance, 0) != sizeof instance)
        instance = 0;
    instance = (instance >> 1) | 1;        /* positive, never 0 */
}

uint64_t erl_seq_instance(void) { return instance; }

static int in_use;                 /* origins tracked now */

int erl_seq_active(void) { return in_use; }

static size_t held_size(const struct erl_seq_held *h) { return sizeof *h + h->len; }

static void unlink_held(struct erl_seq_origin *o, struct erl_seq_held *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        o->head = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        o->tail = h->prev;
    held_bytes -= held_size(h);
}

/* Gives up every held message of o (their master's run is over). */
static void drop_held(struct erl_seq_origin *o)
{
    uint64_t n = 0;
    while (o->head) {
        struct erl_seq_held *h = o->head;
        unlink_held(o, h);
        n += h->last - h->seq + 1;
        free(h);
    }
    if (n)
        atomic_fetch_add(&cnode_stats.seq_skipped, n);
    o->hole_ms = 0;
}

void erl_seq_free(void)
{
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++)
        drop_held(&origins[i]);
    memset(origins, 0, sizeof origins);
    in_use = 0;
}

static void set_name(char *to, size_t size, const char *from)
{
    size_t n = strlen(from);
    if (n >= size)
        n = size - 1;
    memcpy(to, from, n);
    to[n] = '\0';
}

static uint64_t name_hash(const char *master) { return XXH3_64bits(master, strlen(master)); }

static struct erl_seq_origin *named(const char *master)
{
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++)
        if (origins[i].master[0] && strcmp(origins[i].master, master) == 0)
            return &origins[i];
    return NULL;
}

/* The slot a restart kept for the master of hash h, or NULL. */
static struct erl_seq_origin *restored_for(uint64_t h)
{
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++)
        if (origins[i].restored && origins[i].name_hash == h)
            return &origins[i];
    return NULL;
}

/* The slot a restart kept for master, now named. */
static struct erl_seq_origin *claim(struct erl_seq_origin *o, const char *master)
{
    set_name(o->master, sizeof o->master, master);
    o->restored = 0;
    in_use++;
    return o;
}

/* The slot of master: its own, the one a restart kept for it, a free one,
 * one a restart kept for a master not heard of since, or the one heard of
 * longest ago with nothing held; NULL when all hold messages. */
static struct erl_seq_origin *slot_of(const char *master)
{
    struct erl_seq_origin *o = named(master);
    if (o)
        return o;
    uint64_t h = name_hash(master);
    if ((o = restored_for(h)) != NULL)
        return claim(o, master);
    struct erl_seq_origin *free_slot = NULL, *kept = NULL, *oldest = NULL;
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        struct erl_seq_origin *s = &origins[i];
        if (!s->master[0] && !s->restored) {
            if (!free_slot)
                free_slot = s;
        } else if (!s->master[0]) {
            if (!kept)
                kept = s;
        } else if (!s->head && (!oldest || s->used_ms < oldest->used_ms)) {
            oldest = s;
        }
    }
    o = free_slot ? free_slot : kept ? kept : oldest;
    if (o) {
        in_use += !o->master[0];
        *o = (struct erl_seq_origin){.name_hash = h};     /* the loop is told of it */
        set_name(o->master, sizeof o->master, master);
    }
    return o;
}

void erl_seq_restore(uint32_t k, uint64_t hash, uint64_t inc, uint64_t applied)
{
    if (k >= ERL_SEQ_ORIGINS || origins[k].master[0])
        return;
    origins[k] = (struct erl_seq_origin){.name_hash = hash, .inc = inc, .next = applied + 1,
                                         .applied = applied, .last_seq = applied,
                                         .run_told = 1, .restored = 1};
}

int erl_seq_run_untold(struct erl_seq_origin *o, struct cmd_seq_run *run)
{
    if (o->run_told)
        return 0;
    *run = (struct cmd_seq_run){.name_hash = o->name_hash, .inc = o->inc,
                                .base = o->next ? o->next - 1 : 0};
    o->run_told = 1;
    return 1;
}

uint32_t erl_seq_slot(const struct erl_seq_origin *o) { return (uint32_t)(o - origins); }

/* o becomes master's run inc, knowing nothing of it yet (nor the loop). */
static void new_run(struct erl_seq_origin *o, uint64_t inc)
{
    drop_held(o);
    char master[MAXATOMLEN];
    memcpy(master, o->master, sizeof master);
    uint64_t h = o->name_hash;
    *o = (struct erl_seq_origin){.name_hash = h, .inc = inc};
    memcpy(o->master, master, sizeof master);
}

/* Keeps a copy of the message in o's list, by number; 0 when kept. A copy
 * of a number already held is not kept again (a duplicate, 1). */
static int hold(struct erl_seq_origin *o, uint64_t seq, uint64_t last, const char *term,
                uint32_t len)
{
    struct erl_seq_held *after = o->tail;        /* numbers mostly come in order */
    while (after && after->seq > seq)
        after = after->prev;
    if (after && after->seq == seq)
        return 1;
    struct erl_seq_held *h = NULL;
    if (held_bytes + sizeof *h + len <= ERL_SEQ_HELD_MAX)
        h = malloc(sizeof *h + len);
    if (!h)
        return -1;
    *h = (struct erl_seq_held){.seq = seq, .last = last, .len = len};
    memcpy(h->term, term, len);
    h->prev = after;
    h->next = after ? after->next : o->head;
    if (h->next)
        h->next->prev = h;
    else
        o->tail = h;
    if (after)
        after->next = h;
    else
        o->head = h;
    held_bytes += held_size(h);
    return 0;
}

enum erl_seq_verdict erl_seq_admit(const char *master, uint64_t inc, uint64_t seq, uint64_t last,
                                   const char *from, const char *term, uint32_t len,
                                   struct erl_seq_origin **out, int64_t now_ms)
{
    struct erl_seq_origin *o = slot_of(master);
    *out = o;
    if (!o) {
        atomic_fetch_add(&cnode_stats.seq_untracked, 1);
        log_limited(&full_rl, LOG_ERROR, "numbered message of master %s: already %d masters' "
                    "streams held here, applied without its number", master, ERL_SEQ_ORIGINS);
        return ERL_SEQ_UNTRACKED;
    }
    if (inc < o->inc) {                /* an older run's, late: that run is over */
        atomic_fetch_add(&cnode_stats.seq_skipped, last - seq + 1);
        return ERL_SEQ_STALE;
    }
    if (inc > o->inc)
        new_run(o, inc);               /* waits for its base: next is 0 */
    o->used_ms = now_cache = now_ms;
    set_name(o->path, sizeof o->path, from);
    if (o->next && last < o->next) {
        atomic_fetch_add(&cnode_stats.seq_duplicates, 1);
        o->ack_again = 1;
        return ERL_SEQ_DUPLICATE;
    }
    if (o->next && seq <= o->next)
        return ERL_SEQ_APPLY;          /* held ones after it follow: erl_seq_take_due */
    int r = hold(o, seq, last, term, len);
    if (r > 0) {
        atomic_fetch_add(&cnode_stats.seq_duplicates, 1);
        return ERL_SEQ_DUPLICATE;
    }
    if (r < 0) {
        atomic_fetch_add(&cnode_stats.seq_held_dropped, 1);
        log_limited(&full_rl, LOG_INFO, "%u bytes of numbered messages wait for the ones "
                    "before them: one of %s not kept, its master sends it again",
                    ERL_SEQ_HELD_MAX, master);
        return ERL_SEQ_DROPPED;
    }
    atomic_fetch_add(&cnode_stats.seq_reordered, 1);
    if (!o->hole_ms)
        o->hole_ms = now_ms;
    return ERL_SEQ_HELD;
}

void erl_seq_committed(struct erl_seq_origin *o, uint64_t last, uint64_t rec)
{
    if (last >= o->next)
        o->next = last + 1;
    o->last_seq = o->next - 1;
    o->last_rec = rec;
    if (!o->mark_rec) {
        o->mark_seq = o->last_seq;
        o->mark_rec = rec;
    }
}

struct erl_seq_held *erl_seq_take_due(struct erl_seq_origin *o)
{
    while (o->next && o->head && o->head->seq <= o->next) {
        struct erl_seq_held *h = o->head;
        unlink_held(o, h);
        if (h->last >= o->next)
            return h;
        atomic_fetch_add(&cnode_stats.seq_duplicates, 1);
        free(h);
    }
    /* A hole left (or a new one): it waits from now. */
    o->hole_ms = o->head ? now_cache : 0;
    return NULL;
}

struct erl_seq_origin *erl_seq_base(const char *master, uint64_t inc, uint64_t base,
                                    const char *ack_to, const char *from, int64_t now_ms)
{
    struct erl_seq_origin *o = slot_of(master);
    if (!o || inc < o->inc)
        return NULL;                   /* none free, or an older run's, late */
    if (inc > o->inc)
        new_run(o, inc);
    if (o->next <= base) {
        /* What comes before base is settled there: acknowledged, or given up. */
        o->next = base + 1;
        if (o->applied < base)
            o->applied = o->last_seq = base;
        o->mark_rec = 0;
    }
    o->used_ms = now_cache = now_ms;
    set_name(o->ack_to, sizeof o->ack_to, ack_to);
    set_name(o->path, sizeof o->path, from);
    o->ack_again = 1;                  /* tells it where the node stands, by this way */
    return o;
}

/* Moves o->applied on as far as the loop has gone. */
static void advance(struct erl_seq_origin *o, uint64_t consumed)
{
    if (!o->mark_rec || consumed < o->mark_rec)
        return;
    o->applied = o->mark_seq;
    if (o->last_seq > o->applied) {
        o->mark_seq = o->last_seq;
        o->mark_rec = o->last_rec;
    } else {
        o->mark_rec = 0;
    }
}

/* After an acknowledgement found no way to its master, the next try waits this long. */
#define ACK_RETRY_MS 100

static int ack_wanted(const struct erl_seq_origin *o)
{
    return o->master[0] && o->ack_to[0] && (o->applied > o->acked || o->ack_again);
}

static int64_t ack_wait(const struct erl_seq_origin *o)
{
    return o->ack_failed ? ACK_RETRY_MS : ERL_SEQ_ACK_MS;
}

static int ack_due(const struct erl_seq_origin *o, int64_t now_ms)
{
    if (!ack_wanted(o))
        return 0;
    return (o->applied - o->acked >= ERL_SEQ_ACK_EVERY && !o->ack_failed) ||
           now_ms - o->ack_ms >= ack_wait(o);
}

void erl_seq_ack(int64_t now_ms, uint64_t consumed)
{
    now_cache = now_ms;
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        struct erl_seq_origin *o = &origins[i];
        if (!o->master[0])
            continue;
        advance(o, consumed);
        if (!ack_due(o, now_ms))
            continue;
        o->ack_ms = now_ms;
        o->ack_failed = ack_fn(o->path, o->ack_to, o->master, o->inc, o->applied) != 0;
        if (o->ack_failed)
            continue;                  /* no way to it now: a little later */
        atomic_fetch_add(&cnode_stats.seq_acks, 1);
        o->acked = o->applied;
        o->ack_again = 0;
    }
}

void erl_seq_master_linked(const char *master, int64_t now_ms)
{
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++)
        if (origins[i].master[0] && strcmp(origins[i].master, master) == 0)
            origins[i].link_ms = now_ms;
}

/* When o's hole is given up. Its master not linked: it still holds the
 * missing numbers (up to its unacked_max_ms) and sends them once linked
 * again, which messages it sent later through another master may come
 * long before (its resends through them back off). Linked: from the hole,
 * or from the link if later (then what it sends again is on its way),
 * within the unlinked bound and ERL_SEQ_HOLE_MS more. */
static int64_t hole_deadline(const struct erl_seq_origin *o)
{
    if (linked_fn && !linked_fn(o->master))
        return o->hole_ms + ERL_SEQ_HOLE_UNLINKED_MS;
    int64_t from = o->link_ms > o->hole_ms ? o->link_ms : o->hole_ms;
    int64_t last = o->hole_ms + ERL_SEQ_HOLE_UNLINKED_MS;
    return (from < last ? from : last) + ERL_SEQ_HOLE_MS;
}

struct erl_seq_origin *erl_seq_hole_expired(int64_t now_ms, uint64_t *skipped_out)
{
    now_cache = now_ms;
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        struct erl_seq_origin *o = &origins[i];
        if (!o->head || !o->hole_ms || now_ms < hole_deadline(o))
            continue;
        int waited_s = (int)((now_ms - o->hole_ms) / 1000);
        uint64_t skipped = o->next ? o->head->seq - o->next : 0;
        *skipped_out = skipped;
        atomic_fetch_add(&cnode_stats.seq_skipped, skipped);
        if (skipped)
            log_limited(&hole_rl, LOG_ERROR, "master %s: numbers %llu to %llu never came in "
                        "%d s (lost with a run of it that died, or past its unacked_max_ms?): "
                        "given up, every uid told a gap, the messages after them applied",
                        o->master, (unsigned long long)o->next,
                        (unsigned long long)(o->head->seq - 1), waited_s);
        else
            log_limited(&hole_rl, LOG_ERROR, "master %s: no base for its run in %d s: its "
                        "messages applied from number %llu", o->master, waited_s,
                        (unsigned long long)o->head->seq);
        o->next = o->head->seq;
        o->hole_ms = now_ms;           /* the next hole waits from now */
        return o;
    }
    return NULL;
}

int erl_seq_wait_ms(int64_t now_ms)
{
    int64_t wait = -1;
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        const struct erl_seq_origin *o = &origins[i];
        if (!o->master[0])
            continue;
        int64_t w = -1;
        if (o->mark_rec)
            w = ERL_SEQ_ACK_MS;        /* to see the loop apply it */
        if (ack_wanted(o)) {
            int64_t a = o->ack_ms + ack_wait(o) - now_ms;
            a = a < 0 ? 0 : a;
            w = w < 0 || a < w ? a : w;
        }
        if (o->head && o->hole_ms) {
            int64_t h = hole_deadline(o) - now_ms;
            h = h < 0 ? 0 : h;
            w = w < 0 || h < w ? h : w;
        }
        if (w >= 0 && (wait < 0 || w < wait))
            wait = w;
    }
    return (int)wait;
}

int erl_seq_applied_for(const char *master, uint64_t *inc, uint64_t *seq)
{
    struct erl_seq_origin *o = named(master);
    if (!o && (o = restored_for(name_hash(master))) != NULL)
        claim(o, master);                /* a restart kept it: the hello tells it */
    if (!o || !o->next)
        return 0;                        /* no base yet: nothing known */
    *inc = o->inc;
    *seq = o->next - 1;
    return 1;
}

/* ---------------------------------------------------------------- hand-over */

static void put_name(struct carry_out *out, const char *name)
{
    carry_u16(out, (uint16_t)strlen(name));
    carry_put(out, name, strlen(name));
}

static int get_name(struct carry_in *in, char *to, size_t size)
{
    uint16_t n = carry_get_u16(in);
    const char *p = carry_view(in, n);
    if (!p || n >= size)
        return -1;
    memcpy(to, p, n);
    to[n] = '\0';
    return 0;
}

int erl_seq_carry_export(struct carry_out *out)
{
    uint32_t n = 0;
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++)
        n += origins[i].master[0] || origins[i].restored;
    size_t at = carry_begin(out, ERL_SEQ_CARRY_TAG, ERL_SEQ_CARRY_VERSION);
    carry_u64(out, instance);
    carry_u32(out, n);
    for (int i = 0; i < ERL_SEQ_ORIGINS; i++) {
        const struct erl_seq_origin *o = &origins[i];
        if (!o->master[0] && !o->restored)
            continue;
        /* 2: the slot (the history file's record of it), and one a restart
         * kept for a master not heard of since. */
        carry_u8(out, (uint8_t)i);
        carry_u8(out, (uint8_t)o->restored);
        carry_u8(out, (uint8_t)o->run_told);
        carry_u64(out, o->name_hash);
        put_name(out, o->master);
        put_name(out, o->ack_to);
        put_name(out, o->path);
        carry_u64(out, o->inc);
        carry_u64(out, o->next);
        /* The hand-over empties the inbox before the C-node exports: every
         * number committed is applied (the records' numbers are this
         * process's and go with it). */
        carry_u64(out, o->last_seq > o->applied ? o->last_seq : o->applied);
        carry_u64(out, o->acked);
        carry_u8(out, (uint8_t)o->ack_again);
        carry_u64(out, (uint64_t)o->ack_ms);
        carry_u64(out, (uint64_t)o->hole_ms);
        carry_u64(out, (uint64_t)o->used_ms);
        uint32_t held = 0;
        for (const struct erl_seq_held *h = o->head; h; h = h->next)
            held++;
        carry_u32(out, held);
        for (const struct erl_seq_held *h = o->head; h; h = h->next) {
            carry_u64(out, h->seq);
            carry_u64(out, h->last);
            carry_u32(out, h->len);
            carry_put(out, h->term, h->len);
        }
    }
    carry_end(out, at);
    return out->failed ? -1 : 0;
}

/* The slot of a version 2 record, as it was; NULL when malformed. */
static struct erl_seq_origin *carried_slot(struct carry_in *in)
{
    uint8_t k = carry_get_u8(in), restored = carry_get_u8(in), told = carry_get_u8(in);
    uint64_t h = carry_get_u64(in);
    char master[MAXATOMLEN];
    if (in->failed || k >= ERL_SEQ_ORIGINS || origins[k].master[0] || origins[k].restored ||
        get_name(in, master, sizeof master) != 0 || !master[0] == !restored)
        return NULL;
    struct erl_seq_origin *o = &origins[k];
    *o = (struct erl_seq_origin){.name_hash = h, .run_told = told, .restored = restored};
    if (!restored)
        claim(o, master);
    return o;
}

int erl_seq_carry_take(struct carry_in *in, uint16_t version)
{
    instance = carry_get_u64(in);
    uint32_t n = carry_get_u32(in);
    if (in->failed || instance == 0 || n > ERL_SEQ_ORIGINS)
        return -1;
    for (uint32_t k = 0; k < n; k++) {
        char master[MAXATOMLEN];
        struct erl_seq_origin *o;
        if (version >= 2)
            o = carried_slot(in);
        else                         /* 1: no slot, the loop is told each run again */
            o = get_name(in, master, sizeof master) == 0 && master[0] ? slot_of(master) : NULL;
        if (!o || get_name(in, o->ack_to, sizeof o->ack_to) != 0 ||
            get_name(in, o->path, sizeof o->path) != 0)
            return -1;
        o->inc = carry_get_u64(in);
        o->next = carry_get_u64(in);
        o->applied = o->last_seq = carry_get_u64(in);
        o->acked = carry_get_u64(in);
        o->ack_again = carry_get_u8(in);
        o->ack_ms = (int64_t)carry_get_u64(in);
        o->hole_ms = (int64_t)carry_get_u64(in);
        o->used_ms = (int64_t)carry_get_u64(in);
        uint32_t held = carry_get_u32(in);
        for (uint32_t j = 0; j < held && !in->failed; j++) {
            uint64_t seq = carry_get_u64(in), last = carry_get_u64(in);
            uint32_t len = carry_get_u32(in);
            const char *term = carry_view(in, len);
            if (!term || last < seq || hold(o, seq, last, term, len) != 0)
                return -1;
        }
    }
    return in->failed ? -1 : 0;
}
