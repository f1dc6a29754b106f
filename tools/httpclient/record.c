/* SPDX-License-Identifier: Apache-2.0 */
/* --record: see record.h. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define RECORD_BUF (64 * 1024)
#define RECORD_LINE_MAX 64      /* "m " + 20 digits + ' ' + 8 hex + ':' + 10 + ' ' + 11 + '\n' */

static int g_fd = -1;
static char g_buf[RECORD_BUF];
static size_t g_len;
static int g_failed;            /* a write failed: said once, the rest dropped */

int record_open(const char *path)
{
    g_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return g_fd < 0 ? -1 : 0;
}

void record_flush(void)
{
    size_t off = 0;
    while (g_fd >= 0 && off < g_len && !g_failed) {
        ssize_t n = write(g_fd, g_buf + off, g_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "httpclient: --record: write failed: %s; recording stops\n",
                    n < 0 ? strerror(errno) : "nothing written");
            g_failed = 1;
            break;
        }
        off += (size_t)n;
    }
    g_len = 0;
}

static void room(void)
{
    if (g_len + RECORD_LINE_MAX > RECORD_BUF)
        record_flush();
}

void record_message(unsigned long uid, int has_id, uint32_t epoch, uint32_t seq, int has_n,
                    uint32_t n)
{
    if (g_fd < 0)
        return;
    room();
    if (!has_id)
        epoch = seq = 0;
    g_len += (size_t)snprintf(g_buf + g_len, RECORD_LINE_MAX, "m %lu %08x:%u %lld\n", uid, epoch,
                              seq, has_n ? (long long)n : -1LL);
}

void record_gap(unsigned long uid)
{
    if (g_fd < 0)
        return;
    room();
    g_len += (size_t)snprintf(g_buf + g_len, RECORD_LINE_MAX, "g %lu\n", uid);
}
