/* SPDX-License-Identifier: Apache-2.0 */
/* What a WebSocket client sends: frames read through wslay's frame parser
 * (wslay_frame_*), checked, and answered: a read's pings get one pong, of
 * the last of them (RFC 6455 5.5.3), a close its close; a data message
 * goes to Erlang's --inbox process (outbound_in, with the connection's id
 * from conn.h), or without --inbox is refused and counted (ws_ignored).
 * Past --client-rate (a bucket of MSGS/4 + 8) the stream is closed 1008
 * (client_rate_closed); while more than 1 MB of client messages wait for
 * Erlang no WebSocket is read (client_paused): TCP pushes back. Protocol errors
 * close the stream: 1002 (unmasked frame, reserved bits or opcodes, a bad
 * control frame, a continuation out of place; RSV1 but on the first frame
 * of a data message where permessage-deflate was agreed), 1007 (invalid
 * UTF-8 in a text message or a close reason, a compressed message that is
 * not deflate data), 1009 (a data message over --max-client-message, a
 * compressed one once inflated: inflating stops there, ws_inflate_too_big).
 * A compressed message is held whole, then inflated into one buffer shared
 * by all (lib/deflate_msg.h: no zlib state per connection).
 * Policy closes it, 1008 (ws_policy_closed): a data message not whole
 * within 10 s of its first byte or in 64 frames, or more in one second
 * than 64 KiB, 128 frames or 16 pings.
 *
 * Parse state exists only while a frame is being read: an idle stream
 * keeps two bits (pings unanswered), one (paused) and a 13-bit slot number, in
 * stream.ws; a stream that sent in the current second, a 24-byte entry in
 * a side table. Loop thread only.
 *
 * The calls that take a stream return -1 when it has ended (its record
 * may then be reused by no one but the reaper: touch nothing of it), else 0. */
#ifndef HTTPDCNODE_WS_READER_H
#define HTTPDCNODE_WS_READER_H

#include "core/client_rate.h"
#include "lib/carry.h"

#include <stdint.h>

struct stream;

/* --inbox, --max-client-message, --client-rate: at startup. */
void ws_reader_configure(const struct client_msg_config *c);

/* Whether the stream is not read for now: Erlang is behind. */
int ws_reader_paused(const struct stream *s);

/* The stream's socket is readable: reads and handles what came. */
int ws_reader_readable(struct stream *s, int fd);

/* The stream is closing: drops the frame it was in the middle of. */
void ws_reader_forget(struct stream *s);

/* A heartbeat period passed: pings the stream, or ends it: 1001, counted
 * in ws_dead, when it answered none of the last two pings; 1008 when its
 * message in flight is past its time. */
int ws_reader_heartbeat(struct stream *s);

/* A hot upgrade (upgrade/): each WebSocket stream handed over keeps the
 * pings it owes and the frame it is in the middle of (ws_reader.c says
 * how), named by its index in the hand-over (stream.h). -1 when out of
 * memory or malformed. */
#define WS_READER_CARRY_TAG CARRY_TAG('W', 'S', 'R', 'D')
#define WS_READER_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int ws_reader_carry_export(struct carry_out *o);
int ws_reader_carry_take(struct carry_in *rec, uint16_t version);

/* Frees what is kept for reuse (at exit, after every stream ended). */
void ws_reader_free(void);

#endif
