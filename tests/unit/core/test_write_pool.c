/* SPDX-License-Identifier: Apache-2.0 */
/* The writer threads (src/core/write_pool.c): every job written once, results
 * and errors reported, and a restarted pool never replays an old batch. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/write_pool.h"

#define NJOBS 40

static int pipes[NJOBS][2];
static struct write_job jobs[NJOBS];
static struct iovec iov[NJOBS][2];
static char text[NJOBS][32];

static void open_pipes(void)
{
    for (int i = 0; i < NJOBS; i++) {
        assert_int_equal(pipe(pipes[i]), 0);
        fcntl(pipes[i][0], F_SETFL, O_NONBLOCK);
    }
}

static void close_pipes(void)
{
    for (int i = 0; i < NJOBS; i++) {
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
}

/* Job i writes "job i, round r" to pipe i in two iovecs. */
static void make_jobs(int n, int round)
{
    for (int i = 0; i < n; i++) {
        int len = snprintf(text[i], sizeof text[i], "job %d, round %d", i, round);
        iov[i][0] = (struct iovec){text[i], 4};
        iov[i][1] = (struct iovec){text[i] + 4, (size_t)len - 4};
        jobs[i] = (struct write_job){.iov = iov[i], .iovcnt = 2, .fd = pipes[i][1],
                                     .total = (size_t)len, .result = -2};
    }
}

/* Pipe i holds exactly "job i, round r", once. */
static void check_pipes(int n, int round)
{
    for (int i = 0; i < n; i++) {
        char want[32], got[64];
        int len = snprintf(want, sizeof want, "job %d, round %d", i, round);
        assert_int_equal(jobs[i].result, len);
        assert_int_equal(jobs[i].error, 0);
        ssize_t r = read(pipes[i][0], got, sizeof got);
        assert_int_equal(r, len);
        assert_memory_equal(got, want, (size_t)len);
        assert_int_equal(read(pipes[i][0], got, sizeof got), -1);   /* nothing more */
        assert_int_equal(errno, EAGAIN);
    }
}

static void every_job_is_written_once(void **state)
{
    (void)state;
    open_pipes();
    assert_int_equal(write_pool_start(3), 0);
    assert_int_equal(write_pool_helpers(), 3);
    for (int round = 1; round <= 50; round++) {
        make_jobs(NJOBS, round);
        write_pool_run(jobs, NJOBS);
        check_pipes(NJOBS, round);
    }
    /* Fewer jobs than parts, and fewer than the helpers are woken for. */
    make_jobs(3, 99);
    write_pool_run(jobs, 3);
    check_pipes(3, 99);
    write_pool_run(jobs, 0);
    write_pool_stop();
    assert_int_equal(write_pool_helpers(), 0);
    close_pipes();
}

static void errors_are_reported_per_job(void **state)
{
    (void)state;
    open_pipes();
    assert_int_equal(write_pool_start(1), 0);
    make_jobs(NJOBS, 1);
    close(pipes[7][0]);               /* nobody reads pipe 7: EPIPE */
    pipes[7][0] = open("/dev/null", O_RDONLY);
    write_pool_run(jobs, NJOBS);
    assert_int_equal(jobs[7].result, -1);
    assert_int_equal(jobs[7].error, EPIPE);
    for (int i = 0; i < NJOBS; i++)
        if (i != 7)
            assert_true(jobs[i].result > 0);
    write_pool_stop();
    close_pipes();
}

static void a_restarted_pool_does_not_replay_the_old_batch(void **state)
{
    (void)state;
    open_pipes();
    assert_int_equal(write_pool_start(2), 0);
    make_jobs(NJOBS, 1);
    write_pool_run(jobs, NJOBS);
    check_pipes(NJOBS, 1);
    write_pool_stop();
    assert_int_equal(write_pool_start(2), 0);
    make_jobs(NJOBS, 2);
    write_pool_run(jobs, NJOBS);
    check_pipes(NJOBS, 2);            /* round 2 once, and no round 1 again */
    write_pool_stop();
    close_pipes();
}

static void no_helpers_means_the_caller_writes(void **state)
{
    (void)state;
    open_pipes();
    assert_int_equal(write_pool_start(0), 0);
    assert_int_equal(write_pool_helpers(), 0);
    make_jobs(NJOBS, 5);
    write_pool_run(jobs, NJOBS);
    check_pipes(NJOBS, 5);
    write_pool_stop();
    close_pipes();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);       /* as the server does */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_job_is_written_once),
        cmocka_unit_test(errors_are_reported_per_job),
        cmocka_unit_test(a_restarted_pool_does_not_replay_the_old_batch),
        cmocka_unit_test(no_helpers_means_the_caller_writes),
    };
    return cmocka_run_group_tests_name("write_pool", tests, NULL, NULL);
}
