/* SPDX-License-Identifier: Apache-2.0 */
/* A message to a topic: its id (the topic's), kept in the topic's history,
 * then to every stream subscribed here, through the write batch. Every
 * stream of a topic gets the same bytes, so the message is framed once per
 * framing and publish, not per stream:
 *   chunked, raw   the payload (chunked: its size line), as a uid's
 *   sse            "id: NAME@EPOCH:SEQ\n" and the payload's data: lines
 *                  (or "event: base64"), as one body
 *   ws             the frame header, the payload
 *   ws_meta        "id: NAME@EPOCH:SEQ\n\n" and the payload, as one body
 *   poll           each waiting poll answers with it (its "topic" field)
 * And what a stream is told of its subscriptions: SSE events and ws+meta
 * text frames (other framings carry no such thing):
 *   joined   {"topic":"NAME","id":"EPOCH:SEQ"}: the topic's newest id when
 *            joined from now (its client resumes from it should it leave
 *            before a message came); no id when it resumes (a replay follows)
 *   refused  {"topic":"NAME","reason":"REASON"}
 *   left     {"topic":"NAME"} (the handler unsubscribed it, or it asked)
 * Loop thread only. */
#ifndef HTTPDCNODE_TOPIC_FANOUT_H
#define HTTPDCNODE_TOPIC_FANOUT_H

#include <stddef.h>
#include <stdint.h>

struct stream;

/* data[len] published to topic t (topic_find: 0 when the name is not
 * held here), binary or text (cmd.h): the streams it was written (or
 * queued) to. A topic not held here is counted (topic_no_subscribers);
 * one held with no stream (it lingers) keeps it for the clients coming
 * back. */
uint32_t topic_publish(uint32_t t, const char *data, uint32_t len, int binary);

/* A master lost a message of topic t (or this node gave up a hole its
 * message may have been in): t's next id names no message (history_skip),
 * so that a client resuming across it is told a gap; a live stream with
 * ids is told now, as a resume from the id before would tell it (a replay
 * under way meets the missing id itself). What was sent before goes first
 * (the caller flushes the batch). */
void topic_gap(uint32_t t);
/* The same for every topic held. */
void topic_gap_all(void);
/* The topics a CMD_GAP's payload names[len] lists (each its length in a
 * byte, then its name): the next one at *at (0 first), its topic_find (0:
 * not held here) in *t; 0 past the end. */
int topic_gap_next(const char *names, uint32_t len, uint32_t *at, uint32_t *t);

enum topic_event { TOPIC_EV_JOINED, TOPIC_EV_REFUSED, TOPIC_EV_LEFT };
/* Tells s (an SSE or ws+meta stream; others are not told) of topic
 * name[len]; reason for a refusal, id ("EPOCH:SEQ") for a join (NULL:
 * none). -1 when s ended. */
int topic_tell(struct stream *s, enum topic_event ev, const char *name, size_t len,
               const char *reason, const char *id);
/* s joined topic t from now on: told, with t's newest id. */
int topic_tell_joined(struct stream *s, uint32_t t);

#endif
