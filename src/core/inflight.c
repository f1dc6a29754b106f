/* SPDX-License-Identifier: Apache-2.0 */
/* Client bytes in flight: see inflight.h.
 *
 * The holders are a compact table (a holder's `at` is its index + 1,
 * fixed up when the last entry moves into a freed place), scanned for the
 * largest only when the bound is passed: under an attack that keeps it
 * passed, a scan of the holders per shed, each shed freeing the most any
 * holder held. */
#include "core/inflight.h"
#include "obs/stats.h"

#include <stdlib.h>

struct entry {                  /* 24 bytes */
    void *owner;
    struct inflight *h;
    uint32_t bytes;
    uint8_t kind;
    uint8_t doomed;
};

static struct entry *table;
static uint32_t used, size;
static uint64_t total, doomed_total, bound;     /* bound 0: none */
static inflight_shed_fn shed_of[INFLIGHT_KINDS];

void inflight_configure(uint64_t max_total) { bound = max_total; }

void inflight_on_shed(enum inflight_kind kind, inflight_shed_fn shed) { shed_of[kind] = shed; }

static struct entry *entry_of(const struct inflight *h) { return &table[h->at - 1]; }

/* h's entry, made when it has none; NULL out of memory. */
static struct entry *enter(struct inflight *h, void *owner, enum inflight_kind kind)
{
    if (h->at)
        return entry_of(h);
    if (used == size) {
        uint32_t n = size ? size * 2 : 64;
        struct entry *t = realloc(table, n * sizeof *t);
        if (!t)
            return NULL;
        table = t;
        size = n;
    }
    table[used] = (struct entry){owner, h, 0, (uint8_t)kind, 0};
    h->at = ++used;
    return &table[used - 1];
}

/* The largest entry not doomed, or NULL. */
static struct entry *largest(void)
{
    struct entry *big = NULL;
    for (uint32_t i = 0; i < used; i++)
        if (!table[i].doomed && (!big || table[i].bytes > big->bytes))
            big = &table[i];
    return big;
}

static void doom(struct entry *e)
{
    e->doomed = 1;
    doomed_total += e->bytes;
}

int inflight_add(struct inflight *h, void *owner, enum inflight_kind kind, uint32_t n)
{
    struct entry *e = enter(h, owner, kind);
    if (!e)
        return -1;
    e->bytes += n;
    total += n;
    loop_stats.input_bytes = total;
    if (e->doomed) {
        doomed_total += n;
        return -1;
    }
    while (bound && total - doomed_total > bound) {
        struct entry *big = largest();  /* never NULL: h's own is not doomed */
        doom(big);
        if (big->h == h)
            return -1;
        if (shed_of[big->kind])
            shed_of[big->kind](big->owner);   /* may drop it: the table moves */
    }
    return 0;
}

void inflight_drop(struct inflight *h)
{
    if (!h->at)
        return;
    struct entry *e = entry_of(h);
    total -= e->bytes;
    if (e->doomed)
        doomed_total -= e->bytes;
    *e = table[--used];                /* the last moves into its place */
    if (e != &table[used])
        e->h->at = (uint32_t)(e - table) + 1;
    h->at = 0;
    loop_stats.input_bytes = total;
}

uint32_t inflight_bytes(const struct inflight *h) { return h->at ? entry_of(h)->bytes : 0; }

void *inflight_take_doomed(enum inflight_kind kind)
{
    for (uint32_t i = 0; i < used; i++)
        if (table[i].doomed && table[i].kind == kind) {
            void *owner = table[i].owner;
            inflight_drop(table[i].h);
            return owner;
        }
    return NULL;
}

void inflight_free(void)
{
    free(table);
    table = NULL;
    used = size = 0;
    total = doomed_total = 0;
}
