/* SPDX-License-Identifier: Apache-2.0 */
/* Uid table: max_users + 1 pointers, allocated once. calloc leaves the
 * pages untouched until a uid in them connects, so a large table costs
 * memory only where uids are used. A bitmap of the online uids (1 bit per
 * uid, 136 KB for 1.1M) lets broadcast and snapshot visit only them, 64
 * uids per word, whatever uids were used before. */
#include "core/uidtable.h"
#include "obs/stats.h"
#include "core/stream-t.h"

#include <stdlib.h>

static struct stream **slots;
static uint64_t *online;
static uint32_t max_uid;
static uidtable_presence_fn on_presence;

int uidtable_init(uint32_t max_users, uidtable_presence_fn presence)
{
    slots = calloc((size_t)max_users + 1, sizeof *slots);
    online = calloc((size_t)max_users / 64 + 1, sizeof *online);
    if (!slots || !online) {
        uidtable_free();
        return -1;
    }
    max_uid = max_users;
    on_presence = presence;
    return 0;
}

void uidtable_free(void)
{
    free(slots);
    free(online);
    slots = NULL;
    online = NULL;
}

struct stream *uidtable_first(uint32_t uid) { return slots[uid]; }

uint32_t uidtable_max(void) { return max_uid; }

void uidtable_add(struct stream *s)
{
    s->next = slots[s->uid];
    slots[s->uid] = s;
    if (!s->next) {
        online[s->uid / 64] |= 1ull << (s->uid % 64);
        loop_stats.uids_online++;
        if (on_presence)
            on_presence(s->uid, 1);
    }
}

void uidtable_remove(struct stream *s)
{
    struct stream **pp = &slots[s->uid];
    while (*pp && *pp != s)          /* at most --max-conns-per-uid steps */
        pp = &(*pp)->next;
    if (!*pp)
        return;
    *pp = s->next;
    s->next = NULL;
    if (!slots[s->uid]) {
        online[s->uid / 64] &= ~(1ull << (s->uid % 64));
        loop_stats.uids_online--;
        if (on_presence)
            on_presence(s->uid, 0);
    }
}

uint32_t uidtable_count(uint32_t uid)
{
    uint32_t n = 0;
    for (struct stream *s = slots[uid]; s; s = s->next)
        n++;
    return n;
}

struct stream *uidtable_oldest(uint32_t uid)
{
    struct stream *s = slots[uid];
    while (s && s->next)
        s = s->next;
    return s;
}

uint32_t uidtable_next_online(uint32_t after)
{
    uint64_t from = (uint64_t)after + 1;
    if (from > max_uid)
        return 0;
    size_t w = from / 64, last = max_uid / 64;
    uint64_t bits = online[w] & (~0ull << (from % 64));
    while (!bits) {
        if (++w > last)
            return 0;
        bits = online[w];
    }
    return (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
}

