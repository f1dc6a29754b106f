/* Long-poll: see longpoll.h. */
#include "longpoll.h"
#include "cors.h"
#include "framing.h"
#include "history.h"
#include "http_guard.h"
#include "json_text.h"
#include "log.h"
#include "socket_export.h"
#include "stats.h"
#include "stream.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Messages in one answer at most (--history is at most this). */
#define POLL_REPLAY_MAX 4096

static struct timeval idle_tv;

static const char empty_answer[] = "{\"messages\":[],\"gap\":false}\n";

/* A waiting poll is done: this answer, then the close. */
static void finish_with(struct stream *s, const char *body, size_t len)
{
    struct iovec iov = {(void *)body, len};
    if (stream_send(s, &iov, 1, len) == 0)
        stream_finish(s);
}

void poll_answer(struct stream *s, const char *data, uint32_t len, uint32_t seq)
{
    if (s->state != STREAM_LIVE)
        return;                    /* answered already: the rest waits in the history */
    char *body = malloc(json_message_max(len) + 32);
    if (!body) {
        log_msg(LOG_ERROR, "out of memory answering a long-poll: it is closed");
        stream_finish(s);
        return;
    }
    size_t n = (size_t)sprintf(body, "{\"messages\":[");
    n += json_message(body + n, history_epoch_hex(), seq, data, len);
    n += (size_t)sprintf(body + n, "],\"gap\":false}\n");
    finish_with(s, body, n);
    free(body);
}

static void on_poll_idle(struct stream *s)
{
    finish_with(s, empty_answer, sizeof empty_answer - 1);
}

void poll_init(uint32_t timeout_s)
{
    idle_tv = (struct timeval){timeout_s, 0};
    stream_on_idle(FRAMING_POLL, on_poll_idle);
}

/* What was kept after the client's id, as the JSON answer; NULL when out
 * of memory. */
static struct evbuffer *replay_answer(const struct history_replay *r)
{
    struct evbuffer *b = evbuffer_new();
    char *msg = NULL;
    size_t cap = 0;
    if (!b)
        return NULL;
    evbuffer_add_printf(b, "{\"messages\":[");
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t len, seq;
        const char *m = history_message(r->pos[i], &len, &seq);
        if (json_message_max(len) > cap) {
            cap = json_message_max(len);
            char *grown = realloc(msg, cap);
            if (!grown) {
                free(msg);
                evbuffer_free(b);
                return NULL;
            }
            msg = grown;
        }
        size_t n = json_message(msg, history_epoch_hex(), seq, m, len);
        if (i)
            evbuffer_add(b, ",", 1);
        evbuffer_add(b, msg, n);
    }
    free(msg);
    if (r->gap && r->first_seq)
        evbuffer_add_printf(b, "],\"gap\":true,\"first\":\"%s:%u\"}\n", history_epoch_hex(),
                            r->first_seq);
    else if (r->gap)
        evbuffer_add_printf(b, "],\"gap\":true,\"first\":null}\n");
    else
        evbuffer_add_printf(b, "],\"gap\":false}\n");
    return b;
}

static void add_header_lines(struct evkeyvalq *h, char *lines)
{
    for (char *line = strtok(lines, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = '\0';
            evhttp_add_header(h, line, colon + 2);
        }
    }
}

/* Something is there to give: answered now, through evhttp (keep-alive). */
static int answer_now(struct evhttp_request *req, const struct history_replay *r)
{
    struct evbuffer *body = replay_answer(r);
    if (!body)
        return -1;
    char cors[512];
    size_t n = cors_headers(req, 0, cors, sizeof cors);
    cors[n] = '\0';
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Cache-Control", "no-store");
    add_header_lines(h, cors);
    evhttp_send_reply(req, HTTP_OK, "OK", body);
    evbuffer_free(body);
    return 0;
}

/* Nothing new: the socket leaves evhttp with the head written; the body
 * follows with the next message, or empty at --poll-timeout. */
static int wait_for_message(struct evhttp_request *req, uint32_t uid)
{
    char head[768], cors[512];
    size_t c = cors_headers(req, 0, cors, sizeof cors);
    cors[c] = '\0';
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n", cors);
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    int own = socket_export_reserve(evcon);
    struct stream *s = own >= 0 ? stream_open(uid, FRAMING_POLL, NULL, own) : NULL;
    if (!s) {
        if (own >= 0)
            close(own);
        return -1;
    }
    http_guard_release(req);
    if (socket_export(evcon) != 0) {        /* the request is gone from here on */
        stream_release(s, 0);
        return 0;
    }
    if (stream_import_idle(s, &idle_tv) == 0) {
        struct iovec iov = {head, (size_t)n};
        stream_send(s, &iov, 1, (size_t)n);
    }
    return 0;
}

int poll_start(struct evhttp_request *req, uint32_t uid)
{
    static struct {
        struct history_replay r;
        uint64_t room[POLL_REPLAY_MAX];
    } replay;
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (q)
        evhttp_parse_query_str(q, &query);
    const char *since = evhttp_find_header(&query, "since");
    uint32_t epoch = 0, seq = 0;
    if (since && history_parse_id(since, &epoch, &seq) != 0)
        epoch = ~history_epoch();              /* unreadable: not ours, a gap */
    history_since(uid, since != NULL, epoch, seq, &replay.r, POLL_REPLAY_MAX);
    evhttp_clear_headers(&query);
    if (since && (replay.r.gap || replay.r.n))
        return answer_now(req, &replay.r);
    return wait_for_message(req, uid);
}
