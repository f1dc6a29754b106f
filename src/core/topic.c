/* SPDX-License-Identifier: Apache-2.0 */
/* Topics and their subscriptions: see topic.h. */
#include "core/topic.h"
#include "core/history.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ptrmap.h"
#include "obs/stats.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct topic_config topic_cfg;

/* 40 bytes, in a table of --max-topics allocated at start, touched as
 * topics are made (the lowest free index first). Its name is the history's
 * (history_topic_name_ptr: kept in the --history-file, once). */
struct topic {
    void *members;              /* one block: struct stream *[cap], then uint32_t[cap]
                                   (each member's subscription record) */
    uint32_t n, cap;
    uint32_t hash;              /* of its name: lookups, and the hash table's moves */
    uint32_t linger_prev;       /* lingering topics, oldest first; free topics: */
    uint32_t linger_next;       /* the next free index */
    uint32_t linger_until;      /* the monotonic second it is given up at */
    uint8_t held;
    uint8_t lingering;
};

_Static_assert(sizeof(struct topic) == 40, "a topic is 40 bytes: update topic.h");
_Static_assert(sizeof(struct topic_sub) == 12, "a subscription record is 12 bytes");

static struct stream **streams_of(const struct topic *x) { return x->members; }
static uint32_t *subs_of(const struct topic *x)
{
    return (uint32_t *)((struct stream **)x->members + x->cap);
}

static struct topic *topics;            /* [max_topics + 1], 0 unused */
static uint32_t *by_hash;               /* open addressing: topic or 0 */
static uint32_t hash_mask;
static uint64_t hash_seed;              /* drawn: names are chosen by clients */
static uint32_t fresh;                  /* indices from here on never used */
static uint32_t free_topics;            /* given up, to be used again */
static uint32_t linger_head, linger_tail;
static struct event *linger_ev;

/* Subscription records: blocks of SUB_BLOCK (192 KB), index 0 never given. */
#define SUB_BLOCK 16384u
static struct topic_sub **blocks;
static uint32_t nblocks;
static uint32_t sub_fresh = 1, sub_free;

/* stream -> its first subscription (bits 0-31), how many (32-47), and
 * REPLAYING: a replay is under way (topic_replay_mark). */
static struct ptrmap by_stream = PTRMAP_INIT;
#define COUNT(v) ((uint32_t)((v) >> 32) & 0xffffu)
#define REPLAYING (1ull << 63)
/* While a stream replays: each of its subscriptions' next id (sub -> next),
 * so that a record need not hold it all the time. */
static struct ptrmap nexts = PTRMAP_INIT;

static const void *sub_key(uint32_t sub) { return (const void *)(uintptr_t)((uint64_t)sub << 3); }

static uint32_t now_s(void) { return (uint32_t)(clock_now_ms() / 1000); }

struct topic_sub *topic_sub_at(uint32_t sub)
{
    return &blocks[sub / SUB_BLOCK][sub % SUB_BLOCK];
}

static uint32_t sub_alloc(void)
{
    if (sub_free) {
        uint32_t i = sub_free;
        sub_free = topic_sub_at(i)->link;
        return i;
    }
    if (sub_fresh / SUB_BLOCK == nblocks) {
        if (nblocks == UINT32_MAX / SUB_BLOCK)
            return 0;
        struct topic_sub **grown = realloc(blocks, (nblocks + 1) * sizeof *blocks);
        if (!grown)
            return 0;
        blocks = grown;
        if (!(blocks[nblocks] = malloc(SUB_BLOCK * sizeof **blocks)))
            return 0;
        nblocks++;
    }
    return sub_fresh++;
}

static void sub_release(uint32_t i)
{
    topic_sub_at(i)->link = sub_free;
    sub_free = i;
}

/* ---------------------------------------------------------------- names */

static uint32_t hash_of(const char *name, size_t len)
{
    return (uint32_t)XXH3_64bits_withSeed(name, len, hash_seed);
}

const char *topic_name(uint32_t t, uint8_t *len)
{
    return history_topic_name_ptr(topic_slot(t), len);
}

uint32_t topic_find(const char *name, size_t len)
{
    if (!by_hash || len == 0 || len > TOPIC_NAME_MAX)
        return 0;
    uint32_t h = hash_of(name, len);
    for (uint32_t i = h & hash_mask; by_hash[i]; i = (i + 1) & hash_mask) {
        uint8_t n;
        const char *at = topics[by_hash[i]].hash == h ? topic_name(by_hash[i], &n) : NULL;
        if (at && n == len && memcmp(at, name, len) == 0)
            return by_hash[i];
    }
    return 0;
}

static void hash_insert(uint32_t t)
{
    uint32_t i = topics[t].hash & hash_mask;
    while (by_hash[i])
        i = (i + 1) & hash_mask;
    by_hash[i] = t;
}

/* Backward shift, as lib/ptrmap.c: no tombstones. */
static void hash_delete(uint32_t t)
{
    uint32_t i = topics[t].hash & hash_mask;
    while (by_hash[i] != t)
        i = (i + 1) & hash_mask;
    for (uint32_t j = (i + 1) & hash_mask; by_hash[j]; j = (j + 1) & hash_mask) {
        uint32_t home = topics[by_hash[j]].hash & hash_mask;
        if (((j - home) & hash_mask) >= ((j - i) & hash_mask)) {
            by_hash[i] = by_hash[j];
            i = j;
        }
    }
    by_hash[i] = 0;
}

uint32_t topic_members(uint32_t t) { return topics[t].n; }

int topic_held(uint32_t t) { return topics && t && t <= topic_cfg.max_topics && topics[t].held; }

struct stream *const *topic_member_array(uint32_t t) { return streams_of(&topics[t]); }

/* ---------------------------------------------------------------- life of a topic */

static void on_linger(evutil_socket_t fd, short what, void *arg);

static void linger_unlink(uint32_t t)
{
    struct topic *x = &topics[t];
    if (x->linger_prev)
        topics[x->linger_prev].linger_next = x->linger_next;
    else
        linger_head = x->linger_next;
    if (x->linger_next)
        topics[x->linger_next].linger_prev = x->linger_prev;
    else
        linger_tail = x->linger_prev;
    x->linger_prev = x->linger_next = 0;
    x->lingering = 0;
}

/* t, held by no stream, goes now or after linger_s. */
static void give_up(uint32_t t)
{
    struct topic *x = &topics[t];
    if (topic_cfg.gone)
        topic_cfg.gone(t);
    hash_delete(t);
    history_topic_close(topic_slot(t));
    free(x->members);
    *x = (struct topic){.linger_next = free_topics};
    free_topics = t;
    loop_stats.topics--;
    loop_stats.topics_given_up++;
}

static void linger(uint32_t t)
{
    struct topic *x = &topics[t];
    if (!topic_cfg.linger_s) {
        give_up(t);
        return;
    }
    x->lingering = 1;
    x->linger_until = now_s() + topic_cfg.linger_s;
    x->linger_prev = linger_tail;
    x->linger_next = 0;
    if (linger_tail)
        topics[linger_tail].linger_next = t;
    else
        linger_head = t;
    linger_tail = t;
    if (!evtimer_pending(linger_ev, NULL)) {
        struct timeval one = {1, 0};
        evtimer_add(linger_ev, &one);
    }
}

static void on_linger(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    uint32_t now = now_s();
    while (linger_head && (int32_t)(topics[linger_head].linger_until - now) <= 0) {
        uint32_t t = linger_head;
        linger_unlink(t);
        give_up(t);
    }
    if (linger_head) {
        struct timeval one = {1, 0};
        evtimer_add(linger_ev, &one);
    }
}

/* A free index for name, held (no member yet): 0 when none is left. */
static uint32_t make(const char *name, size_t len, int restored)
{
    uint32_t t;
    if (free_topics) {
        t = free_topics;
        free_topics = topics[t].linger_next;
    } else if (fresh <= topic_cfg.max_topics) {
        t = fresh++;
    } else {
        return 0;
    }
    struct topic *x = &topics[t];
    *x = (struct topic){.hash = hash_of(name, len), .held = 1};
    if (!restored)
        history_topic_open(topic_slot(t), name, (uint8_t)len);
    hash_insert(t);
    loop_stats.topics++;
    return t;
}

/* The topics a --history-file kept, held again (each lingering until a
 * stream subscribes or its time is up), at the indices they had. taken: a
 * hot upgrade's history: held silently (the masters know them), lingering
 * as topic_carry_take says. */
static void restore(int taken)
{
    char name[TOPIC_NAME_MAX];
    uint32_t restored = 0;
    for (uint32_t t = 1; t <= topic_cfg.max_topics; t++) {
        int len = history_topic_name(topic_slot(t), name);
        if (len > 0 && topic_name_ok(name, (size_t)len) && !topic_find(name, (size_t)len)) {
            fresh = t;                   /* make takes it */
            make(name, (size_t)len, 1);
            if (!taken && topic_cfg.changed)
                topic_cfg.changed(t);    /* the masters send its messages here again */
            if (!taken)
                linger(t);
            restored++;
        } else if (len > 0) {
            history_topic_close(topic_slot(t));     /* the same name twice: once */
        }
    }
    /* the indices below the last one kept that hold none are free */
    free_topics = 0;
    fresh = 1;
    for (uint32_t t = 1; t <= topic_cfg.max_topics; t++)
        if (topics[t].held)
            fresh = t + 1;
    for (uint32_t t = fresh; t-- > 1;)
        if (!topics[t].held) {
            topics[t].linger_next = free_topics;
            free_topics = t;
        }
    if (restored && !taken)
        log_msg(LOG_INFO, "topics: %u kept by the history file held again, each until a stream "
                "subscribes or %u s pass", restored, topic_cfg.linger_s);
}

int topic_init(const struct topic_config *cfg)
{
    topic_cfg = *cfg;
    if (!cfg->max_topics)
        return 0;
    uint32_t size = 64;
    while (size < 2 * (uint64_t)cfg->max_topics)
        size *= 2;
    topics = calloc((size_t)cfg->max_topics + 1, sizeof *topics);
    by_hash = calloc(size, sizeof *by_hash);
    linger_ev = evtimer_new(cfg->base, on_linger, NULL);
    if (!topics || !by_hash || !linger_ev) {
        log_msg(LOG_ERROR, "cannot allocate the table of %u topics; lower --max-topics",
                cfg->max_topics);
        return -1;
    }
    hash_mask = size - 1;
    if (getrandom(&hash_seed, sizeof hash_seed, 0) != sizeof hash_seed)
        hash_seed = clock_now_ns();
    fresh = 1;
    if (history_resumed() || history_taken_over())
        restore(history_taken_over());
    return 0;
}

void topic_free(void)
{
    for (uint32_t t = 1; topics && t < fresh; t++)
        free(topics[t].members);
    for (uint32_t b = 0; b < nblocks; b++)
        free(blocks[b]);
    free(blocks);
    free(topics);
    free(by_hash);
    if (linger_ev)
        event_free(linger_ev);
    ptrmap_free(&by_stream);
    ptrmap_free(&nexts);
    blocks = NULL;
    topics = NULL;
    by_hash = NULL;
    linger_ev = NULL;
    nblocks = 0;
    sub_fresh = 1;
    sub_free = free_topics = linger_head = linger_tail = 0;
}

/* ---------------------------------------------------------------- subscriptions */

static const char *const refusal_names[TOPIC_REFUSALS] = {
    [TOPIC_OK] = "ok", [TOPIC_BAD_NAME] = "bad_name", [TOPIC_STREAM_FULL] = "too_many_topics",
    [TOPIC_FULL] = "topic_full", [TOPIC_NO_ROOM] = "no_room", [TOPIC_DENIED] = "denied",
    [TOPIC_NO_MEMORY] = "no_memory"};

const char *topic_refusal_name(enum topic_refusal r)
{
    return r < TOPIC_REFUSALS ? refusal_names[r] : "denied";
}

void topic_count_refusal(enum topic_refusal r)
{
    switch (r) {
    case TOPIC_BAD_NAME: loop_stats.topic_refused_name++; break;
    case TOPIC_STREAM_FULL: loop_stats.topic_refused_stream_full++; break;
    case TOPIC_FULL: loop_stats.topic_refused_topic_full++; break;
    case TOPIC_NO_ROOM: loop_stats.topic_refused_no_room++; break;
    case TOPIC_DENIED: loop_stats.topic_refused_denied++; break;
    case TOPIC_NO_MEMORY: loop_stats.topic_refused_no_memory++; break;
    default: break;
    }
}

uint32_t topic_stream_first(const struct stream *s)
{
    uint64_t *v = ptrmap_get(&by_stream, s);
    return v ? (uint32_t)*v : 0;
}

uint32_t topic_stream_count(const struct stream *s)
{
    uint64_t *v = ptrmap_get(&by_stream, s);
    return v ? COUNT(*v) : 0;
}

uint32_t topic_sub_next(uint32_t sub)
{
    uint64_t *v = nexts.used ? ptrmap_get(&nexts, sub_key(sub)) : NULL;
    return v ? (uint32_t)*v : 0;
}

int topic_sub_set_next(uint32_t sub, uint32_t next)
{
    return ptrmap_put(&nexts, sub_key(sub), next);
}

int topic_replay_mark(struct stream *s, int on)
{
    uint64_t *v = ptrmap_get(&by_stream, s);
    if (on) {
        if (v) {
            *v |= REPLAYING;
            return 0;
        }
        return ptrmap_put(&by_stream, s, REPLAYING);
    }
    if (!v)
        return 0;
    *v &= ~REPLAYING;
    for (uint32_t i = (uint32_t)*v; i; i = topic_stream_next(i))
        ptrmap_remove(&nexts, sub_key(i), NULL);
    if (COUNT(*v) == 0)
        ptrmap_remove(&by_stream, s, NULL);
    return 0;
}

uint32_t topic_sub_of(const struct stream *s, uint32_t t)
{
    for (uint32_t i = topic_stream_first(s); i; i = topic_stream_next(i))
        if (topic_sub_at(i)->topic == t)
            return i;
    return 0;
}

enum topic_refusal topic_would_take(const char *name, size_t len, uint32_t *fresh_count)
{
    if (!topic_name_ok(name, len))
        return TOPIC_BAD_NAME;
    uint32_t t = topic_find(name, len);
    if (t)
        return topics[t].n >= topic_cfg.per_topic ? TOPIC_FULL : TOPIC_OK;
    uint32_t more = fresh_count ? ++*fresh_count : 1;
    uint32_t left = (free_topics ? 1 : 0) + (topic_cfg.max_topics + 1 - fresh);
    if (left >= more)
        return TOPIC_OK;
    /* the free list may hold more than one: count it only when it matters */
    for (uint32_t f = free_topics; f && left < more; f = topics[f].linger_next)
        left += f != free_topics;
    return left >= more ? TOPIC_OK : TOPIC_NO_ROOM;
}

/* x's members in a block of cap (at least its n): the streams, then their
 * records, moved as the block's size changes. -1 when out of memory. */
static int resize_members(struct topic *x, uint32_t cap)
{
    const size_t each = sizeof(struct stream *) + sizeof(uint32_t);
    void *b = malloc((size_t)cap * each);
    if (!b)
        return -1;
    if (x->n) {
        memcpy(b, streams_of(x), x->n * sizeof(struct stream *));
        memcpy((struct stream **)b + cap, subs_of(x), x->n * sizeof(uint32_t));
    }
    free(x->members);
    x->members = b;
    x->cap = cap;
    return 0;
}

/* Room for one more member: the block grows by half (a quarter of it
 * unused on average, against a third by doubling). */
static int grow_members(struct topic *x)
{
    return x->n < x->cap ? 0 : resize_members(x, x->cap < 2 ? 2 : x->cap + (x->cap + 1) / 2);
}

/* Below a third used, the block gives back half (keeps it on failure). */
static void shrink_members(struct topic *x)
{
    if (x->cap > 8 && x->n < x->cap / 3)
        (void)resize_members(x, x->cap / 2);
}

enum topic_refusal topic_subscribe(struct stream *s, const char *name, size_t len, uint32_t *out)
{
    if (!topic_name_ok(name, len))
        return TOPIC_BAD_NAME;
    uint64_t *v = ptrmap_get(&by_stream, s);
    uint32_t t = topic_find(name, len);
    if (t && v && topic_sub_of(s, t)) {
        *out = t;
        return TOPIC_OK;
    }
    if (v && COUNT(*v) >= topic_cfg.per_stream)
        return TOPIC_STREAM_FULL;
    if (t && topics[t].n >= topic_cfg.per_topic)
        return TOPIC_FULL;
    int made = 0;
    if (!t) {
        if (!topics || !(t = make(name, len, 0)))
            return TOPIC_NO_ROOM;
        made = 1;
    }
    struct topic *x = &topics[t];
    uint32_t sub = 0;
    uint64_t head = v ? *v : 0, first = (uint32_t)head ? (uint32_t)head : 0;
    /* a replay under way gives it what comes from now (replay.c) */
    uint32_t next = head & REPLAYING ? history_last_seq(topic_slot(t)) + 1 : 0;
    if (grow_members(x) != 0 || !(sub = sub_alloc()) ||
        ptrmap_put(&by_stream, s, (head & REPLAYING) | (uint64_t)(COUNT(head) + 1) << 32 |
                                      (first ? first : sub)) != 0 ||
        (next && topic_sub_set_next(sub, next) != 0)) {
        if (sub) {
            sub_release(sub);
            if (head)
                *ptrmap_get(&by_stream, s) = head;
            else
                ptrmap_remove(&by_stream, s, NULL);
        }
        if (made)
            give_up(t);
        return TOPIC_NO_MEMORY;
    }
    *topic_sub_at(sub) = (struct topic_sub){.topic = t, .pos = x->n};
    /* last in the stream's list: its topics are replayed in the order joined */
    uint32_t last = (uint32_t)first;
    while (last && topic_stream_next(last))
        last = topic_stream_next(last);
    if (last)
        topic_sub_at(last)->link = sub;
    streams_of(x)[x->n] = s;
    subs_of(x)[x->n] = sub;
    x->n++;
    if (x->lingering)
        linger_unlink(t);
    loop_stats.topic_subscriptions++;
    loop_stats.topic_joins++;
    if (topic_cfg.member)
        topic_cfg.member(t, s, 1);       /* first: a count told at once tells it too */
    if (topic_cfg.changed)
        topic_cfg.changed(t);
    *out = t;
    return TOPIC_OK;
}

/* sub (of s, on t) leaves t's arrays: the last member takes its place. */
static void leave(const struct stream *s, uint32_t sub)
{
    uint32_t t = topic_sub_at(sub)->topic, pos = topic_sub_at(sub)->pos;
    struct topic *x = &topics[t];
    x->n--;
    if (pos != x->n) {
        streams_of(x)[pos] = streams_of(x)[x->n];
        subs_of(x)[pos] = subs_of(x)[x->n];
        topic_sub_at(subs_of(x)[pos])->pos = pos;
    }
    if (nexts.used)
        ptrmap_remove(&nexts, sub_key(sub), NULL);
    sub_release(sub);
    shrink_members(x);
    loop_stats.topic_subscriptions--;
    loop_stats.topic_leaves++;
    if (topic_cfg.member)
        topic_cfg.member(t, s, 0);
    if (topic_cfg.changed)
        topic_cfg.changed(t);
    if (x->n == 0)
        linger(t);
}

int topic_unsubscribe(struct stream *s, uint32_t t)
{
    uint64_t *v = ptrmap_get(&by_stream, s);
    if (!v)
        return 0;
    uint32_t prev = 0, i = (uint32_t)*v;
    while (i && topic_sub_at(i)->topic != t) {
        prev = i;
        i = topic_stream_next(i);
    }
    if (!i)
        return 0;
    uint32_t after = topic_sub_at(i)->link, count = COUNT(*v) - 1;
    if (prev)
        topic_sub_at(prev)->link = after;
    if (count == 0 && !(*v & REPLAYING))
        ptrmap_remove(&by_stream, s, NULL);
    else
        *v = (*v & REPLAYING) | (uint64_t)count << 32 | (prev ? (uint32_t)*v : after);
    leave(s, i);
    return 1;
}

void topic_leave_all(struct stream *s)
{
    uint64_t v;
    if (!ptrmap_remove(&by_stream, s, &v))
        return;
    for (uint32_t i = (uint32_t)v, next; i; i = next) {
        next = topic_stream_next(i);
        leave(s, i);
    }
}

/* ---------------------------------------------------------------- requests */

static struct topic_request requests[256];
static uint32_t nrequests;
static const struct stream *requests_owner;

void topic_requests_set(const struct topic_request *r, uint32_t n)
{
    nrequests = n < 256 ? n : 256;
    if (nrequests)
        memcpy(requests, r, nrequests * sizeof *r);
    requests_owner = NULL;
}

const struct topic_request *topic_requests(uint32_t *n)
{
    *n = requests_owner ? 0 : nrequests;
    return requests;
}

void topic_requests_own(const struct stream *s)
{
    requests_owner = s;
    if (!s)
        nrequests = 0;
}

const struct topic_request *topic_stream_requests(const struct stream *s, uint32_t *n)
{
    int mine = requests_owner && requests_owner == s;
    *n = mine ? nrequests : 0;
    return mine ? requests : NULL;
}

uint32_t topic_next_held(uint32_t t)
{
    while (topics && ++t < fresh)
        if (topics[t].held)
            return t;
    return 0;
}

size_t topic_index_bytes(void)
{
    size_t n = ptrmap_bytes(&by_stream) + ptrmap_bytes(&nexts) +
               (size_t)nblocks * SUB_BLOCK * sizeof **blocks;
    for (uint32_t t = 1; topics && t < fresh; t++)
        n += (size_t)topics[t].cap * (sizeof(struct stream *) + sizeof(uint32_t));
    return n;
}

/* ---------------------------------------------------------------- hand-over */

int topic_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s))
{
    uint32_t held = 0, streams = 0, now = now_s();
    for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t))
        held++;
    for (uint32_t i = 0; by_stream.e && i <= by_stream.mask; i++)
        streams += by_stream.e[i].key && index_of(by_stream.e[i].key) != UINT32_MAX;
    size_t at = carry_begin(o, TOPIC_CARRY_TAG, TOPIC_CARRY_VERSION);
    /* the lingering first, oldest first (the order they are given up in),
     * then those with streams */
    carry_u32(o, held);
    for (uint32_t t = linger_head; t; t = topics[t].linger_next) {
        int32_t left = (int32_t)(topics[t].linger_until - now);
        carry_u32(o, t);
        carry_u32(o, left > 0 ? (uint32_t)left : 0);
    }
    for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t))
        if (!topics[t].lingering) {
            carry_u32(o, t);
            carry_u32(o, UINT32_MAX);
        }
    carry_u32(o, streams);
    for (uint32_t i = 0; by_stream.e && i <= by_stream.mask; i++) {
        const void *s = by_stream.e[i].key;
        uint32_t k = s ? index_of(s) : UINT32_MAX;
        if (k == UINT32_MAX)
            continue;
        uint64_t v = by_stream.e[i].value;
        carry_u32(o, k);
        carry_u8(o, (v & REPLAYING) != 0);
        carry_u16(o, (uint16_t)COUNT(v));
        for (uint32_t sub = (uint32_t)v; sub; sub = topic_stream_next(sub)) {
            carry_u32(o, topic_sub_at(sub)->topic);
            carry_u32(o, v & REPLAYING ? topic_sub_next(sub) : 0);
        }
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

/* One carried stream's subscriptions, made again: 0, or -1. */
static int take_stream(struct carry_in *rec, struct stream *s)
{
    int replaying = carry_get_u8(rec);
    uint32_t n = carry_get_u16(rec);
    if (rec->failed || !s || ptrmap_get(&by_stream, s) || n > topic_cfg.per_stream ||
        (replaying && topic_replay_mark(s, 1) != 0))
        return -1;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t t = carry_get_u32(rec), next = carry_get_u32(rec), got = 0;
        uint8_t len;
        if (rec->failed || !topic_held(t))
            return -1;
        const char *name = topic_name(t, &len);
        if (topic_subscribe(s, name, len, &got) != TOPIC_OK || got != t ||
            (next && topic_sub_set_next(topic_sub_of(s, t), next) != 0))
            return -1;
    }
    return 0;
}

int topic_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i))
{
    (void)version;                   /* 1: the only one yet */
    /* nothing is told while the index is made again: it is what it was */
    struct topic_config told = topic_cfg;
    topic_cfg.changed = NULL;
    topic_cfg.gone = NULL;
    topic_cfg.member = NULL;
    int failed = 0;
    uint32_t held = carry_get_u32(rec), now = now_s();
    for (uint32_t k = 0; k < held && !rec->failed && !failed; k++) {
        uint32_t t = carry_get_u32(rec), left = carry_get_u32(rec);
        if (rec->failed || !topic_held(t) || topics[t].lingering) {
            failed = 1;              /* the history handed over has no such topic */
            break;
        }
        if (left != UINT32_MAX) {
            linger(t);               /* in the order they came: oldest first */
            topics[t].linger_until = now + left;
        }
    }
    uint32_t streams = failed ? 0 : carry_get_u32(rec);
    for (uint32_t k = 0; k < streams && !rec->failed && !failed; k++) {
        uint32_t i = carry_get_u32(rec);
        failed = take_stream(rec, rec->failed ? NULL : at(i)) != 0;
    }
    /* a topic the history named that nothing held: lingers, as at a restart */
    for (uint32_t t = topic_next_held(0); t && !failed; t = topic_next_held(t))
        if (!topics[t].n && !topics[t].lingering)
            linger(t);
    topic_cfg.changed = told.changed;
    topic_cfg.gone = told.gone;
    topic_cfg.member = told.member;
    if (failed || rec->failed) {
        log_msg(LOG_ERROR, "takeover: the topics handed over do not match the history handed "
                "over (or out of memory)");
        return -1;
    }
    log_msg(LOG_INFO, "topics: %u taken over, %llu subscriptions", held,
            (unsigned long long)loop_stats.topic_subscriptions);
    return 0;
}
