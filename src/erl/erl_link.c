/* SPDX-License-Identifier: Apache-2.0 */
/* A small table of Erlang connections: a handful of nodes at most. */
#include "erl/erl_link.h"
#include "erl/erl_socket.h"
#include "core/outbound.h"
#include "lib/carry.h"
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

/* ---------------------------------------------------------------- hand-over */

/* A parked record: its bytes, but a conn event's names as text (they
 * point into this binary, which the next process is not). */
static void put_parked(struct carry_out *o, const struct erl_parked *p)
{
    const struct out_rec *r = (const struct out_rec *)p->rec;
    carry_u8(o, r->kind);
    if (r->kind != OUT_CONN) {
        carry_u32(o, p->size);
        carry_put(o, p->rec, p->size);
        return;
    }
    const struct out_conn *c = (const struct out_conn *)(r + 1);
    carry_put(o, r, sizeof *r);
    carry_u64(o, c->conn);
    carry_u32(o, c->uid);
    carry_u16(o, c->port);
    carry_u8(o, c->family);
    carry_u8(o, c->up);
    carry_put(o, c->addr, sizeof c->addr);
    for (int k = 0; k < 2; k++) {
        const char *name = k ? c->reason : c->transport;
        size_t n = name ? strlen(name) : 0;
        carry_u8(o, (uint8_t)n);
        carry_put(o, name, n);
    }
}

int erl_link_carry_export(struct carry_out *o)
{
    int n = 0;
    for (int i = 0; i < nlinks; i++)
        n += !links[i].broken;
    size_t at = carry_begin(o, ERL_LINK_CARRY_TAG, ERL_LINK_CARRY_VERSION);
    carry_u32(o, (uint32_t)n);
    for (int i = 0; i < nlinks; i++) {
        const struct erl_link *l = &links[i];
        if (l->broken)
            continue;                /* it goes: its peer sees it closed */
        const char *unread;
        size_t left = erl_socket_unread(l->sock, &unread);
        uint32_t parked = 0;
        for (const struct erl_parked *p = erl_park_head(&l->park); p; p = p->next)
            parked++;
        carry_u32(o, carry_fd(o, l->fd));
        carry_u16(o, (uint16_t)strlen(l->node));
        carry_put(o, l->node, strlen(l->node));
        carry_u8(o, (uint8_t)l->is_master);
        carry_u8(o, (uint8_t)l->awaiting);
        carry_u8(o, (uint8_t)l->in_snapshot);
        carry_u8(o, (uint8_t)l->repair);
        carry_u32(o, l->in_unacked);
        carry_u8(o, (uint8_t)l->in_stuck);
        carry_u64(o, (uint64_t)l->in_full_ms);
        carry_u32(o, (uint32_t)left);
        carry_put(o, unread, left);
        carry_u32(o, parked);
        for (const struct erl_parked *p = erl_park_head(&l->park); p; p = p->next)
            put_parked(o, p);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

/* The names of conn events taken over, kept for the life of the process
 * (a handful: the transports and the reasons a stream ends). */
static const char *intern(const char *p, size_t n)
{
    static char names[32][32];
    static int used;
    for (int i = 0; i < used; i++)
        if (strlen(names[i]) == n && memcmp(names[i], p, n) == 0)
            return names[i];
    if (used == 32 || n >= sizeof names[0])
        return "unknown";
    memcpy(names[used], p, n);
    names[used][n] = '\0';
    return names[used++];
}

/* A parked record into l's park; -1 when malformed or out of memory. */
static int take_parked(struct carry_in *rec, struct erl_link *l)
{
    uint8_t kind = carry_get_u8(rec);
    if (kind != OUT_CONN) {
        uint32_t size = carry_get_u32(rec);
        const struct out_rec *r = carry_view(rec, size);
        if (!r || size < sizeof *r || r->kind != kind || erl_park_push(&l->park, r, size) != 0)
            return -1;
        if (kind == OUT_IN)          /* the loop weighs what waits for Erlang */
            atomic_fetch_add(&outbound_in_pending, outbound_in_cost(r->count));
        return 0;
    }
    struct {
        struct out_rec r;
        struct out_conn c;
    } e;
    memset(&e, 0, sizeof e);
    carry_get(rec, &e.r, sizeof e.r);
    e.c.conn = carry_get_u64(rec);
    e.c.uid = carry_get_u32(rec);
    e.c.port = carry_get_u16(rec);
    e.c.family = carry_get_u8(rec);
    e.c.up = carry_get_u8(rec);
    carry_get(rec, e.c.addr, sizeof e.c.addr);
    for (int k = 0; k < 2; k++) {
        uint8_t n = carry_get_u8(rec);
        const char *p = carry_view(rec, n);
        const char *name = p && n ? intern(p, n) : NULL;
        if (k)
            e.c.reason = name;
        else
            e.c.transport = name;
    }
    if (rec->failed || !e.c.transport || e.r.kind != OUT_CONN)
        return -1;
    return erl_park_push(&l->park, &e, sizeof e);
}

int erl_link_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds,
                        int (*adopt)(int fd, const char *node, const void *unread, size_t n))
{
    (void)version;                   /* 1: the only one yet */
    uint32_t n = carry_get_u32(rec);
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        uint32_t fd_at = carry_get_u32(rec);
        char node[MAXNODELEN + 1];
        uint16_t len = carry_get_u16(rec);
        if (len > MAXNODELEN)
            return -1;
        carry_get(rec, node, len);
        node[len] = '\0';
        struct erl_link saved = {0};
        saved.is_master = carry_get_u8(rec);
        saved.awaiting = carry_get_u8(rec);
        saved.in_snapshot = carry_get_u8(rec);
        saved.repair = carry_get_u8(rec);
        saved.in_unacked = carry_get_u32(rec);
        saved.in_stuck = carry_get_u8(rec);
        saved.in_full_ms = (int64_t)carry_get_u64(rec);
        uint32_t left = carry_get_u32(rec);
        const void *unread = carry_view(rec, left);
        if (rec->failed || fd_at >= nfds)
            return -1;
        int fd = adopt(fds[fd_at], node, unread, left);
        int i = fd < 0 ? -1 : erl_link_add(fd, node, saved.is_master);
        if (i < 0) {
            log_msg(LOG_ERROR, "takeover: cannot take the link to %s", node);
            return -1;
        }
        struct erl_link *l = &links[i];
        l->awaiting = saved.awaiting;
        l->in_snapshot = saved.in_snapshot;
        l->repair = saved.repair;
        l->in_unacked = saved.in_unacked;
        l->in_stuck = saved.in_stuck;
        l->in_full_ms = saved.in_full_ms;
        atomic_fetch_sub(&cnode_stats.erl_connects, 1);   /* not a new connection */
        uint32_t parked = carry_get_u32(rec);
        for (uint32_t p = 0; p < parked; p++)
            if (take_parked(rec, l) != 0)
                return -1;
    }
    return rec->failed ? -1 : 0;
}
