/* SPDX-License-Identifier: Apache-2.0 */
/* Replays: what a resuming client missed, sent from the history as its
 * socket takes it. A replay is a cursor into the uid's history riding on
 * the stream's backlog (backlog.h), or into one of its topics' (each a
 * history slot of its own: topic.h): the uid's first, then each topic
 * behind, and again any that a message reached meanwhile, until all are
 * caught up at once. Each refill encodes at most
 * REPLAY_CHUNK bytes, so nothing is encoded ahead of what the client reads
 * and a client that leaves costs what it took. While a replay is under
 * way the stream takes no live message: every message is in the history
 * with its id, and the cursor reaches it; once the cursor is past the
 * uid's newest id the replay ends and live messages follow, with nothing
 * lost or doubled at the seam. A message pushed out of the history before
 * the cursor reaches it is told as a gap, in the transport's way.
 * Loop thread only. */
#ifndef HTTPDCNODE_REPLAY_H
#define HTTPDCNODE_REPLAY_H

#include "core/history.h"
#include "core/replay-t.h"

#include <stddef.h>
#include <stdint.h>

struct backlog;

/* Bytes a refill encodes at most (plus the one message that passes it). */
#define REPLAY_CHUNK 16384

enum replay_result { REPLAY_FAILED = -1, REPLAY_NONE = 0, REPLAY_STARTED = 1 };

/* For the transports' encoders (transport_ops.h): room for n bytes at the
 * end of *out (commit them with backlog_commit), NULL when out of memory.
 * Replay bytes are bounded by REPLAY_CHUNK and one message, not by
 * --max-backlog (which a long message in SSE's encoding may pass). */
char *replay_room(struct backlog **out, void *owner, size_t n);
/* p[n], at the end of *out: 0, or -1 when out of memory. */
int replay_put(struct backlog **out, void *owner, const char *p, size_t n);
/* "EPOCH:SEQ" (the uid's) into out[size]: its length. */
size_t replay_id_text(char *out, size_t size, uint32_t seq);

/* The client of a stream of this framing on uid saw up to the id asked
 * (NULL: it gave none; unreadable: a gap). A gap is put in *out at once if
 * it missed more than is kept, and a replay of what is kept starts on
 * *out (owner: the stream). REPLAY_NONE when there is nothing to replay
 * and no gap (a long-poll then waits); a long-poll that starts a replay
 * answers with what it finds, messages up to budget bytes, then its end. */
enum replay_result replay_open(struct backlog **out, void *owner, uint8_t framing, uint32_t uid,
                               const char *asked, uint32_t budget);

/* A topic the stream joined (its subscription sub: topic.h), with the id
 * its client saw there last (asked): what it missed is replayed, after
 * whatever replay is under way, or a gap told. REPLAY_NONE when there is
 * nothing to give, nor a framing that replays (its messages then come
 * live from now). */
enum replay_result replay_topic(struct backlog **out, void *owner, uint8_t framing, uint32_t uid,
                                uint32_t sub, const char *asked);

/* The replay's bytes so far have gone out: the next ones, at most about
 * REPLAY_CHUNK, are encoded into *out. 1 when more remain, 0 when the
 * replay is over (*out freed if empty; for a long-poll its answer is
 * complete and *finished is set), -1 when out of memory. */
int replay_fill(struct backlog **out, void *owner, uint8_t framing, uint32_t uid, int *finished);

#endif
