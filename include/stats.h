/* Counters of the server. Loop-thread counters are plain; the C-node
 * thread's are atomics read by the loop when it reports. */
#ifndef HTTPDCNODE_STATS_H
#define HTTPDCNODE_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct loop_stats {
    uint64_t streams_open;       /* streams held now */
    uint64_t streams_total;      /* streams ever welcomed */
    uint64_t uids_online;        /* uids with at least one stream */
    uint64_t client_closed;      /* streams ended by their client */
    uint64_t evicted;            /* oldest stream ended by --max-conns-per-uid */
    uint64_t slow_closed;        /* ended for passing --max-backlog */
    uint64_t kicked;             /* streams ended by {kick, Uid} */
    uint64_t msgs_applied;       /* messages taken from the hand-off */
    uint64_t deliveries;         /* chunks written (or queued) to streams */
    uint64_t bytes_out;          /* payload bytes delivered */
    uint64_t dropped_no_conn;    /* message for a uid with no stream */
    uint64_t http_not_found;     /* 404 */
    uint64_t http_too_big;       /* 503 uid above --max-users */
    uint64_t http_bad_method;    /* 405 */
    uint64_t http_no_fds;        /* 503 because descriptors ran short */
};

struct cnode_stats {
    atomic_uint_fast64_t msgs_in;        /* messages received from Erlang */
    atomic_uint_fast64_t bad_terms;      /* dropped: not a known shape */
    atomic_uint_fast64_t bad_uid;        /* dropped: uid not integer or out of range */
    atomic_uint_fast64_t too_big;        /* dropped: payload over --max-message */
    atomic_uint_fast64_t empty;          /* dropped: empty payload */
    atomic_uint_fast64_t erl_connects;   /* Erlang connections made or accepted */
    atomic_uint_fast64_t erl_nodes;      /* Erlang connections up now */
    atomic_uint_fast64_t backpressure;   /* times the reader waited on a full hand-off */
};

extern struct loop_stats loop_stats;
extern struct cnode_stats cnode_stats;

/* Writes the counters as one JSON object into buf; returns its length. */
size_t stats_format_json(char *buf, size_t size);

#endif
