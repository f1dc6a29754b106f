/* Uid table: max_users + 1 pointers, allocated once. calloc leaves the
 * pages untouched until a uid in them connects, so a large table costs
 * memory only where uids are used. */
#include "uidtable.h"
#include "stats.h"
#include "stream.h"

#include <stdlib.h>

static struct stream **slots;
static uint32_t max_uid;
static uint32_t high_uid;
static uidtable_presence_fn on_presence;

int uidtable_init(uint32_t max_users, uidtable_presence_fn presence)
{
    slots = calloc((size_t)max_users + 1, sizeof *slots);
    if (!slots)
        return -1;
    max_uid = max_users;
    high_uid = 0;
    on_presence = presence;
    return 0;
}

void uidtable_free(void)
{
    free(slots);
    slots = NULL;
}

struct stream *uidtable_first(uint32_t uid) { return slots[uid]; }

void uidtable_add(struct stream *s)
{
    s->next = slots[s->uid];
    slots[s->uid] = s;
    if (s->uid > high_uid)
        high_uid = s->uid;
    if (!s->next) {
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

uint32_t uidtable_high(void) { return high_uid; }

uint32_t uidtable_max_users(void) { return max_uid; }
