/* SPDX-License-Identifier: Apache-2.0 */
/* Fork-join writer threads: see write_pool.h. */
#include "core/write_pool.h"
#include "obs/probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

static pthread_t *threads;
static unsigned nhelpers;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;     /* a new batch, or stop */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;   /* the last helper finished */
static uint64_t generation;      /* batches handed out so far */
static unsigned pending;         /* helpers still writing the current batch */
static int stopping;
static struct write_job *batch_jobs;
static uint32_t batch_n;

static void run_slice(struct write_job *jobs, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        struct write_job *j = &jobs[i];
        j->result = writev(j->fd, j->iov, j->iovcnt);
        j->error = j->result < 0 ? errno : 0;
        if (probe_enabled)
            j->done_ns = probe_now_ns();
    }
}

/* Slice k of n jobs over the loop (k = 0) and the helpers. */
static void slice(unsigned k, uint32_t n, uint32_t *from, uint32_t *to)
{
    uint64_t parts = nhelpers + 1u;
    *from = (uint32_t)((uint64_t)n * k / parts);
    *to = (uint32_t)((uint64_t)n * (k + 1u) / parts);
}

static void *helper_main(void *arg)
{
    unsigned k = (unsigned)(uintptr_t)arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&lock);
    for (;;) {
        while (!stopping && generation == seen)
            pthread_cond_wait(&go, &lock);
        if (stopping)
            break;
        seen = generation;
        struct write_job *jobs = batch_jobs;
        uint32_t n = batch_n, from, to;
        pthread_mutex_unlock(&lock);

        slice(k, n, &from, &to);
        run_slice(jobs, from, to);

        pthread_mutex_lock(&lock);
        if (--pending == 0)
            pthread_cond_signal(&done);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int write_pool_start(unsigned helpers)
{
    if (helpers == 0)
        return 0;
    threads = calloc(helpers, sizeof *threads);
    if (!threads)
        return -1;
    /* Signals stay with the loop thread (libevent's evsignal). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < helpers; i++) {
        if (pthread_create(&threads[i], NULL, helper_main, (void *)(uintptr_t)(i + 1)) != 0)
            break;
        nhelpers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (nhelpers < helpers) {
        write_pool_stop();
        return -1;
    }
    return 0;
}

void write_pool_stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    for (unsigned i = 0; i < nhelpers; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    threads = NULL;
    nhelpers = 0;
    /* A later start begins afresh: its helpers must not see an old batch. */
    stopping = 0;
    generation = 0;
    batch_jobs = NULL;
    batch_n = 0;
}

unsigned write_pool_helpers(void) { return nhelpers; }

void write_pool_run(struct write_job *jobs, uint32_t n)
{
    uint32_t from, to;
    if (nhelpers == 0 || n < WRITE_POOL_MIN_JOBS) {
        run_slice(jobs, 0, n);     /* waking a helper would cost more */
        return;
    }
    pthread_mutex_lock(&lock);
    batch_jobs = jobs;
    batch_n = n;
    pending = nhelpers;
    generation++;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);

    slice(0, n, &from, &to);
    run_slice(jobs, from, to);

    pthread_mutex_lock(&lock);
    while (pending > 0)
        pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
}
