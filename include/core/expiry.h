/* SPDX-License-Identifier: Apache-2.0 */
/* Token lifetime: a stream opened with a subscriber token is ended, with
 * the expired ending (framing.h), once the token's exp has passed (within
 * half a second), unless --no-token-expiry. Loop thread only.
 *
 * The expiry is kept beside the stream, not in it (struct stream is
 * counted in bytes): an entry per tracked stream in a wheel of per-second
 * lists, found from the stream through a hash on its address, so that a
 * stream that closes is dropped from it in O(1), without a walk. */
#ifndef HTTPDCNODE_EXPIRY_H
#define HTTPDCNODE_EXPIRY_H

#include "lib/carry.h"

#include <event2/event.h>
#include <stdint.h>

struct stream;

/* enabled 0: nothing is ever tracked (--no-token-expiry). A stream whose
 * token expired is given to end (stream_end_why, with END_EXPIRED): passed
 * in, so that the stream and its expiry do not call each other. */
int expiry_init(struct event_base *base, int enabled, void (*end)(struct stream *s, uint8_t why));
void expiry_free(void);

/* The token exp (Unix seconds) of the stream the request being served
 * will open, 0 for none: set by the token check, taken by the next
 * expiry_track. */
void expiry_next_stream(int64_t exp);

/* stream_open: tracks s when its request carried a token. */
void expiry_track(struct stream *s);

/* stream_close: s is no longer tracked (a no-op when it was not). */
void expiry_forget(struct stream *s);

/* Streams tracked now (for tests). */
uint32_t expiry_tracked(void);

/* A hot upgrade (upgrade/): the expiry of each stream handed over goes
 * with it (index_of, at: as conn.h's). -1 when out of memory or malformed. */
#define EXPIRY_CARRY_TAG CARRY_TAG('E', 'X', 'P', 'Y')
#define EXPIRY_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int expiry_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s));
int expiry_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i));

#endif
