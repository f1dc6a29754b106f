/* SPDX-License-Identifier: Apache-2.0 */
/* The handshake pool: ERL_SETUP_WORKERS threads for the handshakes of
 * accepted connections, one more per master for its connects, counted
 * apart so that masters being dialled never starve nodes dialling in,
 * nor the other way round, and no master waits for another's attempt.
 * See erl_setup_int.h. */
#include "erl/erl_setup_int.h"
#include "erl/erl_socket.h"
#include "lib/log.h"

#include <string.h>
#include <unistd.h>

/* Threads: the handshake workers, and one connector per master (started). */
#define NWORKERS (ERL_SETUP_WORKERS + ERL_SETUP_MASTERS_MAX)

struct job {
    enum erl_setup_job kind;
    int fd;                       /* ACCEPT: the accepted connection */
    int master;                   /* CONNECT: the master's index */
};

static pthread_t workers[NWORKERS];
static int workers_started;
static struct log_ratelimit worker_rl[NWORKERS];

/* Under the lock. */
static pthread_cond_t job_ready = PTHREAD_COND_INITIALIZER;
static struct job jobs[NWORKERS];
static int njobs;                 /* given, not yet taken by a worker */
static int busy_accepts, busy_connects;   /* given, not yet finished */

static void run_connect(int i)
{
    const char *why = "";
    int fd = erl_setup_master_dial(i, &why);
    if (fd >= 0)
        erl_setup_queue_push(fd, erl_setup_master_node(i), i);
    erl_setup_master_dialled(i, fd >= 0, why);
}

static void run_accept(int fd, struct log_ratelimit *rl)
{
    ErlConnect conn;
    erl_socket_hand_accepted(fd);
    int cfd = ei_accept_tmo(&erl_setup_ec, erl_setup_listen_fd, &conn, ERL_SOCKET_HANDSHAKE_MS);
    if (cfd < 0) {
        log_limited(rl, LOG_DEBUG, "Erlang connection attempt failed (%s): wrong cookie, "
                    "or a peer that did not finish its handshake in %d ms?",
                    strerror(erl_errno), ERL_SOCKET_HANDSHAKE_MS);
        return;
    }
    erl_setup_queue_push(cfd, conn.nodename, erl_setup_master_index(conn.nodename));
}

static void *worker_main(void *arg)
{
    struct log_ratelimit *rl = arg;
    for (;;) {
        pthread_mutex_lock(&erl_setup_lock);
        while (!erl_setup_stopping && njobs == 0)
            pthread_cond_wait(&job_ready, &erl_setup_lock);
        if (erl_setup_stopping) {
            pthread_mutex_unlock(&erl_setup_lock);
            return NULL;
        }
        struct job j = jobs[--njobs];
        pthread_mutex_unlock(&erl_setup_lock);

        if (j.kind == ERL_SETUP_JOB_ACCEPT)
            run_accept(j.fd, rl);
        else
            run_connect(j.master);

        pthread_mutex_lock(&erl_setup_lock);
        if (j.kind == ERL_SETUP_JOB_ACCEPT)
            busy_accepts--;
        else
            busy_connects--;
        pthread_mutex_unlock(&erl_setup_lock);
        erl_setup_poke(erl_setup_wake_fd);
    }
}

int erl_setup_pool_give(enum erl_setup_job kind, int fd, int master)
{
    int *busy = kind == ERL_SETUP_JOB_ACCEPT ? &busy_accepts : &busy_connects;
    if (*busy == (kind == ERL_SETUP_JOB_ACCEPT ? ERL_SETUP_WORKERS : erl_setup_master_count()))
        return 0;
    (*busy)++;
    jobs[njobs++] = (struct job){.kind = kind, .fd = fd, .master = master};
    pthread_cond_signal(&job_ready);
    return 1;
}

int erl_setup_pool_start(int threads)
{
    for (; workers_started < threads; workers_started++) {
        int err = pthread_create(&workers[workers_started], NULL, worker_main,
                                 &worker_rl[workers_started]);
        if (err != 0) {
            log_msg(LOG_ERROR, "cannot start an Erlang handshake thread: %s", strerror(err));
            return -1;
        }
    }
    return 0;
}

void erl_setup_pool_wake_all(void) { pthread_cond_broadcast(&job_ready); }

int erl_setup_pool_join(const struct timespec *deadline)
{
    int r = 0;
    for (int i = 0; i < workers_started; i++)
        if (pthread_timedjoin_np(workers[i], NULL, deadline) != 0)
            r = -1;                 /* in a handshake: bounded, but past our deadline */
    return r;
}

void erl_setup_pool_close(void)
{
    for (int i = 0; i < njobs; i++)
        if (jobs[i].kind == ERL_SETUP_JOB_ACCEPT)
            close(jobs[i].fd);
    njobs = 0;
}
