/* SPDX-License-Identifier: Apache-2.0 */
/* A WebSocket client's budget of a second: see ws_budget.h.
 *
 * Open addressing, linear probing; an entry of an earlier second is free,
 * so the table empties itself as the second turns, without a walk. Within
 * a second entries are only added (a closed stream's keeps its place, its
 * stream NULL), so a probe may stop at the first free entry. */
#include "transport/ws_budget.h"

#include <stdlib.h>

#define BUDGET_MIN 256u
#define BUDGET_PROBES 64u           /* a crowded table does not count a stream */

static struct ws_budget *budgets;
static uint32_t budget_mask;        /* entries - 1 */
static uint32_t budget_used;        /* entries of budget_second */
static uint32_t budget_second;

static uint32_t budget_hash(const struct stream *s)
{
    return (uint32_t)(((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 32);
}

/* s's entry of second, or a new one when add; NULL when none (or crowded). */
static struct ws_budget *budget_probe(const struct stream *s, uint32_t second, int add)
{
    if (!budgets)
        return NULL;
    uint32_t i = budget_hash(s) & budget_mask;
    for (unsigned n = 0; n < BUDGET_PROBES; n++, i = (i + 1) & budget_mask) {
        struct ws_budget *b = &budgets[i];
        if (b->second != second) {
            if (!add)
                return NULL;
            *b = (struct ws_budget){s, second, 0, 0, 0};
            budget_used++;
            return b;
        }
        if (b->s == s)
            return b;
    }
    return NULL;
}

/* Twice the entries, the current second's moved over. Rare: the table only
 * grows, to twice the most streams that ever sent in one second. */
static void budget_grow(uint32_t second)
{
    uint32_t old_n = budgets ? budget_mask + 1 : 0, n = old_n ? old_n * 2 : BUDGET_MIN;
    struct ws_budget *old = budgets, *t = calloc(n, sizeof *t);
    if (!t)
        return;                     /* the old table, more crowded */
    budgets = t;
    budget_mask = n - 1;
    budget_used = 0;
    for (uint32_t i = 0; i < old_n; i++) {
        struct ws_budget *b;
        if (old[i].second == second && old[i].s && (b = budget_probe(old[i].s, second, 1)))
            *b = old[i];
    }
    free(old);
}

struct ws_budget *ws_budget_of(const struct stream *s, uint32_t now)
{
    if (budget_second != now) {
        budget_second = now;
        budget_used = 0;
    }
    if (budget_used >= (budget_mask + 1) / 2)
        budget_grow(now);
    return budget_probe(s, now, 1);
}

void ws_budget_forget(const struct stream *s)
{
    struct ws_budget *b = budget_probe(s, budget_second, 0);
    if (b)
        b->s = NULL;
}

void ws_budget_free(void)
{
    free(budgets);
    budgets = NULL;
    budget_mask = budget_used = budget_second = 0;
}
