/* Connection lifecycle: see conn.h. */
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

/* Callbacks get the conn as their argument; the set is found here instead of
 * in every conn (one set per process, 8 bytes saved per connection). */
static struct conn_set *g_set;

/* One read buffer for every connection of the process. */
static char g_rbuf[65536];
/* CLOCK_REALTIME of the current read, taken when a stamped chunk needs it. */
static uint64_t g_now_real;

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
    cs->base = base;
    cs->o = o;
    cs->st = st;
    cs->n = n;
    cs->worker = worker;
    cs->procs = procs;
    cs->timeout.tv_sec = (time_t)o->timeout;
    cs->timeout.tv_usec = (suseconds_t)((o->timeout - (double)cs->timeout.tv_sec) * 1e6);
    g_set = cs;
    return 0;
}

static void changed(void)
{
    if (g_set->on_change)
        g_set->on_change(g_set->arg);
}

/* Ends c. Counts it in *if_pending (and failed) if it was not welcomed yet,
 * else in *if_streaming (when not NULL). */
static void finish(struct conn *c, uint64_t *if_pending, uint64_t *if_streaming)
{
    struct worker_stats *st = g_set->st;
    int fd = event_get_fd(&c->ev);
    event_del(&c->ev);
    if (fd >= 0)
        close(fd);
    if (c->phase == CP_STREAMING) {
        if (if_streaming)
            (*if_streaming)++;
    } else {
        g_set->pending--;
        st->failed++;
        (*if_pending)++;
    }
    c->phase = CP_CLOSED;
    st->open--;
}

static int on_headers(void *ctx, unsigned status, int chunked)
{
    (void)ctx;
    (void)chunked;
    return status != 200;
}

static void on_chunk(void *ctx, int has_ts, uint64_t ts)
{
    struct conn *c = ctx;
    struct worker_stats *st = g_set->st;
    st->chunks++;
    if (c->phase == CP_WAIT_WELCOME) {
        /* The welcome chunk: streaming now, no timeout any more. */
        c->phase = CP_STREAMING;
        st->welcomed++;
        g_set->pending--;
        event_del(&c->ev);
        /* --no-read: the socket stays open, unread, until the end. */
        if (!g_set->o->no_read)
            event_add(&c->ev, NULL);
        return;
    }
    uint64_t now = mono_ns();
    st->msgs++;
    if (!st->first_msg_ns) {
        st->first_msg_ns = now;
        st->first_msg_cpu_us = cpu_us();   /* once: CPU spent on messages only */
    }
    st->last_msg_ns = now;
    if (has_ts) {
        if (!g_now_real)
            g_now_real = real_ns();
        hist_record(&st->lat, g_now_real > ts ? (g_now_real - ts) / 1000 : 0);
    }
}

static const struct resp_callbacks k_callbacks = {on_headers, on_chunk};

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
            enum rp_result r = rp_feed(&c->rp, g_rbuf, (size_t)n, &k_callbacks, c);
            if (r == RP_STOPPED) {
                finish(c, &st->fail_status, NULL);
                break;
            }
            if (r == RP_DONE) {
                /* The terminating chunk (or a complete non-streaming body). */
                finish(c, &st->fail_closed, &st->closed_by_server);
                break;
            }
            if (r == RP_ERROR) {
                finish(c, &st->fail_closed, &st->stream_errors);
                break;
            }
            if (c->phase == CP_STREAMING && g_set->o->no_read)
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
        finish(c, &st->fail_closed, &st->closed_by_server);
        break;
    }
    if (c->phase != before)
        changed();
}

/* Writes the request in one send: it is at most OPT_MAX_REQUEST bytes and the
 * socket's send buffer is empty, so a short write means the socket is broken. */
static int send_request(int fd, uint64_t uid)
{
    const struct client_opts *o = g_set->o;
    char req[OPT_MAX_REQUEST + 32];
    size_t len = o->req_pre_len;
    memcpy(req, o->req_pre, len);
    if (o->path_has_uid)
        len += (size_t)snprintf(req + len, 32, "%llu", (unsigned long long)uid);
    memcpy(req + len, o->req_post, o->req_post_len);
    len += o->req_post_len;
    ssize_t n = send(fd, req, len, MSG_NOSIGNAL);
    return n == (ssize_t)len ? 0 : -1;
}

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct worker_stats *st = g_set->st;
    int err = 0;
    socklen_t len = sizeof err;

    if (what & EV_TIMEOUT) {
        finish(c, &st->fail_timeout, NULL);
        changed();
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
        finish(c, &st->fail_connect, NULL);
        changed();
        return;
    }
    uint64_t now = mono_ns();
    st->connected++;
    st->last_connect_ns = now;
    if (send_request(fd, opts_uid_of(g_set->o, global_of(c)))) {
        finish(c, &st->fail_closed, NULL);
        changed();
        return;
    }
    c->phase = CP_WAIT_WELCOME;
    rp_init(&c->rp);
    /* The timeout left of --timeout is not tracked: the welcome gets a full
     * one, so a connection fails after at most twice --timeout. */
    event_assign(&c->ev, g_set->base, fd, EV_READ | EV_PERSIST, on_read, c);
    event_add(&c->ev, &g_set->timeout);
}

void conn_open(struct conn_set *cs, size_t i)
{
    struct conn *c = &cs->conns[i];
    struct worker_stats *st = cs->st;
    const struct client_opts *o = cs->o;
    uint64_t g = global_of(c);

    st->attempted++;
    if (!st->first_connect_ns)
        st->first_connect_ns = mono_ns();
    cs->pending++;
    st->open++;
    c->phase = CP_CONNECTING;
    /* An fd of -1 in the event until the socket exists, for finish(). */
    event_assign(&c->ev, cs->base, -1, 0, on_connect, c);

    int fd = socket(o->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    if (o->nsrc) {
        struct sockaddr_in src;
        int one = 1;
        memset(&src, 0, sizeof src);
        src.sin_family = AF_INET;
        src.sin_addr = o->src[g % o->nsrc];
        /* Let connect() pick the port knowing the destination, so one source
         * address can reuse a port towards different servers. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&src, sizeof src))
            goto fail_fd;
    }
    if (connect(fd, (const struct sockaddr *)&o->dst, o->dst_len) && errno != EINPROGRESS)
        goto fail_fd;
    event_assign(&c->ev, cs->base, fd, EV_WRITE, on_connect, c);
    event_add(&c->ev, &cs->timeout);
    return;

fail_fd:
    close(fd);
fail:
    finish(c, &st->fail_connect, NULL);
}

int conn_churn(struct conn_set *cs, size_t i, int reset)
{
    struct conn *c = &cs->conns[i];
    if (c->phase != CP_STREAMING)
        return -1;
    int fd = event_get_fd(&c->ev);
    event_del(&c->ev);
    if (reset) {
        /* Linger on, timeout 0: close() sends RST instead of FIN. */
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        cs->st->churn_reset++;
    }
    close(fd);
    cs->st->churn_closed++;
    cs->st->open--;
    c->phase = CP_CLOSED;
    conn_open(cs, i);
    return 0;
}

void conn_close_all(struct conn_set *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        struct conn *c = &cs->conns[i];
        if (c->phase == CP_IDLE || c->phase == CP_CLOSED)
            continue;
        int fd = event_get_fd(&c->ev);
        event_del(&c->ev);
        if (fd >= 0)
            close(fd);
        c->phase = CP_CLOSED;
        cs->st->open--;
    }
}
