/* SPDX-License-Identifier: Apache-2.0 */
/* The record a message becomes in the hand-off, from the C-node thread to
 * the event loop. Laid out once by the C-node thread, read in place by the
 * loop: header, then uids[nuids], then the payload, then reply bytes. */
#ifndef HTTPDCNODE_CMD_H
#define HTTPDCNODE_CMD_H

#include <stddef.h>
#include <stdint.h>

enum cmd_kind {
    CMD_UNICAST = 1,
    CMD_MULTICAST,
    CMD_BROADCAST,
    CMD_KICK,
    CMD_STATS,
    CMD_SNAPSHOT,      /* the master (re)connected: send it who is online */
    CMD_DRAIN,         /* {drain, Seconds}: uid holds the seconds */
    CMD_UNDRAIN,       /* {drain, cancel} */
    CMD_CONN,          /* {conn, Conn, Data}: to one connection (conn) */
    CMD_IN_ACK,        /* {httpdcnode_in_ack, N}: the C-node thread's, never in the ring */
    CMD_IN_RESET,      /* {httpdcnode_in_reset, Name}: the same */
    CMD_GAP,           /* a master lost messages for uids[nuids] and the topics in
                          the payload (each its length in a byte, then its name):
                          tell them a gap */
    CMD_GAP_ALL,       /* messages were lost, for which uids or topics nobody knows:
                          tell every uid and topic */
    CMD_SEQ_BASE,      /* {httpdcnode_seq_base, ...}: the C-node thread's, never in the ring */
    /* Topics (core/topic.h): the topic's name where a multicast's uids go
     * (cmd_topic: uid holds its length, nuids the words it takes). */
    CMD_TOPIC,         /* {topic, Topic, Data}: to the topic's streams */
    CMD_SUBSCRIBE,     /* {subscribe, Conn, Topic}: conn subscribes */
    CMD_UNSUBSCRIBE,   /* {unsubscribe, Conn, Topic} */
    CMD_JOIN_ALLOWED,  /* {subscribe, Conn, Topic, Since}: the handler allowed a join;
                          the payload is the id to resume from (maybe none) */
    CMD_JOIN_REFUSED,  /* {refuse_join, Conn, Topic, Reason}: it did not; the payload is why */
    CMD_SEQ_RUN,       /* the C-node thread's: origin slot uid of the masters' numbered
                          streams is now the run the payload (struct cmd_seq_run) names */
};

static inline int cmd_is_topic(uint8_t kind) { return kind >= CMD_TOPIC && kind <= CMD_JOIN_REFUSED; }

struct cmd {
    uint8_t kind;          /* enum cmd_kind */
    uint8_t binary;        /* 1: the payload goes as binary (a WebSocket binary
                              frame, SSE's event: base64, long-poll's
                              data_base64); 0: as text, and it is valid UTF-8
                              (erl_term.h: Erlang says which, else its bytes) */
    uint16_t reply_len;    /* encoded {Pid, Ref} bytes at the end, 0 for none */
    uint32_t uid;          /* CMD_UNICAST, CMD_KICK; CMD_DRAIN: seconds; topics: the name's bytes */
    uint32_t nuids;        /* CMD_MULTICAST */
    uint32_t payload_len;
    uint64_t received_ns;  /* when the C-node decoded it: clock_now_ns() (monotonic) */
    union {
        uint64_t conn;     /* CMD_CONN, CMD_SUBSCRIBE ... CMD_JOIN_REFUSED: conn.h's id */
        uint64_t mark;     /* a numbered message (erl/erl_seq.h): cmd_mark(), 0: none */
    };
};

/* A numbered message's origin slot and last number, as the loop keeps them
 * with the history (core/history_origins.h); numbers from 2^56 are not
 * marked (a master counts from 1: never reached). */
#define CMD_MARK_LAST_MAX ((1ull << 56) - 1)
static inline uint64_t cmd_mark(uint32_t origin, uint64_t last)
{
    return last <= CMD_MARK_LAST_MAX ? (uint64_t)(origin + 1) << 56 | last : 0;
}
static inline uint32_t cmd_mark_origin(uint64_t mark) { return (uint32_t)(mark >> 56) - 1; }
static inline uint64_t cmd_mark_last(uint64_t mark) { return mark & CMD_MARK_LAST_MAX; }

/* CMD_SEQ_RUN's payload. */
struct cmd_seq_run {
    uint64_t name_hash;    /* XXH3 of the master's node name */
    uint64_t inc;          /* its run */
    uint64_t base;         /* every number up to this is settled */
};

static inline size_t cmd_size(uint32_t nuids, uint32_t payload_len, uint32_t reply_len)
{
    return sizeof(struct cmd) + (size_t)nuids * 4 + payload_len + reply_len;
}

static inline uint32_t *cmd_uids(struct cmd *c) { return (uint32_t *)(c + 1); }

static inline char *cmd_payload(struct cmd *c) { return (char *)(cmd_uids(c) + c->nuids); }

static inline char *cmd_reply(struct cmd *c) { return cmd_payload(c) + c->payload_len; }

/* A topic command's topic (c->uid bytes). */
static inline char *cmd_topic(struct cmd *c) { return (char *)cmd_uids(c); }

/* The words of the uid area a topic name of len bytes takes. */
static inline uint32_t cmd_topic_words(uint32_t len) { return (len + 3) / 4; }

#endif
