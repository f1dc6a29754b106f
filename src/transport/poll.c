/* Long-poll: see poll.h. */
#include "transport/poll.h"
#include "core/backlog.h"
#include "core/replay.h"
#include "transport/transport.h"
#include "http/cors.h"
#include "core/framing.h"
#include "core/history.h"
#include "http/http_front.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "core/transport_ops.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct timeval idle_tv;
static uint32_t answer_budget;      /* bytes of messages in one answer at most */

/* "],"gap":false,"next":"E:S"}\n" after the messages of an answer. */
static size_t answer_end(char *out, size_t size, uint32_t next_seq)
{
    return (size_t)snprintf(out, size, "],\"gap\":false,\"next\":\"%s:%u\"}\n",
                            history_epoch_hex(), next_seq);
}

/* A waiting poll is done: this answer, then the close. */
static void finish_with(struct stream *s, const char *body, size_t len)
{
    struct iovec iov = {(void *)body, len};
    if (stream_send(s, &iov, 1, len) == 0)
        stream_finish(s);
}

static int poll_answer(struct stream *s, const char *data, uint32_t len, int binary,
                       uint32_t seq)
{
    static char *body;              /* grown to the largest answer, kept */
    static size_t cap;
    if (s->state != STREAM_LIVE)
        return 0;                   /* answered already: the rest waits in the history */
    size_t need = json_message_max(len) + 96;
    if (need > cap) {
        char *grown = realloc(body, need);
        if (!grown) {
            log_msg(LOG_ERROR, "out of memory answering a long-poll: it is closed");
            stream_finish(s);
            return 0;
        }
        body = grown;
        cap = need;
    }
    size_t n = (size_t)sprintf(body, "{\"messages\":[");
    n += json_message(body + n, history_epoch_hex(), seq, data, len, binary);
    n += answer_end(body + n, cap - n, seq);
    finish_with(s, body, n);
    return 1;
}

static void on_poll_idle(struct stream *s)
{
    if (s->state != STREAM_LIVE || stream_replaying(s)) {
        /* Its answer did not go out within --poll-timeout: the client
         * does not read; it polls again from its last id. */
        stream_end_with(s, (struct iovec){NULL, 0}, END_SLOW);
        return;
    }
    char body[96];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"messages\":[");
    n += answer_end(body + n, sizeof body - n, history_last_seq(s->uid));
    finish_with(s, body, n);
}


/* The socket leaves evhttp as a stream with the head written; then the
 * answer is what the history has after since, at most answer_budget bytes
 * of it (the client polls again from the last id it got), or the next
 * message, or an empty answer at --poll-timeout. */
static int poll_start(struct evhttp_request *req, uint32_t uid)
{
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (q)
        evhttp_parse_query_str(q, &query);
    char since[32] = "";
    const char *asked = evhttp_find_header(&query, "since");
    int known = asked != NULL;
    if (known)   /* longer than any id: kept unreadable, a gap */
        snprintf(since, sizeof since, "%s", strlen(asked) < sizeof since ? asked : "-");
    evhttp_clear_headers(&query);

    char head[768], cors[512];
    size_t c = cors_headers(req, 0, cors, sizeof cors);
    cors[c] = '\0';
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n", cors);
    return transport_open(req, uid, &(struct transport_opening){
        .framing = FRAMING_POLL, .head = head, .head_len = (size_t)n, .idle = &idle_tv,
        .replay = 1, .since = known ? since : NULL, .budget = answer_budget});
}

/* ---------------------------------------------------------------- replay */

static int poll_replay_open(struct backlog **out, void *owner)
{
    static const char start[] = "{\"messages\":[";
    return replay_put(out, owner, start, sizeof start - 1);
}

/* A message of the answer, within its budget (the first always). */
static size_t poll_replay_message(struct backlog **out, void *owner, uint8_t framing,
                                  const char *data, uint32_t len, int binary, uint32_t seq,
                                  const struct replay *r, int *over)
{
    (void)framing;
    int comma = r->given > 0;
    char *at = replay_room(out, owner, 1 + json_message_max(len));
    if (!at)
        return 0;
    if (comma)
        *at = ',';
    size_t n = (size_t)comma +
               json_message(at + comma, history_epoch_hex(), seq, data, len, binary);
    if (comma && n > r->budget) {
        *over = 1;              /* encoded, not committed: the next poll gets it */
        return 0;
    }
    backlog_commit(*out, n);
    return n;
}

/* The answer's end: whether anything was missed, and the id to poll
 * from next. */
static int poll_replay_end(struct backlog **out, void *owner, const struct replay *r)
{
    char buf[160], first[32], next[32];
    replay_id_text(next, sizeof next, r->at.seq - 1);
    size_t n;
    if (r->gap) {
        if (r->first)
            snprintf(first, sizeof first, "\"%s:%u\"", history_epoch_hex(), r->first);
        else
            strcpy(first, "null");
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":true,\"first\":%s,\"next\":\"%s\"}\n",
                             first, next);
    } else {
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":false,\"next\":\"%s\"}\n", next);
    }
    return replay_put(out, owner, buf, n);
}

/* A gap is said in the answer's end. */
static const struct transport_replay poll_replay = {
    .open = poll_replay_open,
    .message = poll_replay_message,
    .end = poll_replay_end,
};

/* A waiting poll's head is out: its body says why it was ended rather
 * than leave the client with no JSON at all. */
#define END_TEXT_BEFORE "{\"messages\":[],\"gap\":false,\"ended\":\""
#define END_TEXT_AFTER "\"}\n"
static const char *const poll_ended[END_TOLD_KINDS] = {END_REASONS_TOLD(END_TEXT)};

static struct iovec poll_goodbye(uint8_t framing, uint8_t why)
{
    (void)framing;
    return (struct iovec){(void *)poll_ended[why], strlen(poll_ended[why])};
}

/* A poll's answer is given at once (deliver), a waiting poll is answered
 * empty when idle, and one ended mid-answer is cut. No {conn, Conn, Data}
 * reply fits its answer, JSON of the uid's messages. */
static const struct transport_ops poll_ops = {
    .name = "poll",
    .goodbye = poll_goodbye,
    .replay = &poll_replay,
    .idle = on_poll_idle,
    .deliver = poll_answer,
    .cut_replay_on_end = 1,
};

int poll_init(uint32_t timeout_s, uint32_t max_answer_bytes)
{
    idle_tv = (struct timeval){timeout_s, 0};
    answer_budget = max_answer_bytes;
    transport_ops_register(FRAMING_POLL, &poll_ops);
    return http_front_route("/poll/", poll_start, 1);
}
