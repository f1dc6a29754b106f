/* SPDX-License-Identifier: Apache-2.0 */
/* What one worker process counts. A worker sends the whole struct to the
 * parent as one SOCK_SEQPACKET message (cumulative values, so a lost progress
 * report costs nothing). */
#ifndef HTTPCLIENT_STATS_H
#define HTTPCLIENT_STATS_H

#include <stdint.h>

#include "lib/histogram.h"

#define STATS_MAGIC 0x68636c31u /* "hcl1" */

struct worker_stats {
    uint32_t magic;
    uint32_t worker;
    uint32_t final;             /* last report of this worker */
    uint32_t signalled;         /* it stopped on SIGINT/SIGTERM */
    uint64_t planned;           /* connections this worker owns */
    uint64_t attempted;         /* connect() started */
    uint64_t connected;         /* TCP connect succeeded */
    uint64_t welcomed;          /* first chunk received */
    uint64_t failed;            /* = the four below */
    uint64_t fail_connect;      /* socket/bind/connect error */
    uint64_t fail_status;       /* HTTP status other than 200 */
    uint64_t fail_timeout;      /* not welcomed within --timeout */
    uint64_t fail_closed;       /* closed, reset or garbled before the welcome */
    uint64_t closed_by_server;  /* after the welcome: EOF, reset or last chunk */
    uint64_t stream_errors;     /* after the welcome: malformed, closed by us */
    uint64_t churn_closed;      /* --churn disconnects (each reconnected) */
    uint64_t churn_reset;       /* of those, resets (SO_LINGER 0) */
    uint64_t reconnects;        /* --reconnect-after drops (each reconnected, resuming) */
    uint64_t parked;            /* dropped, waiting for SIGUSR1 now */
    uint64_t retries;           /* --reconnect-lost waits begun (one per loss or failure) */
    uint64_t retrying;          /* waiting for such a reconnection now */
    uint64_t up;                /* welcomed and not lost since, now */
    uint64_t id_errors;         /* ids missing without a gap, another epoch, no id */
    uint64_t gaps;              /* gaps the server reported */
    uint64_t dup;               /* ids not after the previous one */
    uint64_t polls;             /* long-poll answers */
    uint64_t pongs;             /* WebSocket pings answered */
    uint64_t open;              /* sockets open now */
    uint64_t chunks;            /* all chunks, the welcome included */
    uint64_t msgs;              /* chunks after the welcome */
    uint64_t bytes;             /* everything read, headers included */
    uint64_t first_connect_ns;  /* CLOCK_MONOTONIC; 0: none yet */
    uint64_t last_connect_ns;
    uint64_t first_msg_ns;
    uint64_t last_msg_ns;
    uint64_t rss_bytes;         /* resident memory of the worker process */
    uint64_t cpu_us;            /* its CPU time so far, user + system */
    uint64_t first_msg_cpu_us;  /* cpu_us when the first message arrived */
    uint64_t msgs_cpu_us;       /* in a sum of workers: CPU from each one's first message on */
    uint64_t up_sent;           /* ws: messages sent up (--send-rate), requests included */
    uint64_t up_requests;       /* of those, requests (--request-rate) */
    uint64_t up_blocked;        /* not sent: the socket's buffer was full */
    uint64_t replies;           /* "event: conn" frames received */
    uint64_t first_up_ns;       /* CLOCK_MONOTONIC of the first and last send up */
    uint64_t last_up_ns;
    struct histogram lat;       /* latency of messages carrying t=<ns>; */
    struct histogram rtt;       /* requests sent up until their "event: conn" answer */
};

#endif
