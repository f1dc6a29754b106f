/* poll()-based, buffered sockets for ei. Each context is one TCP socket,
 * non-blocking, with a read buffer (a few Erlang connections at most, so
 * 64 KB each is cheap). */
#include "erl/erl_socket.h"
#include "lib/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_BUF 65536
#define MAX_SOCKETS 128     /* links + listener + handshakes in progress */

struct erl_socket {
    int fd;
    uint32_t rpos, rlen;    /* unread bytes are rbuf[rpos..rlen) */
    int64_t deadline_ms;    /* end of the handshake in progress, 0 after it */
    uint64_t rx_bytes;      /* read from the peer so far (erl_link.c judges silence by it) */
    char rbuf[READ_BUF];
};

/* fd -> socket, for erl_socket_find. Sockets are made by the handshake
 * threads and closed by the C-node thread: the table is under a lock (it
 * changes once per connection; the C-node thread keeps the pointer). */
static struct erl_socket *by_fd[MAX_SOCKETS];
static pthread_mutex_t by_fd_lock = PTHREAD_MUTEX_INITIALIZER;

/* The descriptor the calling thread accepted, for cb_accept. */
static _Thread_local int handed_fd = -1;

static int remember(struct erl_socket *s)
{
    int r = -1;     /* cannot happen with ERL_LINK_MAX links; refuse rather than lose track */
    pthread_mutex_lock(&by_fd_lock);
    for (int i = 0; i < MAX_SOCKETS; i++)
        if (!by_fd[i]) {
            by_fd[i] = s;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&by_fd_lock);
    return r;
}

static void forget(struct erl_socket *s)
{
    pthread_mutex_lock(&by_fd_lock);
    for (int i = 0; i < MAX_SOCKETS; i++)
        if (by_fd[i] == s)
            by_fd[i] = NULL;
    pthread_mutex_unlock(&by_fd_lock);
}

const struct erl_socket *erl_socket_find(int fd)
{
    const struct erl_socket *s = NULL;
    pthread_mutex_lock(&by_fd_lock);
    for (int i = 0; i < MAX_SOCKETS && !s; i++)
        if (by_fd[i] && by_fd[i]->fd == fd)
            s = by_fd[i];
    pthread_mutex_unlock(&by_fd_lock);
    return s;
}

int erl_socket_buffered(const struct erl_socket *s) { return s && s->rpos < s->rlen; }

uint64_t erl_socket_rx_bytes(const struct erl_socket *s) { return s ? s->rx_bytes : 0; }

void erl_socket_hand_accepted(int fd) { handed_fd = fd; }

static struct erl_socket *wrap(int fd)
{
    struct erl_socket *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->fd = fd;
    s->rpos = s->rlen = 0;
    s->deadline_ms = 0;
    s->rx_bytes = 0;
    if (remember(s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* How long one wait may last: what ei asks, capped, and within the
 * handshake's deadline, so that a peer dribbling bytes cannot hold the
 * C-node thread past it. */
static int wait_ms(const struct erl_socket *s, unsigned tmo)
{
    int64_t ms = tmo > ERL_SOCKET_MAX_WAIT_MS ? ERL_SOCKET_MAX_WAIT_MS : (int64_t)tmo;
    if (s->deadline_ms) {
        int64_t left = s->deadline_ms - clock_now_ms();
        if (left < ms)
            ms = left < 0 ? 0 : left;
    }
    return (int)ms;
}

static void start_handshake(struct erl_socket *s)
{
    s->deadline_ms = clock_now_ms() + ERL_SOCKET_HANDSHAKE_MS;
}

/* Waits for events on s: 0, ETIMEDOUT or an errno. */
static int wait_for(const struct erl_socket *s, short events, unsigned tmo)
{
    struct pollfd p = {.fd = s->fd, .events = events};
    for (;;) {
        int r = poll(&p, 1, wait_ms(s, tmo));
        if (r > 0)
            return 0;
        if (r == 0)
            return ETIMEDOUT;
        if (errno != EINTR)
            return errno;
    }
}

static int cb_socket(void **ctx, void *setup_ctx)
{
    (void)setup_ctx;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct erl_socket *s = wrap(fd);
    if (!s) {
        close(fd);
        return ENOMEM;
    }
    *ctx = s;
    return 0;
}

static int cb_close(void *ctx)
{
    struct erl_socket *s = ctx;
    forget(s);
    int r = close(s->fd) == 0 ? 0 : errno;
    free(s);
    return r;
}

static int cb_listen(void *ctx, void *addr, int *len, int backlog)
{
    struct erl_socket *s = ctx;
    int one = 1;
    socklen_t slen = (socklen_t)*len;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->fd, addr, slen) != 0 || listen(s->fd, backlog) != 0 ||
        getsockname(s->fd, addr, &slen) != 0)
        return errno;
    *len = (int)slen;
    return 0;
}

/* The connection was accepted already (by the setup thread, which decides
 * whether a handshake may start): take the descriptor handed over. */
static int cb_accept(void **ctx, void *addr, int *len, unsigned tmo)
{
    (void)tmo;
    socklen_t slen = (socklen_t)*len;
    int fd = handed_fd;
    handed_fd = -1;
    if (fd < 0)
        return EBADF;
    if (getpeername(fd, addr, &slen) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    struct erl_socket *s = wrap(fd);
    if (!s) {
        close(fd);
        return ENOMEM;
    }
    *len = (int)slen;
    *ctx = s;
    start_handshake(s);
    return 0;
}

static int cb_connect(void *ctx, void *addr, int len, unsigned tmo)
{
    struct erl_socket *s = ctx;
    start_handshake(s);
    if (connect(s->fd, addr, (socklen_t)len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    int err = wait_for(s, POLLOUT, tmo);
    if (err)
        return err;
    socklen_t elen = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        return errno;
    return err;
}

static int cb_writev(void *ctx, const void *iov, int iovcnt, ssize_t *len, unsigned tmo)
{
    struct erl_socket *s = ctx;
    for (;;) {
        ssize_t n = writev(s->fd, iov, iovcnt);
        if (n >= 0) {
            *len = n;
            return 0;
        }
        if (errno != EAGAIN && errno != EINTR)
            return errno;
        int err = wait_for(s, POLLOUT, tmo);
        if (err)
            return err;
    }
}

static int cb_write(void *ctx, const char *buf, ssize_t *len, unsigned tmo)
{
    struct iovec iov = {(void *)buf, (size_t)*len};
    return cb_writev(ctx, &iov, 1, len, tmo);
}

static int cb_read(void *ctx, char *buf, ssize_t *len, unsigned tmo)
{
    struct erl_socket *s = ctx;
    while (s->rpos == s->rlen) {
        ssize_t n = recv(s->fd, s->rbuf, READ_BUF, 0);
        if (n >= 0) {
            if (n == 0) {          /* peer closed: ei sees a zero-length read */
                *len = 0;
                return 0;
            }
            s->rpos = 0;
            s->rlen = (uint32_t)n;
            s->rx_bytes += (uint64_t)n;
            break;
        }
        if (errno != EAGAIN && errno != EINTR)
            return errno;
        int err = wait_for(s, POLLIN, tmo);
        if (err)
            return err;
    }
    size_t take = s->rlen - s->rpos;
    if (take > (size_t)*len)
        take = (size_t)*len;
    memcpy(buf, s->rbuf + s->rpos, take);
    s->rpos += (uint32_t)take;
    *len = (ssize_t)take;
    return 0;
}

static int cb_header_size(void *ctx, int *sz)
{
    (void)ctx;
    *sz = 2;       /* TCP distribution: 2-byte handshake packet lengths */
    return 0;
}

/* An established link sends each message at once (TCP_NODELAY, as Erlang's
 * own distribution does): a presence `up` or a client message waiting for
 * the ack of the one before would lag by up to a delayed-ACK time. */
static int cb_handshake_complete(void *ctx)
{
    struct erl_socket *s = ctx;
    int one = 1;
    s->deadline_ms = 0;
    if (setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        return errno;
    return 0;
}

static int cb_get_fd(void *ctx, int *fd)
{
    *fd = ((struct erl_socket *)ctx)->fd;
    return 0;
}

ei_socket_callbacks erl_socket_callbacks = {
    .flags = EI_SCLBK_FLG_FULL_IMPL,
    .socket = cb_socket,
    .close = cb_close,
    .listen = cb_listen,
    .EI_ACCEPT_NAME = cb_accept,
    .connect = cb_connect,
    .writev = cb_writev,
    .write = cb_write,
    .read = cb_read,
    .handshake_packet_header_size = cb_header_size,
    .connect_handshake_complete = cb_handshake_complete,
    .accept_handshake_complete = cb_handshake_complete,
    .get_fd = cb_get_fd,
};
