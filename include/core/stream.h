/* SPDX-License-Identifier: Apache-2.0 */
/* A stream: one client's open response, to which every message for its
 * uid is written. stream.c is the one place that creates, registers in
 * the uid table, unregisters and frees a stream.
 *
 * Life of a stream:
 *   stream_open      WELCOMING  in the uid table; evhttp still owns the
 *                               socket and sends the head and welcome
 *                               (chunked.c); messages are queued
 *   stream_import    LIVE       the socket left evhttp (socket_export.c);
 *                               we write to it and watch it for EOF
 *   stream_end/close CLOSED     out of the uid table, socket closed; the
 *                               record is freed later, by the reaper, so
 *                               that no caller holding it (a write batch)
 *                               ever sees it freed under its feet
 * Ended while WELCOMING it becomes ENDING (terminator after the import);
 * closed while evhttp holds it, ABANDONED until chunked.c releases it.
 * A stream that has said all it had to (a long-poll's answer) is finished:
 * DRAINING until what it wrote has gone out, then closed.
 *
 * A call that may end the stream says so: it returns -1 (or, for
 * stream_end, always ends it), and its caller touches nothing of the
 * stream's after that but its state (the record lives till the reaper). */
#ifndef HTTPDCNODE_STREAM_H
#define HTTPDCNODE_STREAM_H

#include "core/stream-t.h"
#include "lib/carry.h"
#include "obs/end_reason.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct stream_config {
    struct event_base *base;
    uint32_t max_backlog;          /* unsent bytes per stream */
    uint64_t max_backlog_total;    /* unsent bytes of all streams together */
    uint32_t max_conns_per_uid;    /* the oldest beyond it is ended */
    /* NULL, or what else a stream had goes as it closes (its topics:
     * topic_join.h); it may still name its conn id. */
    void (*closing)(struct stream *s);
};

int stream_configure(const struct stream_config *cfg);
/* Frees what the reaper holds and the configuration's events. */
void stream_unconfigure(void);

/* A new stream for uid whose head evhttp is sending; fd is our own
 * descriptor of the socket (socket_export_reserve). Registered in the uid
 * table at once; the uid's oldest stream is ended if it now has too many.
 * NULL when out of memory. */
struct stream *stream_open(uint32_t uid, uint8_t framing, struct evhttp_request *req, int fd);
/* The same, its client at *peer (a proxy's client: --presence-conns tells
 * it); stream_open takes the socket's peer. */
struct peer_addr;
struct stream *stream_open_peer(uint32_t uid, uint8_t framing, struct evhttp_request *req, int fd,
                                const struct peer_addr *peer);

/* The socket left evhttp: watch it and write what was queued. -1 when the
 * stream is gone (that failed, or it was ENDING and now has ended). */
int stream_import(struct stream *s);

/* stream_import for a stream whose head evhttp had not all sent yet: iov,
 * its unsent bytes, go first (a hot upgrade takes such a stream from
 * evhttp at once, upgrade/). */
int stream_import_with(struct stream *s, const struct iovec *iov, int iovcnt);

/* evhttp let go of a stream it held (the client left, the head could not
 * be sent, or the stream was ABANDONED): it closes and is freed later. */
void stream_release(struct stream *s, int client_left);

/* stream_import, with an idle timeout: the framing's transport_ops idle
 * is called when no event came on its socket for that long. */
int stream_import_idle(struct stream *s, const struct timeval *idle);

/* The stream has nothing more to say: closed once what it wrote (or
 * queued) has gone out; till then DRAINING, still counted in the uid's
 * streams (--max-conns-per-uid) but given no message. -1 when it is
 * closed (now or before), 0 while it drains. */
int stream_finish(struct stream *s);

/* For a LIVE stream whose head is written: replays what its client missed
 * after the id asked (replay.h), as its socket takes it; a long-poll
 * answers with at most budget bytes of messages and finishes. 1 when
 * there is nothing to replay and no gap (a long-poll then waits), 0 when
 * under way (or done), -1 when the stream ended. */
int stream_replay(struct stream *s, const char *asked, uint32_t budget);

/* s joined a topic (its subscription sub, topic.h) whose client saw up
 * to the id asked there: what it missed is replayed (after a replay under
 * way) or a gap told, on a framing that replays. 0 when under way (or
 * nothing to give), -1 when the stream ended. */
int stream_replay_topic(struct stream *s, uint32_t sub, const char *asked);

/* Whether a replay is under way: the stream takes no live message then
 * (the replay reaches it in the history). */
int stream_replaying(const struct stream *s);

/* Every stream's end has its reason (enum end_reason, end_reason.h),
 * given by the call that ends it and taken from there to its counter,
 * the masters' conn_down and the client's goodbye; once a stream.
 *
 * Ends a stream on purpose (why: end_reason_told): its transport's
 * goodbye for the reason (transport_ops.h: what the client is told to
 * do), then the close. */
void stream_end_why(struct stream *s, uint8_t why);
/* stream_end_why(s, END_DRAIN): the server is going away. */
void stream_end(struct stream *s);
/* The same with other last bytes than the goodbye (none: iov_len 0), for
 * any reason, for a LIVE stream (one still welcoming gets its goodbye). */
void stream_end_with(struct stream *s, struct iovec last, uint8_t why);

/* Writes whole framed messages (iov, total bytes), or queues them when the
 * socket is not ours yet or has a backlog. What the socket does not take
 * is kept up to --max-backlog, then the stream is closed (END_SLOW).
 * 0 when written or kept, -1 when the stream is closed (now or before). */
int stream_send(struct stream *s, const struct iovec *iov, int iovcnt, size_t total);

/* A LIVE stream's transport_ops paused changed: watches its socket for
 * reading again, or stops. */
void stream_rewatch(struct stream *s);

/* For writes made elsewhere (a write job, possibly on a writer thread):
 * the descriptor to writev whole messages to, or -1 when they must go
 * through stream_send. */
int stream_direct_fd(const struct stream *s);

/* Loop thread, after such a writev returned n (errno err when n < 0):
 * keeps the unsent rest or closes the stream, as stream_send does. */
int stream_write_done(struct stream *s, const struct iovec *iov, int iovcnt, size_t total,
                      ssize_t n, int err);

/* A hot upgrade (upgrade/): the LIVE and DRAINING streams go to the
 * process taking over, their sockets with them, in a record of their
 * uid, framing, state, the client bytes counted and what is left of an
 * idle timeout; what other modules keep beside a stream (its backlog, id,
 * token expiry, a transport's state) goes in their records, naming it by
 * its index here. Export builds the index (stream_carry_index: UINT32_MAX
 * for a stream not carried); forget drops it. take makes the streams, in
 * the uid table (presence's view must be taken first), watched by nothing
 * until stream_carry_arm, once every record is in; stream_carried gives
 * them by index meanwhile. -1 when out of memory or malformed. */
#define STREAM_CARRY_TAG CARRY_TAG('S', 'T', 'R', 'M')
#define STREAM_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int stream_carry_export(struct carry_out *o);
uint32_t stream_carry_index(const void *s);
uint32_t stream_carry_count(void);
int stream_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds);
struct stream *stream_carried(uint32_t i);
void stream_carry_arm(void);
void stream_carry_forget(void);

/* Frees every closed stream now (the reaper does it after each loop
 * callback; shutdown calls it once the loop has stopped). */
void stream_reap(void);

#endif
