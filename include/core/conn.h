/* SPDX-License-Identifier: Apache-2.0 */
/* Connection ids: a name for one stream that Erlang can address
 * ({conn, Conn, Data}), never reused by this run of the node nor by a
 * later one under the same name: an id is the CLOCK_REALTIME microsecond
 * it is given at, or one past the id before when ids come faster (they
 * then run ahead of the clock by as many microseconds as they came too
 * fast: 9 ms after 10,000 in one millisecond). A restart takes far longer,
 * so a later run starts above every id of the earlier one, unless the wall
 * clock was stepped back between the two by more than the time between
 * them. Ids stay below 2^53 (exact in a JavaScript number) until 2255.
 *
 * Given lazily, to a stream that sends a message up
 * (a WebSocket's) or asks for its id (SSE, chunked: ?conn=1), so a stream
 * that does neither costs nothing here; one that did costs a 24-byte and a
 * 16-byte entry of two side tables (twice that at most, the tables are
 * kept at most half full): 40 to 80 bytes. With --presence-conns every
 * stream gets its id at open (presence.c), so every stream costs that.
 * Each entry also holds two words for its --client-rate bucket
 * (client_rate.h), taken from by client_in.c. Loop thread only. */
#ifndef HTTPDCNODE_CONN_H
#define HTTPDCNODE_CONN_H

#include "lib/carry.h"

#include <stdint.h>

struct stream;

struct conn {
    uint64_t id;
    uint32_t tokens;        /* its --client-rate bucket (client_rate.h) */
    uint32_t at_ms;
};

/* s's entry, made (with a new id, tokens and at_ms 0) when it has none;
 * NULL when out of memory. The pointer holds until the next conn_of or
 * conn_forget. */
struct conn *conn_of(const struct stream *s);

/* s's id, 0 when it has none (none is made). */
uint64_t conn_id_of(const struct stream *s);

/* The stream of id, or NULL (never given, or its stream closed). */
struct stream *conn_find(uint64_t id);

/* The stream is closing: its id names nothing any more. */
void conn_forget(const struct stream *s);

/* At exit. */
void conn_free(void);

/* A hot upgrade (upgrade/): the ids and --client-rate buckets of the
 * streams handed over go with them (index_of: a stream's index in the
 * hand-over, UINT32_MAX when not carried; at: the stream of an index, or
 * NULL), and the last id given, so that none is given twice. -1 when out
 * of memory or malformed. */
#define CONN_CARRY_TAG CARRY_TAG('C', 'O', 'N', 'N')
#define CONN_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int conn_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s));
int conn_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i));

#endif
