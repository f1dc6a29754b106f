/* What a WebSocket client sends: frames read through wslay's frame parser
 * (wslay_frame_*), checked, and answered: a ping gets its pong, a close
 * its close; data frames are ignored and counted (clients have nothing to
 * send us). Protocol errors close the stream: 1002 (unmasked frame,
 * reserved bits or opcodes, a bad control frame, a continuation out of
 * place), 1007 (invalid UTF-8 in a text message or a close reason), 1009
 * (a data message over 4 KB).
 *
 * Parse state exists only while a frame is being read: an idle stream
 * keeps two bits (pings unanswered) and a 14-bit slot number, in
 * stream.ws. Loop thread only. */
#ifndef HTTPDCNODE_WS_READER_H
#define HTTPDCNODE_WS_READER_H

#include <stdint.h>

struct stream;

/* The stream's socket is readable: reads and handles what came. */
void ws_reader_readable(struct stream *s, int fd);

/* The stream is closing: drops the frame it was in the middle of. */
void ws_reader_forget(struct stream *s);

/* A heartbeat period passed: pings the stream, or ends it (1001, counted
 * in ws_dead) when it answered none of the last two pings. */
void ws_reader_heartbeat(struct stream *s);

/* Frees what is kept for reuse (at exit, after every stream ended). */
void ws_reader_free(void);

#endif
