/* Why a stream ended, carried from the call that ends it to everything
 * that reports it: the counter of stats.h it moves, the label /metrics
 * (httpdcnode_streams_closed_total{reason="..."}) and a master's
 * conn_down give it, and, for an ending on purpose, the word the client
 * reads in its transport's goodbye (transport_ops.h; docs/protocol.md,
 * "Endings"). A new reason is one line below and the call that ends a
 * stream with it. */
#ifndef HTTPDCNODE_END_REASON_H
#define HTTPDCNODE_END_REASON_H

#include <stdint.h>

/* X(NAME, counter, label, word): END_NAME, its loop_stats counter, its
 * label, the word its client reads (NULL: told nothing, or a close code). */

/* Ended on purpose: the client is told whether to come back, and when.
 *   DRAIN     the server is going away (SIGTERM, {drain, S}): come back,
 *             with a backoff, to this or another node
 *   KICKED    Erlang ended the uid's streams: do not come back
 *   REPLACED  a newer stream of the uid took its place past
 *             --max-conns-per-uid: do not come back
 *   EXPIRED   its subscriber token expired: only with a fresh token */
#define END_REASONS_TOLD(X)                                                   \
    X(DRAIN, drained, "drain", "drain")                                        \
    X(KICKED, kicked, "kick", "kicked")                                        \
    X(REPLACED, evicted, "evicted", "replaced")                                \
    X(EXPIRED, token_expired, "token_expired", "expired")

/* The others: the client left, or broke a rule (stats.h says which). */
#define END_REASONS_UNTOLD(X)                                                 \
    X(CLIENT, client_closed, "client", NULL)                                   \
    X(SLOW, slow_closed, "slow", NULL)                                         \
    X(INPUT, input_closed, "input", NULL)                                      \
    X(WS_PROTOCOL, ws_bad_frames, "ws_protocol", NULL)                         \
    X(WS_DEAD, ws_dead, "ws_dead", NULL)                                       \
    X(WS_POLICY, ws_policy_closed, "ws_policy", NULL)                          \
    X(CLIENT_RATE, client_rate_closed, "client_rate", NULL)                    \
    X(WS_SHED, ws_shed, "ws_shed", NULL)

#define END_REASONS(X) END_REASONS_TOLD(X) END_REASONS_UNTOLD(X)

enum end_reason {
#define END_ENUM(name, counter, label, word) END_##name,
    END_REASONS(END_ENUM)
#undef END_ENUM
    /* None of those, counted nowhere: it said all it had (a long-poll
     * answered), or could not go on (out of memory). */
    END_FINISHED,
    END_REASON_KINDS
};

#define END_ONE(name, counter, label, word) +1
enum { END_TOLD_KINDS = 0 END_REASONS_TOLD(END_ONE) };
#undef END_ONE

/* Whether the client is told why (the transport's goodbye). */
static inline int end_reason_told(uint8_t why) { return why < END_TOLD_KINDS; }

/* Its label ("client", "kick", ..., "finished"). */
const char *end_reason_label(uint8_t why);
/* The word its client reads ("drain", "kicked", ...); "drain" when the
 * client is told nothing. */
const char *end_reason_word(uint8_t why);
/* Counts one stream ended so (its counter of stats.h; none for finished). */
void end_reason_count(uint8_t why);

#endif
