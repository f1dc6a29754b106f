/* SPDX-License-Identifier: Apache-2.0 */
/* Command line of the load client. */
#ifndef HTTPCLIENT_OPTIONS_H
#define HTTPCLIENT_OPTIONS_H

#include <netinet/in.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define OPT_MAX_SRC 256
/* One send() must carry the whole request into an empty socket buffer. */
#define OPT_MAX_REQUEST 8192

/* How messages arrive (--proto). */
enum client_proto { PROTO_CHUNKED = 0, PROTO_SSE, PROTO_WS, PROTO_POLL };

struct client_opts {
    char host[256];
    unsigned port;
    struct sockaddr_storage dst;        /* resolved --host/--port */
    socklen_t dst_len;

    unsigned long conns;                /* -n/--conns */
    unsigned long uid_base;
    unsigned long uids;                 /* 0: every connection its own uid */
    unsigned procs;                     /* 0: as few as the fd limit allows */

    struct in_addr src[OPT_MAX_SRC];    /* --src: bind before connect */
    unsigned nsrc;

    double rate;                        /* connections/s over all procs, 0: unlimited */
    unsigned long pending;              /* max connections not yet welcomed, total */
    double hold;                        /* seconds to stay after all are up */
    int hold_set;
    uint64_t until_msgs;                /* 0: not used */
    double max_time;                    /* hard bound on the whole run */
    double timeout;                     /* connect + welcome, per connection */
    int json;
    int quiet;
    const char *record;                 /* --record: each message and gap received, a line each */
    const char *hist_out;               /* --hist-out: the latency histogram, each second */

    double churn;                       /* disconnects (each then reconnected) per second */
    unsigned churn_reset_pct;           /* share of them that reset instead of closing */
    int no_read;                        /* stop reading after the welcome */
    int read_on_signal;                 /* with no_read: until SIGUSR1 */
    double send_rate;                   /* ws: messages sent up per second, all procs */
    double request_rate;                /* ws: of which requests, timed to their answer */

    enum client_proto proto;
    uint64_t reconnect_after;           /* --reconnect-after K, 0: never */
    int reconnect_on_signal;            /* wait for SIGUSR1 before that reconnection */
    uint32_t reconnect_lost_ms;         /* --reconnect-lost backoff base, 0: never */
    uint32_t reconnect_cap_ms;          /* the longest backoff wait */
    uint32_t topics;                    /* --topics T: topics t:0 .. t:T-1, 0: none */
    uint32_t topics_per_conn;           /* --topics-per-conn K */

    /* The request is req_pre + uid + req_post (the rest of the path), then
     * "since=" the last id for a resumption (ws, poll), then req_tail (the
     * version and headers), then Last-Event-ID (sse) and the blank line. */
    char req_pre[OPT_MAX_REQUEST];
    char req_post[OPT_MAX_REQUEST];
    char req_tail[OPT_MAX_REQUEST];
    size_t req_pre_len, req_post_len, req_tail_len;
    int path_has_uid;
    int path_has_query;                 /* since= joins with '&' */
};

/* "chunked", "sse", "ws", "poll". */
const char *opts_proto_name(enum client_proto p);

/* Parses argv into o. Returns 0 to go on, 1 when --help was printed (exit 0),
 * -1 on a bad option (a message was printed; exit 2). */
int opts_parse(struct client_opts *o, int argc, char **argv);
void opts_usage(FILE *out);

/* uid of global connection number g. */
unsigned long opts_uid_of(const struct client_opts *o, uint64_t g);

/* Topic j (< topics_per_conn) of global connection g: t:((g * K + j) mod T),
 * so that each topic has conns * K / T subscribers; and back, the j of
 * topic t for g (K or more: not one of its topics). */
uint32_t opts_topic_of(const struct client_opts *o, uint64_t g, uint32_t j);
uint32_t opts_topic_index(const struct client_opts *o, uint64_t g, uint32_t t);

#endif
