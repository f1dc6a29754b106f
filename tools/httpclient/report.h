/* SPDX-License-Identifier: Apache-2.0 */
/* Adding up the workers' stats and printing them: progress lines and the
 * final summary (text or one JSON line). */
#ifndef HTTPCLIENT_REPORT_H
#define HTTPCLIENT_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "stats.h"

struct run_info {
    unsigned long conns;        /* requested */
    unsigned procs;
    double elapsed_s;
    const char *stopped_by;     /* until-msgs, hold, done, signal, max-time */
    const char *proto;          /* --proto */
    uint64_t resume_ns;         /* when SIGUSR1 came (CLOCK_MONOTONIC), 0: never */
};

/* out = the sum of n workers' stats (earliest first_*, latest last_*). */
void report_sum(struct worker_stats *out, const struct worker_stats *ws, unsigned n);
/* Messages per second from the first to the last message (over elapsed_s
 * when they are not apart). */
double report_msg_rate(const struct worker_stats *s, double elapsed_s);
/* Successful connects per second from the first connect() to the last success. */
double report_connect_rate(const struct worker_stats *s);
/* Messages sent up per second, from the first send to the last (--send-rate). */
double report_up_rate(const struct worker_stats *s);
/* The last message's arrival as CLOCK_REALTIME ms, from the two clocks
 * read now; 0 when none came. */
uint64_t report_last_msg_real_ms(const struct worker_stats *s, uint64_t mono_now,
                                 uint64_t real_now);
/* One progress line; msg_rate is the rate since the previous line. It ends
 * "lat p50 P p99 Q us max M us last_msg_ms T" (latency from the stamps so
 * far; T as report_last_msg_real_ms). */
void report_progress(FILE *out, const struct worker_stats *s, const struct run_info *ri,
                     double msg_rate);
/* The histogram to path, whole (written aside, then renamed over it): a
 * line "HIGH_US COUNT" per bucket holding samples, then "max US". -1 (errno
 * set) when it cannot be written. */
int report_histogram(const char *path, const struct histogram *h);
void report_summary(FILE *out, const struct worker_stats *s, const struct run_info *ri, int json);

#endif
