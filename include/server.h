/* SPDX-License-Identifier: Apache-2.0 */
/* The server's start-up and shut-down, in one order for all who run it
 * (main.c, tools/benchprocess): as nginx's ngx_cycle.c runs each module's
 * init in turn, server_start starts each part of its table in turn, and a
 * part that cannot start stops those started before it, backwards;
 * server_stop stops them all, backwards. Each layer gets its own config,
 * made here from the options: no layer includes options.h. */
#ifndef HTTPDCNODE_SERVER_H
#define HTTPDCNODE_SERVER_H

#include "core/history.h"
#include "erl/erl_config.h"
#include "http/http_config.h"
#include "options.h"
#include "transport/ws.h"

#include <stddef.h>

/* Which parts start: the core alone (the event loop, uid table, history,
 * writers, streams, the rings, presence, dispatch: what benchprocess
 * drives), or with its doors (the transports, HTTP, the admin listener,
 * the heartbeat, drain, token expiry, the C-node, the hot upgrade). */
enum { SERVER_CORE = 1, SERVER_DOORS = 2, SERVER_ALL = 3 };

struct server {
    struct event_base *base;
    struct handoff *inbox, *outbox;
    /* What each layer was given: they keep pointers into these (and into
     * the options), so the server outlives them. */
    struct history_config history;
    struct http_config http;
    struct admin_config admin;
    struct ws_config ws;
    struct erl_config erl;
    /* private */
    const struct options *opts;
    unsigned parts;
    int argc;
    char **argv;
    size_t started;             /* parts started, in the table's order */
    int cnode_running;          /* the C-node thread was started */
};

/* Starts the parts asked for, in order (opts and argv must outlive the
 * server: --takeover compares argv with the running process's). 0, or
 * the exit status after one error line: 2 for a configuration the server
 * cannot use (--auth-secret-file, --admin-listen), else 1; then what had
 * started is stopped, unless the C-node thread was (the exit ends it). */
int server_start(struct server *sv, const struct options *opts, unsigned parts, int argc,
                 char **argv);
/* Stops and frees every part started, the last first. Only once the
 * C-node thread has ended (erl_cnode_stop). */
void server_stop(struct server *sv);

#endif
