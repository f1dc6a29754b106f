/* SPDX-License-Identifier: Apache-2.0 */
/* poll()-based, buffered sockets for ei. Each context is one TCP socket,
 * non-blocking, with a read buffer (a few Erlang connections at most, so
 * 64 KB each is cheap). */
#include "erl/erl_socket.h"
#include "lib/clock.h"

#include <openssl/evp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_BUF 65536
#define MAX_SOCKETS 128     /* links + listener + handshakes in progress */

struct adoption;

struct erl_socket {
    int fd;
    uint32_t rpos, rlen;    /* unread bytes are rbuf[rpos..rlen) */
    int64_t deadline_ms;    /* end of the handshake in progress, 0 after it */
    uint64_t rx_bytes;      /* read from the peer so far (erl_link.c judges silence by it) */
    struct adoption *adopting;   /* an established connection taken over: see below */
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
    s->adopting = NULL;
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

/* ---------------------------------------------------------------- adoption
 *
 * A process taking over from another (a hot upgrade) is handed the
 * established Erlang connections as descriptors. ei keeps what it knows
 * of a connection (its socket layer, the distribution version, the
 * cookie) in a table it fills only at the end of a handshake, with no
 * call to fill it otherwise. So the adopting process runs a handshake
 * with itself: ei connects "out" through these callbacks, and the socket
 * it is given answers as the peer would, from here, without a byte on the
 * wire (the peer, which finished its handshake long ago, sees nothing).
 * The answers need only the cookie: the status "ok", a challenge with
 * ei's own flags echoed, and the acknowledgement of ei's challenge, the
 * MD5 of the cookie and its decimal (the distribution protocol's digest).
 * Then the bytes the previous process had read and not yet handed to ei
 * are put back in the read buffer, and ei reads on where it stopped. */

struct adoption {
    const char *cookie;
    const char *peer;                /* the peer's node name, for the challenge */
    const char *unread;              /* bytes read by the previous process, not yet taken */
    size_t unread_len;
    char in[512];                    /* what ei wrote, until a whole packet */
    size_t in_len;
    char out[512];                   /* the answers ei reads */
    size_t out_len, out_pos;
    int failed;
};

/* The next cb_socket on this thread wraps this descriptor (already a
 * connected or listening socket) instead of making one; adopting is
 * NULL for a listening socket. */
static _Thread_local struct {
    int fd;
    struct adoption *adopting;
} take_next = {-1, NULL};

static void put16(char *p, unsigned v)
{
    p[0] = (char)(v >> 8);
    p[1] = (char)v;
}

static void put32(char *p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p + 2, v & 0xffff);
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* A handshake packet for ei to read: 2-byte length, then body. */
static void answer(struct adoption *a, const char *body, size_t n)
{
    if (a->out_len + 2 + n > sizeof a->out) {
        a->failed = 1;
        return;
    }
    put16(a->out + a->out_len, (unsigned)n);
    memcpy(a->out + a->out_len + 2, body, n);
    a->out_len += 2 + n;
}

/* The peer's challenge in the format of ei's name packet: 'N' (flags 8
 * bytes, challenge, creation, name length 2 bytes, name) or 'n' (version
 * 2 bytes, flags 4 bytes, challenge, name). */
static void answer_name(struct adoption *a, const char *pkt, size_t n)
{
    char body[16 + MAXNODELEN + 2];
    size_t peer_len = strlen(a->peer), k = 0;
    if (peer_len > MAXNODELEN) {
        a->failed = 1;
        return;
    }
    answer(a, "sok", 3);
    if (pkt[0] == 'N' && n >= 15) {
        memcpy(body, pkt, 9);                /* 'N' and ei's own flags */
        put32(body + 9, 0);                  /* our challenge: ei's digest of it is not read */
        put32(body + 13, 1);                 /* the peer's creation: ei ignores it */
        put16(body + 17, (unsigned)peer_len);
        k = 19;
    } else if (pkt[0] == 'n' && n >= 7) {
        memcpy(body, pkt, 7);                /* 'n', version, ei's own flags */
        put32(body + 7, 0);
        k = 11;
    } else {
        a->failed = 1;
        return;
    }
    memcpy(body + k, a->peer, peer_len);
    answer(a, body, k + peer_len);
}

/* ei's reply to the challenge holds its own: acknowledged with the digest. */
static void answer_reply(struct adoption *a, const char *pkt, size_t n)
{
    if (n != 21) {
        a->failed = 1;
        return;
    }
    char text[16], ack[17];
    int len = snprintf(text, sizeof text, "%u", get32(pkt + 1));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int dlen = 0;
    if (!md || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1 ||
        EVP_DigestUpdate(md, a->cookie, strlen(a->cookie)) != 1 ||
        EVP_DigestUpdate(md, text, (size_t)len) != 1 ||
        EVP_DigestFinal_ex(md, (unsigned char *)ack + 1, &dlen) != 1 || dlen != 16)
        a->failed = 1;
    EVP_MD_CTX_free(md);
    ack[0] = 'a';
    if (!a->failed)
        answer(a, ack, sizeof ack);
}

/* What ei wrote, read as the peer would. */
static void adoption_written(struct adoption *a, const char *p, size_t n)
{
    if (a->in_len + n > sizeof a->in) {
        a->failed = 1;
        return;
    }
    memcpy(a->in + a->in_len, p, n);
    a->in_len += n;
    while (!a->failed && a->in_len >= 2) {
        size_t len = (size_t)((unsigned char)a->in[0] << 8 | (unsigned char)a->in[1]);
        if (a->in_len < 2 + len)
            return;
        const char *pkt = a->in + 2;
        if (len == 0)
            a->failed = 1;
        else if (pkt[0] == 'N' || pkt[0] == 'n')
            answer_name(a, pkt, len);
        else if (pkt[0] == 'r')
            answer_reply(a, pkt, len);
        else if (pkt[0] != 'c')              /* a complement needs no answer */
            a->failed = 1;
        memmove(a->in, a->in + 2 + len, a->in_len - 2 - len);
        a->in_len -= 2 + len;
    }
}

static int cb_socket(void **ctx, void *setup_ctx)
{
    (void)setup_ctx;
    int fd = take_next.fd;
    struct adoption *adopting = take_next.adopting;
    take_next.fd = -1;
    take_next.adopting = NULL;
    if (fd < 0)
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct erl_socket *s = wrap(fd);
    if (!s) {
        close(fd);
        return ENOMEM;
    }
    s->adopting = adopting;
    *ctx = s;
    return 0;
}

int erl_socket_adopt(ei_cnode *ec, int fd, const char *peer, const void *unread, size_t n)
{
    struct adoption a = {.cookie = ec->ei_connect_cookie, .peer = peer, .unread = unread,
                         .unread_len = n};
    if (n > READ_BUF)
        return -1;
    struct in_addr loopback = {htonl(INADDR_LOOPBACK)};
    take_next.fd = fd;
    take_next.adopting = &a;
    /* No epmd, no connect: the port is not used. */
    int r = ei_xconnect_host_port_tmo(ec, &loopback, 1, ERL_SOCKET_HANDSHAKE_MS);
    take_next.fd = -1;
    take_next.adopting = NULL;
    return r;
}

int erl_socket_adopt_listen(ei_cnode *ec, int fd, int *port)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0 || sin.sin_family != AF_INET)
        return -1;
    take_next.fd = fd;
    take_next.adopting = NULL;
    *port = 0;
    struct in_addr addr = sin.sin_addr;
    int r = ei_xlisten(ec, &addr, port, 128);
    take_next.fd = -1;
    return r;
}

size_t erl_socket_unread(const struct erl_socket *s, const char **p)
{
    *p = s->rbuf + s->rpos;
    return s->rlen - s->rpos;
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
    int one = 1, listening = 0;
    socklen_t slen = (socklen_t)*len, olen = sizeof listening;
    /* A listening socket taken over (erl_socket_adopt_listen): as it is. */
    if (getsockopt(s->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) == 0 && listening) {
        if (getsockname(s->fd, addr, &slen) != 0)
            return errno;
        *len = (int)slen;
        return 0;
    }
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
    if (s->adopting)
        return 0;                  /* connected long ago */
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
    if (s->adopting) {
        const struct iovec *v = iov;
        *len = 0;
        for (int i = 0; i < iovcnt; i++) {
            adoption_written(s->adopting, v[i].iov_base, v[i].iov_len);
            *len += (ssize_t)v[i].iov_len;
        }
        return s->adopting->failed ? EPROTO : 0;
    }
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
    if (s->adopting) {
        struct adoption *a = s->adopting;
        size_t take = a->out_len - a->out_pos;
        if (take == 0 || a->failed)
            return EPROTO;
        if (take > (size_t)*len)
            take = (size_t)*len;
        memcpy(buf, a->out + a->out_pos, take);
        a->out_pos += take;
        *len = (ssize_t)take;
        return 0;
    }
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
    if (s->adopting) {
        /* The bytes the previous process read and had not given to ei. */
        memcpy(s->rbuf, s->adopting->unread, s->adopting->unread_len);
        s->rpos = 0;
        s->rlen = (uint32_t)s->adopting->unread_len;
        s->adopting = NULL;
    }
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
