/* SPDX-License-Identifier: Apache-2.0 */
/* One streaming connection: socket, connect, request, reading the response
 * through its transport's parser (proto.h), counting into the worker's
 * stats, checking its message ids. Raw sockets and one libevent event each;
 * no bufferevent, no per-connection buffers. */
#ifndef HTTPCLIENT_CONN_H
#define HTTPCLIENT_CONN_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "conn-t.h"
#include "options.h"
#include "stats.h"

/* All connections of one worker process. */
struct conn_set {
    struct event_base *base;
    const struct client_opts *o;
    struct worker_stats *st;
    struct conn *conns;
    struct id_track *topic_ids; /* --topics: conns[i]'s K topics' ids at [i * K] */
    size_t n;
    unsigned worker, procs;     /* conns[i] is global connection worker + i * procs */
    size_t pending;             /* connecting or awaiting the welcome */
    int resume_signalled;       /* SIGUSR1 came: parked connections may reconnect */
    uint64_t rng;               /* --reconnect-lost backoff draws */
    struct timeval timeout;
    /* Called after a connection was welcomed, failed, closed or parked. */
    void (*on_change)(void *arg);
    void *arg;
};

/* Allocates n connections. One conn_set per process. Returns -1 on ENOMEM. */
int conn_set_init(struct conn_set *cs, struct event_base *base, const struct client_opts *o,
                  struct worker_stats *st, size_t n, unsigned worker, unsigned procs);
/* Starts connecting conns[i] (also a parked or closed one). */
void conn_open(struct conn_set *cs, size_t i);
/* Ends streaming conns[i] (a reset if reset is set, else a clean close) and
 * opens it again at once for the same uid. Returns -1 if it was not streaming. */
int conn_churn(struct conn_set *cs, size_t i, int reset);
/* Closes every open connection. */
void conn_close_all(struct conn_set *cs);
/* Whether streams are read now (not --no-read, or its SIGUSR1 came). */
int conn_reading(const struct conn_set *cs);
/* --read-on-signal: every stream welcomed starts reading. */
void conn_read_all(struct conn_set *cs);

/* What a response said: the handlers conn_set_init gives proto.c
 * (proto_init). */
void conn_welcome(struct conn *c);
void conn_message(struct conn *c, const struct msg_info *m);
void conn_gap(struct conn *c);
/* ws: a ping was answered. */
void conn_pong(struct conn *c);
/* ws: an "event: conn" frame came; has_ts: its body started "t=NS;". */
void conn_reply(struct conn *c, int has_ts, uint64_t ts);
/* --send-rate: sends conns[i] its next message up (a request if request
 * is set). Returns 0 when sent, 1 when conns[i] is not streaming, -1 when
 * its socket could not take it (counted in up_blocked, or the stream is
 * ended when only part went). */
int conn_send_up(struct conn_set *cs, size_t i, int request);
/* A poll answer ended; gap: it said so. */
void conn_answer(struct conn *c, int gap);

#endif
