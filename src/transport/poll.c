/* SPDX-License-Identifier: Apache-2.0 */
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
#include "core/topic.h"
#include "http/topic_query.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct timeval idle_tv;
static uint32_t answer_budget;      /* bytes of messages in one answer at most */

/* Bytes of an answer's "topics" for a stream with n topics at most. */
#define TOPICS_JSON_MAX(n) (16 + (size_t)(n) * (TOPIC_NAME_MAX + 32))

/* ,"topics":{"NAME":"E:S",...} of s's topics (none: nothing), each the
 * id its client saw last: the topic's newest when the answer was live
 * (from_subs 0), else where the replay stands. Its length. */
static size_t topics_json(char *out, const struct stream *s, int from_subs)
{
    size_t n = 0;
    for (uint32_t i = topic_stream_first(s); i; i = topic_stream_next(i)) {
        const struct topic_sub *x = topic_sub_at(i);
        uint32_t slot = topic_slot(x->topic);
        uint8_t len;
        const char *name = topic_name(x->topic, &len);
        n += (size_t)sprintf(out + n, "%s\"%.*s\":\"%08x:%u\"", n ? "," : ",\"topics\":{",
                             (int)len, name, history_slot_epoch(slot),
                             from_subs ? topic_sub_next(i) - 1 : history_last_seq(slot));
    }
    if (n)
        out[n++] = '}';
    return n;
}

/* "],"gap":false,"next":"E:S"[,"topics":{...}]}\n" after the messages of
 * an answer given live (nothing missed). */
static size_t answer_end(char *out, const struct stream *s, uint32_t next_seq)
{
    size_t n = (size_t)sprintf(out, "],\"gap\":false,\"next\":\"%s:%u\"",
                               history_epoch_hex(), next_seq);
    n += topics_json(out + n, s, 0);
    memcpy(out + n, "}\n", 2);
    return n + 2;
}

/* A message as JSON: {"topic":"NAME","id":"E:S","data":...} for a
 * topic's, json_message's for the uid's. Its length. */
static size_t message_json(char *out, const struct msg_id *id, const char *data, uint32_t len,
                           int binary)
{
    char epoch[9];
    snprintf(epoch, sizeof epoch, "%08x", id->epoch);
    size_t n = 0;
    if (id->topic)
        n = (size_t)sprintf(out, "{\"topic\":\"%.*s\",", (int)id->topic_len, id->topic) - 1;
    n += json_message(out + n, epoch, id->seq, data, len, binary);
    if (id->topic)
        out[(size_t)id->topic_len + 11] = ',';   /* json_message's "{" */
    return n;
}

/* A waiting poll is done: this answer, then the close. */
static void finish_with(struct stream *s, const char *body, size_t len)
{
    struct iovec iov = {(void *)body, len};
    if (stream_send(s, &iov, 1, len) == 0)
        stream_finish(s);
}

static int poll_answer(struct stream *s, const char *data, uint32_t len, int binary,
                       const struct msg_id *id)
{
    static char *body;              /* grown to the largest answer, kept */
    static size_t cap;
    if (s->state != STREAM_LIVE)
        return 0;                   /* answered already: the rest waits in the history */
    size_t need = json_message_max(len) + 128 + TOPIC_NAME_MAX +
                  TOPICS_JSON_MAX(topic_stream_count(s));
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
    n += message_json(body + n, id, data, len, binary);
    n += answer_end(body + n, s, history_last_seq(s->uid));
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
    char body[96 + TOPICS_JSON_MAX(256)];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"messages\":[");
    n += answer_end(body + n, s, history_last_seq(s->uid));
    finish_with(s, body, n);
}


/* The socket leaves evhttp as a stream with the head written; then the
 * answer is what the history has after since, at most answer_budget bytes
 * of it (the client polls again from the last id it got), or the next
 * message, or an empty answer at --poll-timeout. */
static int poll_start(struct evhttp_request *req, uint32_t uid)
{
    if (!topic_query_admit(req, 1, TOPIC_IDS_TAKEN))
        return 0;
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
                                  const char *data, uint32_t len, int binary,
                                  const struct msg_id *id, const struct replay *r, int *over)
{
    (void)framing;
    int comma = r->given > 0;
    char *at = replay_room(out, owner, 1 + json_message_max(len) + 16 + TOPIC_NAME_MAX);
    if (!at)
        return 0;
    if (comma)
        *at = ',';
    size_t n = (size_t)comma + message_json(at + comma, id, data, len, binary);
    if (comma && n > r->budget) {
        *over = 1;              /* encoded, not committed: the next poll gets it */
        return 0;
    }
    backlog_commit(*out, n);
    return n;
}

/* A topic's gap is an entry of the messages, {"gap":{"topic":...}}, where
 * it happened; the uid's is told in the answer's end. */
static int poll_replay_gap(struct backlog **out, void *owner, const struct replay *r,
                           const char *json, size_t n, const struct msg_id *next)
{
    if (!next->topic)
        return 0;
    char buf[HISTORY_GAP_JSON_MAX + TOPIC_NAME_MAX + 32];
    size_t k = (size_t)snprintf(buf, sizeof buf, "%s{\"gap\":%.*s}", r->given ? "," : "",
                                (int)n, json);
    return replay_put(out, owner, buf, k) == 0 ? 1 : -1;
}

/* The answer's end: whether anything of the uid's was missed, the id to
 * poll from next, and each topic's. */
static int poll_replay_end(struct backlog **out, void *owner, const struct replay *r)
{
    char buf[160 + TOPICS_JSON_MAX(256)], first[32], next[32];
    replay_id_text(next, sizeof next, r->uid_next - 1);
    size_t n;
    if (r->gap) {
        if (r->first)
            snprintf(first, sizeof first, "\"%s:%u\"", history_epoch_hex(), r->first);
        else
            strcpy(first, "null");
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":true,\"first\":%s,\"next\":\"%s\"",
                             first, next);
    } else {
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":false,\"next\":\"%s\"", next);
    }
    n += topics_json(buf + n, owner, 1);
    memcpy(buf + n, "}\n", 2);
    return replay_put(out, owner, buf, n + 2);
}

/* The uid's gap is said in the answer's end, a topic's in its messages. */
static const struct transport_replay poll_replay = {
    .open = poll_replay_open,
    .gap = poll_replay_gap,
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
