/* SPDX-License-Identifier: Apache-2.0 */
/* Connection ids: see conn.h. Two open-addressing tables (linear probing,
 * deletion by backward shift, so no tombstones): stream -> entry, and
 * id -> stream. Each grows to twice its size past half full. */
#include "core/conn.h"
#include "lib/carry.h"
#include "lib/clock.h"

#include <stdlib.h>

struct by_stream {               /* 24 bytes */
    const struct stream *s;      /* NULL: free */
    struct conn c;
};

struct by_id {                   /* 16 bytes */
    uint64_t id;                 /* 0: free (ids start at 1) */
    struct stream *s;
};

static struct by_stream *ts;
static struct by_id *ti;
static uint32_t mask;            /* both tables have mask + 1 entries */
static uint32_t used;
static uint64_t last_id;

/* A new id: the wall clock in microseconds, or one past the last id when
 * ids come faster than that. Ids of an earlier run of the node are below
 * it (that run ended before this one started), so a Conn Erlang kept from
 * then names nothing here; see conn.h. */
static uint64_t new_id(void)
{
    uint64_t now = clock_realtime_us();
    last_id = now > last_id ? now : last_id + 1;
    return last_id;
}

static uint32_t hash64(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32); }
static uint32_t hash_s(const struct stream *s) { return hash64((uintptr_t)s >> 3); }

static struct by_stream *find_s(const struct stream *s)
{
    if (!ts)
        return NULL;
    for (uint32_t i = hash_s(s) & mask;; i = (i + 1) & mask) {
        if (ts[i].s == s)
            return &ts[i];
        if (!ts[i].s)
            return NULL;
    }
}

static struct by_id *find_id(uint64_t id)
{
    if (!ti || id == 0)
        return NULL;
    for (uint32_t i = hash64(id) & mask;; i = (i + 1) & mask) {
        if (ti[i].id == id)
            return &ti[i];
        if (!ti[i].id)
            return NULL;
    }
}

static struct by_stream *put_s(const struct stream *s, struct conn c)
{
    uint32_t i = hash_s(s) & mask;
    while (ts[i].s)
        i = (i + 1) & mask;
    ts[i] = (struct by_stream){s, c};
    return &ts[i];
}

static void put_id(uint64_t id, struct stream *s)
{
    uint32_t i = hash64(id) & mask;
    while (ti[i].id)
        i = (i + 1) & mask;
    ti[i] = (struct by_id){id, s};
}

static int grow(void)
{
    uint32_t old_n = ts ? mask + 1 : 0, n = old_n ? old_n * 2 : 256;
    struct by_stream *os = ts, *ns = calloc(n, sizeof *ns);
    struct by_id *oi = ti, *ni = calloc(n, sizeof *ni);
    if (!ns || !ni) {
        free(ns);
        free(ni);
        return -1;
    }
    ts = ns;
    ti = ni;
    mask = n - 1;
    for (uint32_t i = 0; i < old_n; i++) {
        if (os[i].s)
            put_s(os[i].s, os[i].c);
        if (oi[i].id)
            put_id(oi[i].id, oi[i].s);
    }
    free(os);
    free(oi);
    return 0;
}

struct conn *conn_of(const struct stream *s)
{
    struct by_stream *e = find_s(s);
    if (e)
        return &e->c;
    if ((used + 1) * 2 > (ts ? mask + 1 : 0) && grow() != 0)
        return NULL;
    used++;
    uint64_t id = new_id();
    put_id(id, (struct stream *)s);
    return &put_s(s, (struct conn){id, 0, 0})->c;
}

uint64_t conn_id_of(const struct stream *s)
{
    const struct by_stream *e = find_s(s);
    return e ? e->c.id : 0;
}

struct stream *conn_find(uint64_t id)
{
    struct by_id *e = find_id(id);
    return e ? e->s : NULL;
}

/* Backward-shift deletion of slot i: later entries of the probe run move
 * up, so that lookups may stop at the first free slot. */
#define DELETE_AT(table, i, is_free, home)                                        \
    do {                                                                          \
        uint32_t hole = (i), j = (i);                                             \
        for (;;) {                                                                \
            j = (j + 1) & mask;                                                   \
            if (is_free(table[j]))                                                \
                break;                                                            \
            uint32_t h = home(table[j]) & mask;                                   \
            /* j's entry may fill the hole when its home is not in (hole, j] */  \
            if (((j - h) & mask) >= ((j - hole) & mask)) {                        \
                table[hole] = table[j];                                           \
                hole = j;                                                         \
            }                                                                     \
        }                                                                         \
        table[hole] = (__typeof__(table[hole])){0};                               \
    } while (0)

#define S_FREE(e) (!(e).s)
#define S_HOME(e) hash_s((e).s)
#define I_FREE(e) (!(e).id)
#define I_HOME(e) hash64((e).id)

void conn_forget(const struct stream *s)
{
    struct by_stream *e = find_s(s);
    if (!e)
        return;
    struct by_id *k = find_id(e->c.id);
    if (k)
        DELETE_AT(ti, (uint32_t)(k - ti), I_FREE, I_HOME);
    DELETE_AT(ts, (uint32_t)(e - ts), S_FREE, S_HOME);
    used--;
}

void conn_free(void)
{
    free(ts);
    free(ti);
    ts = NULL;
    ti = NULL;
    mask = used = 0;
}

/* ---------------------------------------------------------------- hand-over */

int conn_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s))
{
    uint32_t n = 0, size = ts ? mask + 1 : 0;
    for (uint32_t i = 0; i < size; i++)
        n += ts[i].s && index_of(ts[i].s) != UINT32_MAX;
    size_t at = carry_begin(o, CONN_CARRY_TAG, CONN_CARRY_VERSION);
    carry_u64(o, last_id);
    carry_u32(o, n);
    for (uint32_t i = 0; i < size; i++) {
        uint32_t k = ts[i].s ? index_of(ts[i].s) : UINT32_MAX;
        if (k == UINT32_MAX)
            continue;
        carry_u32(o, k);
        carry_u64(o, ts[i].c.id);
        carry_u32(o, ts[i].c.tokens);
        carry_u32(o, ts[i].c.at_ms);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int conn_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i))
{
    (void)version;                   /* 1: the only one yet */
    uint64_t last = carry_get_u64(rec);
    uint32_t n = carry_get_u32(rec);
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        struct stream *s = at(carry_get_u32(rec));
        struct conn c = {.id = carry_get_u64(rec)};
        c.tokens = carry_get_u32(rec);
        c.at_ms = carry_get_u32(rec);
        if (rec->failed || !s || c.id == 0 || find_s(s) || find_id(c.id))
            return -1;
        if ((used + 1) * 2 > (ts ? mask + 1 : 0) && grow() != 0)
            return -1;
        used++;
        put_id(c.id, s);
        put_s(s, c);
    }
    /* Ids go on from the last one given, never below (conn.h). */
    if (last > last_id)
        last_id = last;
    return rec->failed ? -1 : 0;
}
