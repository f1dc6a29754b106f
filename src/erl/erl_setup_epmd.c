/* SPDX-License-Identifier: Apache-2.0 */
/* The name's registration with epmd: made when due, kept while the epmd
 * socket stays open, made again when epmd forgets it. Setup thread only.
 * See erl_setup_int.h. */
#include "erl/erl_setup_int.h"
#include "erl/erl_epmd.h"
#include "lib/clock.h"
#include "lib/log.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PUBLISH_RETRY_MS 1000

static int publish_fd = -1;
static int64_t next_publish_ms;
static int publish_failed_logged;

static void try_publish(void)
{
    publish_fd = erl_epmd_register(erl_setup_ec.thisalivename, erl_setup_listen_port,
                                   EPMD_TIMEOUT_MS, erl_setup_stop_fd);
    if (publish_fd >= 0) {
        log_msg(LOG_INFO, "published %s to epmd (port %d)", erl_setup_ec.thisnodename,
                erl_setup_listen_port);
        publish_failed_logged = 0;
        return;
    }
    if (!publish_failed_logged)
        log_msg(LOG_ERROR, "cannot register %s with epmd (%s): is epmd running "
                           "(epmd -daemon), or does another node use this name? retrying",
                erl_setup_ec.thisnodename,
                errno == EADDRINUSE ? "name in use" : strerror(errno));
    publish_failed_logged = 1;
    next_publish_ms = clock_now_ms() + PUBLISH_RETRY_MS;
}

int erl_setup_epmd_step(int64_t now)
{
    if (publish_fd < 0 && now >= next_publish_ms)
        try_publish();
    return publish_fd;
}

/* EOF means epmd went away and forgot us; bytes are read and ignored. */
void erl_setup_epmd_readable(void)
{
    char buf[64];
    ssize_t n = recv(publish_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;
    log_msg(LOG_INFO, "epmd registration lost; registering again");
    close(publish_fd);
    publish_fd = -1;
    next_publish_ms = clock_now_ms();
}

int64_t erl_setup_epmd_wait(int64_t now, int64_t t)
{
    return publish_fd < 0 && next_publish_ms - now < t ? next_publish_ms - now : t;
}

void erl_setup_epmd_close(void)
{
    if (publish_fd >= 0)
        close(publish_fd);        /* unregisters from epmd */
    publish_fd = -1;
}

int erl_setup_epmd_fd(void) { return publish_fd; }

void erl_setup_epmd_adopt(int fd) { publish_fd = fd; }
