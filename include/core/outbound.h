/* SPDX-License-Identifier: Apache-2.0 */
/* What the event loop asks the C-node thread to send to Erlang: replies
 * ({Ref, N}, {Ref, Stats}) and presence, through the outbox ring (the
 * inbox is erl_inbound.h's, the other way); the loop never waits on it: when full, the record is dropped and
 * counted (replies_dropped). */
#ifndef HTTPDCNODE_OUTBOUND_H
#define HTTPDCNODE_OUTBOUND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/handoff.h"
#include "obs/stats.h"

enum out_kind { OUT_ACK = 1, OUT_STATS, OUT_PRESENCE, OUT_IN, OUT_CONN, OUT_TOPICS };
/* PRESENCE_SNAPSHOT is a snapshot's first piece (replaces), the others are
 * PRESENCE_SNAPSHOT_MORE (add), right after it. */
enum presence_op { PRESENCE_UP = 1, PRESENCE_DOWN, PRESENCE_SNAPSHOT, PRESENCE_SNAPSHOT_MORE };
/* Topic presence (core/topic_presence.c), OUT_TOPICS: each a list of
 * entries (outbound_topics). The snapshots follow a uid snapshot, to the
 * same masters (erl_send.c); joins and leaves are --presence-topics'. */
enum topic_op {
    TOPICS_CHANGED = 1,     /* {u32 streams, u8 len, name}: the topic's streams here now */
    TOPICS_GONE,            /* {u32 0, u8 len, name}: no longer held here */
    TOPICS_SNAPSHOT,        /* as CHANGED: every topic held (replaces) */
    TOPICS_SNAPSHOT_MORE,   /* the rest of it (adds) */
    TOPIC_MEMBERS,          /* {u8 len, name, u32 uid, u64 conn}: every subscription (replaces) */
    TOPIC_MEMBERS_MORE,     /* the rest (adds) */
    TOPIC_JOINED,           /* one entry as TOPIC_MEMBERS: a stream subscribed */
    TOPIC_LEFT,             /* one: a stream's subscription ended */
};

/* Record layout: header, then the kind's body. */
struct out_rec {
    uint8_t kind;          /* enum out_kind */
    uint8_t op;            /* enum presence_op, OUT_PRESENCE */
    union {
        uint16_t reply_len; /* encoded {Pid, Ref} bytes, OUT_ACK and OUT_STATS */
        uint16_t to_all;    /* OUT_PRESENCE snapshot: for every master, not who asked */
    };
    uint32_t count;        /* N for OUT_ACK, pairs for OUT_STATS, uids for OUT_PRESENCE,
                            * data bytes for OUT_IN */
    /* OUT_ACK:      reply bytes
     * OUT_STATS:    struct stat_pair[count], then reply bytes
     * OUT_PRESENCE: uint32_t uids[count]
     * OUT_IN:       struct out_in, then the data
     * OUT_CONN:     struct out_conn
     * OUT_TOPICS:   count entries of the op (enum topic_op), to the record's end */
};

/* What a record for the --inbox process is: a client's message, or a
 * topic it asked to join (the handler decides: core/topic_join.c) or left. */
enum in_what { IN_MESSAGE = 0, IN_JOIN, IN_LEAVE };

/* A client's message for the --inbox process. */
struct out_in {
    uint64_t conn;         /* conn.h's id of the connection */
    uint32_t uid;
    uint8_t binary;        /* a binary message: {binary, Data} to Erlang */
    uint8_t what;          /* enum in_what; a join's data is the topic, then the
                              id it resumes from (maybe none); a leave's the topic */
    uint8_t topic_len;     /* IN_JOIN, IN_LEAVE: the topic's bytes of the data */
    uint8_t pad;
};

/* A stream opened (conn_up) or ended (conn_down), --presence-conns. */
struct out_conn {          /* 48 bytes */
    uint64_t conn;         /* conn.h's id */
    const char *transport; /* static atom name: chunked, sse, ws, poll */
    const char *reason;    /* conn_down: static atom name of why it ended */
    uint32_t uid;
    uint16_t port;         /* the peer's, host order */
    uint8_t family;        /* 4, 6, or 0: the peer is not known */
    uint8_t up;            /* 1 conn_up, 0 conn_down */
    uint8_t addr[16];      /* the peer's address, network order (4 bytes for IPv4) */
};

/* Records of struct out_conn committed and not yet sent by the C-node
 * thread: past OUTBOUND_CONN_MAX new ones are dropped (counted in
 * conn_events_dropped), so a connect storm takes at most about 1 MB of
 * the outbox from the replies and client messages. */
#define OUTBOUND_CONN_MAX 16384
extern atomic_uint_fast32_t outbound_conn_pending;

/* Client messages committed to the outbox and not yet sent by the C-node
 * thread (which takes them off as it sends, or drops them), each weighed
 * by outbound_in_cost: past a bound the loop stops reading from clients. */
extern atomic_uint_fast64_t outbound_in_pending;

/* The header of a parked copy of a record (struct erl_parked, erl_park.h,
 * which asserts it). */
#define OUTBOUND_PARKED_HEADER 16u

/* What a client message of len bytes weighs in outbound_in_pending: its
 * records and the header of a parked copy, as the park (erl_park.h)
 * counts it, so that the loop pauses its clients on the measure the park
 * fills by (40 bytes and the data): 1-byte messages weigh 41 bytes, not 1. */
#define OUTBOUND_IN_OVERHEAD (OUTBOUND_PARKED_HEADER + sizeof(struct out_rec) + sizeof(struct out_in))
static inline uint64_t outbound_in_cost(uint32_t len) { return OUTBOUND_IN_OVERHEAD + len; }

void outbound_init(struct handoff *outbox);

void outbound_ack(const char *reply, uint16_t reply_len, uint32_t n);
void outbound_stats(const char *reply, uint16_t reply_len);
/* -1 when the queue was full (counted): the caller must repair the view. */
int outbound_presence(enum presence_op op, int to_all, const uint32_t *uids, uint32_t n);
/* A client's message for Erlang (binary: a WebSocket binary message, a
 * POST of application/octet-stream; else text). -1 when the outbox was
 * full (counted in client_in_dropped by the caller). */
int outbound_in(uint32_t uid, uint64_t conn, const void *data, uint32_t len, int binary);
/* A join (with the id it resumes from, since_len 0: none) or a leave of
 * topic by a client, for the --inbox process; -1 when the outbox was full. */
int outbound_in_topic(enum in_what what, uint32_t uid, uint64_t conn, const char *topic,
                      uint8_t topic_len, const char *since, uint8_t since_len);
/* Topic presence: n entries of op, bytes[len] (the entries, as enum
 * topic_op says), for the masters; -1 when the queue was full (counted). */
int outbound_topics(enum topic_op op, int to_all, const void *bytes, uint32_t len, uint32_t n);
/* A conn_up / conn_down; -1 when dropped (counted in conn_events_dropped). */
int outbound_conn(const struct out_conn *c);

#endif
