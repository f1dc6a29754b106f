/* SPDX-License-Identifier: Apache-2.0 */
/* httpdcnode: the command line, signals and the loop; server.c starts
 * and stops the parts. */
#include "core/drain.h"
#include "erl/erl_cnode.h"
#include "http/admin.h"
#include "http/http_front.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "options.h"
#include "server.h"
#include "upgrade/upgrade.h"

#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>

/* File-scope: what a start-up that stops half-way leaves is still
 * reachable at exit, not a leak. */
static struct server server;
static int shutting_down;
static int cnode_joined;

static uint32_t drain_seconds;      /* --drain-seconds */

/* The drain is over: the C-node goes, then the loop. */
static void on_drained(void)
{
    cnode_joined = erl_cnode_stop() == 0;
    event_base_loopbreak(server.base);
}

/* The first SIGTERM or SIGINT drains (the C-node still delivers to the
 * streams not ended yet), a second ends the rest at once. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (shutting_down) {
        log_msg(LOG_INFO, "signal %d again: ending the streams left now", (int)sig);
        drain_now();
        return;
    }
    shutting_down = 1;
    upgrade_serve_draining();
    log_msg(LOG_INFO, "signal %d: draining the streams over %u s, then exiting", (int)sig,
            drain_seconds);
    http_front_stop();
    admin_stop();
    drain_start(drain_seconds, on_drained);
}

/* SIGUSR2: a new process takes over (upgrade.h); SIGCHLD: it ended. */
static void on_upgrade_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGUSR2 && !shutting_down)
        upgrade_spawn();
    else if (sig == SIGCHLD)
        upgrade_reap();
}

int main(int argc, char **argv)
{
    struct options opts;
    int r = options_parse(&opts, argc, argv);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (opts.list_counters) {
        metrics_list(stdout);
        return 0;
    }
    log_set_level(opts.verbosity);
    signal(SIGPIPE, SIG_IGN);
    /* A reload (SIGUSR2) before the loop takes it must not kill us. */
    signal(SIGUSR2, SIG_IGN);
    r = server_start(&server, &opts, SERVER_ALL, argc, argv);
    if (r != 0)
        return r;

    drain_seconds = opts.drain_seconds;
    struct event_base *base = server.base;
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, NULL);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
    struct event *sigusr2 = evsignal_new(base, SIGUSR2, on_upgrade_signal, NULL);
    struct event *sigchld = evsignal_new(base, SIGCHLD, on_upgrade_signal, NULL);
    evsignal_add(sigint, NULL);
    evsignal_add(sigterm, NULL);
    evsignal_add(sigusr2, NULL);
    evsignal_add(sigchld, NULL);

    event_base_dispatch(base);

    log_msg(LOG_INFO, "stopped");
    if (!cnode_joined)
        return 0;
    event_free(sigint);
    event_free(sigterm);
    event_free(sigusr2);
    event_free(sigchld);
    server_stop(&server);
    return 0;
}
