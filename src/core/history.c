/* Message ids and history: see history.h.
 *
 * The arena is a ring of entries at monotonic byte positions (offset =
 * position modulo its size): appended at the tail, pushed out at the head.
 * A position is valid while it is at or past the head, so the per-uid
 * chains (each entry points to the uid's previous one) need no unlinking:
 * a walk stops at the first entry already pushed out. */
#include "core/history.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* 16 bytes per uid slot, allocated once (untouched pages cost nothing). */
struct uid_history {
    uint64_t newest;        /* position + 1 of the newest kept message, 0: none */
    uint32_t seq;           /* the last id given */
    uint32_t unused;
};

_Static_assert(sizeof(struct uid_history) == 16, "history costs 16 bytes per uid slot");

/* 32 bytes, then the payload, padded to 8. A payload sent to many uids (a
 * multicast, a broadcast) is kept once, as a shared entry (uid 0), and each
 * uid's entry holds its position instead (8 bytes): such an entry is kept
 * while the shared one is, which is older and leaves first. A uid's entries
 * are chained both ways: back for a resume's start, forward for a replay
 * cursor to step in O(1). Whether a message is binary is a bit of len in
 * the entry holding its payload (its own, or the shared one): no byte more
 * per entry, as payloads are far shorter than that bit (16 MiB records). */
struct entry {
    uint64_t prev;          /* position + 1 of the uid's previous kept message */
    uint64_t next;          /* position + 1 of the uid's next one, 0: none yet */
    uint32_t uid;           /* 0: a shared payload */
    uint32_t seq;
    uint32_t stamp_s;       /* monotonic seconds when kept */
    uint32_t len;           /* payload bytes [| BINARY_MSG], or FILLER, or SHARED_REF | 8 */
};

#define FILLER UINT32_MAX
#define SHARED_REF 0x80000000u  /* the payload is the shared entry at this position + 1 */
#define BINARY_MSG 0x40000000u  /* the payload is a binary message (cmd.h) */
#define LEN_BYTES (~(SHARED_REF | BINARY_MSG))  /* the bytes in len */

static struct history_config config;
static struct uid_history *uids;
static char *arena;
static size_t arena_size;
static uint64_t head, tail;         /* positions: oldest entry, next free byte */
/* Bytes the head may still move ahead rather than push out: an eighth of
 * the arena to start, then what pushing out messages of no use won back.
 * So moving costs at most what it saves, and an arena full of messages
 * all still of use is not copied round and round. */
static size_t move_credit;
static uint32_t epoch;
static char epoch_hex[9];

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static struct entry *entry_at(uint64_t pos) { return (struct entry *)(arena + pos % arena_size); }

/* Bytes from pos to the arena's end. */
static size_t to_end(uint64_t pos) { return arena_size - (size_t)(pos % arena_size); }

static uint32_t monotonic_s(void) { return (uint32_t)(clock_now_ms() / 1000); }
static uint32_t (*now_s)(void) = monotonic_s;     /* the unit test sets its own */

int history_init(const struct history_config *cfg)
{
    config = *cfg;
    uids = calloc((size_t)cfg->max_users + 1, sizeof *uids);
    if (!uids) {
        log_msg(LOG_ERROR, "cannot allocate message ids for %u uids; lower --max-users",
                cfg->max_users);
        return -1;
    }
    arena_size = cfg->per_uid ? cfg->bytes & ~(size_t)7 : 0;
    if (arena_size) {
        arena = malloc(arena_size);
        if (!arena) {
            log_msg(LOG_ERROR, "cannot allocate %zu bytes of history; lower --history-bytes",
                    arena_size);
            return -1;
        }
    }
    if (getrandom(&epoch, sizeof epoch, 0) != sizeof epoch) {
        log_msg(LOG_ERROR, "cannot draw the message id epoch: %m");
        return -1;
    }
    snprintf(epoch_hex, sizeof epoch_hex, "%08x", epoch);
    head = tail = 0;
    move_credit = arena_size / 8;
    return 0;
}

void history_free(void)
{
    free(uids);
    free(arena);
    uids = NULL;
    arena = NULL;
}

uint32_t history_epoch(void) { return epoch; }

const char *history_epoch_hex(void) { return epoch_hex; }

uint32_t history_last_seq(uint32_t uid) { return uids[uid].seq; }

static int head_is_live(const struct entry *e);

/* The entry at the head leaves. */
static void push_out_oldest(void)
{
    if (to_end(head) < sizeof(struct entry)) {
        head += to_end(head);                /* too short for a header: skipped */
        return;
    }
    struct entry *e = entry_at(head);
    if (e->len == FILLER) {
        head += to_end(head);
        return;
    }
    size_t size = sizeof *e + pad8(e->len & LEN_BYTES);
    if (!head_is_live(e) && move_credit < arena_size / 8)
        move_credit += size;             /* room won back: moves may spend it */
    head += size;
    loop_stats.history_bytes -= size;
    if (e->uid) {
        loop_stats.history_entries--;
        loop_stats.history_evicted++;
    }
}

static const struct entry *kept_entry(uint64_t p, uint32_t uid);

/* Whether the entry at the head is still of use: a uid's message among
 * its newest --history, within the TTL (a multicast's reference is not:
 * its payload is older and went first). */
static int head_is_live(const struct entry *e)
{
    if (to_end(head) < sizeof *e || e->len == FILLER)
        return 0;
    return e->uid && !(e->len & SHARED_REF) && uids[e->uid].seq - e->seq < config.per_uid &&
           (int32_t)(e->stamp_s - (now_s() - config.ttl_s)) >= 0;
}

/* Moves the entry at the head, if still of use and it fits at the tail
 * as it is, to the tail, its links mended: so that a uid that sends far
 * more than --history keeps --history and pushes out its own older
 * messages, not everyone else's. Returns the bytes moved, 0 when none. */
static size_t move_head_to_tail(void)
{
    static char *scratch;                /* the largest entry moved so far */
    static size_t scratch_size;
    if (to_end(head) < sizeof(struct entry))
        return 0;
    struct entry *e = entry_at(head);
    if (e->len == FILLER || !head_is_live(e))
        return 0;
    size_t size = sizeof *e + pad8(e->len & LEN_BYTES);
    if (to_end(tail) < size || move_credit < size)
        return 0;
    if (size > scratch_size) {
        char *grown = realloc(scratch, size);
        if (!grown)
            return 0;                    /* pushed out instead */
        scratch = grown;
        scratch_size = size;
    }
    memcpy(scratch, e, size);            /* the tail may cover the head's bytes */
    uint64_t from = head + 1, to = tail + 1;
    head += size;
    memcpy(entry_at(tail), scratch, size);
    tail += size;
    struct entry *m = entry_at(to - 1);
    struct entry *before = (struct entry *)kept_entry(m->prev, m->uid);
    struct entry *after = (struct entry *)kept_entry(m->next, m->uid);
    if (before && before->next == from)
        before->next = to;
    if (after && after->prev == from)
        after->prev = to;
    if (uids[m->uid].newest == from)
        uids[m->uid].newest = to;
    loop_stats.history_moved++;
    move_credit -= size;
    return size;
}

/* Room for size contiguous bytes at the tail. What must go from the head
 * is moved to the tail while of use, within a budget of twice size per
 * call (so an arena full of live messages costs a bounded copy per
 * append), else pushed out. */
static void make_room(size_t size)
{
    size_t moved = 0;
    for (;;) {
        if (to_end(tail) < size) {
            /* The rest of this lap is skipped: what the previous lap
             * left there goes first. */
            uint64_t end = tail + to_end(tail);
            while (end > arena_size && head < end - arena_size)
                push_out_oldest();
            if (to_end(tail) >= sizeof(struct entry))
                entry_at(tail)->len = FILLER;
            tail = end;
        }
        if (tail + size - head <= arena_size)
            return;
        size_t m = moved < 2 * size ? move_head_to_tail() : 0;
        if (m)
            moved += m;
        else
            push_out_oldest();
    }
}

/* Writes an entry of uid (0: shared) with body[0..len) at the tail;
 * returns its position + 1, 0 when it is too large to keep. */
static uint64_t keep(uint32_t uid, uint32_t seq, uint32_t len_field, const void *body,
                     size_t body_len)
{
    size_t size = sizeof(struct entry) + pad8(body_len);
    if (!arena_size || size > arena_size / 4 || body_len > LEN_BYTES)
        return 0;                             /* a resume across it is a gap */
    make_room(size);
    struct entry *e = entry_at(tail);
    *e = (struct entry){.prev = uid ? uids[uid].newest : 0, .uid = uid, .seq = seq,
                        .stamp_s = now_s(), .len = len_field};
    memcpy(e + 1, body, body_len);
    uint64_t at = tail + 1;
    tail += size;
    loop_stats.history_bytes += size;
    if (uid) {
        struct entry *before = (struct entry *)kept_entry(uids[uid].newest, uid);
        if (before)
            before->next = at;
        uids[uid].newest = at;
        loop_stats.history_entries++;
    }
    return at;
}

uint32_t history_append(uint32_t uid, const char *data, uint32_t len, int binary)
{
    uint32_t seq = ++uids[uid].seq;
    keep(uid, seq, len | (binary ? BINARY_MSG : 0), data, len);
    return seq;
}

uint64_t history_share(const char *data, uint32_t len, int binary)
{
    return config.per_uid ? keep(0, 0, len | (binary ? BINARY_MSG : 0), data, len) : 0;
}

uint32_t history_append_shared(uint32_t uid, uint64_t shared)
{
    uint32_t seq = ++uids[uid].seq;
    if (shared && shared - 1 >= head)         /* still kept */
        keep(uid, seq, SHARED_REF | sizeof shared, &shared, sizeof shared);
    return seq;
}

/* The entry at position+1 p, if it and its payload are still kept, for uid. */
static const struct entry *kept_entry(uint64_t p, uint32_t uid)
{
    if (p == 0 || p - 1 < head)
        return NULL;
    const struct entry *e = entry_at(p - 1);
    if (e->uid != uid)
        return NULL;
    if (e->len & SHARED_REF) {
        uint64_t shared;
        memcpy(&shared, e + 1, sizeof shared);
        if (shared - 1 < head)
            return NULL;
    }
    return e;
}

/* The oldest of the uid's newest kept messages that a replay may give: at
 * or after id want, contiguous up to the newest, at most --history of them
 * (and, when fresh_only, none past the TTL). Its position + 1 (0: none)
 * and its id. O(what it walks), at most --history steps. */
static uint64_t oldest_replayable(uint32_t uid, uint32_t want, int fresh_only, uint32_t *seq)
{
    uint32_t expect = uids[uid].seq, n = 0;
    uint32_t oldest_ok_s = now_s() - config.ttl_s;
    uint64_t found = 0;
    const struct entry *e;
    for (uint64_t p = uids[uid].newest; (e = kept_entry(p, uid)) != NULL; p = e->prev) {
        if (e->seq != expect || e->seq < want || n == config.per_uid ||
            (fresh_only && (int32_t)(e->stamp_s - oldest_ok_s) < 0))
            break;
        found = p;
        *seq = e->seq;
        expect--;
        n++;
    }
    return found;
}

int history_resume(uint32_t uid, int known, uint32_t from_epoch, uint32_t seq,
                   struct history_cursor *c, uint32_t *first_seq)
{
    uint32_t last = uids[uid].seq;
    *c = (struct history_cursor){.pos = 0, .seq = last + 1};
    *first_seq = 0;
    if (!known)
        return 0;                             /* a first connect: live messages only */
    int ours = from_epoch == epoch && seq <= last;
    uint32_t want = ours ? seq + 1 : 1;       /* the oldest id the client lacks */
    uint32_t oldest = 0;
    uint64_t p = oldest_replayable(uid, want, 1, &oldest);
    if (p) {
        *c = (struct history_cursor){.pos = p, .seq = oldest};
        *first_seq = oldest;
    }
    /* Nothing missed, or all of it kept: no gap. */
    return !ours || (last >= want && (p == 0 || oldest != want));
}

/* history_next, which also gives the message's position. */
static int next_at(uint32_t uid, struct history_cursor *c, uint64_t *at);

int history_next(uint32_t uid, struct history_cursor *c, const char **data, uint32_t *len,
                 uint32_t *seq, int *binary)
{
    uint64_t at;
    int r = next_at(uid, c, &at);
    if (r > 0)
        *data = history_message(at, len, seq, binary);
    return r;
}

void history_since(uint32_t uid, int known, uint32_t from_epoch, uint32_t seq,
                   struct history_replay *r, uint32_t max)
{
    struct history_cursor c;
    r->gap = history_resume(uid, known, from_epoch, seq, &c, &r->first_seq);
    for (r->n = 0; r->n < max && next_at(uid, &c, &r->pos[r->n]) > 0; r->n++)
        ;
}

static int next_at(uint32_t uid, struct history_cursor *c, uint64_t *at)
{
    uint32_t last = uids[uid].seq;
    if (c->seq > last)
        return 0;                             /* caught up */
    const struct entry *e = kept_entry(c->pos, uid);
    int gap = 0;
    if (!e || e->seq != c->seq || last - c->seq >= config.per_uid) {
        /* Not linked yet (kept after the cursor moved), pushed out, or
         * more than --history behind: found again from the newest. */
        uint32_t oldest = 0;
        uint64_t p = oldest_replayable(uid, c->seq, 0, &oldest);
        if (!p) {
            *c = (struct history_cursor){.pos = 0, .seq = last + 1};
            return -1;
        }
        gap = oldest != c->seq;
        *c = (struct history_cursor){.pos = p, .seq = oldest};
        if (gap)
            return -1;
        e = entry_at(p - 1);
    }
    *at = c->pos - 1;
    c->seq++;
    c->pos = e->next;
    return 1;
}

const char *history_message(uint64_t pos, uint32_t *len, uint32_t *seq, int *binary)
{
    const struct entry *e = entry_at(pos);
    *seq = e->seq;
    if (e->len & SHARED_REF) {
        uint64_t shared;
        memcpy(&shared, e + 1, sizeof shared);
        e = entry_at(shared - 1);
    }
    *len = e->len & LEN_BYTES;
    *binary = (e->len & BINARY_MSG) != 0;
    return (const char *)(e + 1);
}

int history_parse_id(const char *text, uint32_t *epoch_out, uint32_t *seq_out)
{
    uint32_t e = 0, s = 0;
    for (int i = 0; i < 8; i++) {
        char c = text[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        e = e << 4 | (uint32_t)d;
    }
    if (text[8] != ':' || text[9] < '0' || text[9] > '9')
        return -1;
    for (const char *p = text + 9; *p; p++) {
        if (*p < '0' || *p > '9' || s > (UINT32_MAX - (uint32_t)(*p - '0')) / 10)
            return -1;
        s = s * 10 + (uint32_t)(*p - '0');
    }
    *epoch_out = e;
    *seq_out = s;
    return 0;
}

size_t history_gap_json(char out[HISTORY_GAP_JSON_MAX], const char *asked, uint32_t first_seq,
                        uint32_t next_seq)
{
    char last[32], first[32];
    uint32_t e, s;
    if (asked && history_parse_id(asked, &e, &s) == 0)
        snprintf(last, sizeof last, "\"%08x:%u\"", e, s);
    else
        strcpy(last, "null");
    if (first_seq)
        snprintf(first, sizeof first, "\"%s:%u\"", epoch_hex, first_seq);
    else
        strcpy(first, "null");
    return (size_t)snprintf(out, HISTORY_GAP_JSON_MAX, "{\"last\":%s,\"first\":%s,\"next\":\"%s:%u\"}",
                            last, first, epoch_hex, next_seq);
}
