/* SPDX-License-Identifier: Apache-2.0 */
/* What the core asks of a transport, one table per framing: the core
 * (stream.c, batch.c, heartbeat.c) calls transport_ops[s->framing] and
 * never names a transport. Each transport registers its table for its
 * framings in its init (chunked_init, sse_init, poll_init, ws_init); a framing with no table, or a NULL entry,
 * gets the core's default. The per-message write path takes no entry of
 * it but deliver, NULL for every framing that frames messages in a batch.
 * Loop thread only. */
#ifndef HTTPDCNODE_TRANSPORT_OPS_H
#define HTTPDCNODE_TRANSPORT_OPS_H

#include "core/framing.h"
#include "core/msg_id.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct backlog;
struct replay;
struct stream;

/* How a framing puts what a client missed into its stream's backlog
 * (core/replay.c, whose replay_room gives the room): the replay's path
 * is the core's, its bytes the transport's. Each returns -1 (or size 0)
 * when out of memory. */
struct transport_replay {
    /* Before anything (a long-poll's answer opens). NULL: nothing. */
    int (*open)(struct backlog **out, void *owner);
    /* A gap: json (history_gap_json, n bytes; a topic's leads with its
     * "topic") says what was missed, next is the id to come back with (a
     * topic's, or the uid's). 1 when it wrote an entry (a long-poll's
     * topic gap, in its messages), 0 when nothing (NULL: a gap of the
     * uid's is told in the end instead), -1 out of memory. */
    int (*gap)(struct backlog **out, void *owner, const struct replay *r, const char *json,
               size_t n, const struct msg_id *next);
    /* One message (binary or text: cmd.h; id: its id, a topic's or the
     * uid's; r: the replay so far); its size. A long-poll takes it
     * only within r->budget (the first always): past it, nothing is
     * written, 0, and *over is set. */
    size_t (*message)(struct backlog **out, void *owner, uint8_t framing, const char *data,
                      uint32_t len, int binary, const struct msg_id *id, const struct replay *r,
                      int *over);
    /* All is given: NULL, live messages follow; else the stream's last
     * bytes (a long-poll's answer end, owner's topics' next ids in their
     * subscriptions: topic.h), and it is finished. */
    int (*end)(struct backlog **out, void *owner, const struct replay *r);
};

/* What a transport's reply returns when the message is empty and its
 * framing cannot carry that (a chunked stream: an empty chunk ends it;
 * HTTP/1.0: nothing would show). */
#define TRANSPORT_REPLY_EMPTY 1

struct transport_ops {
    /* Its name, as a master's conn_up and conn_down say it: "chunked",
     * "sse", "poll", "ws". */
    const char *name;
    /* {conn, Conn, Data} to this stream alone (binary or text: cmd.h): not
     * a message of its uid's, so without id and not kept; after what was
     * written before. 0 when written (or queued), TRANSPORT_REPLY_EMPTY,
     * -1 when the stream ended or out of memory. NULL: no reply fits the
     * framing (a long-poll's answer is JSON of the uid's messages). */
    int (*reply)(struct stream *s, const char *data, uint32_t len, int binary);
    /* EV_READ on a LIVE or DRAINING stream: read what the client sent.
     * NULL: stray bytes, counted and capped (stream.c). -1 when the
     * stream ended. */
    int (*readable)(struct stream *s, int fd);
    /* Whether its socket is not to be read for now (a WebSocket while
     * Erlang is behind: TCP pushes back on its client). NULL: never.
     * The transport calls stream_rewatch when that changes. */
    int (*paused)(const struct stream *s);
    /* The stream is closing from LIVE or DRAINING: drop what the
     * transport keeps beside it. Must not end the stream. */
    void (*closing)(struct stream *s);
    /* Imported with stream_import_idle and idle that long. */
    void (*idle)(struct stream *s);
    /* Every --heartbeat, for each LIVE stream (may end it). */
    void (*heartbeat)(struct stream *s);
    /* A live message for a stream that does not take it framed in a
     * batch (a long-poll answers with it at once): returns as batch_add.
     * NULL: the batch frames it. */
    int (*deliver)(struct stream *s, const char *data, uint32_t len, int binary,
                   const struct msg_id *id);
    /* Resume (stream_replay); NULL: the framing replays nothing. */
    const struct transport_replay *replay;
    /* The last bytes of a stream ended on purpose (why: end_reason_told,
     * end_reason.h): what its client is told to do (may be empty).
     * NULL: none, the close says it all. */
    struct iovec (*goodbye)(uint8_t framing, uint8_t why);
    /* Ended while a replay is under way: cut, without the goodbye
     * (a long-poll's answer would be spoilt by it; the client asks again). */
    uint8_t cut_replay_on_end;
};

extern const struct transport_ops *transport_ops[FRAMING_KINDS];

/* At startup, before the first stream of the framing opens. */
void transport_ops_register(uint8_t framing, const struct transport_ops *ops);

/* The framing's goodbye for why (a reason the client is not told of:
 * drain's); empty when it has none. */
struct iovec transport_goodbye(uint8_t framing, uint8_t why);

#endif
