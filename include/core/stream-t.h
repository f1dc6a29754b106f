/* SPDX-License-Identifier: Apache-2.0 */
/* The stream's types: its states and its record (stream.h says how it
 * lives). Apart, so that a file that only keeps streams (uidtable.c)
 * needs the type and none of the stream's functions. */
#ifndef HTTPDCNODE_STREAM_T_H
#define HTTPDCNODE_STREAM_T_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdint.h>

struct evhttp_request;
struct backlog;

enum stream_state {
    STREAM_WELCOMING = 1,
    STREAM_ENDING,
    STREAM_LIVE,
    STREAM_DRAINING,        /* finished: takes no message, closes once written */
    STREAM_ABANDONED,
    STREAM_CLOSED,
};

/* Cost per stream: this struct, 152 bytes from a pool (no malloc header),
 * plus libevent's per-fd entry (a 32 B malloc chunk) and its fd-indexed
 * pointer (8 B), plus the uid table slot it shares with its uid. A
 * backlog exists only while the kernel would not take a write. */
struct stream {
    union {
        struct event ev;             /* 128: LIVE: EV_READ, + EV_WRITE while backlogged */
        struct {                     /* WELCOMING, ENDING, ABANDONED: */
            struct evhttp_request *req;
            int fd;                  /* our own descriptor of the socket, -1 once closed */
            uint8_t why;             /* ENDING: its enum end_reason, for after the import */
        } w;
    } u;
    struct stream *next;             /* 8: next older stream of the uid; CLOSED: reap list */
    struct backlog *out;             /* 8: unsent bytes, NULL when idle */
    uint32_t uid;                    /* 4 */
    uint8_t state;                   /* 1: enum stream_state */
    uint8_t framing;                 /* 1: enum framing_kind */
    union {                          /* 2: */
        uint16_t input_bytes;        /* client bytes read since the request */
        uint16_t ws;                 /* WebSocket: ws_reader.c's (pings, frame) */
    };
};

_Static_assert(sizeof(struct stream) == sizeof(struct event) + 24,
               "struct stream grew: update the cost above and BENCHMARKS.md");

#endif
