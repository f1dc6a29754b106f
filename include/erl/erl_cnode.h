/* SPDX-License-Identifier: Apache-2.0 */
/* The Erlang C-node thread: takes the connections erl_setup.c makes (to
 * the master, from other nodes), decodes their messages and hands them to
 * the event loop. Once a connection is established, it is its only user. */
#ifndef HTTPDCNODE_ERL_CNODE_H
#define HTTPDCNODE_ERL_CNODE_H

#include "lib/carry.h"
#include "lib/handoff.h"
#include "erl/erl_config.h"

#include <ei.h>
#include <stdint.h>

/* cfg must outlive the C-node. */
int erl_cnode_start(const struct erl_config *cfg, struct handoff *inbox, struct handoff *outbox);
/* erl_cnode_start in two: prepare makes the node, its listening socket
 * and (taking over) its links, with no thread and no byte on a socket;
 * run starts the setup and C-node threads. */
int erl_cnode_prepare(const struct erl_config *cfg, struct handoff *inbox, struct handoff *outbox);
int erl_cnode_run(void);
/* Closes the Erlang connections and joins the thread; -1 when the thread
 * did not end in time (then nothing it uses may be freed). */
int erl_cnode_stop(void);

/* Gives back x's memory when a message made it large (ei grows it to the
 * largest message received and never shrinks it). Exposed for tests. */
void erl_cnode_trim_xbuf(ei_x_buff *x);

/* A hot upgrade (upgrade/), from the event loop. hold: the C-node thread
 * stops reading its links (what Erlang sends waits in the sockets) and
 * taking new ones, and the setup thread stops accepting, connecting and
 * registering; the outbox is still sent. wait is called while waiting
 * (the loop empties the inbox, which the thread may be waiting on).
 * carry_export: once the loop has queued all it will, the thread sends
 * the outbox and writes its records (the node's creation, its listening
 * socket and epmd registration, ERL_CNODE_CARRY_TAG; its links, erl_link.h)
 * into o. release: back to work (the hand-over failed). -1 past
 * deadline_ms (monotonic), logged.
 * carry_take, in the process taking over, before erl_cnode_prepare (which
 * then takes them, instead of listening, registering and connecting): -1
 * when the records are missing or malformed. */
#define ERL_CNODE_CARRY_TAG CARRY_TAG('E', 'R', 'L', 'N')
#define ERL_CNODE_CARRY_VERSION 1
int erl_cnode_hold(int64_t deadline_ms, void (*wait)(void));
int erl_cnode_carry_export(struct carry_out *o, int64_t deadline_ms);
void erl_cnode_release(void);
int erl_cnode_carry_take(const struct carry_in *state, const int *fds, uint32_t nfds);

#endif
