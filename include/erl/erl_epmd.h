/* SPDX-License-Identifier: Apache-2.0 */
/* A small client of epmd (the Erlang port mapper), written here rather
 * than ei's: ei's epmd exchange either waits without limit (a hung epmd
 * holds the caller for ever) or, with a timeout, waits with select(),
 * which cannot watch a descriptor above 1023, and this server holds
 * thousands. These wait with poll(), within a deadline, and give up at
 * once when cancel_fd becomes readable. epmd's port is $ERL_EPMD_PORT,
 * else 4369, as for erl and ei. */
#ifndef HTTPDCNODE_ERL_EPMD_H
#define HTTPDCNODE_ERL_EPMD_H

#include <netinet/in.h>

/* Longest one exchange with epmd may take (it answers in microseconds). */
#define EPMD_TIMEOUT_MS 1000

/* Registers alive (a hidden node) at port with the local epmd. Returns the
 * socket, which keeps the registration while open (close it to end it), or
 * -1 with errno set (ETIMEDOUT, ECANCELED, EADDRINUSE: the name is taken). */
int erl_epmd_register(const char *alive, int port, int timeout_ms, int cancel_fd);

/* Asks the epmd at addr for the port of node alive. Returns the port, or -1
 * with errno set (ENOENT: no such node registered). */
int erl_epmd_port_please(struct in_addr addr, const char *alive, int timeout_ms, int cancel_fd);

#endif
