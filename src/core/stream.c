/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: their life (see stream.h) and their writes. One writev per
 * message batch when the socket takes it; a backlog, and EV_WRITE, only
 * while it does not. */
#include "core/stream.h"
#include "core/linger.h"
#include "core/transport_ops.h"
#include "core/backlog.h"
#include "core/expiry.h"
#include "core/framing.h"
#include "lib/carry.h"
#include "core/presence.h"
#include "lib/log.h"
#include "lib/pool.h"
#include "core/replay.h"
#include "obs/stats.h"
#include "core/uidtable.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Client bytes a stream tolerates after its request (a stray CRLF, a
 * pipelined request it drops); more and the client is misbehaving. */
#define STREAM_INPUT_ALLOWANCE 4096

static struct stream_config config;

/* 152-byte records in blocks of 1024 (152 KB). */
static struct pool streams = POOL_INIT(sizeof(struct stream), 1024);

static struct stream *closed_streams;   /* CLOSED, waiting for the reaper */
static struct timeval idle_after[FRAMING_KINDS];   /* each framing's stream_import_idle time */
static struct event *reap_ev;           /* frees them after the current callback */

static int stream_fd(const struct stream *s) { return event_get_fd(&s->u.ev); }

static int stream_gone(const struct stream *s)
{
    return s->state == STREAM_ABANDONED || s->state == STREAM_CLOSED;
}

/* ---------------------------------------------------------------- closing */

/* The record goes on the reap list; freed once the current loop callback,
 * and any batch in it, is over. */
static void reap_later(struct stream *s)
{
    s->state = STREAM_CLOSED;
    s->next = closed_streams;
    closed_streams = s;
    if (reap_ev)
        event_active(reap_ev, EV_TIMEOUT, 0);
}

void stream_reap(void)
{
    while (closed_streams) {
        struct stream *s = closed_streams;
        closed_streams = s->next;
        pool_free(&streams, s);
    }
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    stream_reap();
}

/* Not a reason (end_reason.h): the stream's end was counted and told
 * before (it was ENDING). */
#define END_COUNTED END_REASON_KINDS

/* The stream ends for why: counted, and told to the masters (before
 * closing forgets its conn id). Once a stream: not again when it closes. */
static void ended(struct stream *s, uint8_t why)
{
    if (why == END_COUNTED)
        return;
    end_reason_count(why);
    if (config.closing)
        config.closing(s);              /* its topics' leaves still name its conn */
    presence_conn_down(s, why);
}

/* Out of the uid table, backlog and socket gone; the record stays valid
 * (CLOSED, or ABANDONED while evhttp holds it) until it is reaped. why:
 * the reason it ended (an ENDING stream's was counted then). */
static void stream_close(struct stream *s, uint8_t why)
{
    if (!stream_gone(s)) {
        loop_stats.streams_open--;      /* open no more, though not yet reaped */
        ended(s, s->state == STREAM_ENDING ? END_COUNTED : why);
    }
    switch (s->state) {
    case STREAM_WELCOMING:
    case STREAM_ENDING:
        uidtable_remove(s);
        expiry_forget(s);
        backlog_free(&s->out);
        close(s->u.w.fd);
        s->u.w.fd = -1;
        s->state = STREAM_ABANDONED;     /* chunked.c releases it */
        return;
    case STREAM_LIVE:
    case STREAM_DRAINING:
        if (transport_ops[s->framing] && transport_ops[s->framing]->closing)
            transport_ops[s->framing]->closing(s);
        uidtable_remove(s);
        expiry_forget(s);
        backlog_free(&s->out);
        event_del(&s->u.ev);
        if (why == END_CLIENT)
            close(stream_fd(s));
        else
            linger_close(stream_fd(s), framing_is_websocket(s->framing));
        reap_later(s);
        return;
    default:
        return;                          /* already closed */
    }
}

void stream_release(struct stream *s, int client_left)
{
    assert(s->state != STREAM_LIVE && s->state != STREAM_CLOSED);
    stream_close(s, client_left ? END_CLIENT : END_FINISHED);
    reap_later(s);
}

/* ---------------------------------------------------------------- backlog limits */

/* Room for n more unsent bytes under --max-backlog-total, made before they
 * are copied: the streams holding the most are ended until there is, with
 * a sixteenth of the cap to spare, so that a server at its cap does not
 * sort its backlogs on every write. -1 when s itself was ended. */
static int total_room(struct stream *s, size_t n)
{
    uint64_t cap = config.max_backlog_total;
    if (loop_stats.backlog_bytes + n <= cap)
        return 0;
    uint64_t target = cap - cap / 16;
    target = target > n ? target - n : 0;
    size_t count, ended = 0;
    /* s counts with the bytes it would add: when it would hold the most,
     * it is the one ended. */
    size_t own = backlog_pending(s->out) + n;
    void **owners = backlog_owners_largest_first(&count);
    for (size_t i = 0; i < count && loop_stats.backlog_bytes > target && !stream_gone(s); i++) {
        struct stream *o = owners[i];
        if (stream_gone(o))
            continue;
        if (own >= backlog_pending(o->out))
            o = s;
        stream_close(o, END_SLOW);
        ended++;
    }
    free(owners);
    static struct log_ratelimit rl;
    log_limited(&rl, LOG_INFO, "unsent bytes would pass --max-backlog-total: ended the %zu "
                "streams holding the most", ended);
    if (!stream_gone(s) && loop_stats.backlog_bytes + n > cap)
        stream_close(s, END_SLOW);        /* even alone it does not fit */
    return stream_gone(s) ? -1 : 0;
}

/* ---------------------------------------------------------------- socket events */

static void on_stream_event(evutil_socket_t fd, short what, void *arg);

/* Re-arms the stream's event: EV_READ unless its transport paused it,
 * EV_WRITE while backlogged. */
static void stream_watch(struct stream *s, int want_write)
{
    int fd = stream_fd(s);
    const struct transport_ops *t = transport_ops[s->framing];
    short read = t && t->paused && t->paused(s) ? 0 : EV_READ;
    event_del(&s->u.ev);
    event_assign(&s->u.ev, config.base, fd,
                 read | EV_PERSIST | (want_write ? EV_WRITE : 0), on_stream_event, s);
    event_add(&s->u.ev, t && t->idle ? &idle_after[s->framing] : NULL);
}

void stream_rewatch(struct stream *s)
{
    if (s->state == STREAM_LIVE)
        stream_watch(s, s->out != NULL);
}

/* Clients do not talk after their request: a read is EOF, an error, or a
 * few stray bytes we drop. Past the allowance, reading them would only
 * spend our CPU on a client that ignores the protocol. */
static int read_client(struct stream *s, int fd)
{
    char sink[512];
    ssize_t n = recv(fd, sink, sizeof sink, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        stream_close(s, END_CLIENT);
        return -1;
    }
    if (n > 0 && s->input_bytes + (size_t)n > STREAM_INPUT_ALLOWANCE) {
        stream_close(s, END_INPUT);
        return -1;
    }
    if (n > 0)
        s->input_bytes = (uint16_t)(s->input_bytes + n);
    return 0;
}

/* Refills the stream's backlog from its replay at most this often per
 * writable event, so that one replaying client does not hold the loop. */
#define REPLAY_ROUNDS 4

/* Sends the backlog, refilled from a replay riding on it while the socket
 * takes it. 1 when all went (the backlog is gone), 0 when more waits for
 * EV_WRITE, -1 when the stream ended. */
static int stream_flush(struct stream *s, int fd)
{
    for (int round = 0;; round++) {
        int r = backlog_send(&s->out, fd);
        if (r < 0) {
            stream_close(s, END_CLIENT);
            return -1;
        }
        if (r == 0)
            return 0;
        if (!s->out)
            return 1;
        if (round == REPLAY_ROUNDS)
            return 0;                        /* the socket is writable: EV_WRITE soon */
        if (total_room(s, REPLAY_CHUNK) != 0)
            return -1;
        int finished;
        if (replay_fill(&s->out, s, s->framing, s->uid, &finished) < 0) {
            stream_close(s, END_FINISHED);
            return -1;
        }
        if (finished)
            s->state = STREAM_DRAINING;      /* a long-poll's answer is complete */
        if (!s->out)
            return 1;
    }
}

/* After stream_flush returned r: EV_WRITE while bytes wait, and a
 * finished stream closes once they went. -1 when the stream ended. */
static int stream_flushed(struct stream *s, int r)
{
    if (r < 0)
        return -1;
    if (r == 1 && s->state == STREAM_DRAINING) {
        stream_close(s, END_FINISHED);       /* all it had to say went out */
        return -1;
    }
    stream_watch(s, r == 0);
    return 0;
}

static void on_stream_event(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;
    const struct transport_ops *t = transport_ops[s->framing];
    if ((what & EV_TIMEOUT) && t && t->idle) {
        t->idle(s);
        return;
    }
    /* A client that talks (WebSocket: pings, pongs, close) is read by its
     * transport; other clients only send stray bytes. */
    if (what & EV_READ) {
        int r = t && t->readable ? t->readable(s, fd) : read_client(s, fd);
        if (r < 0)
            return;                          /* the stream ended */
    }
    int writing = s->state == STREAM_LIVE || s->state == STREAM_DRAINING;
    if ((what & EV_WRITE) && writing && s->out) {
        int r = stream_flush(s, fd);
        if (r != 0)
            stream_flushed(s, r);
    }
}


int stream_finish(struct stream *s)
{
    if (s->state != STREAM_LIVE)
        return stream_gone(s) ? -1 : 0;
    if (s->out) {
        s->state = STREAM_DRAINING;          /* stays in the uid table till closed */
        return 0;
    }
    stream_close(s, END_FINISHED);
    return -1;
}

int stream_replay(struct stream *s, const char *asked, uint32_t budget)
{
    if (s->state != STREAM_LIVE)
        return -1;
    if (total_room(s, REPLAY_CHUNK) != 0)
        return -1;
    enum replay_result r = replay_open(&s->out, s, s->framing, s->uid, asked, budget);
    if (r == REPLAY_FAILED) {
        log_msg(LOG_ERROR, "out of memory starting a replay: the stream is closed");
        stream_close(s, END_FINISHED);
        return -1;
    }
    if (r == REPLAY_NONE)
        return 1;
    return stream_flushed(s, stream_flush(s, stream_fd(s)));
}

int stream_replay_topic(struct stream *s, uint32_t sub, const char *asked)
{
    if (s->state != STREAM_LIVE)
        return s->state == STREAM_WELCOMING ? 0 : -1;   /* chunked: nothing to replay */
    int was = stream_replaying(s);
    if (total_room(s, REPLAY_CHUNK) != 0)
        return -1;
    enum replay_result r = replay_topic(&s->out, s, s->framing, s->uid, sub, asked);
    if (r == REPLAY_FAILED) {
        log_msg(LOG_ERROR, "out of memory starting a replay: the stream is closed");
        stream_close(s, END_FINISHED);
        return -1;
    }
    if (r == REPLAY_NONE || was)
        return 0;
    return stream_flushed(s, stream_flush(s, stream_fd(s)));
}

int stream_replaying(const struct stream *s) { return s->out && backlog_replay(s->out); }

/* ---------------------------------------------------------------- writing */

/* Both caps are checked before the bytes are copied: a stream they would
 * take past --max-backlog is ended, and room under --max-backlog-total is
 * made first. */
static int stream_queue(struct stream *s, const struct iovec *iov, int iovcnt, size_t skip)
{
    int was_idle = s->out == NULL;
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    n -= skip;
    if (total_room(s, n) != 0)
        return -1;
    if (backlog_append(&s->out, s, iov, iovcnt, skip, config.max_backlog) != 0) {
        stream_close(s, END_SLOW);
        return -1;
    }
    if (was_idle && s->state == STREAM_LIVE)
        stream_watch(s, 1);
    return 0;
}

int stream_direct_fd(const struct stream *s)
{
    return s->out || s->state != STREAM_LIVE ? -1 : stream_fd(s);
}

int stream_write_done(struct stream *s, const struct iovec *iov, int iovcnt, size_t total,
                      ssize_t n, int err)
{
    if (s->state != STREAM_LIVE)
        return -1;              /* ended meanwhile, to make room for other backlogs */
    assert(!s->out);            /* as stream_direct_fd promised */
    if (n == (ssize_t)total)
        return 0;
    if (n < 0) {
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            stream_close(s, END_CLIENT);
            return -1;
        }
        n = 0;
    }
    return stream_queue(s, iov, iovcnt, (size_t)n);
}

int stream_send(struct stream *s, const struct iovec *iov, int iovcnt, size_t total)
{
    if (s->state == STREAM_ABANDONED || s->state == STREAM_CLOSED)
        return -1;
    int fd = stream_direct_fd(s);
    if (fd < 0)
        return stream_queue(s, iov, iovcnt, 0);
    ssize_t n = writev(fd, iov, iovcnt);
    return stream_write_done(s, iov, iovcnt, total, n, n < 0 ? errno : 0);
}

/* ---------------------------------------------------------------- life */

int stream_configure(const struct stream_config *cfg)
{
    config = *cfg;
    linger_configure(cfg->base);
    reap_ev = event_new(cfg->base, -1, 0, on_reap, NULL);
    if (!reap_ev) {
        log_msg(LOG_ERROR, "cannot create the stream events: out of memory");
        return -1;
    }
    return 0;
}

void stream_unconfigure(void)
{
    stream_reap();
    linger_close_all();
    if (reap_ev)
        event_free(reap_ev);
    reap_ev = NULL;
}

struct stream *stream_open(uint32_t uid, uint8_t framing, struct evhttp_request *req, int fd)
{
    return stream_open_peer(uid, framing, req, fd, NULL);
}

struct stream *stream_open_peer(uint32_t uid, uint8_t framing, struct evhttp_request *req, int fd,
                                const struct peer_addr *peer)
{
    struct stream *s = pool_alloc(&streams);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->u.w.req = req;
    s->u.w.fd = fd;
    s->uid = uid;
    s->framing = framing;
    s->state = STREAM_WELCOMING;
    loop_stats.streams_open++;
    loop_stats.streams_total++;
    uidtable_add(s);
    presence_conn_up(s, fd, peer);
    expiry_track(s);                     /* when its request carried a token */
    if (uidtable_count(uid) > config.max_conns_per_uid)
        stream_end_why(uidtable_oldest(uid), END_REPLACED);
    return s;
}

/* Last bytes t, or while welcoming the terminator for why once imported;
 * why is counted and told (END_COUNTED: it was). */
static void end_with(struct stream *s, struct iovec t, uint8_t why)
{
    if (s->state == STREAM_WELCOMING) {
        /* No socket of ours yet: finish once the welcome is out. */
        ended(s, why);
        uidtable_remove(s);
        s->u.w.why = why;
        s->state = STREAM_ENDING;
        return;
    }
    if (s->state == STREAM_DRAINING) {
        stream_close(s, why);                /* its answer is cut: the client asks again */
        return;
    }
    if (s->state != STREAM_LIVE)
        return;
    if (transport_ops[s->framing] && transport_ops[s->framing]->cut_replay_on_end && stream_replaying(s))
        t.iov_len = 0;                       /* an answer under way: cut, not spoilt */
    if (t.iov_len) {
        /* Best effort: a stream whose client does not read loses its tail. */
        if (!s->out)
            (void)!send(stream_fd(s), t.iov_base, t.iov_len, MSG_NOSIGNAL);
        else if (backlog_append(&s->out, s, &t, 1, 0, (size_t)config.max_backlog + t.iov_len) == 0)
            backlog_send(&s->out, stream_fd(s));
    }
    stream_close(s, why);
}

int stream_import(struct stream *s) { return stream_import_idle(s, NULL); }

int stream_import_with(struct stream *s, const struct iovec *iov, int iovcnt)
{
    assert(s->state == STREAM_WELCOMING || s->state == STREAM_ENDING);
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    if (n && (total_room(s, n) != 0 ||
              backlog_prepend(&s->out, s, iov, iovcnt, SIZE_MAX) != 0)) {
        if (!stream_gone(s)) {
            log_msg(LOG_ERROR, "out of memory taking a stream's head from evhttp: it is closed");
            stream_close(s, END_FINISHED);
        }
        return -1;
    }
    return stream_import(s);
}

int stream_import_idle(struct stream *s, const struct timeval *idle)
{
    assert(s->state == STREAM_WELCOMING || s->state == STREAM_ENDING);
    int fd = s->u.w.fd, ending = s->state == STREAM_ENDING;
    uint8_t why = s->u.w.why;          /* the union is the event from here */
    /* Each message is one small write that must leave at once: without
     * NODELAY, Nagle holds the second of two quick messages until the
     * client's (delayed) ACK, tens of milliseconds later. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->state = STREAM_LIVE;
    if (idle)
        idle_after[s->framing] = *idle;
    event_assign(&s->u.ev, config.base, fd, EV_READ | EV_PERSIST, on_stream_event, s);
    if (event_add(&s->u.ev, idle) != 0) {
        log_msg(LOG_ERROR, "cannot watch stream socket %d; ending the stream", fd);
        stream_close(s, ending ? END_COUNTED : END_FINISHED);
        return -1;
    }
    if (s->out && stream_flushed(s, stream_flush(s, fd)) != 0)
        return -1;
    if (ending) {
        end_with(s, transport_goodbye(s->framing, why), END_COUNTED);
        return -1;
    }
    return 0;
}

void stream_end(struct stream *s) { stream_end_why(s, END_DRAIN); }

void stream_end_why(struct stream *s, uint8_t why)
{
    end_with(s, transport_goodbye(s->framing, why), why);
}

void stream_end_with(struct stream *s, struct iovec last, uint8_t why) { end_with(s, last, why); }

/* ---------------------------------------------------------------- hand-over */

/* The streams of a hand-over, in its order: export, as found; import, as
 * made. Their idle time left (import: UINT32_MAX for none) and, to find
 * an export's index from a stream, the same sorted by address. */
static struct stream **carried;
static uint32_t ncarried;
static uint32_t *idle_left;
static struct by_addr {
    const struct stream *s;
    uint32_t i;
} *by_addr;

static int cmp_addr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct by_addr *)a)->s;
    uintptr_t y = (uintptr_t)((const struct by_addr *)b)->s;
    return (x > y) - (x < y);
}

void stream_carry_forget(void)
{
    free(carried);
    free(idle_left);
    free(by_addr);
    carried = NULL;
    idle_left = NULL;
    by_addr = NULL;
    ncarried = 0;
}

static int carry_push(struct stream *s, uint32_t *cap)
{
    if (ncarried == *cap) {
        uint32_t n = *cap ? *cap * 2 : 1024;
        struct stream **c = realloc(carried, n * sizeof *c);
        if (!c)
            return -1;
        carried = c;
        *cap = n;
    }
    carried[ncarried++] = s;
    return 0;
}

/* ms until s's idle timeout, UINT32_MAX when it has none. */
static uint32_t idle_ms_left(const struct stream *s)
{
    struct timeval at, now;
    if (!event_pending(&s->u.ev, EV_TIMEOUT, &at))
        return UINT32_MAX;
    evutil_gettimeofday(&now, NULL);
    int64_t ms = ((int64_t)at.tv_sec - now.tv_sec) * 1000 + (at.tv_usec - now.tv_usec) / 1000;
    return ms < 0 ? 0 : ms > 86400000 ? 86400000 : (uint32_t)ms;
}

static void put_stream(struct carry_out *o, const struct stream *s)
{
    const struct transport_ops *t = transport_ops[s->framing];
    carry_u32(o, carry_fd(o, stream_fd(s)));
    carry_u32(o, s->uid);
    carry_u8(o, s->framing);
    carry_u8(o, s->state);
    /* A talking transport's bits are its own, carried in its record. */
    carry_u16(o, t && t->readable ? 0 : s->input_bytes);
    carry_u32(o, t && t->idle ? idle_ms_left(s) : UINT32_MAX);
}

int stream_carry_export(struct carry_out *o)
{
    uint32_t cap = 0, left_behind = 0;
    stream_carry_forget();
    /* Each uid's streams oldest first, so that they are added back in the
     * order --max-conns-per-uid evicts them. */
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid)) {
        uint32_t first = ncarried;
        for (struct stream *s = uidtable_first(uid); s; s = s->next) {
            if (s->state != STREAM_LIVE && s->state != STREAM_DRAINING) {
                left_behind++;           /* still in evhttp's hands */
                continue;
            }
            if (carry_push(s, &cap) != 0)
                return -1;
        }
        for (uint32_t a = first, b = ncarried; b > a + 1; a++, b--) {
            struct stream *x = carried[a];
            carried[a] = carried[b - 1];
            carried[b - 1] = x;
        }
    }
    if (left_behind)
        log_msg(LOG_ERROR, "takeover: %u streams still being opened are not handed over",
                left_behind);
    by_addr = malloc((ncarried ? ncarried : 1) * sizeof *by_addr);
    if (!by_addr)
        return -1;
    for (uint32_t i = 0; i < ncarried; i++)
        by_addr[i] = (struct by_addr){carried[i], i};
    qsort(by_addr, ncarried, sizeof *by_addr, cmp_addr);

    size_t at = carry_begin(o, STREAM_CARRY_TAG, STREAM_CARRY_VERSION);
    carry_u32(o, FRAMING_KINDS);
    for (int k = 0; k < FRAMING_KINDS; k++)
        carry_u32(o, (uint32_t)(idle_after[k].tv_sec * 1000 + idle_after[k].tv_usec / 1000));
    carry_u32(o, ncarried);
    for (uint32_t i = 0; i < ncarried; i++)
        put_stream(o, carried[i]);
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

uint32_t stream_carry_count(void) { return ncarried; }

struct stream *stream_carried(uint32_t i) { return i < ncarried ? carried[i] : NULL; }

uint32_t stream_carry_index(const void *s)
{
    struct by_addr key = {s, 0}, *at = by_addr ? bsearch(&key, by_addr, ncarried,
                                                          sizeof *by_addr, cmp_addr) : NULL;
    return at ? at->i : UINT32_MAX;
}

/* One stream of the record, made: -1 when it is malformed. */
static int take_stream(struct carry_in *rec, const int *fds, uint32_t nfds, uint32_t i)
{
    uint32_t fd_at = carry_get_u32(rec), uid = carry_get_u32(rec);
    uint8_t framing = carry_get_u8(rec), state = carry_get_u8(rec);
    uint16_t bits = carry_get_u16(rec);
    idle_left[i] = carry_get_u32(rec);
    if (rec->failed || fd_at >= nfds || uid == 0 || uid > uidtable_max() ||
        framing >= FRAMING_KINDS || (state != STREAM_LIVE && state != STREAM_DRAINING))
        return -1;
    struct stream *s = pool_alloc(&streams);
    if (!s)
        return -1;
    memset(s, 0, sizeof *s);
    s->uid = uid;
    s->framing = framing;
    s->state = state;
    s->input_bytes = bits;
    /* Watched once all is taken (stream_carry_arm): nothing is read or
     * written before the previous process has let go. */
    event_assign(&s->u.ev, config.base, fds[fd_at], 0, on_stream_event, s);
    carried[i] = s;
    uidtable_add(s);
    loop_stats.streams_open++;
    return 0;
}

int stream_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds)
{
    (void)version;                   /* 1: the only one yet */
    stream_carry_forget();
    uint32_t kinds = carry_get_u32(rec);
    if (kinds > FRAMING_KINDS) {
        log_msg(LOG_ERROR, "takeover: the running process has %u kinds of stream, this one "
                "knows %d", kinds, FRAMING_KINDS);
        return -1;
    }
    for (uint32_t k = 0; k < kinds; k++) {
        uint32_t ms = carry_get_u32(rec);
        idle_after[k] = (struct timeval){ms / 1000, (suseconds_t)(ms % 1000) * 1000};
    }
    uint32_t n = carry_get_u32(rec);
    if (rec->failed || n > carry_left(rec) / 16)
        return -1;
    carried = calloc(n ? n : 1, sizeof *carried);
    idle_left = calloc(n ? n : 1, sizeof *idle_left);
    if (!carried || !idle_left)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (take_stream(rec, fds, nfds, i) != 0)
            return -1;
        ncarried = i + 1;
    }
    return 0;
}

void stream_carry_arm(void)
{
    for (uint32_t i = 0; i < ncarried; i++) {
        struct stream *s = carried[i];
        const struct transport_ops *t = transport_ops[s->framing];
        stream_watch(s, s->out != NULL);
        if (t && t->idle && idle_left[i] != UINT32_MAX) {
            struct timeval tv = {idle_left[i] / 1000, (suseconds_t)(idle_left[i] % 1000) * 1000};
            event_add(&s->u.ev, &tv);        /* what was left of it, then as usual */
        }
    }
    stream_carry_forget();
}
