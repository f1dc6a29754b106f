/* SPDX-License-Identifier: Apache-2.0 */
/* The new-link queue: established connections wait here, under the
 * lock, for the C-node thread, which an eventfd wakes. See
 * erl_setup_int.h. */
#include "erl/erl_setup_int.h"
#include "lib/log.h"

#include <string.h>
#include <unistd.h>

#define NEW_LINKS_MAX 16          /* established, not yet taken by the C-node thread */

static struct erl_new_link queue[NEW_LINKS_MAX];     /* under the lock */
static int nqueued;

void erl_setup_queue_push(int fd, const char *node, int master)
{
    pthread_mutex_lock(&erl_setup_lock);
    if (nqueued == NEW_LINKS_MAX) {
        pthread_mutex_unlock(&erl_setup_lock);
        log_msg(LOG_ERROR, "dropping the new connection of %s: the C-node thread has %d "
                           "waiting already (is it stuck?)", node, NEW_LINKS_MAX);
        ei_close_connection(fd);
        return;
    }
    struct erl_new_link *l = &queue[nqueued++];
    l->fd = fd;
    l->is_master = master >= 0;
    strncpy(l->node, node, sizeof l->node - 1);
    l->node[sizeof l->node - 1] = '\0';
    if (master >= 0)
        erl_setup_master_linked(master);   /* with the push: a gone link is never missed */
    erl_setup_poke(erl_setup_queue_fd);
    pthread_mutex_unlock(&erl_setup_lock);
}

int erl_setup_ready_fd(void) { return erl_setup_queue_fd; }

int erl_setup_take(struct erl_new_link *out)
{
    int took = 0;
    pthread_mutex_lock(&erl_setup_lock);
    if (nqueued > 0) {
        *out = queue[0];
        memmove(queue, queue + 1, (size_t)--nqueued * sizeof queue[0]);
        took = 1;
    } else {
        uint64_t n;
        (void)!read(erl_setup_queue_fd, &n, sizeof n);  /* empty: clear; a push writes it again */
    }
    pthread_mutex_unlock(&erl_setup_lock);
    return took;
}

void erl_setup_queue_close(void)
{
    for (int i = 0; i < nqueued; i++)
        ei_close_connection(queue[i].fd);
    nqueued = 0;
}
