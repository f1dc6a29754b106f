/* SPDX-License-Identifier: Apache-2.0 */
/* A connection's record and what a parser says of a message (conn.h says
 * how a connection lives). Apart, so that the parsers' dispatch (proto.c),
 * which conn.c calls, needs the type and none of conn.c's functions. */
#ifndef HTTPCLIENT_CONN_T_H
#define HTTPCLIENT_CONN_T_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdint.h>

#include "ids.h"
#include "poll_parser.h"
#include "resp_parser.h"
#include "sse_parser.h"
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

#endif
