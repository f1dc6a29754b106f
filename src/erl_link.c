/* A small table of Erlang connections: a handful of nodes at most. */
#include "erl_link.h"
#include "log.h"
#include "stats.h"

#include <stdatomic.h>
#include <string.h>
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
    l->is_master = is_master;
    l->broken = 0;
    strncpy(l->node, node, sizeof l->node - 1);
    l->node[sizeof l->node - 1] = '\0';
    atomic_fetch_add(&cnode_stats.erl_connects, 1);
    atomic_fetch_add(&cnode_stats.erl_nodes, 1);
    return nlinks++;
}

void erl_link_remove(int i)
{
    ei_close_connection(links[i].fd);   /* frees ei's socket context too */
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

void erl_link_tick_all(void)
{
    /* A distribution tick is a zero-length packet. */
    static const char tick[4] = {0, 0, 0, 0};
    for (int i = 0; i < nlinks; i++)
        (void)!send(links[i].fd, tick, sizeof tick, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void erl_link_close_all(void)
{
    while (nlinks > 0)
        erl_link_remove(nlinks - 1);
}
