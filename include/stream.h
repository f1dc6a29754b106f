/* A lean streaming connection: what is left of an HTTP request once its
 * headers and welcome chunk went out through evhttp. */
#ifndef HTTPDCNODE_STREAM_H
#define HTTPDCNODE_STREAM_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct evhttp_request;
struct outbuf;

enum stream_state {
    STREAM_WELCOMING = 1,   /* evhttp still owns the socket and flushes the welcome */
    STREAM_ENDING,          /* ended while welcoming: out of the uid table, it gets
                             * its queued messages and terminating chunk once the
                             * welcome is flushed */
    STREAM_DETACHED,        /* we own the socket; ev watches it */
};

/* Cost per stream: this struct, 152 bytes from a pool (no malloc header),
 * plus libevent's per-fd entry (a 32 B malloc chunk) and its fd-indexed
 * pointer (8 B), plus the uid table slot it shares with its uid. An
 * outbuf exists only while the kernel would not take a write. */
struct stream {
    union {
        struct event ev;             /* 128: EV_READ for EOF, + EV_WRITE while backlogged */
        struct {                     /* while STREAM_WELCOMING or _ENDING: */
            struct evhttp_request *req;
            int fd;                  /* our own descriptor of the socket */
        } w;
    } u;
    struct stream *next;             /* 8: next older stream of the same uid */
    struct outbuf *out;              /* 8: unsent bytes, NULL when idle */
    uint32_t uid;                    /* 4 */
    uint8_t state;                   /* 1: enum stream_state */
    uint8_t chunked;                 /* 1: HTTP/1.1 chunked, else raw HTTP/1.0 */
    uint16_t input_bytes;            /* 2: client bytes read since the request */
};

struct stream_config {
    struct event_base *base;
    uint32_t max_backlog;          /* unsent bytes per stream */
    uint64_t max_backlog_total;    /* unsent bytes of all streams together */
};

int stream_configure(const struct stream_config *cfg);
void stream_unconfigure(void);

/* A stream for uid whose welcome evhttp is still sending; fd is the
 * stream's own descriptor of the socket, kept for when evhttp lets go.
 * The caller sets chunked once the reply's headers are chosen. */
struct stream *stream_new_welcoming(uint32_t uid, struct evhttp_request *req, int fd);

/* Takes over the socket once evhttp let go of it: watches it for EOF and
 * writes what was queued during the welcome. Returns -1 when the stream is
 * gone: that failed, or it had been ended (STREAM_ENDING) and now was. */
int stream_attach(struct stream *s);

/* Writes whole framed messages (iov, total bytes); what the socket does
 * not take is kept, up to --max-backlog. Returns 0 when written or kept,
 * -1 when the stream was ended (error or slow consumer; it is freed). */
struct iovec;
int stream_write(struct stream *s, const struct iovec *iov, int iovcnt, size_t total);

/* For writes made by a writer thread (write_pool.c): the descriptor to
 * writev whole messages to, or -1 when they must go through stream_write
 * (a backlog is queued, or the welcome is still going out). */
int stream_direct_fd(const struct stream *s);

/* What stream_write does after its writev returned n (errno err when
 * n < 0): keeps the unsent rest, or ends the stream. Same return. */
int stream_write_done(struct stream *s, const struct iovec *iov, int iovcnt, size_t total,
                      ssize_t n, int err);

/* The chunk size line "%x\r\n" of n into buf[10]; returns its length. */
size_t stream_chunk_header(char *buf, uint32_t n);

/* Ends a stream on purpose: terminating chunk when chunked, then close and
 * free; a stream still in its welcome leaves the uid table now and ends
 * when the welcome is out. The reason is counted by the caller. */
void stream_end(struct stream *s);

/* Closes and frees a stream still in its welcome (evhttp's side is the
 * caller's business). */
void stream_free_welcoming(struct stream *s);

#endif
