/* SPDX-License-Identifier: Apache-2.0 */
/* Server-Sent Events: see sse.h. */
#include "transport/sse.h"
#include "core/backlog.h"
#include "core/conn.h"
#include "core/history.h"
#include "core/replay.h"
#include "transport/transport.h"
#include "http/cors.h"
#include "core/framing.h"
#include "http/http_front.h"
#include "core/transport_ops.h"
#include "core/stream.h"
#include "http/topic_query.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static const char head_start[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n";
static const char head_end[] = "Connection: close\r\n\r\n";


/* The id the client saw last: Last-Event-ID (sent by EventSource when it
 * reconnects), else ?since= (a first connect cannot set headers). A
 * Last-Event-ID of a topic's message (NAME@ID) is that topic's
 * (topic_query.c), not the uid's. */
static const char *last_seen_id(struct evhttp_request *req, struct evkeyvalq *query)
{
    const char *id = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
    return id && !strchr(id, '@') ? id : evhttp_find_header(query, "since");
}

/* The retry advice: a random delay in [RETRY_MIN_MS, RETRY_MAX_MS] per
 * stream, so that the clients of a server that restarts do not all come
 * back in the same instant. */
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 5000

static uint32_t retry_ms(void)
{
    static uint64_t state;            /* xorshift64*, seeded once */
    if (!state) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        state = ((uint64_t)t.tv_sec * 1000000007u) ^ (uint64_t)t.tv_nsec ^ (uint64_t)getpid() << 32;
        state |= 1;
    }
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t r = state * 2685821657736338717ull;
    return RETRY_MIN_MS + (uint32_t)((r >> 33) % (RETRY_MAX_MS - RETRY_MIN_MS + 1));
}

/* ?conn=1: the stream's conn id, its first event, for POST /send/N?conn=ID
 * (client_post.h). Given only when asked: an id costs its entries (conn.h). */
static int sse_conn_event(struct stream *s)
{
    const struct conn *c = conn_of(s);
    if (!c)
        return 0;                      /* out of memory: the stream goes on without one */
    char ev[64];
    int n = snprintf(ev, sizeof ev, "event: conn\ndata: {\"conn\":\"%llu\"}\n\n",
                     (unsigned long long)c->id);
    struct iovec iov = {ev, (size_t)n};
    return stream_send(s, &iov, 1, iov.iov_len);
}

static void sse_closing(struct stream *s) { conn_forget(s); }

static int sse_start(struct evhttp_request *req, uint32_t uid)
{
    if (!topic_query_admit(req, 0, TOPIC_IDS_TAKEN))
        return 0;
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (q)
        evhttp_parse_query_str(q, &query);
    /* The id, copied: the request is gone once the socket leaves evhttp. */
    char asked[32];
    const char *id = last_seen_id(req, &query);
    if (id)
        snprintf(asked, sizeof asked, "%s", strlen(id) < sizeof asked ? id : "-");
    const char *conn = evhttp_find_header(&query, "conn");
    int want_conn = conn && strcmp(conn, "1") == 0;
    evhttp_clear_headers(&query);
    char head[1024], cors[512];
    cors[cors_headers(req, 1, cors, sizeof cors)] = '\0';
    int n = snprintf(head, sizeof head, "%s%s%sretry: %u\n\n", head_start, cors, head_end,
                     retry_ms());
    return transport_open(req, uid, &(struct transport_opening){
        .framing = FRAMING_SSE, .head = head, .head_len = (size_t)n,
        .replay = 1, .since = id ? asked : NULL, .budget = UINT32_MAX,
        .after_head = want_conn ? sse_conn_event : NULL});
}

static void sse_heartbeat(struct stream *s)
{
    static const char comment[] = ":\n\n";
    struct iovec iov = {(void *)comment, sizeof comment - 1};
    stream_send(s, &iov, 1, iov.iov_len);
}

/* A gap as an event, with id: too, so that an EventSource coming back
 * asks from there and is not told the same gap again. */
static int sse_replay_gap(struct backlog **out, void *owner, const struct replay *r,
                          const char *json, size_t n, const struct msg_id *next)
{
    char buf[HISTORY_GAP_JSON_MAX + TOPIC_NAME_MAX + MSG_ID_TEXT_MAX + 64], id[MSG_ID_TEXT_MAX];
    (void)r;
    msg_id_text(id, next);
    size_t k = (size_t)snprintf(buf, sizeof buf, "id: %s\nevent: gap\ndata: %.*s\n\n", id,
                                (int)n, json);
    return replay_put(out, owner, buf, k);
}

static size_t sse_replay_message(struct backlog **out, void *owner, uint8_t framing,
                                 const char *data, uint32_t len, int binary,
                                 const struct msg_id *id, const struct replay *r, int *over)
{
    (void)r;
    (void)over;
    (void)framing;
    char line[4 + MSG_ID_TEXT_MAX + 1];
    memcpy(line, "id: ", 4);
    size_t k = 4 + msg_id_text(line + 4, id);
    line[k++] = '\n';
    size_t n = k + framing_sse_body_len(data, len, binary);
    char *at = replay_room(out, owner, n);
    if (!at)
        return 0;
    memcpy(at, line, k);
    framing_sse_body(data, len, binary, at + k);
    backlog_commit(*out, n);
    return n;
}

static const struct transport_replay sse_replay = {
    .gap = sse_replay_gap,
    .message = sse_replay_message,
};

/* {conn, Conn, Data}: "event: reply" with its data: lines, or
 * "event: reply_base64" when binary (the base64 event, renamed); no id:
 * an EventSource would give a plain event the last id again. The body is
 * made on the stack when small, else in a buffer of its own (one stream's
 * reply, not the fan-out path). */
static int sse_reply(struct stream *s, const char *data, uint32_t len, int binary)
{
    static const char reply[] = "event: reply\n", reply_b64[] = "event: reply_base64\n";
    char small[1024];
    size_t n = framing_sse_data_len(data, len, binary);
    char *body = n <= sizeof small ? small : malloc(n);
    if (!body)
        return -1;
    framing_sse_data(data, len, binary, body);
    struct iovec iov[2] = {binary ? (struct iovec){(void *)reply_b64, sizeof reply_b64 - 1}
                                  : (struct iovec){(void *)reply, sizeof reply - 1},
                           {body, n}};
    int r = stream_send(s, iov, 2, iov[0].iov_len + n);
    if (body != small)
        free(body);
    return r;
}

/* EventSource reconnects after any close: "event: end" with the reason's
 * word is how a client learns not to. */
#define END_TEXT_BEFORE "event: end\ndata: {\"reason\":\""
#define END_TEXT_AFTER "\"}\n\n"
static const char *const sse_end[END_TOLD_KINDS] = {END_REASONS_TOLD(END_TEXT)};

static struct iovec sse_goodbye(uint8_t framing, uint8_t why)
{
    (void)framing;
    return (struct iovec){(void *)sse_end[why], strlen(sse_end[why])};
}

static const struct transport_ops sse_ops = {
    .name = "sse", .reply = sse_reply, .goodbye = sse_goodbye, .closing = sse_closing,
    .heartbeat = sse_heartbeat, .replay = &sse_replay};

int sse_init(void)
{
    transport_ops_register(FRAMING_SSE, &sse_ops);
    return http_front_route("/sse/", sse_start, 1);
}
