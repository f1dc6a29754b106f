/* SPDX-License-Identifier: Apache-2.0 */
/* Write batching for one drain of the hand-off: deliveries are collected
 * (payloads stay in the ring, nothing is copied) and each stream then gets
 * all of its messages in one writev. Under load, when many messages for
 * the same uid wait in the ring, this turns many small TCP sends into one;
 * with no backlog a batch holds a message or two and adds nothing.
 *
 * A stream closed by a flush stays a valid record until the loop callback
 * is over (stream.c's reaper), so holding stream pointers across a flush
 * is safe; later deliveries to it are dropped. */
#ifndef HTTPDCNODE_BATCH_H
#define HTTPDCNODE_BATCH_H

#include "core/framing.h"
#include "core/msg_id.h"

#include <stdint.h>

struct stream;

/* Makes room for n more deliveries (at most 65,536), flushing if needed:
 * 1 when it flushed (what batch_body gave is gone), else 0. */
int batch_room(uint32_t n);
/* Queues data (valid until batch_flush), the uid's message seq, binary or
 * text (cmd.h), for s.
 * Room must have been made with batch_room (asserted). 1 when s takes it,
 * 0 when not: a replay under way reaches it in the history, and a
 * long-poll that has answered asks for it again. */
int batch_add(struct stream *s, const char *data, uint32_t len, int binary, uint32_t seq);
/* A message framed once for every stream of one framing (a topic's,
 * core/topic_fanout.c): each takes the prefix and the body as they are. */
struct batch_framed {
    struct framing_prefix prefix;
    const char *body;
    uint32_t body_len;
};
/* batch_add for a message so framed; data[len], binary and id are the
 * message as it is, for a stream that answers at once (a long-poll). */
int batch_add_framed(struct stream *s, const struct batch_framed *f, const char *data,
                     uint32_t len, int binary, const struct msg_id *id);
/* n bytes that hold until the next flush: a body framed for a batch. NULL
 * when out of memory (logged). */
char *batch_body(size_t n);
/* The n deliveries just queued were of one message received at
 * received_ns (clock_now_ns): its age is observed when they are written. */
void batch_delivered(uint64_t received_ns, uint32_t n);
/* Queues the reply {Ref, n} (reply: the encoded Pid and Ref, valid until
 * batch_flush), sent once the writes it counts are done. */
void batch_ack(const char *reply, uint16_t reply_len, uint32_t n);
/* Writes everything queued, one writev per stream, then sends the queued
 * replies; empties the batch. */
void batch_flush(void);

#endif
