/* SPDX-License-Identifier: Apache-2.0 */
/* Why a stream ended, carried from the call that ends it to everything
 * that reports it: the counter of stats.h it moves, the label /metrics
 * (httpdcnode_streams_closed_total{reason="..."}) and a master's
 * conn_down give it, and, for an ending on purpose, the word the client
 * reads in its transport's goodbye (transport_ops.h; docs/protocol.md,
 * "Endings"). A new reason is one line below and the call that ends a
 * stream with it: its counter is declared by the line too. */
#ifndef HTTPDCNODE_END_REASON_T_H
#define HTTPDCNODE_END_REASON_T_H

#include <stdint.h>

/* X(counter, NAME, label, word): its counter (a field of stats.h's
 * loop_stats, in /stats and the Erlang stats reply), END_NAME, its label,
 * the word its client reads (NULL: told nothing, or a close code). */

/* Ended on purpose: the client is told whether to come back, and when.
 * A new one goes last: its place is its WebSocket close code (ws.c). */
#define END_REASONS_TOLD(X)                                                   \
    /* the server is going away (SIGTERM, {drain, S}): come back, with a     \
     * backoff, to this or another node */                                    \
    X(drained, DRAIN, "drain", "drain")                                        \
    /* Erlang ended the uid's streams ({kick, Uid}): do not come back */      \
    X(kicked, KICKED, "kick", "kicked")                                        \
    /* a newer stream of the uid took its place past --max-conns-per-uid     \
     * (the oldest is ended): do not come back */                             \
    X(evicted, REPLACED, "evicted", "replaced")                                \
    /* its subscriber token's exp passed: come back with a fresh token */    \
    X(token_expired, EXPIRED, "token_expired", "expired")

/* The others: the client left, or broke a rule. */
#define END_REASONS_UNTOLD(X)                                                 \
    X(client_closed, CLIENT, "client", NULL)       /* ended by their client */ \
    X(slow_closed, SLOW, "slow", NULL)     /* passed --max-backlog(-total) */  \
    X(input_closed, INPUT, "input", NULL)  /* sent more than 4 KB after its GET */ \
    /* WebSockets closed: protocol error (1002, 1007, 1009), 1013 */           \
    X(ws_bad_frames, WS_PROTOCOL, "ws_protocol", NULL)                         \
    X(ws_dead, WS_DEAD, "ws_dead", NULL)   /* WebSockets closed: no pong to two pings */ \
    /* WebSockets closed 1008: a message too slow or in too many frames, a flood */ \
    X(ws_policy_closed, WS_POLICY, "ws_policy", NULL)                          \
    /* WebSockets closed 1008: past --client-rate */                           \
    X(client_rate_closed, CLIENT_RATE, "client_rate", NULL)                    \
    /* WebSockets closed 1013: their message held the most of --max-input-total */ \
    X(ws_shed, WS_SHED, "ws_shed", NULL)

#define END_REASONS(X) END_REASONS_TOLD(X) END_REASONS_UNTOLD(X)

/* A text per told reason, for a goodbye: {END_REASONS_TOLD(END_TEXT)} is
 * END_TEXT_BEFORE WORD END_TEXT_AFTER for each (string literals the file
 * defines first). */
#define END_TEXT(counter, name, label, word) [END_##name] = END_TEXT_BEFORE word END_TEXT_AFTER,

enum end_reason {
#define END_ENUM(counter, name, label, word) END_##name,
    END_REASONS(END_ENUM)
#undef END_ENUM
    /* None of those, counted nowhere: it said all it had (a long-poll
     * answered), or could not go on (out of memory). */
    END_FINISHED,
    END_REASON_KINDS
};

#define END_ONE(...) +1
enum { END_TOLD_KINDS = 0 END_REASONS_TOLD(END_ONE) };
#undef END_ONE

/* Whether the client is told why (the transport's goodbye). */
static inline int end_reason_told(uint8_t why) { return why < END_TOLD_KINDS; }

#endif
