/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket streams: see ws.h. */
#include "transport/ws.h"
#include "core/backlog.h"
#include "core/replay.h"
#include "transport/transport.h"
#include "http/http_reply.h"
#include "http/http_front.h"
#include "http/topic_query.h"
#include "core/framing.h"
#include "core/history.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "core/transport_ops.h"
#include "transport/ws_handshake.h"
#include "transport/ws_reader.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


static struct ws_config cfg;

static void refuse(struct evhttp_request *req, int status, const char *why)
{
    static const struct {
        int status;
        const char *reason;
    } reasons[] = {{400, "Bad Request"}, {403, "Forbidden"}, {426, "Upgrade Required"}};
    const char *reason = "Bad Request";
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status)
            reason = reasons[i].reason;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (status == 426) {
        evhttp_add_header(h, "Upgrade", "websocket");
        evhttp_add_header(h, "Sec-WebSocket-Version", "13");
    }
    http_reply_text(req, status, reason, why);
    loop_stats.ws_refused++;
}

/* ---------------------------------------------------------------- opening bytes */

/* The 101 head, into buf (room for it: 384 bytes). */
static size_t format_head(char *buf, size_t size, const struct ws_handshake *hs)
{
    int n = snprintf(buf, size,
                     "HTTP/1.1 101 Switching Protocols\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n"
                     "%s%s"
                     "\r\n",
                     hs->accept,
                     hs->meta ? "Sec-WebSocket-Protocol: " WS_META_PROTOCOL "\r\n" : "",
                     hs->deflate ? "Sec-WebSocket-Extensions: " WS_DEFLATE_RESPONSE "\r\n" : "");
    return (size_t)n;
}

/* ---------------------------------------------------------------- start */

/* The socket leaves evhttp and the stream writes the head, then replays
 * what the client missed after the id since (NULL: none). */
static int open_stream(struct evhttp_request *req, uint32_t uid, const struct ws_handshake *hs,
                       uint8_t framing, const char *since)
{
    char head[384];
    size_t n = format_head(head, sizeof head, hs);
    return transport_open(req, uid, &(struct transport_opening){
        .framing = framing, .head = head, .head_len = n,
        .replay = framing_ws_meta(framing), .since = since, .budget = UINT32_MAX});
}

static int ws_start(struct evhttp_request *req, uint32_t uid)
{
    /* RFC 6455 4.1: the handshake is an HTTP/1.1 request (HTTP/1.0 has no
     * Upgrade). libevent 2.1 has no getter for the version: its struct. */
    if (req->major < 1 || (req->major == 1 && req->minor < 1)) {
        refuse(req, 400, "A WebSocket handshake is an HTTP/1.1 request (RFC 6455 4.1)");
        return 0;
    }
    struct ws_origins origins = {cfg.origins.list, cfg.origins.n};
    struct ws_handshake hs;
    const char *why;
    int status = ws_handshake_check(evhttp_request_get_input_headers(req), &origins,
                                    cfg.deflate, &hs, &why);
    if (status) {
        refuse(req, status, why);
        return 0;
    }
    if (!topic_query_admit(req, 0, hs.meta ? TOPIC_IDS_TAKEN : TOPIC_IDS_REFUSED))
        return 0;
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (q)
        evhttp_parse_query_str(q, &query);
    const char *since = evhttp_find_header(&query, "since");
    if (since && !hs.meta) {
        evhttp_clear_headers(&query);
        refuse(req, 400, "Resuming with since= needs the subprotocol " WS_META_PROTOCOL
                         " (frames without ids cannot tell a gap from data)");
        return 0;
    }
    /* permessage-deflate is a framing of its own: no byte more per stream. */
    uint8_t framing = hs.meta ? (hs.deflate ? FRAMING_WS_META_DEFLATE : FRAMING_WS_META)
                              : (hs.deflate ? FRAMING_WS_DEFLATE : FRAMING_WS);
    /* The id, copied: the request is gone once the socket leaves evhttp. */
    char asked[32];
    if (since)
        snprintf(asked, sizeof asked, "%s", strlen(since) < sizeof asked ? since : "-");
    evhttp_clear_headers(&query);
    return open_stream(req, uid, &hs, framing, since ? asked : NULL);
}

/* ---------------------------------------------------------------- the core's table */

static void ws_heartbeat(struct stream *s) { (void)ws_reader_heartbeat(s); }

/* A gap as a text frame "event: gap\n\n" then the JSON. */
static int ws_replay_gap(struct backlog **out, void *owner, const struct replay *r,
                         const char *json, size_t n, const struct msg_id *next)
{
    static const char event[] = "event: gap\n\n";
    char buf[HISTORY_GAP_JSON_MAX + TOPIC_NAME_MAX + 64];
    (void)next;
    (void)r;
    size_t k = framing_ws_header(buf, 1, sizeof event - 1 + n);
    memcpy(buf + k, event, sizeof event - 1);
    memcpy(buf + k + sizeof event - 1, json, n);
    return replay_put(out, owner, buf, k + sizeof event - 1 + n);
}

/* One frame: with ws+meta, led by "id: ID\n\n" (a uid's or a topic's). */
static size_t ws_replay_message(struct backlog **out, void *owner, uint8_t framing,
                                const char *data, uint32_t len, int binary,
                                const struct msg_id *id, const struct replay *r, int *over)
{
    (void)r;
    (void)over;
    char head[10 + 4 + MSG_ID_TEXT_MAX + 2];
    size_t meta = 0;
    if (framing_ws_meta(framing)) {
        memcpy(head + 10, "id: ", 4);
        meta = 4 + msg_id_text(head + 14, id);
        memcpy(head + 10 + meta, "\n\n", 2);
        meta += 2;
    }
    size_t h = framing_ws_header(head, binary ? 2 : 1, (uint64_t)meta + len);
    memmove(head + h, head + 10, meta);
    size_t n = h + meta + len;
    char *at = replay_room(out, owner, n);
    if (!at)
        return 0;
    memcpy(at, head, h + meta);
    memcpy(at + h + meta, data, len);
    backlog_commit(*out, n);
    return n;
}

static const struct transport_replay ws_replay = {
    .gap = ws_replay_gap,
    .message = ws_replay_message,
};

/* {conn, Conn, Data}: one frame, binary or text as the message is,
 * uncompressed also with permessage-deflate (RFC 7692 lets any message
 * go so: it goes to one connection, once). With ws+meta it says so
 * ("event: conn", no id: ids are the uid's history's). */
static int ws_reply(struct stream *s, const char *data, uint32_t len, int binary)
{
    static const char event[] = "event: conn\n\n";
    size_t ev = framing_ws_meta(s->framing) ? sizeof event - 1 : 0;
    char head[16];
    size_t k = framing_ws_header(head, binary ? 2 : 1, ev + len);
    struct iovec iov[3] = {{head, k}, {(void *)event, ev}, {(void *)data, len}};
    return stream_send(s, iov, 3, k + ev + len);
}

/* A close frame whose code says why: 1012 (service restart) for a drain,
 * else a private code (RFC 6455 7.4.2), 4000 + the reason: 4001 kicked,
 * 4002 replaced, 4003 expired. */
#define WS_CLOSE_CODE(why) ((why) == END_DRAIN ? 1012 : 4000 + (why))
static struct iovec ws_goodbye(uint8_t framing, uint8_t why)
{
#define WS_CLOSE(counter, name, label, word)                                   \
    [END_##name] = {0x88, 2, WS_CLOSE_CODE(END_##name) >> 8, WS_CLOSE_CODE(END_##name) & 0xff},
    static const unsigned char frame[END_TOLD_KINDS][4] = {END_REASONS_TOLD(WS_CLOSE)};
#undef WS_CLOSE
    (void)framing;
    return (struct iovec){(void *)frame[why], 4};
}

/* A WebSocket client talks: its frames are read and checked. */
static const struct transport_ops ws_ops = {
    .name = "ws",
    .reply = ws_reply,
    .goodbye = ws_goodbye,
    .replay = &ws_replay,
    .readable = ws_reader_readable,
    .closing = ws_reader_forget,
    .paused = ws_reader_paused,
    .heartbeat = ws_heartbeat,
};

int ws_init(const struct ws_config *c)
{
    cfg = *c;
    ws_reader_configure(&c->client);
    transport_ops_register(FRAMING_WS, &ws_ops);
    transport_ops_register(FRAMING_WS_META, &ws_ops);
    transport_ops_register(FRAMING_WS_DEFLATE, &ws_ops);
    transport_ops_register(FRAMING_WS_META_DEFLATE, &ws_ops);
    return http_front_route("/ws/", ws_start, 1);
}

void ws_free(void)
{
    ws_reader_free();
}
