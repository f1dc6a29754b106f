/* SPDX-License-Identifier: Apache-2.0 */
/* Token lifetime: see expiry.h.
 *
 * Cost per tracked stream: a 24-byte entry and a 4-byte hash head (both
 * arrays grow by doubling: up to twice that), nothing in struct stream;
 * 16 KB for the wheel. A tick every EXPIRY_TICK_MS looks at the slots of
 * the seconds that passed since the last one: an entry sits in slot
 * exp % WHEEL_SLOTS and is skipped there until its own second comes, so a
 * token valid for days costs one look every WHEEL_SLOTS seconds (68 min). */
#include "core/expiry.h"
#include "obs/end_reason.h"
#include "lib/carry.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "core/stream-t.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WHEEL_SLOTS 4096               /* seconds, a power of two */
#define EXPIRY_TICK_MS 500

/* Entries are numbered from 1; 0 is "none" in every link. */
struct entry {
    struct stream *s;                  /* NULL: free */
    uint32_t hnext;                    /* next in the hash chain; free: next free */
    uint32_t prev, next;               /* the wheel slot's list */
    uint32_t exp;                      /* Unix seconds */
};

static int enabled;
static void (*end_stream)(struct stream *s, uint8_t why);
static struct event *tick_ev;
static int64_t pending_exp;            /* for the next expiry_track */
static struct entry *entries;          /* [cap + 1] */
static uint32_t cap, used, free_head, tracked;
static uint32_t *hash;                 /* [hcap] chain heads */
static uint32_t hcap;
static uint32_t wheel[WHEEL_SLOTS];
static int64_t done_until;             /* every second up to it was looked at */

static uint32_t hash_of(const struct stream *s)
{
    uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (hcap - 1);
}

static void hash_insert(uint32_t i)
{
    uint32_t h = hash_of(entries[i].s);
    entries[i].hnext = hash[h];
    hash[h] = i;
}

/* Twice the heads, every tracked entry rechained: O(tracked), amortized. */
static int hash_grow(void)
{
    uint32_t n = hcap ? hcap * 2 : 1024;
    uint32_t *h = calloc(n, sizeof *h);
    if (!h)
        return -1;
    free(hash);
    hash = h;
    hcap = n;
    for (uint32_t i = 1; i <= used; i++)
        if (entries[i].s)
            hash_insert(i);
    return 0;
}

static uint32_t entry_new(void)
{
    if (free_head) {
        uint32_t i = free_head;
        free_head = entries[i].hnext;
        return i;
    }
    if (used == cap) {
        uint32_t n = cap ? cap * 2 : 1024;
        struct entry *e = realloc(entries, ((size_t)n + 1) * sizeof *e);
        if (!e)
            return 0;
        entries = e;
        cap = n;
    }
    return ++used;
}

static void wheel_unlink(uint32_t i)
{
    struct entry *e = &entries[i];
    if (e->prev)
        entries[e->prev].next = e->next;
    else
        wheel[e->exp % WHEEL_SLOTS] = e->next;
    if (e->next)
        entries[e->next].prev = e->prev;
}

void expiry_next_stream(int64_t exp) { pending_exp = enabled ? exp : 0; }

void expiry_track(struct stream *s)
{
    int64_t exp = pending_exp;
    pending_exp = 0;
    if (exp <= 0)
        return;
    if (exp > UINT32_MAX)
        exp = UINT32_MAX;              /* 2106: as good as never */
    uint32_t i = (tracked + 1 > hcap && hash_grow() != 0) ? 0 : entry_new();
    if (!i) {
        static struct log_ratelimit rl;
        log_limited(&rl, LOG_ERROR, "out of memory tracking a token's expiry: the stream "
                    "outlives its token");
        return;
    }
    struct entry *e = &entries[i];
    *e = (struct entry){.s = s, .exp = (uint32_t)exp};
    hash_insert(i);
    uint32_t slot = e->exp % WHEEL_SLOTS;
    e->next = wheel[slot];
    if (e->next)
        entries[e->next].prev = i;
    wheel[slot] = i;
    tracked++;
}

void expiry_forget(struct stream *s)
{
    if (!tracked)
        return;
    for (uint32_t *link = &hash[hash_of(s)]; *link; link = &entries[*link].hnext) {
        uint32_t i = *link;
        if (entries[i].s != s)
            continue;
        *link = entries[i].hnext;
        wheel_unlink(i);
        entries[i].s = NULL;
        entries[i].hnext = free_head;
        free_head = i;
        tracked--;
        return;
    }
}

uint32_t expiry_tracked(void) { return tracked; }

/* Ends the streams of slot whose exp is at most now. Ending one drops its
 * entry (stream_close calls expiry_forget): the next is taken first. A
 * stream still welcoming keeps its entry till its ending is sent. */
static void expire_slot(uint32_t slot, int64_t now)
{
    for (uint32_t i = wheel[slot], next; i; i = next) {
        next = entries[i].next;
        struct stream *s = entries[i].s;
        if (entries[i].exp > now || s->state == STREAM_ENDING)
            continue;
        end_stream(s, END_EXPIRED);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int64_t now = (int64_t)time(NULL);
    if (now < done_until)
        done_until = now - 1;          /* the clock went back: look again from now */
    if (!tracked) {
        done_until = now;
        return;
    }
    int64_t from = done_until + 1;
    if (now - from >= WHEEL_SLOTS)
        from = now - WHEEL_SLOTS + 1;  /* a jump forward: every slot once */
    for (int64_t t = from; t <= now; t++)
        expire_slot((uint32_t)(t % WHEEL_SLOTS), now);
    done_until = now;
}

int expiry_init(struct event_base *base, int on, void (*end)(struct stream *s, uint8_t why))
{
    end_stream = end;
    enabled = on;
    if (!on)
        return 0;
    done_until = (int64_t)time(NULL);
    tick_ev = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    static const struct timeval every = {0, EXPIRY_TICK_MS * 1000};
    if (!tick_ev || event_add(tick_ev, &every) != 0) {
        log_msg(LOG_ERROR, "cannot start the token expiry timer: out of memory");
        return -1;
    }
    return 0;
}

void expiry_free(void)
{
    if (tick_ev)
        event_free(tick_ev);
    tick_ev = NULL;
    free(entries);
    free(hash);
    entries = NULL;
    hash = NULL;
    cap = used = free_head = tracked = hcap = 0;
    memset(wheel, 0, sizeof wheel);
    enabled = 0;
}

/* ---------------------------------------------------------------- hand-over */

int expiry_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s))
{
    uint32_t n = 0;
    for (uint32_t i = 1; i <= used; i++)
        n += entries[i].s && index_of(entries[i].s) != UINT32_MAX;
    size_t at = carry_begin(o, EXPIRY_CARRY_TAG, EXPIRY_CARRY_VERSION);
    carry_u32(o, n);
    for (uint32_t i = 1; i <= used; i++) {
        uint32_t k = entries[i].s ? index_of(entries[i].s) : UINT32_MAX;
        if (k == UINT32_MAX)
            continue;
        carry_u32(o, k);
        carry_u32(o, entries[i].exp);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int expiry_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i))
{
    (void)version;                   /* 1: the only one yet */
    uint32_t n = carry_get_u32(rec);
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        struct stream *s = at(carry_get_u32(rec));
        uint32_t exp = carry_get_u32(rec);
        if (rec->failed || !s)
            return -1;
        uint32_t before = tracked;
        expiry_next_stream(exp);
        expiry_track(s);
        if (enabled && tracked == before)
            return -1;               /* out of memory */
    }
    return rec->failed ? -1 : 0;
}
