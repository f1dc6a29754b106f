/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental parser for a text/event-stream body (WHATWG HTML, "Server-sent
 * events"): lines ending in LF, CRLF or CR; "field: value" (one space after
 * the colon dropped); ':' starts a comment; a blank line dispatches the
 * event. It never buffers: each byte is looked at once, in pieces of any
 * size, and an event is reported by what it carried:
 *   - its type: "event: gap" is a gap, data lines without an event field
 *     (or "event: message") a message, any other event name is OTHER;
 *   - its id (EPOCH:SEQ, see stamp.h), or that it had a malformed one;
 *   - whether its first data line starts with "t=<ns>;", and the number;
 *   - whether it had a retry field (the server opens with "retry: 3000").
 * A block of comments only (the heartbeat ":") is not reported. The body
 * must be UTF-8: anything else is an error. */
#ifndef HTTPCLIENT_SSE_PARSER_H
#define HTTPCLIENT_SSE_PARSER_H

#include <stddef.h>
#include <stdint.h>

#include "stamp.h"

enum sse_type { SSE_NONE = 0, SSE_MESSAGE, SSE_GAP, SSE_OTHER };

struct sse_event {
    enum sse_type type;
    int has_id;             /* a well-formed id field */
    int bad_id;             /* an id field that was not EPOCH:SEQ */
    uint32_t epoch, seq;
    uint32_t topic;         /* a topic's id (t:N@...): N + 1; 0: the uid's */
    int has_ts;
    uint64_t ts;
    int has_n;              /* "n=N;" after the stamp */
    uint32_t n;
    int has_retry;
};

struct sse_parser {
    struct stamp_scan ts;
    struct id_scan id;
    uint8_t state;
    uint8_t field;          /* the field being read */
    uint8_t pos;            /* position in a name or literal */
    uint8_t seen;           /* SEEN_* of the event being built */
    uint8_t utf8;           /* continuation bytes still expected, and the range of the next */
};

enum sse_result { SSE_OK = 0, SSE_ERROR };

typedef void (*sse_event_fn)(void *ctx, const struct sse_event *ev);

void ssep_init(struct sse_parser *p);
/* Feeds len bytes of the body; on_event is called for each dispatched
 * event. Once SSE_ERROR, it stays so. */
enum sse_result ssep_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_fn on_event,
                         void *ctx);

#endif
