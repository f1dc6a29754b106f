/* SPDX-License-Identifier: Apache-2.0 */
/* What the history's kill tests share (test_history_file.c,
 * test_history_origins.c): the clock, a child killed and reaped, and a
 * traced child single-stepped. Included after cmocka.h. */
#ifndef HTTPDCNODE_TEST_KILL_STEPS_H
#define HTTPDCNODE_TEST_KILL_STEPS_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

/* The first seed of a run of random kills: $HISTORY_SEED (an earlier
 * run's programs again, each killed after the same op), else the clock;
 * printed, so that a failure can be run again. */
static uint64_t kill_seed(void)
{
    const char *again = getenv("HISTORY_SEED");
    uint64_t seed = again ? strtoull(again, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    return seed;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* Single-steps the stopped child n instructions, or until it stops again
 * (its step done): the instructions stepped. */
static long step(pid_t pid, long n)
{
    long i = 0;
    for (; i < n; i++) {
        int st;
        assert_int_equal(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSTOPPED(st));
        if (WSTOPSIG(st) == SIGSTOP)
            break;
    }
    return i;
}

#endif
