/* SPDX-License-Identifier: Apache-2.0 */
/* Connection setup for the C-node (see erl_setup.h): the setup thread,
 * start and stop. The setup thread polls the listen socket, the epmd
 * registration and its timers; it never waits on a peer. Handshakes and
 * master connects run on the pool's threads; what they establish goes to
 * the C-node thread's queue. The parts are in erl_setup_*.c (listed in
 * erl_setup_int.h). */
#include "erl/erl_setup_int.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static pthread_t setup_thread;
static int setup_started;

/* A hot upgrade: held, the thread accepts nothing, connects to no master
 * and does not register; held_seen is its acknowledgement. */
static atomic_int held, held_seen;
/* The process taking over: the masters it has links to already. */
static char adopted[ERL_SETUP_MASTERS_MAX][MAXNODELEN + 1];
static int nadopted;

/* Every master that is due gets a connect, while connect threads are free. */
static void maybe_connect_masters(int64_t now)
{
    pthread_mutex_lock(&erl_setup_lock);
    for (;;) {
        int i = erl_setup_master_due(now);
        if (i < 0)
            break;
        if (!erl_setup_pool_give(ERL_SETUP_JOB_CONNECT, -1, i)) {
            erl_setup_master_undue(i);
            break;
        }
    }
    pthread_mutex_unlock(&erl_setup_lock);
}

static int next_timeout_ms(int64_t now)
{
    int64_t t = erl_setup_epmd_wait(now, erl_setup_accept_wait(now, 1000));
    pthread_mutex_lock(&erl_setup_lock);
    t = erl_setup_master_wait(now, t);
    pthread_mutex_unlock(&erl_setup_lock);
    return t < 0 ? 0 : (int)t;
}

static void *setup_main(void *arg)
{
    (void)arg;
    for (;;) {
        int hold = atomic_load(&held);
        atomic_store(&held_seen, hold);
        int publish_fd = hold ? erl_setup_epmd_fd() : erl_setup_epmd_step(clock_now_ms());
        if (!hold)
            maybe_connect_masters(clock_now_ms());

        int64_t now = clock_now_ms();
        struct pollfd fds[4] = {
            {.fd = erl_setup_stop_fd, .events = POLLIN},
            {.fd = hold ? -1 : erl_setup_accept_fd(now), .events = POLLIN},  /* -1 is ignored */
            {.fd = publish_fd, .events = POLLIN},
            {.fd = erl_setup_wake_fd, .events = POLLIN},
        };
        if (poll(fds, 4, next_timeout_ms(now)) < 0 && errno != EINTR)
            log_msg(LOG_ERROR, "poll in the Erlang setup thread: %s", strerror(errno));
        if (fds[0].revents)
            break;
        if (fds[3].revents) {
            uint64_t n;
            (void)!read(erl_setup_wake_fd, &n, sizeof n);
        }
        if (fds[2].revents)
            erl_setup_epmd_readable();
        if (fds[1].revents)
            erl_setup_accept_some();
    }
    erl_setup_epmd_close();
    return NULL;
}

int erl_setup_start(const ei_cnode *ec, int lfd, int lport, const char *const *master_nodes,
                    int n_masters)
{
    erl_setup_ec = *ec;
    erl_setup_listen_fd = lfd;
    erl_setup_listen_port = lport;
    for (int i = 0; i < n_masters; i++)
        if (erl_setup_master_add(master_nodes[i]) != 0) {
            log_msg(LOG_ERROR, "bad master node name %s (or more than %d masters)",
                    master_nodes[i], ERL_SETUP_MASTERS_MAX);
            return -1;
        }
    for (int i = 0; i < nadopted; i++)
        if (erl_setup_master_index(adopted[i]) >= 0)
            erl_setup_master_linked(erl_setup_master_index(adopted[i]));
    erl_setup_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    erl_setup_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    erl_setup_queue_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (erl_setup_stop_fd < 0 || erl_setup_wake_fd < 0 || erl_setup_queue_fd < 0) {
        log_msg(LOG_ERROR, "eventfd: %s", strerror(errno));
        return -1;
    }
    if (erl_setup_pool_start(ERL_SETUP_WORKERS + erl_setup_master_count()) != 0)
        return -1;
    int err = pthread_create(&setup_thread, NULL, setup_main, NULL);
    if (err != 0) {
        log_msg(LOG_ERROR, "cannot start the Erlang setup thread: %s", strerror(err));
        return -1;
    }
    setup_started = 1;
    return 0;
}

int erl_setup_stop(const struct timespec *deadline)
{
    int r = 0;
    pthread_mutex_lock(&erl_setup_lock);
    erl_setup_stopping = 1;
    erl_setup_pool_wake_all();
    pthread_mutex_unlock(&erl_setup_lock);
    if (erl_setup_stop_fd >= 0)
        erl_setup_poke(erl_setup_stop_fd);
    if (setup_started && pthread_timedjoin_np(setup_thread, NULL, deadline) != 0)
        r = -1;
    if (erl_setup_pool_join(deadline) != 0)
        r = -1;
    if (r != 0)
        return -1;
    erl_setup_pool_close();
    erl_setup_queue_close();
    close(erl_setup_stop_fd);
    close(erl_setup_wake_fd);
    close(erl_setup_queue_fd);
    return 0;
}

int erl_setup_hold(int on, int64_t deadline_ms)
{
    atomic_store(&held, on);
    if (!setup_started)
        return 0;
    erl_setup_poke(erl_setup_wake_fd);
    while (atomic_load(&held_seen) != on) {
        if (clock_now_ms() >= deadline_ms)
            return -1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

void erl_setup_adopt_master(const char *node)
{
    if (nadopted < ERL_SETUP_MASTERS_MAX)
        snprintf(adopted[nadopted++], sizeof adopted[0], "%s", node);
}
