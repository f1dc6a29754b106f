/* SPDX-License-Identifier: Apache-2.0 */
/* What a restart checks in a history file: see history_check.h.
 *
 * A file written only by this code and left by a process killed at any
 * instruction passes (history.c publishes in an order that keeps it so);
 * what fails is damage (a stray write, another program, a file edited by
 * hand). Nothing here trusts a length or a link before checking it: a
 * link is followed only to an entry start found by the walk. */
#include "core/history_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char why[160];
static uint8_t *starts;            /* a bit per 8 bytes of arena: an entry starts there */
static uint64_t checked_head, checked_tail, checked_size;

#define WHY(...) (snprintf(why, sizeof why, __VA_ARGS__), why)

static size_t to_end(const struct history_view *v, uint64_t pos)
{
    return (size_t)(v->arena_size - pos % v->arena_size);
}

static const struct entry *at(const struct history_view *v, uint64_t pos)
{
    return (const struct entry *)(v->arena + pos % v->arena_size);
}

static int starts_at(uint64_t pos)
{
    uint64_t bit = pos % checked_size / 8;
    return starts[bit / 8] >> (bit % 8) & 1;
}

int history_check_link_ok(uint64_t p)
{
    return p == 0 || p - 1 < checked_head ||
           (p - 1 < checked_tail && (p - 1) % 8 == 0 && starts_at(p - 1));
}

/* Why the entry e, with room bytes before the arena's end, is not as
 * history.c writes them; NULL when it is. */
static const char *well_formed(const struct history_view *v, const struct entry *e, size_t room)
{
    size_t len = e->len & LEN_BYTES;
    if (e->len == FILLER || sizeof *e + pad8(len) > room)
        return "its length runs past its room";
    if (e->uid > v->max_users)
        return "its uid is past --max-users";
    if ((e->len & SHARED_REF) && (!e->uid || (e->len & BINARY_MSG) || len != sizeof(uint64_t)))
        return "it is a malformed multicast entry";
    if (e->check != entry_check(e))
        return "it is not as written (its check differs)";
    return NULL;
}

const char *history_check_state(const struct history_view *v)
{
    uint64_t head = atomic_load(&v->hd->head), tail = atomic_load(&v->hd->tail);
    if (tail < head || tail - head > v->arena_size || head % 8 || tail % 8)
        return WHY("its head %ju and tail %ju are not an arena apart, 8-byte aligned",
                   (uintmax_t)head, (uintmax_t)tail);
    if (atomic_load(&v->hd->move_credit) > v->arena_size)
        return WHY("its move credit is past the arena");
    if (!atomic_load(&v->hd->move_on))
        return NULL;
    const struct entry *r = (const struct entry *)v->room;
    uint64_t from = atomic_load(&v->hd->move_from), to = atomic_load(&v->hd->move_to);
    const char *bad = well_formed(v, r, v->room_size < v->arena_size / 4 ? v->room_size
                                                                        : v->arena_size / 4);
    if (bad || !r->uid || (r->len & SHARED_REF))
        return WHY("the entry it was moving: %s", bad ? bad : "it is not a uid's message");
    size_t size = entry_size(r);
    if ((head != from && head != from + size) || (tail != to && tail != to + size) ||
        to_end(v, to) < size || to < from || to - from > v->arena_size || from % 8 || to % 8)
        return WHY("the move it was making does not fit its head and tail");
    return NULL;
}

const char *history_check_entries(const struct history_view *v, uint64_t head, uint64_t tail)
{
    history_check_end();
    checked_head = head;
    checked_tail = tail;
    checked_size = v->arena_size;
    if (!v->arena_size)
        return head == tail ? NULL : WHY("it has entries but no arena");
    starts = calloc(v->arena_size / 64 + 1, 1);
    if (!starts)
        return WHY("no memory to check it (%ju bytes)", (uintmax_t)(v->arena_size / 64));
    uint64_t pos = head;
    while (pos < tail) {
        size_t left = to_end(v, pos);
        const struct entry *e = at(v, pos);
        if (left < sizeof *e || e->len == FILLER) {
            pos += left;                    /* the rest of a lap, skipped */
            continue;
        }
        size_t room = left < v->arena_size / 4 ? left : v->arena_size / 4;
        const char *bad = well_formed(v, e, room);
        if (!bad && pos + entry_size(e) > tail)
            bad = "it runs past the tail";
        if (bad)
            return WHY("the entry at position %ju: %s", (uintmax_t)pos, bad);
        uint64_t bit = pos % v->arena_size / 8;
        starts[bit / 8] |= (uint8_t)(1u << (bit % 8));
        pos += entry_size(e);
    }
    return pos == tail ? NULL : WHY("its entries run past the tail (%ju, not %ju)",
                                    (uintmax_t)pos, (uintmax_t)tail);
}

/* The entry at position + 1 p, when p is kept (not 0 nor gone). */
static const struct entry *live(const struct history_view *v, uint64_t p)
{
    return p && p - 1 >= checked_head ? at(v, p - 1) : NULL;
}

/* Whether e (a multicast's entry) still has its payload, as history.c's
 * kept_entry says. */
static int payload_kept(const struct entry *e)
{
    uint64_t shared;
    if (!(e->len & SHARED_REF))
        return 1;
    memcpy(&shared, e + 1, sizeof shared);
    return shared - 1 >= checked_head;
}

/* The uid entry e at pos: its links agree with those they name. history.c
 * mends links only between entries still kept (kept_entry): a multicast's
 * entry whose payload is gone is never read again, so a neighbour that
 * moved ahead since may name it while it still names where the neighbour
 * was, either way round. */
static const char *uid_links(const struct history_view *v, uint64_t pos, const struct entry *e)
{
    uint64_t p = entry_link(pos, e->prev), n = entry_link(pos, e->next);
    if (!history_check_link_ok(p) || !history_check_link_ok(n))
        return "a link names no entry";
    const struct entry *q = live(v, p), *r = live(v, n);
    if (q && (q->uid != e->uid || q->seq >= e->seq ||
              (payload_kept(q) && entry_link(p - 1, q->next) != pos + 1)))
        return "its previous message does not link back to it";
    if (r && (r->uid != e->uid || r->seq <= e->seq ||
              (payload_kept(r) && entry_link(n - 1, r->prev) != pos + 1)))
        return "its next message does not link back to it";
    if (e->seq > v->uids[e->uid].seq)
        return "its id is past its uid's last";
    if (e->len & SHARED_REF) {
        uint64_t shared;
        memcpy(&shared, e + 1, sizeof shared);
        const struct entry *s = live(v, shared);
        if (s && (shared - 1 >= pos || !history_check_link_ok(shared) || s->uid != 0))
            return "its payload is not a multicast's";
    }
    return NULL;
}

const char *history_check_links(const struct history_view *v, uint64_t head, uint64_t tail,
                                uint64_t *bytes, uint64_t *messages)
{
    *bytes = *messages = 0;
    for (uint64_t pos = head; pos < tail;) {
        size_t left = to_end(v, pos);
        const struct entry *e = at(v, pos);
        if (left < sizeof *e || e->len == FILLER) {
            pos += left;
            continue;
        }
        const char *bad = e->uid ? uid_links(v, pos, e) : NULL;
        if (bad)
            return WHY("the entry at position %ju: %s", (uintmax_t)pos, bad);
        *bytes += entry_size(e);
        *messages += e->uid != 0;
        pos += entry_size(e);
    }
    for (uint32_t uid = 1; uid <= v->max_users; uid++) {
        uint64_t p = v->uids[uid].newest;
        const struct entry *e = live(v, p);
        if (p && p - 1 >= tail)
            return WHY("uid %u's newest message is past the tail", uid);
        if (e && (!history_check_link_ok(p) || e->uid != uid || e->seq > v->uids[uid].seq ||
                  e->next != 0))
            return WHY("uid %u's newest message is not its own", uid);
    }
    return NULL;
}

void history_check_end(void)
{
    free(starts);
    starts = NULL;
}
