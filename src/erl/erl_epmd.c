/* SPDX-License-Identifier: Apache-2.0 */
/* The two epmd requests the C-node needs: ALIVE2_REQ and PORT_PLEASE2_REQ
 * (OTP's "Distribution Protocol", EPMD section). Each request is a 2-byte
 * big-endian length and the body; the answers are not length-prefixed. */
#include "erl/erl_epmd.h"
#include "lib/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ALIVE2_REQ 120
#define ALIVE2_X_RESP 118
#define ALIVE2_RESP 121
#define PORT_PLEASE2_REQ 122
#define PORT2_RESP 119
#define NODE_HIDDEN 'h'
#define DIST_HIGH 6
#define DIST_LOW 5
#define MAX_ALIVE 255

static uint16_t epmd_port(void)
{
    const char *s = getenv("ERL_EPMD_PORT");
    int p = s ? atoi(s) : 0;
    return (uint16_t)(p > 0 && p < 65536 ? p : 4369);
}

/* Waits until fd is ready for events, the deadline passes (ETIMEDOUT) or
 * cancel_fd is readable (ECANCELED). 0 when ready. */
static int wait_ready(int fd, short events, int64_t deadline, int cancel_fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = cancel_fd, .events = POLLIN}};
    for (;;) {
        int64_t left = deadline - clock_now_ms();
        if (left <= 0)
            return ETIMEDOUT;
        int r = poll(p, 2, (int)left);
        if (r < 0 && errno != EINTR)
            return errno;
        if (r > 0 && p[1].revents)
            return ECANCELED;
        if (r > 0 && p[0].revents)
            return 0;
    }
}

static int fail(int fd, int err)
{
    if (fd >= 0)
        close(fd);
    errno = err;
    return -1;
}

static int connect_epmd(struct in_addr addr, int64_t deadline, int cancel_fd)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(epmd_port()),
                             .sin_addr = addr};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
        return fd;
    if (errno != EINPROGRESS)
        return fail(fd, errno);
    int err = wait_ready(fd, POLLOUT, deadline, cancel_fd);
    socklen_t elen = sizeof err;
    if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    return err ? fail(fd, err) : fd;
}

static int send_all(int fd, const unsigned char *buf, size_t len, int64_t deadline,
                    int cancel_fd)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return errno;
        int err = wait_ready(fd, POLLOUT, deadline, cancel_fd);
        if (err)
            return err;
    }
    return 0;
}

/* Reads exactly len bytes; ECONNRESET when epmd closes first. */
static int recv_all(int fd, unsigned char *buf, size_t len, int64_t deadline, int cancel_fd)
{
    while (len > 0) {
        ssize_t n = recv(fd, buf, len, 0);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return ECONNRESET;
        if (errno != EAGAIN && errno != EINTR)
            return errno;
        int err = wait_ready(fd, POLLIN, deadline, cancel_fd);
        if (err)
            return err;
    }
    return 0;
}

static unsigned char *put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
    return p + 2;
}

static unsigned get16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

int erl_epmd_register(const char *alive, int port, int timeout_ms, int cancel_fd)
{
    size_t nlen = strlen(alive);
    if (nlen == 0 || nlen > MAX_ALIVE)
        return fail(-1, EINVAL);
    unsigned char req[2 + 13 + MAX_ALIVE], *p = req;
    p = put16(p, (unsigned)(13 + nlen));
    *p++ = ALIVE2_REQ;
    p = put16(p, (unsigned)port);
    *p++ = NODE_HIDDEN;
    *p++ = 0;                      /* protocol: TCP/IPv4 */
    p = put16(p, DIST_HIGH);
    p = put16(p, DIST_LOW);
    p = put16(p, (unsigned)nlen);
    memcpy(p, alive, nlen);
    p = put16(p + nlen, 0);        /* no extra */

    int64_t deadline = clock_now_ms() + timeout_ms;
    struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = connect_epmd(lo, deadline, cancel_fd);
    if (fd < 0)
        return -1;
    unsigned char resp[4];         /* ALIVE2_RESP: tag result creation(2); _X_: creation(4) */
    int err = send_all(fd, req, (size_t)(p - req), deadline, cancel_fd);
    if (!err)
        err = recv_all(fd, resp, sizeof resp, deadline, cancel_fd);
    if (!err && resp[0] != ALIVE2_RESP && resp[0] != ALIVE2_X_RESP)
        err = EPROTO;
    if (!err && resp[1] != 0)
        err = EADDRINUSE;
    if (err)
        return fail(fd, err);
    if (resp[0] == ALIVE2_X_RESP) {       /* two more creation bytes: consume them */
        unsigned char rest[2];
        if ((err = recv_all(fd, rest, sizeof rest, deadline, cancel_fd)) != 0)
            return fail(fd, err);
    }
    return fd;
}

int erl_epmd_port_please(struct in_addr addr, const char *alive, int timeout_ms, int cancel_fd)
{
    size_t nlen = strlen(alive);
    if (nlen == 0 || nlen > MAX_ALIVE)
        return fail(-1, EINVAL);
    unsigned char req[3 + MAX_ALIVE];
    put16(req, (unsigned)(1 + nlen));
    req[2] = PORT_PLEASE2_REQ;
    memcpy(req + 3, alive, nlen);

    int64_t deadline = clock_now_ms() + timeout_ms;
    int fd = connect_epmd(addr, deadline, cancel_fd);
    if (fd < 0)
        return -1;
    /* PORT2_RESP: tag, result, then (if 0) port(2) type proto high(2) low(2) ... */
    unsigned char resp[10];
    int err = send_all(fd, req, 3 + nlen, deadline, cancel_fd);
    if (!err)
        err = recv_all(fd, resp, 2, deadline, cancel_fd);
    if (!err && resp[0] != PORT2_RESP)
        err = EPROTO;
    if (!err && resp[1] != 0)
        err = ENOENT;
    if (!err)
        err = recv_all(fd, resp + 2, 8, deadline, cancel_fd);
    if (!err && (resp[5] != 0 || get16(resp + 6) < DIST_LOW))
        err = EPROTONOSUPPORT;     /* not TCP/IPv4, or too old a distribution */
    close(fd);
    if (err)
        return fail(-1, err);
    return (int)get16(resp + 2);
}
