/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to stderr with levels, and a rate limiter for noisy events. */
#ifndef HTTPDCNODE_LOG_H
#define HTTPDCNODE_LOG_H

#include <time.h>

enum log_level { LOG_ERROR = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

void log_set_level(int level);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At most one line per interval; the next line says how many were suppressed. */
struct log_ratelimit {
    time_t last;
    unsigned long suppressed;
};

void log_limited(struct log_ratelimit *rl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
