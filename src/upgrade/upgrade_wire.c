/* SPDX-License-Identifier: Apache-2.0 */
/* The control socket of a hot upgrade: see upgrade_wire.h. */
#include "upgrade/upgrade_wire.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

/* "\0httpdcnode/NODE"; a name too long for sun_path is hashed. */
static socklen_t address(const char *node, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    char *name = a->sun_path + 1;
    size_t room = sizeof a->sun_path - 1;
    int n = snprintf(name, room, "httpdcnode/%s", node);
    if (n < 0 || (size_t)n >= room) {
        uint64_t h = 1469598103934665603ull;          /* FNV-1a */
        for (const char *p = node; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        n = snprintf(name, room, "httpdcnode/#%016llx", (unsigned long long)h);
    }
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int upgrade_wire_listen(const char *node)
{
    struct sockaddr_un a;
    socklen_t len = address(node, &a);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 4) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int upgrade_wire_connect(const char *node)
{
    struct sockaddr_un a;
    socklen_t len = address(node, &a);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, len) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int upgrade_wire_peer_ok(int fd, int *pid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -1;
    *pid = (int)cred.pid;
    return cred.uid == geteuid() || cred.uid == 0 ? 0 : -1;
}

int upgrade_wire_accept(int listen_fd, int *pid)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    if (upgrade_wire_peer_ok(fd, pid) != 0) {
        log_msg(LOG_ERROR, "takeover: refused a connection from pid %d, another user's", *pid);
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits for events on fd until the deadline: 0, or -1 (ETIMEDOUT). */
static int wait_for(int fd, short events, int64_t deadline_ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    for (;;) {
        int64_t left = deadline_ms - clock_now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

int upgrade_wire_send(int fd, const void *p, size_t n, const int *fds, uint32_t nfds,
                      int64_t deadline_ms)
{
    char control[CMSG_SPACE(UPGRADE_FDS_MAX * sizeof(int))];
    struct iovec iov = {(void *)p, n};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > UPGRADE_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (nfds) {
        memset(control, 0, sizeof control);
        m.msg_control = control;
        m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    for (;;) {
        ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r == (ssize_t)n)
            return 0;
        if (r >= 0) {
            errno = EMSGSIZE;          /* a packet goes whole or not at all */
            return -1;
        }
        if (errno == EINTR)
            continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || wait_for(fd, POLLOUT, deadline_ms) != 0)
            return -1;
    }
}

ssize_t upgrade_wire_recv(int fd, void *buf, size_t size, int *fds, uint32_t fds_room,
                          uint32_t *nfds, int64_t deadline_ms)
{
    char control[CMSG_SPACE(UPGRADE_FDS_MAX * sizeof(int))];
    struct iovec iov = {buf, size};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
    *nfds = 0;
    ssize_t r;
    for (;;) {
        r = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r >= 0)
            break;
        if (errno == EINTR)
            continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || wait_for(fd, POLLIN, deadline_ms) != 0)
            return -1;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        uint32_t n = (uint32_t)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        const int *got = (const int *)CMSG_DATA(c);
        for (uint32_t i = 0; i < n; i++) {
            if (*nfds < fds_room)
                fds[(*nfds)++] = got[i];
            else
                close(got[i]);
        }
    }
    if (r == 0) {
        errno = ECONNRESET;
        return -1;
    }
    if (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
        errno = EMSGSIZE;
        return -1;
    }
    return r;
}
