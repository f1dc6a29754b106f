/* Server-Sent Events: see sse.h. */
#include "sse.h"
#include "cors.h"
#include "framing.h"
#include "history.h"
#include "http_guard.h"
#include "socket_export.h"
#include "stream.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Browsers retry after this many ms when the stream drops. */
#define SSE_RETRY_MS 3000
/* Messages replayed at most (--history is at most this). */
#define SSE_REPLAY_MAX 4096

static const char head_start[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n";
static const char head_end[] = "Connection: close\r\n\r\n";


/* The id the client saw last: Last-Event-ID (sent by EventSource when it
 * reconnects), else ?since= (a first connect cannot set headers). */
static const char *last_seen_id(struct evhttp_request *req, struct evkeyvalq *query)
{
    const char *id = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
    return id ? id : evhttp_find_header(query, "since");
}

/* A growing buffer of the opening bytes. */
struct text {
    char *p;
    size_t len, cap;
};

/* Room for n more bytes at the end; NULL when out of memory. */
static char *text_room(struct text *t, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n)
            cap *= 2;
        char *grown = realloc(t->p, cap);
        if (!grown)
            return NULL;
        t->p = grown;
        t->cap = cap;
    }
    char *at = t->p + t->len;
    t->len += n;
    return at;
}

static int text_add(struct text *t, const char *s, size_t n)
{
    char *at = text_room(t, n);
    if (!at)
        return -1;
    memcpy(at, s, n);
    return 0;
}

/* "event: gap" with the id asked from and the first still kept. */
static int add_gap(struct text *t, const char *asked, uint32_t first_seq)
{
    char json[HISTORY_GAP_JSON_MAX];
    size_t n = history_gap_json(json, asked, first_seq);
    return text_add(t, "event: gap\ndata: ", 17) == 0 && text_add(t, json, n) == 0 &&
                   text_add(t, "\n\n", 2) == 0
               ? 0
               : -1;
}

static int add_message(struct text *t, const char *data, uint32_t len, uint32_t seq)
{
    struct framing_prefix prefix;
    framing_prefix(FRAMING_SSE, len, seq, &prefix);
    if (text_add(t, prefix.bytes, prefix.len) != 0)
        return -1;
    char *body = text_room(t, framing_sse_body_len(data, len));
    if (!body)
        return -1;
    framing_sse_body(data, len, body);
    return 0;
}

/* The head, the retry advice, a gap event if any, and what was missed. */
static int opening_bytes(struct text *t, uint32_t uid, const char *asked, const char *cors)
{
    static struct {
        struct history_replay r;
        uint64_t room[SSE_REPLAY_MAX];
    } replay;
    char retry[32];
    uint32_t epoch = 0, seq = 0;
    int known = asked != NULL;
    if (known && history_parse_id(asked, &epoch, &seq) != 0)
        epoch = ~history_epoch();            /* unreadable: not ours, a gap */
    history_since(uid, known, epoch, seq, &replay.r, SSE_REPLAY_MAX);

    int n = snprintf(retry, sizeof retry, "retry: %u\n\n", SSE_RETRY_MS);
    if (text_add(t, head_start, sizeof head_start - 1) != 0 ||
        text_add(t, cors, strlen(cors)) != 0 || text_add(t, head_end, sizeof head_end - 1) != 0 ||
        text_add(t, retry, (size_t)n) != 0)
        return -1;
    if (replay.r.gap && add_gap(t, asked, replay.r.first_seq) != 0)
        return -1;
    for (uint32_t i = 0; i < replay.r.n; i++) {
        uint32_t len, s;
        const char *m = history_message(replay.r.pos[i], &len, &s);
        if (add_message(t, m, len, s) != 0)
            return -1;
    }
    return 0;
}

int sse_start(struct evhttp_request *req, uint32_t uid)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (q)
        evhttp_parse_query_str(q, &query);
    struct text t = {0};
    char cors[512];
    cors[cors_headers(req, 1, cors, sizeof cors)] = '\0';
    int r = opening_bytes(&t, uid, last_seen_id(req, &query), cors);
    evhttp_clear_headers(&query);
    int own = r == 0 ? socket_export_reserve(evcon) : -1;
    struct stream *s = own >= 0 ? stream_open(uid, FRAMING_SSE, NULL, own) : NULL;
    if (!s) {
        if (own >= 0)
            close(own);
        free(t.p);
        return -1;
    }
    /* From here the request and its connection are gone. */
    http_guard_release(req);
    if (socket_export(evcon) != 0) {
        stream_release(s, 0);
        free(t.p);
        return 0;
    }
    if (stream_import(s) == 0) {
        struct iovec iov = {t.p, t.len};
        stream_send(s, &iov, 1, t.len);
    }
    free(t.p);
    return 0;
}

void sse_heartbeat(struct stream *s)
{
    static const char comment[] = ":\n\n";
    struct iovec iov = {(void *)comment, sizeof comment - 1};
    stream_send(s, &iov, 1, iov.iov_len);
}
