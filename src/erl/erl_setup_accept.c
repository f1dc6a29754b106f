/* SPDX-License-Identifier: Apache-2.0 */
/* Accepting nodes' connections: each goes to a free handshake thread, or
 * is closed at once and counted (erl_refused) when every one is busy.
 * Setup thread only. See erl_setup_int.h. */
#include "erl/erl_setup_int.h"
#include "erl/erl_socket.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_PAUSE_MS 1000      /* out of descriptors: listening again at once would spin */
#define ACCEPTS_PER_WAKE 16

static int64_t paused_until_ms;
static struct log_ratelimit refused_rl, accept_rl;

static void refuse(int fd)
{
    close(fd);
    atomic_fetch_add(&cnode_stats.erl_refused, 1);
    log_limited(&refused_rl, LOG_INFO, "refused an Erlang connection: %d handshakes in "
                "progress already (a peer that connects and says nothing holds one for "
                "up to %d ms)", ERL_SETUP_WORKERS, ERL_SOCKET_HANDSHAKE_MS);
}

void erl_setup_accept_some(void)
{
    for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
        int fd = accept4(erl_setup_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                paused_until_ms = clock_now_ms() + ACCEPT_PAUSE_MS;
                log_limited(&accept_rl, LOG_ERROR, "cannot accept an Erlang node: out of "
                            "file descriptors (raise ulimit -n, or hold fewer streams)");
            }
            return;                      /* EAGAIN: none left; others: that one is gone */
        }
        pthread_mutex_lock(&erl_setup_lock);
        int given = erl_setup_pool_give(ERL_SETUP_JOB_ACCEPT, fd, -1);
        pthread_mutex_unlock(&erl_setup_lock);
        if (!given)
            refuse(fd);
    }
}

int erl_setup_accept_fd(int64_t now) { return now >= paused_until_ms ? erl_setup_listen_fd : -1; }

int64_t erl_setup_accept_wait(int64_t now, int64_t t)
{
    return paused_until_ms > now && paused_until_ms - now < t ? paused_until_ms - now : t;
}
