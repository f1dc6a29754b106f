/* SPDX-License-Identifier: Apache-2.0 */
/* Message ids and history: see history.h.
 *
 * The arena is a ring of entries at monotonic byte positions (offset =
 * position modulo its size): appended at the tail, pushed out at the head.
 * A position is valid while it is at or past the head, so the per-uid
 * chains (each entry links to the uid's previous one) need no unlinking:
 * a walk stops at the first entry already pushed out.
 *
 * What a restart finds (a --history-file; the same code runs in memory).
 * The loop is the one writer, and a process killed at any instruction
 * leaves every store made before it and none after (the compiler is kept
 * to program order by signal fences: publish()). So each change is made
 * where nothing counts it yet, then published by one 8-byte store:
 *   - an entry is written past the tail, then the tail is published: it
 *     counts. Its uid's slot (newest, seq) and the previous entry's link
 *     are updated after, so the file's head names it first (last): a
 *     restart finds the slot behind (seq one short) and does it again
 *     (redo_last);
 *   - the head is published before the tail may write over what it
 *     freed;
 *   - a move copies the entry into the room, publishes move_on, then
 *     moves the head, copies, moves the tail and mends the links; a
 *     restart finding move_on does it all again from the room.
 * A client is sent a message only after history_append returns, so what
 * it saw is always in the file; what a killed append had not published is
 * not, and its id was never given. Nothing is flushed to a disk: the file
 * outlives the process, not the machine. */
#include "core/history.h"
#include "core/history_check.h"
#include "core/history_map.h"
#include "lib/carry.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static struct history_config config;
static struct history_map map;
static struct history_head *hd;     /* map.head: what is published */
static struct uid_history *uids;    /* the uids' slots, then the topics' */
static struct topic_name *names;    /* the topics' */
static uint32_t slots;              /* max_users + max_topics */
static char *arena;
static char *room;                  /* where a moved entry waits */
static size_t arena_size, room_size;
static uint64_t head, tail;         /* positions: oldest entry, next free byte */
/* Bytes the head may still move ahead rather than push out: an eighth of
 * the arena to start, then what pushing out messages of no use won back.
 * So moving costs at most what it saves, and an arena full of messages
 * all still of use is not copied round and round. */
static size_t move_credit;
static int checked;                 /* entries carry their check: a file */
static uint32_t epoch;
static char epoch_hex[9];
/* The id being given while its message is kept: what the slot will hold
 * once the message is in, and what head_is_live counts from meanwhile. */
static uint32_t giving_uid, giving_seq;
/* Per topic, its bytes kept so far (entries, in 8-byte units, wrapping):
 * an entry's topic_at is its topic's count before it, so the bytes of it
 * and its topic's newer ones are the difference (history_layout.h). In
 * memory only: counted again from the arena when a history is resumed
 * or taken over. */
static uint32_t *topic_units;
static uint32_t topic_bound;        /* --topic-history-bytes in 8-byte units, 0: none */

static struct entry *entry_at(uint64_t pos) { return (struct entry *)(arena + pos % arena_size); }

/* Bytes from pos to the arena's end. */
static size_t to_end(uint64_t pos) { return arena_size - (size_t)(pos % arena_size); }

static uint32_t monotonic_s(void) { return (uint32_t)(clock_now_ms() / 1000); }
static uint32_t (*now_s)(void) = monotonic_s;     /* the unit test sets its own */

/* One store a restart reads: after every store before it, before every
 * store after it, whatever the compiler would do (a kill stops the
 * process between two instructions, in program order). */
static void publish(_Atomic uint64_t *field, uint64_t v)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(field, v, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
}

static void publish_move(uint32_t on)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&hd->move_on, on, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
}

static void set_credit(size_t credit)
{
    move_credit = credit;
    atomic_store_explicit(&hd->move_credit, credit, memory_order_relaxed);
}

static uint32_t last_seq(uint32_t uid) { return uid && uid == giving_uid ? giving_seq : uids[uid].seq; }

static int is_topic(uint32_t slot) { return slot > config.max_users; }

/* Messages kept for the slot at most: --history for a uid, --topic-history
 * for a topic. */
static uint32_t kept_max(uint32_t slot)
{
    return is_topic(slot) ? config.per_topic : config.per_uid;
}

/* How long the slot's messages are kept: --history-ttl, --topic-history-ttl. */
static uint32_t ttl_of(uint32_t slot)
{
    return is_topic(slot) && config.topic_ttl_s ? config.topic_ttl_s : config.ttl_s;
}

static uint32_t *units_of(uint32_t slot) { return &topic_units[slot - config.max_users - 1]; }

/* Whether the entry e is among its topic's newest within
 * --topic-history-bytes (a uid's always is). */
static int within_bytes(const struct entry *e)
{
    return !topic_bound || !is_topic(e->uid) || *units_of(e->uid) - e->topic_at <= topic_bound;
}

/* Each topic's bytes so far, from the entries the arena keeps (a history
 * resumed or taken over): past the newest of each. O(entries kept). */
static void count_topic_bytes(void)
{
    for (uint64_t p = head; topic_units && p < tail;) {
        const struct entry *e = entry_at(p);
        if (to_end(p) < sizeof *e || e->len == FILLER) {
            p += to_end(p);
            continue;
        }
        if (is_topic(e->uid)) {
            uint32_t *u = units_of(e->uid), end = e->topic_at + (uint32_t)(entry_size(e) / 8);
            if (!*u || (int32_t)(end - *u) > 0)
                *u = end;
        }
        p += entry_size(e);
    }
}

static const char *recover(void);

/* The statics from the map, as published. */
static void attach(void)
{
    hd = map.head;
    uids = map.uids;
    names = map.names;
    arena = map.arena;
    room = map.room;
    head = atomic_load(&hd->head);
    tail = atomic_load(&hd->tail);
    move_credit = (size_t)atomic_load(&hd->move_credit);
    epoch = hd->epoch;
    snprintf(epoch_hex, sizeof epoch_hex, "%08x", epoch);
    loop_stats.history_bytes = loop_stats.history_entries = 0;
    giving_uid = 0;
}

/* A hot upgrade: the history handed over (history_carry_take), used by
 * history_init instead of a new one or the file's open. */
static struct {
    int fd;                          /* -1: none */
    int is_file;
    uint64_t bytes, entries;         /* loop_stats' history gauges, as they were */
} handed = {-1, 0, 0, 0};
static int copy_fd = -1;             /* a memory history copied to hand over */
static int taken_over;               /* this run's history was handed over */

int history_carry_export(struct carry_out *o)
{
    int fd = map.fd;
    if (fd < 0) {
        if (copy_fd < 0)
            copy_fd = history_map_copy(&map);
        if (copy_fd < 0)
            return -1;
        fd = copy_fd;
    }
    size_t at = carry_begin(o, HISTORY_CARRY_TAG, HISTORY_CARRY_VERSION);
    carry_u8(o, map.file != NULL);
    carry_u32(o, carry_fd(o, fd));
    carry_u64(o, loop_stats.history_bytes);
    carry_u64(o, loop_stats.history_entries);
    carry_end(o, at);
    return 0;
}

void history_carry_release(void)
{
    if (copy_fd >= 0)
        close(copy_fd);
    copy_fd = -1;
}

int history_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds)
{
    if (version < 2) {               /* 1: no topics' slots after the uids' */
        log_msg(LOG_ERROR, "takeover: the running process keeps a history without topics: "
                "restart it instead (with a --history-file, ids go on)");
        return -1;
    }
    handed.is_file = carry_get_u8(rec);
    uint32_t i = carry_get_u32(rec);
    handed.bytes = carry_get_u64(rec);
    handed.entries = carry_get_u64(rec);
    if (rec->failed || i >= nfds)
        return -1;
    handed.fd = fds[i];
    return 0;
}

/* history_init for the history handed over: as it was left, no check
 * (the previous process stopped between two messages). */
static int init_handed(const struct history_config *cfg)
{
    if (handed.is_file != (cfg->file != NULL)) {
        log_msg(LOG_ERROR, "takeover: the running process keeps its history %s, this one "
                "would %s: start it with the same options",
                handed.is_file ? "in a --history-file" : "in memory",
                cfg->file ? "in a --history-file" : "in memory");
        return -1;
    }
    int fd = handed.fd;
    handed.fd = -1;
    if (history_map_adopt(&map, fd, cfg->file, cfg->node, cfg->max_users, cfg->max_topics,
                          arena_size, room_size) != 0) {
        close(fd);
        return -1;
    }
    checked = cfg->file != NULL;
    taken_over = 1;
    attach();
    count_topic_bytes();
    loop_stats.history_bytes = handed.bytes;
    loop_stats.history_entries = handed.entries;
    log_msg(LOG_INFO, "history: taken over, epoch %s: %llu messages kept (%llu bytes)", epoch_hex,
            (unsigned long long)handed.entries, (unsigned long long)handed.bytes);
    return 0;
}

static int init_history(const struct history_config *cfg);

int history_init(const struct history_config *cfg)
{
    topic_bound = (uint32_t)(cfg->topic_bytes / 8);
    topic_units = cfg->max_topics ? calloc(cfg->max_topics, sizeof *topic_units) : NULL;
    if (cfg->max_topics && !topic_units) {
        log_msg(LOG_ERROR, "history: no memory for %u topics' counts (4 bytes each); lower "
                "--max-topics", cfg->max_topics);
        return -1;
    }
    if (init_history(cfg) == 0)
        return 0;
    free(topic_units);
    topic_units = NULL;
    return -1;
}

/* history_init once the topics' counts are made. */
static int init_history(const struct history_config *cfg)
{
    config = *cfg;
    slots = cfg->max_users + cfg->max_topics;
    arena_size = cfg->per_uid || cfg->per_topic ? cfg->bytes & ~(size_t)7 : 0;
    if (arena_size > HISTORY_ARENA_MAX) {
        log_msg(LOG_ERROR, "history of %zu bytes: at most %llu", arena_size, HISTORY_ARENA_MAX);
        return -1;
    }
    room_size = arena_size / 4;
    if (cfg->max_message && sizeof(struct entry) + pad8(cfg->max_message) < room_size)
        room_size = sizeof(struct entry) + pad8(cfg->max_message);
    if (handed.fd >= 0)
        return init_handed(cfg);
    if (history_map_open(&map, cfg->file, cfg->node, cfg->max_users, cfg->max_topics, arena_size,
                         room_size) != 0)
        return -1;
    checked = cfg->file != NULL;
    attach();
    if (map.resumed) {
        const char *why = recover();
        if (why) {
            if (history_map_renew(&map, why) != 0)
                return -1;
            attach();
        } else {
            count_topic_bytes();
            log_msg(LOG_INFO, "history: --history-file %s resumed, epoch %s: %llu messages "
                              "kept (%llu bytes), made %llu s ago", cfg->file, epoch_hex,
                    (unsigned long long)loop_stats.history_entries,
                    (unsigned long long)loop_stats.history_bytes,
                    (unsigned long long)(time(NULL) - (time_t)hd->made_s));
        }
    }
    if (!map.resumed)
        set_credit(arena_size / 8);
    return 0;
}

void history_free(void)
{
    history_map_close(&map);
    free(topic_units);
    topic_units = NULL;
    hd = NULL;
    uids = NULL;
    names = NULL;
    arena = room = NULL;
    taken_over = 0;
}

uint32_t history_epoch(void) { return epoch; }

const char *history_epoch_hex(void) { return epoch_hex; }

uint32_t history_last_seq(uint32_t uid) { return uids[uid].seq; }

uint32_t history_skip(uint32_t uid) { return ++uids[uid].seq; }

static int head_is_live(const struct entry *e);

/* The entry at the head leaves. */
static void push_out_oldest(void)
{
    struct entry *e = entry_at(head);
    if (to_end(head) < sizeof *e || e->len == FILLER) {
        head += to_end(head);                /* the rest of a lap, skipped */
        publish(&hd->head, head);
        return;
    }
    size_t size = entry_size(e);
    if (!head_is_live(e) && move_credit < arena_size / 8)
        set_credit(move_credit + size);      /* room won back: moves may spend it */
    head += size;
    publish(&hd->head, head);
    loop_stats.history_bytes -= size;
    if (e->uid) {
        loop_stats.history_entries--;
        loop_stats.history_evicted++;
        loop_stats.topic_history_trimmed += !within_bytes(e);
    }
}

static const struct entry *kept_entry(uint64_t p, uint32_t uid);

/* Whether the entry at the head is still of use: a uid's message among
 * its newest --history, within the TTL (a multicast's reference is not:
 * its payload is older and went first); a topic's among its newest
 * --topic-history and --topic-history-bytes, within its TTL. */
static int head_is_live(const struct entry *e)
{
    if (to_end(head) < sizeof *e || e->len == FILLER)
        return 0;
    return e->uid && !(e->len & SHARED_REF) && last_seq(e->uid) - e->seq < kept_max(e->uid) &&
           within_bytes(e) && (int32_t)(e->stamp_s - (now_s() - ttl_of(e->uid))) >= 0;
}

/* The entry waiting in the room goes from the head at from to the tail
 * at to (the tail may cover the head's bytes, hence the room): head and
 * tail published, its links made relative to where it is now. */
static void move_bytes(uint64_t from, uint64_t to)
{
    const struct entry *r = (const struct entry *)room;
    size_t size = entry_size(r);
    head = from + size;
    publish(&hd->head, head);
    struct entry *m = entry_at(to);
    memcpy(m, r, size);
    m->prev = entry_link_to(to, entry_link(from, r->prev), head);
    m->next = entry_link_to(to, entry_link(from, r->next), head);
    tail = to + size;
    publish(&hd->tail, tail);
}

/* The links to the moved entry (now at to) follow it: its uid's previous
 * and next messages, and its slot if it is the newest. */
static void move_mend(uint64_t from, uint64_t to)
{
    struct entry *m = entry_at(to);
    uint64_t p = entry_link(to, m->prev), n = entry_link(to, m->next);
    struct entry *before = (struct entry *)kept_entry(p, m->uid);
    struct entry *after = (struct entry *)kept_entry(n, m->uid);
    if (before && entry_link(p - 1, before->next) == from + 1)
        before->next = entry_link_to(p - 1, to + 1, head);
    if (after && entry_link(n - 1, after->prev) == from + 1)
        after->prev = entry_link_to(n - 1, to + 1, head);
    if (uids[m->uid].newest == from + 1)
        uids[m->uid].newest = to + 1;
}

/* Moves the entry at the head, if still of use and it fits at the tail
 * as it is, to the tail, its links mended: so that a uid that sends far
 * more than --history keeps --history and pushes out its own older
 * messages, not everyone else's. Returns the bytes moved, 0 when none. */
static size_t move_head_to_tail(void)
{
    if (to_end(head) < sizeof(struct entry))
        return 0;
    struct entry *e = entry_at(head);
    if (e->len == FILLER || !head_is_live(e))
        return 0;
    size_t size = entry_size(e);
    if (to_end(tail) < size || move_credit < size || size > room_size)
        return 0;
    uint64_t from = head, to = tail;
    memcpy(room, e, size);
    atomic_store_explicit(&hd->move_from, from, memory_order_relaxed);
    atomic_store_explicit(&hd->move_to, to, memory_order_relaxed);
    publish_move(1);
    move_bytes(from, to);
    move_mend(from, to);
    publish_move(0);
    loop_stats.history_moved++;
    set_credit(move_credit - size);
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
            publish(&hd->tail, tail);
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

/* The entry at position + 1 at (uid's message seq, the newest entry) is
 * in: the uid's previous message (at p) links to it, its slot names it.
 * What a restart does again when the process was killed in between
 * (redo_last). */
static void commit_slot(uint32_t uid, uint32_t seq, uint64_t at, uint64_t p)
{
    struct entry *before = (struct entry *)kept_entry(p, uid);
    if (before)
        before->next = (int32_t)((at - p) / 8);   /* at is past p: the tail's */
    uids[uid].newest = at;
    uids[uid].seq = seq;
}

/* Writes an entry of uid (0: shared) with id seq and body[0..len) at the
 * tail, and for a uid gives it the id; returns its position + 1, 0 when it
 * is too large to keep (the id is not given then). */
static uint64_t keep(uint32_t uid, uint32_t seq, uint32_t len_field, const void *body,
                     size_t body_len)
{
    size_t size = sizeof(struct entry) + pad8(body_len);
    if (!arena_size || size > arena_size / 4 || body_len > LEN_BYTES)
        return 0;                             /* a resume across it is a gap */
    uint32_t *units = is_topic(uid) ? units_of(uid) : NULL, topic_at = units ? *units : 0;
    if (units && topic_bound && size / 8 > topic_bound)
        return 0;                             /* past its topic's bound alone: the same */
    if (units)
        *units += (uint32_t)(size / 8);       /* counted already: what it pushes out */
    giving_uid = uid;
    giving_seq = seq;
    make_room(size);
    giving_uid = 0;
    struct entry *e = entry_at(tail);
    uint64_t before = uid ? uids[uid].newest : 0;
    *e = (struct entry){.prev = entry_link_to(tail, before, head), .uid = uid, .seq = seq,
                        .stamp_s = now_s(), .len = len_field, .topic_at = topic_at};
    memcpy(e + 1, body, body_len);
    if (checked)
        e->check = entry_check(e);
    uint64_t at = tail + 1;
    if (uid)
        publish(&hd->last, at);
    tail += size;
    publish(&hd->tail, tail);                 /* it counts */
    loop_stats.history_bytes += size;
    if (uid) {
        commit_slot(uid, seq, at, before);
        loop_stats.history_entries++;
    }
    return at;
}

uint32_t history_append(uint32_t uid, const char *data, uint32_t len, int binary)
{
    uint32_t seq = uids[uid].seq + 1;
    if (!kept_max(uid) || !keep(uid, seq, len | (binary ? BINARY_MSG : 0), data, len))
        uids[uid].seq = seq;                  /* not kept: the id is given all the same */
    return seq;
}

uint64_t history_share(const char *data, uint32_t len, int binary)
{
    return config.per_uid ? keep(0, 0, len | (binary ? BINARY_MSG : 0), data, len) : 0;
}

uint32_t history_append_shared(uint32_t uid, uint64_t shared)
{
    uint32_t seq = uids[uid].seq + 1;
    if (!shared || shared - 1 < head ||       /* no longer kept */
        !keep(uid, seq, SHARED_REF | sizeof shared, &shared, sizeof shared))
        uids[uid].seq = seq;
    return seq;
}

/* A killed process may have published its newest entry and not yet its
 * slot (commit_slot): the slot is one id short of it. Done again. */
static const char *redo_last(void)
{
    uint64_t at = atomic_load(&hd->last);
    if (!at || at - 1 < head || at - 1 >= tail)
        return NULL;                          /* none, gone, or never published */
    if (!history_check_link_ok(at))
        return "the newest entry it names is not an entry";
    struct entry *e = entry_at(at - 1);
    if (!e->uid || e->seq != uids[e->uid].seq + 1)
        return NULL;                          /* its slot is up to date */
    if (!history_check_link_ok(entry_link(at - 1, e->prev)))
        return "the newest entry links to no entry";
    commit_slot(e->uid, e->seq, at, entry_link(at - 1, e->prev));
    return NULL;
}

/* The file's state as a killed (or stopped) process left it: checked,
 * and what it was doing completed. NULL when it can be used; else why
 * not (the file is then started afresh). */
static const char *recover(void)
{
    struct history_view v = {.hd = hd, .uids = uids, .arena = arena, .room = room,
                             .arena_size = arena_size, .room_size = room_size,
                             .max_users = slots};
    const char *why = history_check_state(&v);
    int moving = !why && atomic_load(&hd->move_on);
    uint64_t from = atomic_load(&hd->move_from), to = atomic_load(&hd->move_to);
    if (moving)
        move_bytes(from, to);                 /* again, from the room */
    if (!why)
        why = history_check_entries(&v, head, tail);
    if (!why && moving) {
        const struct entry *m = entry_at(to);
        if (!history_check_link_ok(entry_link(to, m->prev)) ||
            !history_check_link_ok(entry_link(to, m->next)))
            why = "the entry it was moving links to no entry";
        else {
            move_mend(from, to);
            publish_move(0);
        }
    }
    uint64_t bytes = 0, messages = 0;
    if (!why)
        why = redo_last();
    if (!why)
        why = history_check_links(&v, head, tail, &bytes, &messages);
    history_check_end();
    loop_stats.history_bytes = bytes;
    loop_stats.history_entries = messages;
    return why;
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
    uint32_t expect = uids[uid].seq, n = 0, max = kept_max(uid);
    uint32_t oldest_ok_s = now_s() - ttl_of(uid);
    uint64_t found = 0;
    const struct entry *e;
    for (uint64_t p = uids[uid].newest; (e = kept_entry(p, uid)) != NULL;
         p = entry_link(p - 1, e->prev)) {
        if (e->seq != expect || e->seq < want || n == max || !within_bytes(e) ||
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
    int ours = from_epoch == history_slot_epoch(uid) && seq <= last;
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
    if (!e || e->seq != c->seq || last - c->seq >= kept_max(uid) || !within_bytes(e)) {
        /* Not linked yet (kept after the cursor moved), pushed out, or
         * more than --history (a topic's bytes) behind: found again from
         * the newest. */
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
    c->pos = entry_link(*at, e->next);
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

size_t history_gap_json(char out[HISTORY_GAP_JSON_MAX], uint32_t slot, const char *asked,
                        uint32_t first_seq, uint32_t next_seq)
{
    char last[32], first[32];
    uint32_t e, s, ours = history_slot_epoch(slot);
    if (asked && history_parse_id(asked, &e, &s) == 0)
        snprintf(last, sizeof last, "\"%08x:%u\"", e, s);
    else
        strcpy(last, "null");
    if (first_seq)
        snprintf(first, sizeof first, "\"%08x:%u\"", ours, first_seq);
    else
        strcpy(first, "null");
    return (size_t)snprintf(out, HISTORY_GAP_JSON_MAX, "{\"last\":%s,\"first\":%s,\"next\":\"%08x:%u\"}",
                            last, first, ours, next_seq);
}

/* ---------------------------------------------------------------- topics */

uint32_t history_slot_epoch(uint32_t slot)
{
    return slot > config.max_users && uids[slot].epoch ? uids[slot].epoch : epoch;
}

int history_resumed(void) { return map.resumed; }

struct history_origin *history_origin_records(void) { return hd && map.file ? hd->origins : NULL; }

int history_taken_over(void) { return taken_over; }

/* A topic's epoch: any number but 0 (a uid's slot holds 0), drawn from a
 * generator seeded once (no syscall per topic made). */
static uint32_t draw_epoch(void)
{
    static uint64_t state;
    if (!state && getrandom(&state, sizeof state, 0) != sizeof state)
        state = clock_now_ns();
    state |= 1;
    for (;;) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        uint32_t e = (uint32_t)((state * 2685821657736338717ull) >> 32);
        if (e && e != epoch)
            return e;
    }
}

uint32_t history_topic_open(uint32_t slot, const char *name, uint8_t len)
{
    uint32_t index = slot - config.max_users - 1;
    struct topic_name *t = &names[index];
    /* A restart takes the slot as the topic's only once its name is whole
     * (its check, written last); the slot's last id stays, so that
     * whatever of an earlier topic is still kept is never past it. */
    t->check = 0;
    atomic_signal_fence(memory_order_seq_cst);
    uids[slot].newest = 0;
    uids[slot].epoch = draw_epoch();
    t->len = len;
    memcpy(t->name, name, len);
    atomic_signal_fence(memory_order_seq_cst);
    t->check = topic_name_check(index, t);
    atomic_signal_fence(memory_order_seq_cst);
    return uids[slot].epoch;
}

void history_topic_close(uint32_t slot)
{
    names[slot - config.max_users - 1].check = 0;
    atomic_signal_fence(memory_order_seq_cst);
}

const char *history_topic_name_ptr(uint32_t slot, uint8_t *len)
{
    const struct topic_name *t = &names[slot - config.max_users - 1];
    *len = t->len;
    return t->name;
}

int history_topic_name(uint32_t slot, char name[HISTORY_TOPIC_NAME_MAX])
{
    uint32_t index = slot - config.max_users - 1;
    const struct topic_name *t = &names[index];
    if (!t->check || t->len == 0 || t->len > HISTORY_TOPIC_NAME_MAX ||
        t->check != topic_name_check(index, t) || !uids[slot].epoch)
        return 0;
    memcpy(name, t->name, t->len);
    return t->len;
}
