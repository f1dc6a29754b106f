/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental parser for one streaming HTTP/1.x response: status line,
 * headers, then a chunked body (or a Content-Length / read-until-close body).
 * Its whole state is 24 bytes per connection: it never buffers input, bytes
 * are looked at once as they arrive, in pieces of any size.
 *
 * The bytes of a body that is not chunked are passed on as they come
 * (Server-Sent Events, long-poll answers). For each complete chunk it reports whether the chunk's data starts with
 * "t=<decimal>;" and that number (the publisher's send time in nanoseconds). */
#ifndef HTTPCLIENT_RESP_PARSER_H
#define HTTPCLIENT_RESP_PARSER_H

#include <stddef.h>
#include <stdint.h>

struct resp_parser {
    uint64_t ts;        /* timestamp digits of the current chunk */
    uint32_t remain;    /* data bytes left in the current chunk / body */
    uint16_t status;    /* HTTP status code */
    uint8_t state;
    uint8_t pos;        /* position in a literal being matched, or a digit count */
    uint8_t flags;
    uint8_t ts_phase;
};

struct resp_callbacks {
    /* Headers complete. Return nonzero to stop parsing (rp_feed then returns
     * RP_STOPPED). chunked: 1 if Transfer-Encoding: chunked. */
    int (*on_headers)(void *ctx, unsigned status, int chunked);
    /* A data chunk is complete (never called for the terminating 0 chunk).
     * has_ts: its data started with "t=<digits>;", ts holds the number. */
    void (*on_chunk)(void *ctx, int has_ts, uint64_t ts);
    /* Bytes of a body that is not chunked (Content-Length or until the
     * close), as they come; may be NULL. */
    void (*on_body)(void *ctx, const char *data, size_t len);
};

enum rp_result {
    RP_MORE = 0,    /* all input consumed, the response goes on */
    RP_DONE,        /* response complete (terminating chunk or whole body) */
    RP_STOPPED,     /* on_headers asked to stop */
    RP_ERROR        /* malformed response */
};

void rp_init(struct resp_parser *p);
/* Feeds len bytes. Bytes after the end of the response are ignored. */
enum rp_result rp_feed(struct resp_parser *p, const char *buf, size_t len,
                       const struct resp_callbacks *cb, void *ctx);
/* The peer closed: returns RP_DONE if that ends the response properly (a body
 * delimited by the close), else RP_ERROR. */
enum rp_result rp_eof(const struct resp_parser *p);

#endif
