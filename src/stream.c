/* Lean streams: one writev per message when the socket takes it; an
 * outbuf, and EV_WRITE, only while it does not. */
#include "stream.h"
#include "log.h"
#include "pool.h"
#include "stats.h"
#include "uidtable.h"
#include "welcome.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bytes a stream could not write yet, in order. Backlogged streams are
 * listed (through their outbuf, so an idle stream pays nothing) for
 * --max-backlog-total to find the largest. */
struct outbuf {
    struct outbuf *prev, *next;   /* backlogged streams */
    struct stream *owner;
    uint32_t off;      /* first unsent byte */
    uint32_t len;      /* end of unsent bytes */
    uint32_t cap;
    char data[];
};

/* Client bytes a stream tolerates after its request (a stray CRLF, a
 * pipelined request it drops); more and the client is misbehaving. */
#define STREAM_INPUT_ALLOWANCE 4096

static const char terminator[] = "0\r\n\r\n";

static struct stream_config config;
static struct outbuf *backlogged;     /* list head */
static struct event *trim_ev;         /* ends the largest backlogs, outside any batch */

/* 152-byte records in blocks of 1024 (152 KB). */
static struct pool streams = POOL_INIT(sizeof(struct stream), 1024);

static int by_backlog_desc(const void *a, const void *b)
{
    const struct outbuf *x = *(struct outbuf *const *)a, *y = *(struct outbuf *const *)b;
    uint32_t px = x->len - x->off, py = y->len - y->off;
    return px < py ? 1 : px > py ? -1 : 0;
}

static void stream_close(struct stream *s);

/* The sum of unsent bytes passed --max-backlog-total: end the streams
 * holding the most until it is back under. Runs from the loop, never
 * inside a write batch. */
static void on_trim(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    size_t n = 0;
    for (struct outbuf *o = backlogged; o; o = o->next)
        n++;
    struct outbuf **all = malloc(n * sizeof *all);
    if (!all) {
        log_msg(LOG_ERROR, "cannot sort %zu backlogged streams: out of memory", n);
        return;
    }
    n = 0;
    for (struct outbuf *o = backlogged; o; o = o->next)
        all[n++] = o;
    qsort(all, n, sizeof *all, by_backlog_desc);
    size_t ended = 0;
    for (size_t i = 0; i < n && loop_stats.backlog_bytes > config.max_backlog_total; i++) {
        loop_stats.slow_closed++;
        stream_close(all[i]->owner);
        ended++;
    }
    free(all);
    static struct log_ratelimit rl;
    log_limited(&rl, LOG_INFO, "unsent bytes passed --max-backlog-total: ended the %zu "
                "streams holding the most", ended);
}

int stream_configure(const struct stream_config *cfg)
{
    config = *cfg;
    trim_ev = event_new(cfg->base, -1, 0, on_trim, NULL);
    if (!trim_ev) {
        log_msg(LOG_ERROR, "cannot create the backlog trim event: out of memory");
        return -1;
    }
    return 0;
}

void stream_unconfigure(void)
{
    if (trim_ev)
        event_free(trim_ev);
    trim_ev = NULL;
}

static int stream_fd(const struct stream *s) { return event_get_fd(&s->u.ev); }

struct stream *stream_new_welcoming(uint32_t uid, struct evhttp_request *req, int fd)
{
    struct stream *s = pool_alloc(&streams);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->u.w.req = req;
    s->u.w.fd = fd;
    s->uid = uid;
    s->state = STREAM_WELCOMING;
    loop_stats.streams_open++;
    loop_stats.streams_total++;
    return s;
}

static void outbuf_release(struct stream *s);

static void stream_free(struct stream *s)
{
    uidtable_remove(s);
    outbuf_release(s);
    pool_free(&streams, s);
    loop_stats.streams_open--;
}

void stream_free_welcoming(struct stream *s)
{
    close(s->u.w.fd);
    stream_free(s);
}

static void stream_close(struct stream *s)
{
    if (s->state != STREAM_DETACHED) {
        welcome_abort(s);     /* frees s through the same path */
        return;
    }
    event_del(&s->u.ev);
    close(stream_fd(s));
    stream_free(s);
}

static void outbuf_link(struct outbuf *o)
{
    o->prev = NULL;
    o->next = backlogged;
    if (backlogged)
        backlogged->prev = o;
    backlogged = o;
}

static void outbuf_unlink(struct outbuf *o)
{
    if (o->prev)
        o->prev->next = o->next;
    else
        backlogged = o->next;
    if (o->next)
        o->next->prev = o->prev;
}

/* Frees the backlog, unsent bytes and all. */
static void outbuf_release(struct stream *s)
{
    struct outbuf *o = s->out;
    if (!o)
        return;
    loop_stats.backlog_bytes -= o->len - o->off;
    outbuf_unlink(o);
    free(o);
    s->out = NULL;
}

/* Appends n bytes to the backlog; -1 when it would pass --max-backlog. */
static int outbuf_append(struct stream *s, const char *p, size_t n)
{
    struct outbuf *o = s->out;
    size_t pending = o ? o->len - o->off : 0;

    if (pending + n > config.max_backlog)
        return -1;
    if (!o || o->len + n > o->cap) {
        size_t cap = o ? o->cap : 0;
        if (o && o->off > 0) {              /* slide unsent bytes to the front */
            memmove(o->data, o->data + o->off, pending);
            o->len = (uint32_t)pending;
            o->off = 0;
        }
        if (pending + n > cap) {
            size_t want = cap ? cap * 2 : 4096;
            while (want < pending + n)
                want *= 2;
            if (want > config.max_backlog)
                want = config.max_backlog;
            if (o)
                outbuf_unlink(o);
            struct outbuf *grown = realloc(o, sizeof *o + want);
            if (!grown) {
                if (o)
                    outbuf_link(o);
                return -1;
            }
            if (!o) {
                grown->off = grown->len = 0;
                grown->owner = s;
            }
            grown->cap = (uint32_t)want;
            outbuf_link(grown);
            s->out = o = grown;
        }
    }
    memcpy(o->data + o->len, p, n);
    o->len += (uint32_t)n;
    loop_stats.backlog_bytes += n;
    if (loop_stats.backlog_bytes > config.max_backlog_total && trim_ev)
        event_active(trim_ev, EV_TIMEOUT, 0);
    return 0;
}

static void on_stream_event(evutil_socket_t fd, short what, void *arg);

/* Re-arms the stream's event: EV_READ always, EV_WRITE while backlogged. */
static void stream_watch(struct stream *s, int want_write)
{
    int fd = stream_fd(s);
    event_del(&s->u.ev);
    event_assign(&s->u.ev, config.base, fd,
                 EV_READ | EV_PERSIST | (want_write ? EV_WRITE : 0), on_stream_event, s);
    event_add(&s->u.ev, NULL);
}

/* Writes what the backlog holds. 1 drained, 0 still pending, -1 error. */
static int stream_flush(struct stream *s)
{
    struct outbuf *o = s->out;
    while (o->off < o->len) {
        ssize_t n = send(stream_fd(s), o->data + o->off, o->len - o->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return -1;
        }
        o->off += (uint32_t)n;
        loop_stats.backlog_bytes -= (uint64_t)n;
    }
    outbuf_release(s);
    return 1;
}

static void on_stream_event(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;

    if (what & EV_READ) {
        /* Clients do not talk after their GET: a read is EOF, an error, or
         * a few stray bytes we drop. Past the allowance, reading them would
         * only spend our CPU on a client that ignores the protocol. */
        char sink[512];
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            loop_stats.client_closed++;
            stream_close(s);
            return;
        }
        if (n > 0 && s->input_bytes + (size_t)n > STREAM_INPUT_ALLOWANCE) {
            loop_stats.input_closed++;
            stream_close(s);
            return;
        }
        if (n > 0)
            s->input_bytes = (uint16_t)(s->input_bytes + n);
    }
    if ((what & EV_WRITE) && s->out) {
        int r = stream_flush(s);
        if (r < 0) {
            loop_stats.client_closed++;
            stream_close(s);
        } else if (r == 1) {
            stream_watch(s, 0);
        }
    }
}

int stream_attach(struct stream *s)
{
    int fd = s->u.w.fd, ending = s->state == STREAM_ENDING;
    s->state = STREAM_DETACHED;
    event_assign(&s->u.ev, config.base, fd, EV_READ | EV_PERSIST, on_stream_event, s);
    if (event_add(&s->u.ev, NULL) != 0) {
        log_msg(LOG_ERROR, "cannot watch stream socket %d; ending the stream", fd);
        close(fd);
        stream_free(s);
        return -1;
    }
    if (s->out) {
        int r = stream_flush(s);
        if (r < 0) {
            loop_stats.client_closed++;
            stream_close(s);
            return -1;
        }
        if (r == 0)
            stream_watch(s, 1);
    }
    if (ending) {
        stream_end(s);
        return -1;
    }
    return 0;
}

size_t stream_chunk_header(char *buf, uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[8];
    size_t k = 0, len = 0;
    do {
        tmp[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    while (k)
        buf[len++] = tmp[--k];
    buf[len++] = '\r';
    buf[len++] = '\n';
    return len;
}

static int stream_backlog(struct stream *s, const struct iovec *iov, int iovcnt, size_t skip)
{
    int was_idle = s->out == NULL;
    for (int i = 0; i < iovcnt; i++) {
        size_t len = iov[i].iov_len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        if (outbuf_append(s, (const char *)iov[i].iov_base + skip, len - skip) != 0) {
            loop_stats.slow_closed++;
            stream_close(s);
            return -1;
        }
        skip = 0;
    }
    if (was_idle && s->state == STREAM_DETACHED)
        stream_watch(s, 1);
    return 0;
}

int stream_direct_fd(const struct stream *s)
{
    return s->out || s->state != STREAM_DETACHED ? -1 : stream_fd(s);
}

int stream_write_done(struct stream *s, const struct iovec *iov, int iovcnt, size_t total,
                      ssize_t n, int err)
{
    if (n == (ssize_t)total)
        return 0;
    if (n < 0) {
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            loop_stats.client_closed++;
            stream_close(s);
            return -1;
        }
        n = 0;
    }
    return stream_backlog(s, iov, iovcnt, (size_t)n);
}

int stream_write(struct stream *s, const struct iovec *iov, int iovcnt, size_t total)
{
    int fd = stream_direct_fd(s);
    if (fd < 0)
        return stream_backlog(s, iov, iovcnt, 0);
    ssize_t n = writev(fd, iov, iovcnt);
    return stream_write_done(s, iov, iovcnt, total, n, n < 0 ? errno : 0);
}

void stream_end(struct stream *s)
{
    if (s->state == STREAM_WELCOMING) {
        /* No socket of ours yet: finish once the welcome is out. */
        uidtable_remove(s);
        s->state = STREAM_ENDING;
        return;
    }
    if (s->state == STREAM_DETACHED && s->chunked) {
        /* Best effort: a stream whose client does not read loses its tail. */
        if (s->out) {
            if (outbuf_append(s, terminator, sizeof terminator - 1) == 0)
                stream_flush(s);
        } else {
            (void)!send(stream_fd(s), terminator, sizeof terminator - 1, MSG_NOSIGNAL);
        }
    }
    stream_close(s);
}
