/* A small table of Erlang connections: a handful of nodes at most. */
#include "erl/erl_link.h"
#include "erl/erl_socket.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static struct erl_link links[ERL_LINK_MAX];
static int nlinks;

int erl_link_add(int fd, const char *node, int is_master)
{
    if (nlinks == ERL_LINK_MAX) {
        log_msg(LOG_ERROR, "refusing node %s: already %d Erlang connections", node,
                ERL_LINK_MAX);
        return -1;
    }
    struct erl_link *l = &links[nlinks];
    l->fd = fd;
    l->sock = erl_socket_find(fd);
    l->is_master = is_master;
    l->broken = l->silent = 0;
    l->quiet = 0;
    l->rx_seen = erl_socket_rx_bytes(l->sock);
    l->awaiting = l->in_snapshot = l->repair = 0;
    l->in_unacked = 0;
    l->in_stuck = 0;
    l->in_full_ms = 0;
    l->park = (struct erl_park){0};
    strncpy(l->node, node, sizeof l->node - 1);
    l->node[sizeof l->node - 1] = '\0';
    atomic_fetch_add(&cnode_stats.erl_connects, 1);
    atomic_fetch_add(&cnode_stats.erl_nodes, 1);
    if (is_master)
        atomic_fetch_add(&cnode_stats.erl_masters, 1);
    return nlinks++;
}

void erl_link_remove(int i)
{
    ei_close_connection(links[i].fd);   /* frees ei's socket context too */
    erl_park_clear(&links[i].park);
    if (links[i].is_master)
        atomic_fetch_sub(&cnode_stats.erl_masters, 1);
    links[i] = links[--nlinks];
    atomic_fetch_sub(&cnode_stats.erl_nodes, 1);
}

int erl_link_count(void) { return nlinks; }

struct erl_link *erl_link_at(int i) { return &links[i]; }

struct erl_link *erl_link_find(const char *node)
{
    for (int i = 0; i < nlinks; i++)
        if (strcmp(links[i].node, node) == 0)
            return &links[i];
    return NULL;
}

/* Sends the rest of a tick, waiting for room at most ERL_LINK_TICK_REST_MS
 * in all; 0 when sent. */
static int send_rest(int fd, const char *p, size_t left)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    while (left > 0) {
        int r = poll(&pfd, 1, ERL_LINK_TICK_REST_MS);
        if (r == 0 || (r < 0 && errno != EINTR))
            return -1;
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (n > 0) {
            p += n;
            left -= (size_t)n;
        }
    }
    return 0;
}

static void tick(struct erl_link *l)
{
    /* A distribution tick is a zero-length packet. */
    static const char zero[4] = {0, 0, 0, 0};
    ssize_t n = send(l->fd, zero, sizeof zero, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)sizeof zero || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;                /* sent, or not at all: the peer hears from us later */
    if (n > 0 && send_rest(l->fd, zero + n, sizeof zero - (size_t)n) == 0)
        return;
    /* Half a packet is out, or the socket failed: nothing more may follow
     * on this stream. The reader sees the shutdown and drops the link. */
    log_msg(LOG_INFO, "tick to %s failed: dropping the connection", l->node);
    shutdown(l->fd, SHUT_RDWR);
    l->broken = 1;
}

void erl_link_tick_all(void)
{
    for (int i = 0; i < nlinks; i++)
        if (!links[i].broken)
            tick(&links[i]);
}

void erl_link_close_all(void)
{
    while (nlinks > 0)
        erl_link_remove(nlinks - 1);
}

int erl_link_judge_masters(void)
{
    int marked = 0;
    for (int i = 0; i < nlinks; i++) {
        struct erl_link *l = &links[i];
        if (!l->is_master || l->broken)
            continue;
        uint64_t rx = erl_socket_rx_bytes(l->sock);
        if (rx != l->rx_seen) {
            l->rx_seen = rx;
            l->quiet = 0;
            continue;
        }
        if (++l->quiet < ERL_LINK_QUIET_JUDGEMENTS)
            continue;
        int unread = 0;
        if (ioctl(l->fd, FIONREAD, &unread) == 0 && unread > 0) {
            l->quiet = 0;          /* it spoke; we were not reading */
            continue;
        }
        log_msg(LOG_INFO, "nothing from master %s, not even a tick, for %u judgements "
                          "(--erl-tick-seconds): the link is dead",
                l->node, l->quiet);
        atomic_fetch_add(&cnode_stats.erl_silent_masters, 1);
        l->broken = l->silent = 1;
        marked++;
    }
    return marked;
}

int erl_link_has_room(const struct erl_link *l)
{
    struct pollfd pfd = {.fd = l->fd, .events = POLLOUT};
    int unsent = 0;
    if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT) ||
        (pfd.revents & (POLLERR | POLLHUP)))
        return 0;
    return ioctl(l->fd, SIOCOUTQ, &unsent) == 0 && (unsigned)unsent < ERL_LINK_UNSENT_MAX;
}
