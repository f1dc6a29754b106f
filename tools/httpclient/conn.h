/* One streaming connection: socket, connect, request, reading the response
 * through resp_parser, counting into the worker's stats. Raw sockets and one
 * libevent event each; no bufferevent, no per-connection buffers. */
#ifndef HTTPCLIENT_CONN_H
#define HTTPCLIENT_CONN_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "resp_parser.h"
#include "stats.h"

/* The process limit is 20000 open files: keep room for the rest. */
#define CONN_MAX_PER_PROC 19000
/* Measured with RSS of a worker at 2,000 and 18,000 idle streams. */
#define CONN_COST_TEXT \
    "about 215 bytes of client memory: a worker's RSS\n" \
    "was 2.2 MB at 2,000 and 5.6 MB at 18,000 idle streams"

enum conn_phase { CP_IDLE, CP_CONNECTING, CP_WAIT_WELCOME, CP_STREAMING, CP_CLOSED };

struct conn {
    struct event ev;            /* holds the fd; 128 bytes in libevent 2.1 */
    struct resp_parser rp;      /* 24 bytes */
    uint8_t phase;
};

/* All connections of one worker process. */
struct conn_set {
    struct event_base *base;
    const struct client_opts *o;
    struct worker_stats *st;
    struct conn *conns;
    size_t n;
    unsigned worker, procs;     /* conns[i] is global connection worker + i * procs */
    size_t pending;             /* connecting or awaiting the welcome */
    struct timeval timeout;
    /* Called after a connection was welcomed, failed or closed. */
    void (*on_change)(void *arg);
    void *arg;
};

/* Allocates n connections. One conn_set per process. Returns -1 on ENOMEM. */
int conn_set_init(struct conn_set *cs, struct event_base *base, const struct client_opts *o,
                  struct worker_stats *st, size_t n, unsigned worker, unsigned procs);
/* Starts connecting conns[i]. */
void conn_open(struct conn_set *cs, size_t i);
/* Ends streaming conns[i] (a reset if reset is set, else a clean close) and
 * opens it again at once for the same uid. Returns -1 if it was not streaming. */
int conn_churn(struct conn_set *cs, size_t i, int reset);
/* Closes every open connection. */
void conn_close_all(struct conn_set *cs);

#endif
