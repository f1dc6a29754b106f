/* SPDX-License-Identifier: Apache-2.0 */
/* Topic presence: see topic_presence.h. What the masters were told of a
 * topic is a number a topic (its streams + 1, 0 when nothing or gone),
 * so a window's changes go out as their net effect: a topic joined and
 * left within it is not mentioned, one joined by a thousand streams is
 * one entry. A topic given up is told gone at once into the window's
 * list of gone names (its index may hold another topic before the window
 * ends), and what waits goes before a topic told at once, so the masters
 * hear changes in the order they happened. Entries go in parts of at
 * most PART_BYTES; a part lost to a full outbox is repaired by a snapshot
 * a second later (presence.c's repair). */
#include "core/topic_presence.h"
#include "core/conn.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/presence_window.h"
#include "core/stream.h"
#include "core/topic.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdlib.h>
#include <string.h>

#define PART_BYTES 65536       /* one message to the masters at most */
#define PENDING_MAX 16384      /* topics changed per window before it is cut short */
#define IMMEDIATE_MAX 16       /* first streams of a topic told at once per quiet window */
#define MEMBER_ENTRY_MAX (1 + TOPIC_NAME_MAX + 4 + 8)

static int enabled, members;
/* A topic was held once: from then on every snapshot says what is (a
 * node that never held one sends the masters nothing of topics). */
static int ever;
static struct presence_window win = PRESENCE_WINDOW_INIT;
static uint32_t *told;                /* [max_topics + 1]: streams + 1 told, 0: nothing */
static uint8_t *dirty;                /* [max_topics + 1]: in pending */
static uint32_t pending[PENDING_MAX];
static uint32_t npending;

/* A part being built: entries of one kind (base), sent as op (a
 * snapshot's later parts as its _MORE). */
static struct {
    uint8_t bytes[PART_BYTES];
    uint32_t len, n;
    enum topic_op base, op;
    int to_all;
} part;

/* The window's gone names and member changes, in order: parts of their own. */
static struct {
    uint8_t bytes[PART_BYTES];
    uint32_t len, n;
} gone;
static struct {
    uint8_t bytes[PART_BYTES];
    uint32_t len, n;
    enum topic_op op;
} joins;

static void send_part(enum topic_op op, int to_all, const uint8_t *bytes, uint32_t len, uint32_t n)
{
    if (outbound_topics(op, to_all, bytes, len, n) != 0) {
        loop_stats.topic_presence_dropped += n;
        presence_repair_later();
    }
}

/* The part so far goes (a snapshot's first even when empty: it
 * replaces what the masters knew). */
static void part_flush(void)
{
    if (part.n || part.op == TOPICS_SNAPSHOT || part.op == TOPIC_MEMBERS)
        send_part(part.op, part.to_all, part.bytes, part.len, part.n);
    part.len = part.n = 0;
}

/* The next entry of kind op goes into the part (after the part so far
 * is sent, if of another kind or full): where to write its size bytes. */
static uint8_t *part_room(enum topic_op op, int to_all, uint32_t size)
{
    if (part.base != op || part.len + size > PART_BYTES) {
        enum topic_op as = op;
        if (part.base == op && op == TOPICS_SNAPSHOT)
            as = TOPICS_SNAPSHOT_MORE;   /* a snapshot's later parts add to its first */
        else if (part.base == op && op == TOPIC_MEMBERS)
            as = TOPIC_MEMBERS_MORE;
        if (part.base)
            part_flush();
        part.base = op;
        part.op = as;
        part.to_all = to_all;
    }
    uint8_t *at = part.bytes + part.len;
    part.len += size;
    part.n++;
    return at;
}

static void put_count(uint8_t *at, uint32_t streams, const char *name, uint8_t len)
{
    memcpy(at, &streams, 4);
    at[4] = len;
    memcpy(at + 5, name, len);
}

static void add_count(enum topic_op op, int to_all, uint32_t t, uint32_t streams)
{
    uint8_t len;
    const char *name = topic_name(t, &len);
    put_count(part_room(op, to_all, 5u + len), streams, name, len);
}

static uint32_t put_member(uint8_t *at, const char *name, uint8_t len, const struct stream *s)
{
    uint64_t id = conn_id_of(s);
    uint32_t uid = s->uid;
    at[0] = len;
    memcpy(at + 1, name, len);
    memcpy(at + 1 + len, &uid, 4);
    memcpy(at + 5 + len, &id, 8);
    return 13u + len;
}

/* What the window holds: the gone names, the member changes, then each
 * changed topic whose streams differ from what was told. */
static void send_pending(void)
{
    if (gone.n)
        send_part(TOPICS_GONE, 0, gone.bytes, gone.len, gone.n);
    gone.len = gone.n = 0;
    if (joins.n)
        send_part(joins.op, 0, joins.bytes, joins.len, joins.n);
    joins.len = joins.n = 0;
    for (uint32_t i = 0; i < npending; i++) {
        uint32_t t = pending[i], now = topic_members(t) + 1;
        dirty[t] = 0;
        if (!topic_held(t) || told[t] == now)
            continue;                     /* given up (and told), or told already */
        told[t] = now;
        add_count(TOPICS_CHANGED, 0, t, now - 1);
    }
    npending = 0;
    if (part.base)
        part_flush();
    part.base = 0;
}

static void flush(void) { presence_window_flush(&win); }

int topic_presence_init(struct event_base *base, int on, int with_members, uint32_t max_topics)
{
    enabled = on && max_topics;
    members = with_members;
    if (!enabled)
        return 0;
    told = calloc((size_t)max_topics + 1, sizeof *told);
    dirty = calloc((size_t)max_topics + 1, 1);
    return told && dirty && presence_window_init(&win, base, send_pending) == 0 ? 0 : -1;
}

void topic_presence_free(void)
{
    presence_window_free(&win);
    free(told);
    free(dirty);
    told = NULL;
    dirty = NULL;
    npending = 0;
    gone.len = gone.n = joins.len = joins.n = part.len = part.n = 0;
    part.base = 0;
    ever = 0;
}

/* A change joins the window (opened if none). */
static void window_change(void) { presence_window_change(&win); }

void topic_presence_changed(uint32_t t)
{
    if (!enabled)
        return;
    ever = 1;
    if (npending == PENDING_MAX)
        flush();
    window_change();
    if (!told[t] && topic_members(t) && presence_window_at_once(&win, IMMEDIATE_MAX)) {
        /* its first stream: the masters route its messages here at once */
        if (!dirty[t]) {
            dirty[t] = 1;
            pending[npending++] = t;
        }
        send_pending();
        return;
    }
    if (!dirty[t]) {
        dirty[t] = 1;
        pending[npending++] = t;
    }
}

void topic_presence_gone(uint32_t t)
{
    if (!enabled || !told[t]) {
        if (enabled)
            told[t] = 0;
        return;
    }
    uint8_t len;
    const char *name = topic_name(t, &len);
    if (gone.len + 5u + len > PART_BYTES) {
        send_part(TOPICS_GONE, 0, gone.bytes, gone.len, gone.n);
        gone.len = gone.n = 0;
    }
    put_count(gone.bytes + gone.len, 0, name, len);
    gone.len += 5u + len;
    gone.n++;
    told[t] = 0;
    window_change();
}

void topic_presence_member(uint32_t t, const struct stream *s, int joined)
{
    if (!enabled || !members)
        return;
    if (joined && !conn_of(s)) {
        loop_stats.topic_presence_dropped++;   /* out of memory: no name to tell */
        return;
    }
    enum topic_op op = joined ? TOPIC_JOINED : TOPIC_LEFT;
    if (joins.n && (joins.op != op || joins.len + MEMBER_ENTRY_MAX > PART_BYTES)) {
        send_part(joins.op, 0, joins.bytes, joins.len, joins.n);
        joins.len = joins.n = 0;
    }
    uint8_t len;
    const char *name = topic_name(t, &len);
    joins.op = op;
    joins.len += put_member(joins.bytes + joins.len, name, len, s);
    joins.n++;
    window_change();
}

void topic_presence_snapshot(int to_all)
{
    if (!enabled || !ever)
        return;
    flush();                  /* the masters that get no snapshot need the changes */
    part.base = 0;
    (void)part_room(TOPICS_SNAPSHOT, to_all, 0);
    part.n = 0;               /* the first part, empty so far */
    for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t)) {
        told[t] = topic_members(t) + 1;
        add_count(TOPICS_SNAPSHOT, to_all, t, told[t] - 1);
    }
    part_flush();
    if (members) {
        part.base = 0;
        (void)part_room(TOPIC_MEMBERS, to_all, 0);
        part.n = 0;
        for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t)) {
            uint8_t len;
            const char *name = topic_name(t, &len);
            struct stream *const *m = topic_member_array(t);
            for (uint32_t i = 0; i < topic_members(t); i++) {
                if (!conn_of(m[i]))
                    continue;
                uint8_t *at = part_room(TOPIC_MEMBERS, to_all, 13u + len);
                put_member(at, name, len, m[i]);
            }
        }
        part_flush();
    }
    part.base = 0;
}

/* ---------------------------------------------------------------- hand-over */

int topic_presence_carry_export(struct carry_out *o)
{
    uint32_t n = 0;
    for (uint32_t t = 1; enabled && t <= topic_cfg.max_topics; t++)
        n += told[t] != 0;
    size_t at = carry_begin(o, TOPIC_PRESENCE_CARRY_TAG, TOPIC_PRESENCE_CARRY_VERSION);
    carry_u8(o, (uint8_t)enabled);
    carry_u8(o, (uint8_t)members);
    carry_u8(o, (uint8_t)ever);
    carry_u32(o, n);
    for (uint32_t t = 1; enabled && t <= topic_cfg.max_topics; t++)
        if (told[t]) {
            carry_u32(o, t);
            carry_u32(o, told[t]);
        }
    carry_u32(o, gone.n);
    carry_u32(o, gone.len);
    carry_put(o, gone.bytes, gone.len);
    carry_u8(o, (uint8_t)joins.op);
    carry_u32(o, joins.n);
    carry_u32(o, joins.len);
    carry_put(o, joins.bytes, joins.len);
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int topic_presence_carry_take(struct carry_in *rec, uint16_t version)
{
    (void)version;                   /* 1: the only one yet */
    int was = carry_get_u8(rec), with_members = carry_get_u8(rec);
    int was_ever = carry_get_u8(rec);
    uint32_t n = carry_get_u32(rec);
    if (rec->failed || was != enabled || with_members != members) {
        log_msg(LOG_ERROR, "takeover: topic presence is %s%s in the running process: start "
                "this one with the same --presence and --presence-topics", was ? "on" : "off",
                with_members ? " with members" : "");
        return -1;
    }
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        uint32_t t = carry_get_u32(rec), v = carry_get_u32(rec);
        if (rec->failed || t == 0 || t > topic_cfg.max_topics)
            return -1;
        told[t] = v;
    }
    gone.n = carry_get_u32(rec);
    gone.len = carry_get_u32(rec);
    if (gone.len > PART_BYTES)
        return -1;
    carry_get(rec, gone.bytes, gone.len);
    joins.op = (enum topic_op)carry_get_u8(rec);
    joins.n = carry_get_u32(rec);
    joins.len = carry_get_u32(rec);
    if (joins.len > PART_BYTES)
        return -1;
    carry_get(rec, joins.bytes, joins.len);
    if (rec->failed)
        return -1;
    if (!enabled)
        return 0;
    ever = was_ever;
    if (gone.n || joins.n)
        window_change();
    /* what the running process had not told yet */
    for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t))
        if (told[t] != topic_members(t) + 1 && !dirty[t] && npending < PENDING_MAX) {
            dirty[t] = 1;
            pending[npending++] = t;
            window_change();
        }
    for (uint32_t t = 1; t <= topic_cfg.max_topics; t++)
        if (told[t] && !topic_held(t))
            told[t] = 0;             /* its gone name waits in the window, or was sent */
    return 0;
}
