/* SPDX-License-Identifier: Apache-2.0 */
/* POST /send/N: see client_post.h.
 *
 * A request is checked in the order a client can act on: its origin, the
 * node taking messages at all (--inbox), the uid and its token (the
 * streams' rules), the ?conn= it names, its type and size, then whether
 * Erlang keeps up (503, no token spent) and the rate (429). Each refusal
 * is counted (obs/stats.h, post_*). evhttp holds the whole body before we
 * see it, never more than the bound client_post_configure gave it: a
 * larger Content-Length gets evhttp's own 413 before a byte of the body
 * is read, a trickling body the --header-timeout of the request.
 *
 * Without ?conn= the rate bucket is the client address's (client_addr.h:
 * behind a --trusted-proxy, the address it forwards for), in a fixed table
 * (PEER_BUCKETS, 32 KB, no allocation): addresses that share an entry
 * share a bucket, which errs on the side of refusing. */
#include "http/client_post.h"
#include "core/client_in.h"
#include "http/auth_http.h"
#include "core/client_rate.h"
#include "core/conn.h"
#include "core/outbound.h"
#include "core/stream.h"
#include "core/topic_join.h"
#include "http/client_addr.h"
#include "http/cors.h"
#include "http/http_reply.h"
#include "http/uid.h"
#include "lib/utf8.h"
#include "obs/stats.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The body bound evhttp has for every request: a smaller
 * --max-client-message is checked here. */
#define BODY_FLOOR 8192

/* Per-peer buckets (8 bytes each) for messages that name no connection. */
#define PEER_BUCKETS 4096u

static struct {
    const struct http_config *o;
    uint32_t max_message;
} cfg;

static struct peer_bucket {
    uint32_t tokens, at_ms;
} peers[PEER_BUCKETS];

size_t client_post_configure(struct evhttp *http, const struct http_config *c)
{
    cfg.o = c;
    cfg.max_message = c->client.max_message;
    client_in_configure(c->client.rate);
    size_t body = c->client.inbox && c->client.max_message > BODY_FLOOR
                      ? c->client.max_message : BODY_FLOOR;
    if (http)
        evhttp_set_max_body_size(http, (ev_ssize_t)body);
    return body;
}

static void reply_plain(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    http_reply_text(req, code, reason, text);
}

static void refuse_later(struct evhttp_request *req, int code, const char *reason,
                         const char *text)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    reply_plain(req, code, reason, text);
}

/* A POST with an Origin must come from the request's own host or an
 * --allow-origin; a cross-origin one gets the CORS headers to read the
 * answer. 0 when refused (403, counted). */
static int origin_ok(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *origin = evhttp_find_header(in, "Origin");
    if (!origin)
        return 1;                       /* not a browser's cross-origin request */
    const char *host = evhttp_find_header(in, "Host");
    if (!origin_allowed(origin, host, cfg.o->origins.list, cfg.o->origins.n)) {
        loop_stats.http_bad_origin++;
        reply_plain(req, 403, "Forbidden", "Origin not allowed: list it with --allow-origin");
        return 0;
    }
    if (cors_origin_allowed(origin)) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        if (cors_origin_allowed("\x01")) {         /* only "*" allows that: any, no credentials */
            evhttp_add_header(h, "Access-Control-Allow-Origin", "*");
        } else {
            evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
            evhttp_add_header(h, "Access-Control-Allow-Credentials", "true");
            evhttp_add_header(h, "Vary", "Origin");
        }
    }
    return 1;
}

/* The uid of the path; 0 when refused (as the streams refuse it). */
static int uid_ok(struct evhttp_request *req, const char *text, uint32_t *uid)
{
    switch (uid_parse(text, cfg.o->max_users, uid)) {
    case UID_OK:
        return 1;
    case UID_INVALID:
        loop_stats.http_not_found++;
        reply_plain(req, 404, "Not Found", "User id not found, try /send/123 instead");
        return 0;
    case UID_TOO_BIG:
        break;
    }
    char body[64];
    loop_stats.http_too_big++;
    snprintf(body, sizeof body, "Max uid allowed is %u", cfg.o->max_users);
    reply_plain(req, 503, "Service Unavailable", body);
    return 0;
}

/* The value of ?conn= as a number: 1 and *id when there is one (0: a
 * value that is not a number), 0 without it. No allocation. */
static int conn_param(const char *q, uint64_t *id)
{
    for (const char *p = q; p && *p; p = strchr(p, '&'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "conn=", 5) != 0)
            continue;
        uint64_t v = 0;
        const char *d = p + 5;
        for (; *d >= '0' && *d <= '9' && v <= (UINT64_MAX - 9) / 10; d++)
            v = v * 10 + (uint64_t)(*d - '0');
        *id = (*d == '\0' || *d == '&') ? v : 0;
        return 1;
    }
    return 0;
}

/* The stream of the connection ?conn= names (*s NULL without one); 0
 * when refused (404). Another uid's live connection gets the same answer
 * as a closed one, so that a client learns nothing of the connections not
 * its own. */
static int conn_ok(struct evhttp_request *req, uint32_t uid, struct stream **s)
{
    uint64_t id;
    *s = NULL;
    if (!conn_param(evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req)), &id))
        return 1;
    struct stream *named = id ? conn_find(id) : NULL;
    if (!named || named->state != STREAM_LIVE || named->uid != uid) {
        loop_stats.post_bad_conn++;
        reply_plain(req, 404, "Not Found",
                    "No such connection of this uid on this node (closed, or never given)");
        return 0;
    }
    *s = named;
    return 1;
}

/* 1 text (text/plain), 2 binary (application/octet-stream), 0 other. */
static int body_kind(struct evhttp_request *req)
{
    const char *t = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (!t)
        return 0;
    size_t n = strcspn(t, "; \t");
    if (n == 10 && strncasecmp(t, "text/plain", n) == 0)
        return 1;
    if (n == 24 && strncasecmp(t, "application/octet-stream", n) == 0)
        return 2;
    return 0;
}

/* The body, whole and within bounds, as one piece, and whether it is
 * binary; NULL when refused. */
static const char *body_ok(struct evhttp_request *req, size_t *len, int *binary)
{
    int kind = body_kind(req);
    *binary = kind == 2;
    if (!kind) {
        loop_stats.post_bad_type++;
        reply_plain(req, 415, "Unsupported Media Type",
               "Content-Type must be text/plain (UTF-8) or application/octet-stream");
        return NULL;
    }
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    *len = evbuffer_get_length(b);
    if (*len > cfg.max_message) {
        loop_stats.post_too_big++;
        reply_plain(req, 413, "Payload Too Large", "Message larger than --max-client-message");
        return NULL;
    }
    /* evhttp's buffer: made contiguous in place (at most the bound). */
    const char *data = *len ? (const char *)evbuffer_pullup(b, -1) : "";
    if (!data) {
        loop_stats.post_busy++;
        refuse_later(req, 503, "Service Unavailable", "Out of memory");
        return NULL;
    }
    if (kind == 1 && !utf8_valid(data, *len)) {
        loop_stats.post_bad_type++;
        reply_plain(req, 400, "Bad Request", "A text/plain message must be valid UTF-8");
        return NULL;
    }
    return data;
}

/* Whether Erlang takes messages now: a master linked, and not behind. */
static int erlang_ok(struct evhttp_request *req)
{
    const char *why = NULL;
    if (atomic_load(&cnode_stats.erl_masters) == 0)
        why = "No Erlang master linked to take it, try again later";
    else if (atomic_load_explicit(&outbound_in_pending, memory_order_relaxed) > CLIENT_IN_PENDING_MAX)
        why = "Erlang is not keeping up, try again later";
    if (!why)
        return 1;
    loop_stats.post_busy++;
    refuse_later(req, 503, "Service Unavailable", why);
    return 0;
}

/* The bucket of the client's address (behind a --trusted-proxy, the one
 * it forwards for): an IPv6 client's /64, which one user holds whole. */
static struct peer_bucket *peer_of(struct evhttp_request *req)
{
    struct peer_addr a;
    client_addr_of(req, &a);
    uint64_t key = 0;
    memcpy(&key, a.addr, a.family == 6 ? 8 : 4);
    return &peers[(uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 52) & (PEER_BUCKETS - 1)];
}

/* Whether the body is a topic's join or leave (topic_join.h): the
 * stream's own business, with or without an inbox. */
static int control_body(struct evhttp_request *req)
{
    char head[16];
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(b);
    ev_ssize_t n = evbuffer_copyout(b, head, sizeof head);
    /* the prefix it is known by is within head */
    return cfg.o->client.topics && n > 0 && topic_control_is(head, len) && body_kind(req) == 1;
}

/* A topic's join or leave for the stream the request names (one it must
 * name): done there, told there (its events), 202. */
static void control(struct evhttp_request *req, const char *uid_text)
{
    uint32_t uid;
    struct stream *s;
    size_t len;
    int binary;
    const char *data;
    if (!uid_ok(req, uid_text, &uid) || !auth_admit(req, uid) || !conn_ok(req, uid, &s) ||
        !(data = body_ok(req, &len, &binary)))
        return;
    if (!s) {
        loop_stats.post_bad_conn++;
        reply_plain(req, 404, "Not Found", "A topic is joined or left by a stream: name it "
                    "with ?conn=ID");
        return;
    }
    switch (client_in_charge(s, NULL, NULL, client_rate_now_ms())) {
    case CLIENT_IN_QUEUED:
        break;
    case CLIENT_IN_RATE:
        loop_stats.post_rate++;
        refuse_later(req, 429, "Too Many Requests", "Past --client-rate, slow down");
        return;
    default:
        loop_stats.post_busy++;
        refuse_later(req, 503, "Service Unavailable", "Out of memory");
        return;
    }
    topic_control_apply(s, data, len);
    reply_plain(req, 202, "Accepted", "");
}

static void post(struct evhttp_request *req, const char *uid_text)
{
    uint32_t uid;
    struct stream *from;
    size_t len;
    int binary;
    const char *data;
    if (!origin_ok(req))
        return;
    if (control_body(req)) {
        control(req, uid_text);
        return;
    }
    if (!cfg.o->client.inbox) {
        loop_stats.post_no_inbox++;
        reply_plain(req, 404, "Not Found", "This node takes no client messages (no --inbox)");
        return;
    }
    if (!uid_ok(req, uid_text, &uid) || !auth_admit(req, uid) || !conn_ok(req, uid, &from) ||
        !(data = body_ok(req, &len, &binary)) || !erlang_ok(req))
        return;
    /* A token of the named connection's bucket, else of the peer's. */
    struct peer_bucket *p = from ? NULL : peer_of(req);
    /* ws_reader's clock: a conn's bucket is shared */
    switch (client_in_send(uid, from, p ? &p->tokens : NULL, p ? &p->at_ms : NULL,
                           client_rate_now_ms(), data, (uint32_t)len, binary)) {
    case CLIENT_IN_QUEUED:
        loop_stats.post_in++;
        reply_plain(req, 202, "Accepted", "");
        return;
    case CLIENT_IN_RATE:
        loop_stats.post_rate++;
        refuse_later(req, 429, "Too Many Requests", "Past --client-rate, slow down");
        return;
    case CLIENT_IN_FULL:
        loop_stats.post_busy++;
        refuse_later(req, 503, "Service Unavailable", "Erlang is not keeping up, try again later");
        return;
    case CLIENT_IN_NO_MEMORY:
        loop_stats.post_busy++;
        refuse_later(req, 503, "Service Unavailable", "Out of memory");
        return;
    }
}

void client_post_serve(struct evhttp_request *req, const char *uid_text)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_POST:
        post(req, uid_text);
        return;
    case EVHTTP_REQ_OPTIONS:
        cors_preflight_for(req, "POST", "Content-Type");
        return;
    default:
        loop_stats.http_bad_method++;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST, OPTIONS");
        http_reply_text(req, 405, "Method Not Allowed", "Only POST is served here");
    }
}
