/* WebSocket streams: see ws.h. */
#include "ws.h"
#include "http_guard.h"
#include "framing.h"
#include "history.h"
#include "log.h"
#include "options.h"
#include "socket_export.h"
#include "stats.h"
#include "stream.h"
#include "utf8.h"
#include "ws_handshake.h"
#include "ws_reader.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Messages replayed at most (--history is at most this). */
#define WS_REPLAY_MAX 4096

static const struct options *options;

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
    evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
    if (status == 426) {
        evhttp_add_header(h, "Upgrade", "websocket");
        evhttp_add_header(h, "Sec-WebSocket-Version", "13");
    }
    struct evbuffer *body = evbuffer_new();
    if (body)
        evbuffer_add(body, why, strlen(why));
    evhttp_send_reply(req, status, reason, body);
    if (body)
        evbuffer_free(body);
    loop_stats.ws_refused++;
}

/* ---------------------------------------------------------------- opening bytes */

/* The 101 head, into buf (room for it: 256 bytes). */
static size_t format_head(char *buf, size_t size, const struct ws_handshake *hs)
{
    int n = snprintf(buf, size,
                     "HTTP/1.1 101 Switching Protocols\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n"
                     "%s"
                     "\r\n",
                     hs->accept,
                     hs->meta ? "Sec-WebSocket-Protocol: " WS_META_PROTOCOL "\r\n" : "");
    return (size_t)n;
}

/* The text frame "event: gap\n\n{"last":...,"first":...}", as SSE's event. */
static int add_gap(struct evbuffer *out, const char *asked, uint32_t first_seq)
{
    static const char event[] = "event: gap\n\n";
    char json[HISTORY_GAP_JSON_MAX], head[10];
    size_t n = history_gap_json(json, asked, first_seq);
    size_t h = framing_ws_header(head, 1, (uint64_t)(sizeof event - 1 + n));
    return evbuffer_add(out, head, h) == 0 && evbuffer_add(out, event, sizeof event - 1) == 0 &&
                   evbuffer_add(out, json, n) == 0
               ? 0
               : -1;
}

static int add_message(struct evbuffer *out, uint8_t framing, const char *data, uint32_t len,
                       uint32_t seq)
{
    struct framing_prefix prefix;
    framing_prefix_utf8(framing, len, seq, utf8_valid(data, len), &prefix);
    return evbuffer_add(out, prefix.bytes, prefix.len) == 0 && evbuffer_add(out, data, len) == 0
               ? 0
               : -1;
}

/* For a client resuming after the id asked: a gap frame if it missed more
 * than is kept, and what it missed. */
static int replay_bytes(struct evbuffer *out, uint8_t framing, uint32_t uid, const char *asked)
{
    static struct {
        struct history_replay r;
        uint64_t room[WS_REPLAY_MAX];
    } replay;
    uint32_t epoch = 0, seq = 0;
    if (history_parse_id(asked, &epoch, &seq) != 0)
        epoch = ~history_epoch();            /* unreadable: not ours, a gap */
    history_since(uid, 1, epoch, seq, &replay.r, WS_REPLAY_MAX);
    if (replay.r.gap && add_gap(out, asked, replay.r.first_seq) != 0)
        return -1;
    for (uint32_t i = 0; i < replay.r.n; i++) {
        uint32_t len, s;
        const char *m = history_message(replay.r.pos[i], &len, &s);
        if (add_message(out, framing, m, len, s) != 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- start */

/* The socket leaves evhttp and the stream writes the head and the replay
 * (NULL: none). */
static int open_stream(struct evhttp_request *req, uint32_t uid, const struct ws_handshake *hs,
                       uint8_t framing, struct evbuffer *replay)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    int own = socket_export_reserve(evcon);
    struct stream *s = own >= 0 ? stream_open(uid, framing, NULL, own) : NULL;
    if (!s) {
        if (own >= 0)
            close(own);
        return -1;
    }
    /* From here the request and its connection are gone. */
    http_guard_release(req);
    if (socket_export(evcon) != 0) {
        stream_release(s, 0);
        return 0;
    }
    if (stream_import(s) == 0) {
        char head[256];
        size_t head_len = format_head(head, sizeof head, hs);
        size_t n = replay ? evbuffer_get_length(replay) : 0;
        struct iovec iov[2] = {{(void *)head, head_len}, {n ? evbuffer_pullup(replay, -1) : NULL, n}};
        stream_send(s, iov, n ? 2 : 1, head_len + n);
    }
    return 0;
}

int ws_start(struct evhttp_request *req, uint32_t uid)
{
    struct ws_origins origins = {options->allow_origin, options->n_allow_origin};
    struct ws_handshake hs;
    const char *why;
    int status = ws_handshake_check(evhttp_request_get_input_headers(req), &origins, &hs, &why);
    if (status) {
        refuse(req, status, why);
        return 0;
    }
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
    uint8_t framing = hs.meta ? FRAMING_WS_META : FRAMING_WS;
    /* Nothing is allocated for a client that does not resume. */
    struct evbuffer *replay = since ? evbuffer_new() : NULL;
    int r = !since || (replay && replay_bytes(replay, framing, uid, since) == 0)
                ? open_stream(req, uid, &hs, framing, replay)
                : -1;
    evhttp_clear_headers(&query);
    if (replay)
        evbuffer_free(replay);
    return r;
}

/* ---------------------------------------------------------------- heartbeat */


int ws_init(const struct options *opts)
{
    options = opts;
    return 0;
}

void ws_free(void)
{
    ws_reader_free();
}
