/* SPDX-License-Identifier: Apache-2.0 */
/* Time for timeouts and deadlines, in one place. */
#ifndef HTTPDCNODE_CLOCK_H
#define HTTPDCNODE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC: for intervals and deadlines. */
static inline int64_t clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Nanoseconds of CLOCK_MONOTONIC: a message's age inside the server (one
 * vDSO call, ~20 ns here; no syscall). */
static inline uint64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Microseconds of CLOCK_REALTIME since the epoch: an instant that a
 * later run of the process has not seen yet (unless the clock is stepped
 * back). One vDSO call. */
static inline uint64_t clock_realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One tick of CLOCK_MONOTONIC_COARSE in ms, rounded up (4 here): how far
 * behind the real time libevent's timers (which run on it) may start. A
 * timeout that must not end before its time adds it. */
static inline int32_t clock_coarse_tick_ms(void)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0)
        return 0;
    return (int32_t)(res.tv_sec * 1000 + (res.tv_nsec + 999999) / 1000000);
}

/* The CLOCK_REALTIME instant ms from now, as pthread's timed waits take it. */
static inline struct timespec clock_realtime_in_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
