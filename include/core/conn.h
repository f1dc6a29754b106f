/* Connection ids: a name for one stream that Erlang can address
 * ({conn, Conn, Data}) and that is never reused while the node lives (a
 * 64-bit counter). Given lazily, to a stream that sends a message up
 * (a WebSocket's) or asks for its id (SSE, chunked: ?conn=1), so a stream
 * that does neither costs nothing here; one that did costs a 24-byte and a
 * 16-byte entry of two side tables (twice that at most, the tables are
 * kept at most half full): 40 to 80 bytes. With --presence-conns every
 * stream gets its id at open (presence.c), so every stream costs that.
 * Each entry also holds two words for its --client-rate bucket
 * (client_rate.h: ws_reader.c's and client_post.c's). Loop thread only. */
#ifndef HTTPDCNODE_CONN_H
#define HTTPDCNODE_CONN_H

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

#endif
