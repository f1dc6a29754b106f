/* SPDX-License-Identifier: Apache-2.0 */
/* Counters of the server. Loop-thread counters are plain; the C-node
 * thread's are atomics. The field lists below feed both GET /stats (JSON)
 * and the {Pid, Ref, stats} reply (an Erlang map), so they cannot drift.
 * X(name, ...): a line of end_reason.h's table gives more than the name. */
#ifndef HTTPDCNODE_STATS_H
#define HTTPDCNODE_STATS_H

#include "lib/carry.h"
#include "obs/end_reason-t.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LOOP_STATS(X)                                                         \
    X(streams_open)     /* streams held now */                                \
    X(streams_total)    /* streams ever started */                            \
    X(uids_online)      /* uids with at least one stream */                   \
    END_REASONS(X)      /* streams ended, one counter a reason (end_reason.h) */ \
    X(backlog_bytes)    /* unsent bytes held for all streams now */           \
    X(input_bytes)      /* bytes clients sent held until whole now (--max-input-total) */ \
    X(msgs_applied)     /* messages taken from the hand-off */                \
    X(history_bytes)    /* bytes of kept messages, headers included */        \
    X(history_entries)  /* messages kept */                                   \
    X(history_evicted)  /* kept messages pushed out for room */               \
    X(history_moved)    /* kept messages moved ahead, still of use, for room */ \
    X(topic_history_trimmed) /* of those pushed out, a topic's past --topic-history-bytes of newer ones */ \
    X(replays)          /* resumes that replayed from the history (or told a gap) */ \
    X(replayed)         /* messages replayed */                               \
    X(replay_gaps)      /* gaps told to resuming clients */                   \
    X(deliveries)       /* chunks written (or queued) to streams */           \
    X(bytes_out)        /* payload bytes delivered */                         \
    X(dropped_no_conn)  /* message for a uid with no stream */                \
    X(multicast_repeats) /* uids a multicast listed again (given it once) */  \
    X(replies_dropped)  /* replies/presence lost: the outbound queue was full */ \
    X(http_not_found)   /* 404 */                                             \
    X(http_too_big)     /* 503 uid above --max-users */                       \
    X(http_bad_method)  /* 405 */                                             \
    X(http_no_fds)      /* 503 because descriptors ran short */               \
    X(http_draining)    /* 503: the node is draining, new streams refused */  \
    X(http_header_timeout) /* closed: request not complete in --header-timeout */ \
    X(http_bad_origin)  /* 403: a cross-origin request from an origin not allowed */ \
    X(http_bad_framing) /* 400: Content-Length repeated or not digits, Transfer-Encoding not one chunked or with a Content-Length */ \
    X(http_shed)        /* requests cut (503, closed): the most of --max-input-total */ \
    X(auth_missing)     /* 403: no subscriber token */                        \
    X(auth_expired)     /* 403: a genuine token past its exp */               \
    X(auth_bad)         /* 403: malformed, for another uid, or forged */ \
    X(ws_refused)       /* WebSocket handshakes refused: 400, 403, 426 */    \
    X(ws_ignored)       /* data messages WebSocket clients sent, refused: no --inbox */ \
    X(client_in)        /* client messages queued for the --inbox process */ \
    X(client_in_dropped) /* client messages lost: the outbox was full */      \
    X(client_paused)    /* times a WebSocket was not read: Erlang was behind */ \
    X(post_in)          /* POST /send/N messages queued for the --inbox process (202) */ \
    X(post_no_inbox)    /* POST /send/N refused 404: no --inbox */            \
    X(post_bad_type)    /* POST /send/N refused: 415 Content-Type, 400 text not UTF-8 */ \
    X(post_bad_conn)    /* POST /send/N refused 404: ?conn= not a live conn of the uid */ \
    X(post_too_big)     /* POST /send/N refused 413: past --max-client-message */ \
    X(post_rate)        /* POST /send/N refused 429: past --client-rate */    \
    X(post_busy)        /* POST /send/N refused 503: Erlang not keeping up */ \
    X(proxy_bad_forwarded) /* from a --trusted-proxy, X-Forwarded-For / X-Real-IP naming no address */ \
    X(conn_sent)        /* {conn, Conn, Data} written to their connection */  \
    X(conn_dropped)     /* {conn, Conn, Data} for an unknown or closed Conn */ \
    X(conn_empty_dropped) /* {conn, Conn, <<>>} to a chunked or HTTP/1.0 stream */ \
    X(conn_events_dropped) /* conn_up/conn_down lost: --presence-conns, too many queued */ \
    X(seq_gap_uids)     /* uids told a gap: a master could not keep their messages */ \
    X(seq_gap_topics)   /* topics told a gap: the same for a topic's messages */ \
    X(ws_deflated)      /* payloads compressed for --ws-deflate WebSockets (once per payload and batch) */ \
    X(ws_deflate_in_bytes) /* their bytes before */                           \
    X(ws_deflate_out_bytes) /* and compressed */                              \
    X(ws_inflated)      /* compressed client messages inflated (--ws-deflate, --inbox) */ \
    X(ws_inflate_too_big) /* of them, past --max-client-message inflated: closed 1009 */ \
    X(topics)           /* topics held now (subscribed to, or lingering for resumes) */ \
    X(topic_subscriptions) /* subscriptions of streams to topics now */       \
    X(topic_joins)      /* subscriptions made */                              \
    X(topic_leaves)     /* subscriptions ended (left, unsubscribed, stream closed) */ \
    X(topics_given_up)  /* topics given up: no stream for their linger time */ \
    X(topic_published)  /* messages published to a topic held here */        \
    X(topic_no_subscribers) /* messages for a topic not held here: dropped */ \
    X(topic_refused_name) /* joins refused: not a topic name, or topics= malformed */ \
    X(topic_refused_stream_full) /* joins refused: --max-topics-per-stream */ \
    X(topic_refused_topic_full) /* joins refused: --max-streams-per-topic */  \
    X(topic_refused_no_room) /* joins refused: --max-topics held */           \
    X(topic_refused_denied) /* joins refused by the token or the handler */   \
    X(topic_refused_no_memory) /* joins refused: out of memory */            \
    X(topic_asks)       /* joins asked of the handler (--topic-auth handler) */ \
    X(topic_asks_allowed) /* of them, allowed */                              \
    X(topic_asks_refused) /* of them, refused */                              \
    X(topic_asks_dropped) /* joins and leaves not sent to the handler: the outbox was full */ \
    X(topic_conn_unknown) /* subscribe, unsubscribe, answers for a Conn not open here */ \
    X(topic_presence_dropped) /* topic presence entries lost: the outbox was full (repaired) */ \
    X(lingering)        /* closed sockets read to their end now (linger.h) */ \
    X(linger_full)      /* closed at once: every lingering slot was busy (the peer may see a reset) */

#define CNODE_STATS(X)                                                        \
    X(msgs_in)          /* messages received from Erlang */                   \
    X(bad_terms)        /* dropped: not a known shape */                      \
    X(bad_uid)          /* dropped: uid not an integer in range */            \
    X(too_big)          /* dropped: payload over --max-message */             \
    X(empty)            /* dropped: empty payload */                          \
    X(not_utf8)         /* dropped: {text, Data} whose Data is not UTF-8 */   \
    X(bad_topic)        /* dropped: a topic that is no topic name */          \
    X(erl_connects)     /* Erlang connections made or accepted */             \
    X(erl_nodes)        /* Erlang connections up now */                       \
    X(erl_masters)      /* of them, to --master nodes (POST /send/N needs one) */ \
    X(erl_refused)      /* connections closed: every handshake thread busy */ \
    X(erl_silent_masters) /* master links dropped: nothing came for --erl-tick-seconds */ \
    X(presence_dropped) /* presence messages not sent to a master not reading */ \
    X(in_no_master)     /* client messages lost: no master linked to send them to */ \
    X(in_park_dropped)  /* client messages lost: 4 MiB parked for inboxes not acknowledging */ \
    X(in_resets)        /* {httpdcnode_in_reset, Name}: an inbox started (again) */ \
    X(in_reset_unacked) /* client messages its inbox had not acknowledged then: maybe lost */ \
    X(in_windows_stuck) /* now: master links whose inbox window is full, no ack for 5 s */ \
    X(seq_duplicates)   /* numbered messages dropped: applied before (sent again) */ \
    X(seq_reordered)    /* numbered messages that came before their turn: held for it */ \
    X(seq_held_dropped) /* of them, not held: 16 MiB held already (their master sends again) */ \
    X(seq_skipped)      /* numbers given up: a hole not filled in 10 s, a master's run gone */ \
    X(seq_untracked)    /* numbered messages applied unnumbered: 16 masters' streams held */ \
    X(seq_acks)         /* acknowledgements sent to masters */                \
    X(backpressure)     /* seconds the reader waited on a full hand-off */

struct loop_stats {
#define X(name, ...) uint64_t name;
    LOOP_STATS(X)
#undef X
};

struct cnode_stats {
#define X(name) atomic_uint_fast64_t name;
    CNODE_STATS(X)
#undef X
};

extern struct loop_stats loop_stats;
extern struct cnode_stats cnode_stats;

struct stat_pair {
    const char *name;      /* static string */
    uint64_t value;
};

/* Every counter plus memory (resident set size, bytes), as name/value pairs; returns the count.
 * Call on the loop thread. */
#define STATS_MAX_PAIRS 128
#define STATS_ONE(...) +1
_Static_assert(0 LOOP_STATS(STATS_ONE) CNODE_STATS(STATS_ONE) + 1 <= STATS_MAX_PAIRS,
               "more counters than STATS_MAX_PAIRS: raise it");
#undef STATS_ONE
/* The /stats JSON at its longest: each pair "name":value, a name under 40
 * bytes and a value of at most 20 digits. */
#define STATS_JSON_MAX (STATS_MAX_PAIRS * (40 + 4 + 20) + 3)
size_t stats_collect(struct stat_pair out[STATS_MAX_PAIRS]);

/* The pairs as one JSON object line; returns its length. */
size_t stats_format_json(char *buf, size_t size);

/* A hot upgrade (upgrade/): the counters go on in the process taking over
 * (by name; gauges, which say what is now, are counted there afresh), so
 * that rates read from /metrics see no reset. -1 when malformed. */
#define STATS_CARRY_TAG CARRY_TAG('S', 'T', 'A', 'T')
#define STATS_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int stats_carry_export(struct carry_out *o);
int stats_carry_take(struct carry_in *rec, uint16_t version);

#endif
