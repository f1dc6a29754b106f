/* SPDX-License-Identifier: Apache-2.0 */
/* How the history is laid out, the same in memory and in a --history-file:
 * a head (who made it, then the positions the loop published), the slots
 * (the uids', then the topics'), the topics' names, the arena of entries,
 * and the room a moved entry waits in.
 * Shared by core/history.c (which writes it), core/history_map.c (which
 * maps it) and core/history_check.c (which checks what a killed process
 * left); nothing else reads it. */
#ifndef HTTPDCNODE_HISTORY_LAYOUT_H
#define HTTPDCNODE_HISTORY_LAYOUT_H

#include "core/history.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* 16 bytes per slot: one per uid, then one per topic (--max-topics),
 * for every one (untouched pages cost nothing). */
struct uid_history {
    uint64_t newest;        /* position + 1 of the newest kept message, 0: none */
    uint32_t seq;           /* the last id given */
    uint32_t epoch;         /* a topic's slot: its own epoch (drawn when the
                               topic was made); 0 for a uid: the history's */
};

_Static_assert(sizeof(struct uid_history) == 16, "history costs 16 bytes per slot");

/* A topic's name, one per topic slot, after the slots: so that a restart
 * knows which topic each slot's messages are of. Written after the slot
 * is reset for the topic, cleared (check 0) before the slot is given up:
 * a record whose check fails names no topic. 72 bytes a topic, untouched
 * until the topic is made. */
struct topic_name {
    uint32_t check;         /* topic_name_check(), never 0; 0: no topic */
    uint8_t len;
    char name[HISTORY_TOPIC_NAME_MAX];
    uint8_t unused[3];
};

_Static_assert(sizeof(struct topic_name) == 72, "a topic's name record is 72 bytes");

static inline uint32_t topic_name_check(uint32_t index, const struct topic_name *t)
{
    uint32_t c = (uint32_t)XXH3_64bits_withSeed(t->name, t->len < HISTORY_TOPIC_NAME_MAX
                                                             ? t->len : HISTORY_TOPIC_NAME_MAX,
                                                (uint64_t)index << 8 | t->len);
    return c ? c : 1;
}

/* 32 bytes, then the payload, padded to 8. A payload sent to many uids (a
 * multicast, a broadcast) is kept once, as a shared entry (uid 0), and each
 * uid's entry holds its position instead (8 bytes): such an entry is kept
 * while the shared one is, which is older and leaves first. A uid's entries
 * are chained both ways: back for a resume's start, forward for a replay
 * cursor to step in O(1); links are kept mutual between entries still kept
 * (a multicast's entry goes with its payload: once that is pushed out,
 * links to it and from it are no longer mended). A link is the distance to the entry it names in
 * 8-byte units, so that it fits 4 bytes (an arena is at most 16 GiB) and
 * the entry has room for its check. Whether a message is binary is a bit of
 * len in the entry holding its payload (its own, or the shared one): no
 * byte more per entry, as payloads are far shorter than that bit. */
struct entry {
    int32_t prev;           /* the uid's previous kept message, 0: none */
    int32_t next;           /* the uid's next one, 0: none yet */
    uint32_t uid;           /* 0: a shared payload */
    uint32_t seq;
    uint32_t stamp_s;       /* monotonic seconds when kept */
    uint32_t len;           /* payload bytes [| BINARY_MSG], or FILLER, or SHARED_REF | 8 */
    uint32_t check;         /* entry_check(), with a --history-file (else 0) */
    uint32_t topic_at;      /* a topic's: its topic's bytes kept before it, in 8-byte
                               units, wrapping (history.c's bound per topic); else 0 */
};

_Static_assert(sizeof(struct entry) == 32, "an entry's header is 32 bytes");

#define FILLER UINT32_MAX
#define SHARED_REF 0x80000000u  /* the payload is the shared entry at this position + 1 */
#define BINARY_MSG 0x40000000u  /* the payload is a binary message (cmd.h) */
#define LEN_BYTES (~(SHARED_REF | BINARY_MSG))  /* the bytes in len */

/* The largest arena: a link (int32 of 8-byte units) spans any two entries. */
#define HISTORY_ARENA_MAX (1ull << 34)

static inline size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The bytes of an entry that is not a filler. */
static inline size_t entry_size(const struct entry *e)
{
    return sizeof *e + pad8(e->len & LEN_BYTES);
}

/* The position + 1 that a link of the entry at pos names (0: none). */
static inline uint64_t entry_link(uint64_t pos, int32_t link)
{
    return link ? pos + (uint64_t)((int64_t)link * 8) + 1 : 0;
}

/* The link from the entry at pos to position + 1 p: none when p is 0 or
 * gone (before head): every entry still kept is within the arena of pos. */
static inline int32_t entry_link_to(uint64_t pos, uint64_t p, uint64_t head)
{
    return p && p - 1 >= head ? (int32_t)(((int64_t)(p - 1) - (int64_t)pos) / 8) : 0;
}

/* What a restart checks an entry by: its id, time, length and payload
 * (not its links, which change). */
static inline uint32_t entry_check(const struct entry *e)
{
    uint64_t seed = ((uint64_t)e->uid << 32 | e->seq) ^
                    ((uint64_t)e->stamp_s << 32 | e->len) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)XXH3_64bits_withSeed(e + 1, e->len & LEN_BYTES, seed);
}

/* Where a master's numbered stream (erl/erl_seq.h) stands in the history,
 * one per origin slot of the C-node (core/history_origins.c writes them,
 * and says in what order): the last number all of whose messages are in,
 * and how far the command being applied went, so that a restart tells the
 * master where to go on from and applies nothing twice. 64 bytes. */
struct history_origin {
    uint64_t name_hash;         /* XXH3 of the master's node name */
    uint64_t inc;               /* its run */
    uint32_t check;             /* history_origin_check(); 0: no stream */
    uint32_t kind;              /* the command being applied (core/cmd.h) */
    uint32_t nuids;             /* and the uids it lists */
    uint32_t unused;
    _Atomic uint64_t applied;   /* every number up to this is in */
    _Atomic uint64_t applying;  /* the last number of the command being
                                   applied; counts only while past applied */
    _Atomic uint64_t at;        /* how far it went: uid << 32 | index << 1 | bit,
                                   the uid at index of its list being given it,
                                   bit the low bit of its last id before */
    uint64_t unused2;
};

_Static_assert(sizeof(struct history_origin) == 64, "an origin's record is 64 bytes");

static inline uint32_t history_origin_check(uint32_t k, const struct history_origin *o)
{
    uint64_t key[2] = {o->name_hash, o->inc};
    uint32_t c = (uint32_t)XXH3_64bits_withSeed(key, sizeof key, k);
    return c ? c : 1;
}

#define HISTORY_MAGIC "httpdhst"    /* 8 bytes, the file's first */
#define HISTORY_VERSION 3u          /* of this layout; another is refused */
/* The oldest read: 2 had no origins (the page is zero there), which is all
 * that changed; a file of it is taken as 3 (history_map.c). */
#define HISTORY_VERSION_OLDEST 2u
#define HISTORY_NODE_MAX 256
#define HISTORY_HEAD_BYTES 4096     /* the head's page; the slots follow */

/* The head: a page. Who made it is written once (check last) and read
 * back when the file is opened again. The state after it is what the loop
 * published, each store a commit (core/history.c says in what order). */
struct history_head {
    char magic[8];
    uint32_t version;
    uint32_t max_users;
    uint64_t arena_size;
    char node[HISTORY_NODE_MAX];    /* the --name that made it */
    char boot_id[40];               /* the kernel's boot_id then: stamps are per boot */
    uint32_t epoch;
    uint32_t max_topics;            /* topic slots after the uids' (--max-topics) */
    uint64_t made_s;                /* when, in seconds since 1970 (for the log) */
    uint64_t check;                 /* XXH3 of all the above */
    _Alignas(64) _Atomic uint64_t head;     /* position of the oldest entry */
    _Atomic uint64_t tail;                  /* the next free byte: entries before it count */
    _Atomic uint64_t last;          /* position + 1 of the newest uid entry, whose
                                       slot is updated after the tail counts it */
    _Atomic uint64_t move_credit;
    _Atomic uint64_t move_from;     /* a move under way: the entry in the room goes */
    _Atomic uint64_t move_to;       /* from the head at move_from to the tail at move_to */
    _Atomic uint32_t move_on;
    _Alignas(64) struct history_origin origins[HISTORY_ORIGINS];   /* version 3 */
};

_Static_assert(sizeof(struct history_head) <= HISTORY_HEAD_BYTES, "the head fits its page");

/* XXH3 of the head's fields up to check. */
static inline uint64_t history_head_check(const struct history_head *h)
{
    return XXH3_64bits(h, offsetof(struct history_head, check));
}

#endif
