/* One streaming connection: socket, connect, request, reading the response
 * through its transport's parser (transport.h), counting into the worker's
 * stats, checking its message ids. Raw sockets and one libevent event each;
 * no bufferevent, no per-connection buffers. */
#ifndef HTTPCLIENT_CONN_H
#define HTTPCLIENT_CONN_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stddef.h>
#include <stdint.h>

#include "ids.h"
#include "options.h"
#include "poll_parser.h"
#include "resp_parser.h"
#include "sse_parser.h"
#include "stats.h"
#include "ws_parser.h"

/* The process limit is 20000 open files: keep room for the rest. */
#define CONN_MAX_PER_PROC 19000
/* Measured by make bench: the slope of the workers' RSS from 2,000 to
 * 18,000 idle streams was 246 bytes (sizeof(struct conn) is 224; up_seq,
 * for --send-rate, took 4 bytes of its padding, so it still is). With
 * --topics each connection also has 12 bytes per topic for its ids. */
#define CONN_COST_TEXT \
    "about 250 bytes of client memory: a worker's RSS\n" \
    "grows by that much per idle stream (make bench, section 1)"

/* CP_RETRY: lost, its event a timer for the --reconnect-lost reconnection. */
enum conn_phase {
    CP_IDLE, CP_CONNECTING, CP_WAIT_WELCOME, CP_STREAMING, CP_CLOSED, CP_PARKED, CP_RETRY
};

#define CF_DROP 0x01u           /* --reconnect-after reached: the rest of this read is not counted */
#define CF_RECONNECTED 0x02u    /* dropped by --reconnect-after once already */
#define CF_ANSWER_BYTES 0x04u   /* poll: bytes of the current answer arrived */
#define CF_FIRST 0x08u          /* poll: the next message is the answer's first */
#define CF_JUMP 0x10u           /* poll: the answer's first id jumped: an error unless it says gap */

struct conn {
    struct event ev;            /* holds the fd; 128 bytes in libevent 2.1 */
    struct resp_parser rp;      /* the HTTP head, chunks (chunked, sse, poll) */
    union {
        struct sse_parser sse;
        struct poll_parser poll;
        struct ws_parser ws;
    } u;
    struct id_track ids;        /* also what a reconnection resumes from */
    uint32_t msgs;              /* since it was opened, for --reconnect-after */
    uint32_t up_seq;            /* --send-rate: the next message's SEQ (from 0 at each open) */
    uint8_t phase;
    uint8_t flags;
    uint8_t tries;              /* --reconnect-lost: failures since the last welcome (padding) */
};

/* A message as a transport parsed it. */
struct msg_info {
    int has_id, bad_id;
    uint32_t epoch, seq;
    uint32_t topic;             /* a topic's message (--topics): t:N is N + 1; 0: the uid's */
    int has_ts;
    uint64_t ts;
    int has_n;                  /* "n=N;" followed the stamp (--record writes it) */
    uint32_t n;
};

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

/* For the transports (transport.c): what a response said. */
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
const struct client_opts *conn_opts(void);

#endif
