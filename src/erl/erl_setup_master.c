/* SPDX-License-Identifier: Apache-2.0 */
/* The masters: each has its own state, backoff and connect thread, so
 * one that is down costs the others nothing. See erl_setup_int.h. */
#include "erl/erl_setup_int.h"
#include "erl/erl_epmd.h"
#include "erl/erl_socket.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* One master: its name (read-only once started), then its state under lock.
 * About 870 bytes each, ERL_SETUP_MASTERS_MAX of them. */
struct master {
    char node[MAXNODELEN + 1], alive[MAXNODELEN + 1], host[MAXNODELEN + 1];
    int linked, connecting, down_logged;
    char why_logged[64];        /* the reason last logged: a new one is logged too */
    int64_t next_connect_ms, backoff_ms;
};

static struct master masters[ERL_SETUP_MASTERS_MAX];
static int nmasters;

int erl_setup_master_add(const char *node)
{
    const char *at = strchr(node, '@');
    if (!at || strlen(node) > MAXNODELEN || nmasters == ERL_SETUP_MASTERS_MAX)
        return -1;                /* options.c checks the form first */
    struct master *m = &masters[nmasters++];
    memcpy(m->alive, node, (size_t)(at - node));
    m->alive[at - node] = '\0';
    strcpy(m->host, at + 1);
    strcpy(m->node, node);
    m->backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
    return 0;
}

int erl_setup_master_count(void) { return nmasters; }

int erl_setup_master_index(const char *node)
{
    for (int i = 0; i < nmasters; i++)
        if (strcmp(masters[i].node, node) == 0)
            return i;
    return -1;
}

void erl_setup_master_linked(int i) { masters[i].linked = 1; }

void erl_setup_master_gone(const char *node)
{
    int i = erl_setup_master_index(node);
    if (i < 0)
        return;
    pthread_mutex_lock(&erl_setup_lock);
    masters[i].linked = 0;
    masters[i].next_connect_ms = clock_now_ms() + ERL_SETUP_RECONNECT_MIN_MS;
    masters[i].backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
    pthread_mutex_unlock(&erl_setup_lock);
    erl_setup_poke(erl_setup_wake_fd);
}

/* The most overdue first, so a master never waits behind the others for
 * more than their attempts. */
int erl_setup_master_due(int64_t now)
{
    struct master *due = NULL;
    for (int i = 0; i < nmasters; i++) {
        struct master *m = &masters[i];
        if (!m->linked && !m->connecting && now >= m->next_connect_ms &&
            (!due || m->next_connect_ms < due->next_connect_ms))
            due = m;
    }
    if (!due)
        return -1;
    due->connecting = 1;
    return (int)(due - masters);
}

void erl_setup_master_undue(int i) { masters[i].connecting = 0; }

int64_t erl_setup_master_wait(int64_t now, int64_t t)
{
    for (int i = 0; i < nmasters; i++) {
        const struct master *m = &masters[i];
        if (!m->linked && !m->connecting && m->next_connect_ms - now < t)
            t = m->next_connect_ms - now;
    }
    return t;
}

static int resolve_master(const struct master *m, struct in_addr *addr)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(m->host, NULL, &hints, &res) != 0)
        return -1;
    *addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

const char *erl_setup_master_node(int i) { return masters[i].node; }

int erl_setup_master_dial(int i, const char **why)
{
    const struct master *m = &masters[i];
    struct in_addr addr;
    if (resolve_master(m, &addr) != 0) {
        *why = "its host name does not resolve";
        return -1;
    }
    int port = erl_epmd_port_please(addr, m->alive, EPMD_TIMEOUT_MS, erl_setup_stop_fd);
    if (port < 0) {
        *why = errno == ENOENT ? "not registered with epmd" : strerror(errno);
        return -1;
    }
    int fd = ei_xconnect_host_port_tmo(&erl_setup_ec, &addr, port, ERL_SOCKET_HANDSHAKE_MS);
    if (fd < 0)
        *why = "the handshake failed: a wrong cookie, or the master still holds a link to "
               "this node that died silently (it refuses another until it drops that one)";
    return fd;
}

void erl_setup_master_dialled(int i, int ok, const char *why)
{
    struct master *m = &masters[i];
    pthread_mutex_lock(&erl_setup_lock);
    m->connecting = 0;
    if (ok) {
        m->backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
        m->down_logged = 0;
    } else {
        if (!m->down_logged || strncmp(m->why_logged, why, sizeof m->why_logged - 1) != 0)
            log_msg(LOG_INFO, "master %s not reachable (%s); retrying every %d s at most "
                              "(HTTP clients are served meanwhile)",
                    m->node, why, ERL_SETUP_RECONNECT_MAX_MS / 1000);
        m->down_logged = 1;
        snprintf(m->why_logged, sizeof m->why_logged, "%s", why);
        m->next_connect_ms = clock_now_ms() + m->backoff_ms;
        m->backoff_ms *= 2;
        if (m->backoff_ms > ERL_SETUP_RECONNECT_MAX_MS)
            m->backoff_ms = ERL_SETUP_RECONNECT_MAX_MS;
    }
    pthread_mutex_unlock(&erl_setup_lock);
}
