/* SPDX-License-Identifier: Apache-2.0 */
/* Clock readings in nanoseconds, and this process's CPU time. */
#ifndef HTTPCLIENT_CLOCK_H
#define HTTPCLIENT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC: durations, comparable between processes of this host. */
static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME: the publisher's "t=" stamps use it. */
static inline uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of this process (user + system), in microseconds. */
static inline uint64_t cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
