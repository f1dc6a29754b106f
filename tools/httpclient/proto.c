/* SPDX-License-Identifier: Apache-2.0 */
/* Per-transport parsing of a connection's bytes: see proto.h. */
#include "proto.h"

#include <sys/socket.h>

static enum client_proto g_proto;
static const struct proto_events *g_ev;

void proto_init(enum client_proto proto, const struct proto_events *ev)
{
    g_proto = proto;
    g_ev = ev;
}

/* --- chunked: every chunk after the welcome is a message ------------------- */

static int chunked_headers(void *ctx, unsigned status, int chunked)
{
    (void)ctx;
    (void)chunked;
    return status != 200;
}

static void chunked_chunk(void *ctx, int has_ts, uint64_t ts)
{
    struct conn *c = ctx;
    if (c->phase == CP_WAIT_WELCOME) {
        g_ev->welcome(c);
        return;
    }
    struct msg_info m = {0, 0, 0, 0, 0, has_ts, ts, 0, 0};
    g_ev->message(c, &m);
}

static const struct resp_callbacks k_chunked = {chunked_headers, chunked_chunk, NULL};

static enum feed_result from_rp(enum rp_result r)
{
    return r == RP_MORE ? FEED_MORE : r == RP_DONE ? FEED_ENDED
         : r == RP_STOPPED ? FEED_STATUS : FEED_ERROR;
}

/* --- Server-Sent Events: an identity body of events --------------------------- */

/* This client reads the identity bodies httpdcnode sends for sse and poll;
 * a chunked one is refused like a wrong status. */
static int identity_headers(void *ctx, unsigned status, int chunked)
{
    struct conn *c = ctx;
    if (status != 200 || chunked)
        return 1;
    if (g_proto == PROTO_POLL) {
        c->flags |= CF_FIRST;
        c->flags &= (uint8_t)~CF_JUMP;
        if (c->phase == CP_WAIT_WELCOME)
            g_ev->welcome(c);
    }
    return 0;
}

static void sse_event(void *ctx, const struct sse_event *ev)
{
    struct conn *c = ctx;
    if (c->flags & CF_DROP)
        return;
    if (c->phase == CP_WAIT_WELCOME)
        g_ev->welcome(c);
    if (ev->type == SSE_GAP) {
        g_ev->gap(c);
    } else if (ev->type == SSE_MESSAGE) {
        struct msg_info m = {ev->has_id, ev->bad_id, ev->epoch, ev->seq, ev->topic, ev->has_ts,
                             ev->ts, ev->has_n, ev->n};
        g_ev->message(c, &m);
    }
}

/* Set while a read is fed, so that the body callback reports a malformed
 * event stream. */
static int g_body_error;

static void sse_body(void *ctx, const char *data, size_t len)
{
    struct conn *c = ctx;
    if (ssep_feed(&c->u.sse, data, len, sse_event, c) != SSE_OK)
        g_body_error = 1;
}

static const struct resp_callbacks k_sse = {identity_headers, NULL, sse_body};

/* --- long-poll: one JSON answer per request ------------------------------------- */

static void poll_message_cb(void *ctx, const struct poll_message *pm)
{
    struct conn *c = ctx;
    if (c->flags & CF_DROP)
        return;
    struct msg_info m = {pm->has_id, pm->bad_id, pm->epoch, pm->seq, 0, pm->has_ts, pm->ts,
                         pm->has_n, pm->n};
    g_ev->message(c, &m);
}

static void poll_answer_cb(void *ctx, int gap)
{
    struct conn *c = ctx;
    uint32_t epoch, seq;
    if (c->flags & CF_DROP)
        return;
    g_ev->answer(c, gap);
    /* After a gap the next poll goes from the answer's "next" (as the
     * browser client does): from the id asked, an epoch the server no
     * longer has, each poll would be told the same gap at once. */
    if (gap && pollp_next(&c->u.poll, &epoch, &seq))
        ids_resume(&c->ids, epoch, seq);
}

static const struct poll_callbacks k_poll_json = {poll_message_cb, poll_answer_cb};

static void poll_body(void *ctx, const char *data, size_t len)
{
    struct conn *c = ctx;
    if (pollp_feed(&c->u.poll, data, len, &k_poll_json, c) == POLL_ERROR)
        g_body_error = 1;
}

static const struct resp_callbacks k_poll = {identity_headers, NULL, poll_body};

/* The answer ended with its body: complete only if the JSON is. */
static enum feed_result poll_ended(struct conn *c)
{
    return pollp_feed(&c->u.poll, "", 0, &k_poll_json, c) == POLL_DONE ? FEED_ANSWER : FEED_ERROR;
}

/* --- WebSocket ----------------------------------------------------------------- */

static void ws_message_cb(void *ctx, const struct ws_message *wm)
{
    struct conn *c = ctx;
    if (c->flags & CF_DROP)
        return;
    if (wm->gap) {
        g_ev->gap(c);
        return;
    }
    if (wm->reply) {
        g_ev->reply(c, wm->has_ts, wm->ts);
        return;
    }
    if (wm->other)
        return;                       /* a topic's joined, refused or left */
    struct msg_info m = {wm->has_id, wm->bad_id, wm->epoch, wm->seq, wm->topic, wm->has_ts,
                         wm->ts, wm->has_n, wm->n};
    g_ev->message(c, &m);
}

/* A pong or the answer to a close: a few bytes into a send buffer this
 * client leaves empty otherwise, so one non-blocking send. */
static void ws_send_cb(void *ctx, const uint8_t *frame, size_t len)
{
    struct conn *c = ctx;
    int fd = event_get_fd(&c->ev);
    if (fd >= 0 && send(fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len &&
        frame[0] == 0x8au)              /* FIN | pong */
        g_ev->pong(c);
}

static const struct ws_callbacks k_ws = {ws_message_cb, ws_send_cb};

static enum feed_result ws_bytes(struct conn *c, const char *buf, size_t len)
{
    /* The messages of the bytes after the 101 come after the welcome. */
    int up = 0;
    size_t i = 0;
    if (!ws_parser_upgraded(&c->u.ws)) {
        /* Feed the head a byte at a time up to the upgrade, so that the
         * welcome is counted before any message. */
        for (; i < len && !up; i++) {
            enum ws_result r = ws_parser_feed(&c->u.ws, buf + i, 1, &k_ws, c, &up);
            if (r == WS_STATUS)
                return FEED_STATUS;
            if (r != WS_MORE)
                return FEED_ERROR;
        }
        if (!up)
            return FEED_MORE;
        if (c->phase == CP_WAIT_WELCOME)
            g_ev->welcome(c);
    }
    switch (ws_parser_feed(&c->u.ws, buf + i, len - i, &k_ws, c, &up)) {
    case WS_MORE:
        return FEED_MORE;
    case WS_CLOSED:
        return FEED_ENDED;
    case WS_STATUS:
        return FEED_STATUS;
    default:
        return FEED_ERROR;
    }
}

/* --- dispatch ------------------------------------------------------------------ */

void proto_start(struct conn *c)
{
    rp_init(&c->rp);
    switch (g_proto) {
    case PROTO_SSE:
        ssep_init(&c->u.sse);
        break;
    case PROTO_POLL:
        pollp_init(&c->u.poll);
        break;
    case PROTO_WS:
        ws_parser_init(&c->u.ws);
        break;
    default:
        break;
    }
}

void proto_end(struct conn *c)
{
    if (g_proto == PROTO_WS)
        ws_parser_release(&c->u.ws);
}

static enum feed_result identity_feed(struct conn *c, const char *buf, size_t len,
                                      const struct resp_callbacks *cb)
{
    g_body_error = 0;
    enum rp_result r = rp_feed(&c->rp, buf, len, cb, c);
    if (g_body_error)
        return FEED_ERROR;
    if (r == RP_DONE && g_proto == PROTO_POLL)
        return poll_ended(c);
    return from_rp(r);
}

enum feed_result proto_feed(struct conn *c, const char *buf, size_t len)
{
    switch (g_proto) {
    case PROTO_SSE:
        return identity_feed(c, buf, len, &k_sse);
    case PROTO_POLL:
        c->flags |= CF_ANSWER_BYTES;
        return identity_feed(c, buf, len, &k_poll);
    case PROTO_WS:
        return ws_bytes(c, buf, len);
    default:
        return from_rp(rp_feed(&c->rp, buf, len, &k_chunked, c));
    }
}

enum feed_result proto_eof(struct conn *c)
{
    if (g_proto != PROTO_POLL)
        return FEED_ENDED;
    if (!(c->flags & CF_ANSWER_BYTES))
        return FEED_RETRY;
    return rp_eof(&c->rp) == RP_DONE ? poll_ended(c) : FEED_ERROR;
}
