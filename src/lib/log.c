/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to stderr. Lines are short and carry a timestamp; nothing on the
 * per-message or per-connection paths logs at the default level. */
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int current_level = LOG_INFO;

void log_set_level(int level) { current_level = level; }

static int log_enabled(int level) { return level <= current_level; }

static void log_vline(const char *fmt, va_list ap)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    /* One fprintf per line so lines from the two threads do not interleave. */
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s httpdcnode: %s\n", stamp, line);
}

void log_msg(int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vline(fmt, ap);
    va_end(ap);
}

void log_limited(struct log_ratelimit *rl, int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    time_t now = time(NULL);
    if (now == rl->last) {
        rl->suppressed++;
        return;
    }
    if (rl->suppressed > 0)
        log_msg(level, "(%lu similar lines suppressed)", rl->suppressed);
    rl->last = now;
    rl->suppressed = 0;
    va_list ap;
    va_start(ap, fmt);
    log_vline(fmt, ap);
    va_end(ap);
}
