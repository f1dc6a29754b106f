/* SPDX-License-Identifier: Apache-2.0 */
/* A worker process: opens its share of the connections at its share of the
 * rate, keeps them, and reports its stats to the parent over a SOCK_SEQPACKET
 * socket every second (every 100 ms with --until-msgs) until SIGTERM (the
 * parent's stop), SIGINT, the parent's end of the socket closing, or it has
 * nothing left to do. The parent never writes to the socket: a worker leaving
 * unread data behind would turn its last report into ECONNRESET. */
#ifndef HTTPCLIENT_WORKER_H
#define HTTPCLIENT_WORKER_H

#include "options.h"

/* Connections of worker id out of procs: global numbers id, id + procs, ... */
size_t worker_share(const struct client_opts *o, unsigned id, unsigned procs);
/* Runs worker id; sock is its end of the socket pair. Returns an exit code. */
int worker_run(const struct client_opts *o, unsigned id, unsigned procs, int sock);

#endif
