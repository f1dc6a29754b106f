/* SPDX-License-Identifier: Apache-2.0 */
/* Connection lifecycle: see conn.h. */
#include "conn.h"
#include "record.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "proto.h"
#include "ws_send.h"

/* Callbacks get the conn as their argument; the set is found here instead of
 * in every conn (one set per process, 8 bytes saved per connection). */
static struct conn_set *g_set;

/* What a stream costs this client (CONN_COST_TEXT), on the 64-bit hosts it runs on. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct conn) == 224, "struct conn grew: update conn.h");

/* One read buffer for every connection of the process. */
static char g_rbuf[65536];
/* CLOCK_REALTIME of the current read, taken when a stamped message needs it. */
static uint64_t g_now_real;

static void on_connect(evutil_socket_t fd, short what, void *arg);
static void retry_later(struct conn *c);

static size_t index_of(const struct conn *c)
{
    return (size_t)(c - g_set->conns);
}

static uint64_t global_of(const struct conn *c)
{
    return g_set->worker + (uint64_t)index_of(c) * g_set->procs;
}

int conn_set_init(struct conn_set *cs, struct event_base *base, const struct client_opts *o,
                  struct worker_stats *st, size_t n, unsigned worker, unsigned procs)
{
    memset(cs, 0, sizeof *cs);
    cs->conns = calloc(n ? n : 1, sizeof *cs->conns);
    if (!cs->conns)
        return -1;
    if (o->topics && !(cs->topic_ids = calloc((n ? n : 1) * o->topics_per_conn,
                                              sizeof *cs->topic_ids)))
        return -1;
    cs->base = base;
    cs->o = o;
    cs->st = st;
    cs->n = n;
    cs->worker = worker;
    cs->procs = procs;
    cs->timeout.tv_sec = (time_t)o->timeout;
    cs->timeout.tv_usec = (suseconds_t)((o->timeout - (double)cs->timeout.tv_sec) * 1e6);
    g_set = cs;
    static const struct proto_events events = {conn_welcome, conn_message, conn_gap,
                                                conn_pong, conn_reply, conn_answer};
    proto_init(o->proto, &events);
    /* Each worker its own backoff draws (they are forked from one parent). */
    cs->rng = ((uint64_t)getpid() << 32) ^ mono_ns() ^ 0x9e3779b97f4a7c15ull;
    return 0;
}

static void changed(void)
{
    if (g_set->on_change)
        g_set->on_change(g_set->arg);
}

/* A masked close frame (1000, normal) before a clean close of a WebSocket
 * that is up; the parser answers the server's pings and close itself. */
static void ws_say_goodbye(struct conn *c, int fd)
{
    if (g_set->o->proto != PROTO_WS || !ws_parser_open(&c->u.ws) || fd < 0)
        return;
    uint8_t frame[WS_CLOSE_FRAME_LEN];
    size_t len = ws_parser_close_frame(frame, 1000);
    if (len)
        (void)send(fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Closes c's socket, if any. */
static void close_socket(struct conn *c)
{
    int fd = event_get_fd(&c->ev);
    event_del(&c->ev);
    if (fd >= 0)
        close(fd);
    proto_end(c);
    event_assign(&c->ev, g_set->base, -1, 0, on_connect, c);
    g_set->st->open--;
}

/* Ends c. Counts it in *if_pending (and failed) if it was not welcomed yet,
 * else in *if_streaming (when not NULL). */
static void finish(struct conn *c, uint64_t *if_pending, uint64_t *if_streaming)
{
    struct worker_stats *st = g_set->st;
    close_socket(c);
    if (c->phase == CP_STREAMING) {
        st->up--;
        if (if_streaming)
            (*if_streaming)++;
    } else {
        g_set->pending--;
        st->failed++;
        (*if_pending)++;
    }
    c->phase = CP_CLOSED;
    if (g_set->o->reconnect_lost_ms)
        retry_later(c);
}

void conn_welcome(struct conn *c)
{
    struct worker_stats *st = g_set->st;
    /* Streaming now, no timeout any more. */
    c->phase = CP_STREAMING;
    st->chunks++;
    st->welcomed++;
    st->up++;
    c->tries = 0;
    g_set->pending--;
    event_del(&c->ev);
    /* --no-read: the socket stays open, unread, until the end (or SIGUSR1). */
    if (conn_reading(g_set))
        event_add(&c->ev, NULL);
}

int conn_reading(const struct conn_set *cs)
{
    return !cs->o->no_read || (cs->o->read_on_signal && cs->resume_signalled);
}

void conn_read_all(struct conn_set *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->conns[i].phase == CP_STREAMING)
            event_add(&cs->conns[i].ev, NULL);
}

/* --topics: the id tracker of c's topic t:N (N + 1 in topic), NULL when
 * it is none of c's. */
static struct id_track *topic_ids(struct conn *c, uint32_t topic)
{
    const struct client_opts *o = g_set->o;
    if (!g_set->topic_ids || topic == 0 || topic > o->topics)
        return NULL;
    uint32_t j = opts_topic_index(o, global_of(c), topic - 1);
    return j < o->topics_per_conn ? &g_set->topic_ids[index_of(c) * o->topics_per_conn + j]
                                  : NULL;
}

/* The message's id against the connection's last one (its topic's). */
static void check_id(struct conn *c, const struct msg_info *m)
{
    struct worker_stats *st = g_set->st;
    int first = (c->flags & CF_FIRST) != 0;
    c->flags &= (uint8_t)~CF_FIRST;
    struct id_track *t = m->topic ? topic_ids(c, m->topic) : &c->ids;
    if (!m->has_id || !t) {
        st->id_errors++;
        return;
    }
    switch (ids_next(t, m->epoch, m->seq)) {
    case ID_OK:
        break;
    case ID_DUP:
        st->dup++;
        break;
    default:
        /* A poll answer says whether it has a gap after its messages. */
        if (first && g_set->o->proto == PROTO_POLL)
            c->flags |= CF_JUMP;
        else
            st->id_errors++;
        break;
    }
}

void conn_message(struct conn *c, const struct msg_info *m)
{
    struct worker_stats *st = g_set->st;
    uint64_t now = mono_ns();
    st->chunks++;
    st->msgs++;
    if (!st->first_msg_ns) {
        st->first_msg_ns = now;
        st->first_msg_cpu_us = cpu_us();   /* once: CPU spent on messages only */
    }
    st->last_msg_ns = now;
    if (m->has_ts) {
        if (!g_now_real)
            g_now_real = real_ns();
        hist_record(&st->lat, g_now_real > m->ts ? (g_now_real - m->ts) / 1000 : 0);
    }
    if (g_set->o->proto != PROTO_CHUNKED)
        check_id(c, m);
    if (g_set->o->record)
        record_message(opts_uid_of(g_set->o, global_of(c)), m->has_id, m->epoch, m->seq,
                       m->has_n, m->n);
    c->msgs++;
    if (g_set->o->reconnect_after && c->msgs >= g_set->o->reconnect_after &&
        !(c->flags & CF_RECONNECTED))
        c->flags |= CF_DROP;
}

void conn_gap(struct conn *c)
{
    if (g_set->o->record)
        record_gap(opts_uid_of(g_set->o, global_of(c)));
    g_set->st->gaps++;
    ids_gap(&c->ids);
    /* a topic's gap may be any of its topics': each may jump once */
    for (uint32_t j = 0; g_set->topic_ids && j < g_set->o->topics_per_conn; j++)
        ids_gap(&g_set->topic_ids[index_of(c) * g_set->o->topics_per_conn + j]);
}

void conn_pong(struct conn *c)
{
    (void)c;
    g_set->st->pongs++;
}

void conn_reply(struct conn *c, int has_ts, uint64_t ts)
{
    struct worker_stats *st = g_set->st;
    (void)c;
    st->replies++;
    if (has_ts) {
        if (!g_now_real)
            g_now_real = real_ns();
        hist_record(&st->rtt, g_now_real > ts ? (g_now_real - ts) / 1000 : 0);
    }
}

/* xorshift32 for the masks of the frames sent up: they only need to vary. */
static uint32_t next_mask(void)
{
    static uint32_t m;
    if (!m)
        m = (uint32_t)(g_set->rng >> 32) | 1u;
    m ^= m << 13;
    m ^= m >> 17;
    m ^= m << 5;
    return m;
}

int conn_send_up(struct conn_set *cs, size_t i, int request)
{
    struct conn *c = &cs->conns[i];
    struct worker_stats *st = cs->st;
    if (c->phase != CP_STREAMING || !ws_parser_open(&c->u.ws))
        return 1;
    char payload[WS_UP_PAYLOAD_MAX];
    uint8_t frame[WS_UP_FRAME_MAX];
    size_t n = ws_up_payload(payload, sizeof payload, request, c->up_seq, real_ns());
    size_t len = ws_client_frame(frame, sizeof frame, WS_OP_TEXT, (const uint8_t *)payload, n,
                                 next_mask());
    ssize_t w = send(event_get_fd(&c->ev), frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == (ssize_t)len) {
        uint64_t now = mono_ns();
        c->up_seq++;
        st->up_sent++;
        st->up_requests += request != 0;
        if (!st->first_up_ns)
            st->first_up_ns = now;
        st->last_up_ns = now;
        return 0;
    }
    st->up_blocked++;
    /* Part of a frame went: the stream is garbled from here on. */
    if (w > 0) {
        finish(c, &st->fail_closed, &st->stream_errors);
        changed();
    }
    return -1;
}

void conn_answer(struct conn *c, int gap)
{
    g_set->st->polls++;
    if (gap) {
        if (g_set->o->record)
            record_gap(opts_uid_of(g_set->o, global_of(c)));
        g_set->st->gaps++;
        ids_gap(&c->ids);   /* for a next answer's first id too: it may repeat the jump */
    } else if (c->flags & CF_JUMP) {
        g_set->st->id_errors++;
    }
    c->flags &= (uint8_t)~CF_JUMP;
}

/* Writes the request in one send: it is at most OPT_MAX_REQUEST bytes and the
 * socket's send buffer is empty, so a short write means the socket is broken.
 * A connection with an id seen resumes from it. */
static int send_request(int fd, struct conn *c)
{
    const struct client_opts *o = g_set->o;
    static char req[OPT_MAX_REQUEST + 64 + 255 * 48];
    char id[32];
    int idlen = ids_format(&c->ids, id, sizeof id);
    size_t len = o->req_pre_len;
    memcpy(req, o->req_pre, len);
    if (o->path_has_uid)
        len += (size_t)snprintf(req + len, 32, "%llu",
                                (unsigned long long)opts_uid_of(o, global_of(c)));
    memcpy(req + len, o->req_post, o->req_post_len);
    len += o->req_post_len;
    int query = o->path_has_query;
    if (idlen && (o->proto == PROTO_WS || o->proto == PROTO_POLL)) {
        len += (size_t)snprintf(req + len, 48, "%csince=%s", query ? '&' : '?', id);
        query = 1;
    }
    /* --topics: each with the last id seen there */
    for (uint32_t j = 0; g_set->topic_ids && j < o->topics_per_conn; j++) {
        char tid[32];
        int k = ids_format(&g_set->topic_ids[index_of(c) * o->topics_per_conn + j], tid,
                           sizeof tid);
        len += (size_t)snprintf(req + len, 48, "%st:%u%s%s", j ? "," : query ? "&topics=" : "?topics=",
                                opts_topic_of(o, global_of(c), j), k ? "@" : "", k ? tid : "");
    }
    memcpy(req + len, o->req_tail, o->req_tail_len);
    len += o->req_tail_len;
    if (idlen && o->proto == PROTO_SSE)
        len += (size_t)snprintf(req + len, 48, "Last-Event-ID: %s\r\n", id);
    memcpy(req + len, "\r\n", 2);
    len += 2;
    c->flags &= (uint8_t)~CF_ANSWER_BYTES;
    proto_start(c);
    ssize_t n = send(fd, req, len, MSG_NOSIGNAL);
    return n == (ssize_t)len ? 0 : -1;
}

/* A socket connecting to the server for c, its event on the connect.
 * Returns -1 on failure (nothing left open). */
static int connect_socket(struct conn *c)
{
    const struct client_opts *o = g_set->o;
    int fd = socket(o->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (o->nsrc) {
        struct sockaddr_in src;
        int one = 1;
        memset(&src, 0, sizeof src);
        src.sin_family = AF_INET;
        src.sin_addr = o->src[global_of(c) % o->nsrc];
        /* Let connect() pick the port knowing the destination, so one source
         * address can reuse a port towards different servers. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&src, sizeof src))
            goto fail;
    }
    if (connect(fd, (const struct sockaddr *)&o->dst, o->dst_len) && errno != EINPROGRESS)
        goto fail;
    g_set->st->attempted++;
    g_set->st->open++;
    event_assign(&c->ev, g_set->base, fd, EV_WRITE, on_connect, c);
    event_add(&c->ev, &g_set->timeout);
    return 0;
fail:
    close(fd);
    return -1;
}

/* The next poll of a loop: on the same socket after a keep-alive answer,
 * else on a new one. Not a new stream: no welcome, not pending. */
static void poll_again(struct conn *c, int same_socket)
{
    if (same_socket) {
        if (send_request(event_get_fd(&c->ev), c) == 0)
            return;
        finish(c, &g_set->st->fail_closed, &g_set->st->stream_errors);
        return;
    }
    close_socket(c);
    if (connect_socket(c) != 0) {
        g_set->st->stream_errors++;
        g_set->st->up--;
        c->phase = CP_CLOSED;
        if (g_set->o->reconnect_lost_ms)
            retry_later(c);
    }
}

/* xorshift64*: the backoff draws need no more than spread. */
static uint64_t next_random(void)
{
    uint64_t x = g_set->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g_set->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    g_set->st->retrying--;
    c->phase = CP_CLOSED;
    conn_open(g_set, index_of(c));
}

/* --reconnect-lost: closed c waits a random time in [0, min(cap, base *
 * 2^tries)] (full jitter: clients that lost a server at the same moment
 * come back spread over the window, their waits growing while it stays
 * away), its event the timer; then it opens again, resuming. */
static void retry_later(struct conn *c)
{
    const struct client_opts *o = g_set->o;
    uint64_t window = (uint64_t)o->reconnect_lost_ms << (c->tries < 31 ? c->tries : 31);
    if (window > o->reconnect_cap_ms)
        window = o->reconnect_cap_ms;
    uint64_t ms = next_random() % (window + 1);
    if (c->tries < UINT8_MAX)
        c->tries++;
    c->phase = CP_RETRY;
    g_set->st->retries++;
    g_set->st->retrying++;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
    event_assign(&c->ev, g_set->base, -1, 0, on_retry, c);
    event_add(&c->ev, &tv);
}

/* --reconnect-after: c is closed and opened again resuming from its last
 * id, at once or, with --reconnect-on-signal, once SIGUSR1 came. */
static void drop(struct conn *c)
{
    struct conn_set *cs = g_set;
    ws_say_goodbye(c, event_get_fd(&c->ev));
    close_socket(c);
    cs->st->up--;
    c->flags = (uint8_t)((c->flags & ~CF_DROP) | CF_RECONNECTED);
    cs->st->reconnects++;
    if (cs->o->reconnect_on_signal && !cs->resume_signalled) {
        c->phase = CP_PARKED;
        cs->st->parked++;
        return;
    }
    c->phase = CP_CLOSED;
    conn_open(cs, index_of(c));
}

/* What the transport said about the bytes read or the close. */
static void handle(struct conn *c, enum feed_result r, int eof)
{
    struct worker_stats *st = g_set->st;
    switch (r) {
    case FEED_MORE:
        break;
    case FEED_STATUS:
        finish(c, &st->fail_status, &st->stream_errors);
        break;
    case FEED_ENDED:
        finish(c, &st->fail_closed, &st->closed_by_server);
        break;
    case FEED_ANSWER:
        poll_again(c, !eof);
        break;
    case FEED_RETRY:
        /* A kept-alive connection the server closed as the next poll went. */
        if (c->phase == CP_STREAMING)
            poll_again(c, 0);
        else
            finish(c, &st->fail_closed, NULL);
        break;
    default:
        finish(c, &st->fail_closed, &st->stream_errors);
        break;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct worker_stats *st = g_set->st;
    uint8_t before = c->phase;

    if (what & EV_TIMEOUT) {
        if (c->phase == CP_WAIT_WELCOME) {
            finish(c, &st->fail_timeout, NULL);
            changed();
        }
        return;
    }
    g_now_real = 0;
    for (;;) {
        ssize_t n = recv(fd, g_rbuf, sizeof g_rbuf, 0);
        if (n > 0) {
            st->bytes += (uint64_t)n;
            enum feed_result r = proto_feed(c, g_rbuf, (size_t)n);
            if (c->flags & CF_DROP) {
                drop(c);
                break;
            }
            if (r != FEED_MORE) {
                handle(c, r, 0);
                break;
            }
            if (c->phase == CP_STREAMING && !conn_reading(g_set))
                break;
            if ((size_t)n < sizeof g_rbuf)
                break;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0 && errno == EINTR)
            continue;
        /* EOF or an error such as a reset. */
        handle(c, n == 0 ? proto_eof(c) : FEED_ENDED, 1);
        break;
    }
    if (c->phase != before)
        changed();
}

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct worker_stats *st = g_set->st;
    int err = 0;
    socklen_t len = sizeof err;

    if (what & EV_TIMEOUT) {
        finish(c, &st->fail_timeout, &st->stream_errors);
        changed();
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
        finish(c, &st->fail_connect, &st->stream_errors);
        changed();
        return;
    }
    uint64_t now = mono_ns();
    st->connected++;
    st->last_connect_ns = now;
    if (send_request(fd, c)) {
        finish(c, &st->fail_closed, &st->stream_errors);
        changed();
        return;
    }
    if (c->phase == CP_STREAMING) {
        /* The next poll of a loop: it may wait up to the server's timeout. */
        event_assign(&c->ev, g_set->base, fd, EV_READ | EV_PERSIST, on_read, c);
        event_add(&c->ev, NULL);
        return;
    }
    c->phase = CP_WAIT_WELCOME;
    /* The timeout left of --timeout is not tracked: the welcome gets a full
     * one, so a connection fails after at most twice --timeout. */
    event_assign(&c->ev, g_set->base, fd, EV_READ | EV_PERSIST, on_read, c);
    event_add(&c->ev, &g_set->timeout);
}

void conn_open(struct conn_set *cs, size_t i)
{
    struct conn *c = &cs->conns[i];
    struct worker_stats *st = cs->st;

    if (!st->first_connect_ns)
        st->first_connect_ns = mono_ns();
    if (c->phase == CP_PARKED)
        st->parked--;
    cs->pending++;
    c->phase = CP_CONNECTING;
    c->msgs = 0;
    c->up_seq = 0;      /* a new connection: the server gives it a new Conn */
    /* c->ids stay: a reconnection resumes from them (calloc made them empty). */
    c->flags &= (uint8_t)~(CF_FIRST | CF_JUMP | CF_DROP);
    /* An fd of -1 in the event until the socket exists, for finish(). */
    event_assign(&c->ev, cs->base, -1, 0, on_connect, c);
    if (connect_socket(c) != 0) {
        st->attempted++;
        st->open++;     /* finish() counts it closed */
        finish(c, &st->fail_connect, NULL);
    }
}

int conn_churn(struct conn_set *cs, size_t i, int reset)
{
    struct conn *c = &cs->conns[i];
    if (c->phase != CP_STREAMING)
        return -1;
    int fd = event_get_fd(&c->ev);
    if (reset && fd >= 0) {
        /* Linger on, timeout 0: close() sends RST instead of FIN. */
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        cs->st->churn_reset++;
    } else {
        ws_say_goodbye(c, fd);
    }
    close_socket(c);
    cs->st->up--;
    cs->st->churn_closed++;
    c->phase = CP_CLOSED;
    conn_open(cs, i);
    return 0;
}

void conn_close_all(struct conn_set *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        struct conn *c = &cs->conns[i];
        if (c->phase == CP_RETRY)
            event_del(&c->ev);      /* a timer, no socket */
        if (c->phase == CP_IDLE || c->phase == CP_CLOSED || c->phase == CP_PARKED ||
            c->phase == CP_RETRY)
            continue;
        if (c->phase == CP_STREAMING) {
            ws_say_goodbye(c, event_get_fd(&c->ev));
            cs->st->up--;
        }
        close_socket(c);
        c->phase = CP_CLOSED;
    }
}
