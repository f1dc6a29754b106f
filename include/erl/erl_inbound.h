/* SPDX-License-Identifier: Apache-2.0 */
/* What the C-node thread hands the event loop: each Erlang message, decoded
 * (erl_term.c) into a command record (cmd.h) in the inbox ring. The mirror of
 * outbound.h. When the inbox is full, the C-node thread waits here (that
 * is the backpressure towards Erlang), keeping its links ticking. */
#ifndef HTTPDCNODE_ERL_INBOUND_H
#define HTTPDCNODE_ERL_INBOUND_H

#include <stdint.h>

#include "lib/handoff.h"

/* inbox_process: --inbox ("" for none), whose resets count. */
void erl_inbound_init(struct handoff *inbox, uint32_t max_users, uint32_t max_message,
                      const char *inbox_process);

/* buf[0..len) is one Erlang message (version byte first), which came on
 * the link of node from: a command for the loop, or dropped and counted
 * when it is not one. A numbered one goes in its master's order
 * (erl_seq.h): it may wait for its turn, then the loop gets it with those
 * before it. Returns the command's kind (enum cmd_kind), 0 when dropped
 * or not applied now. CMD_IN_ACK and CMD_IN_RESET are not for the loop:
 * *acked gets an ack's N, for erl_send_in_acked; a reset (of our
 * --inbox's name; another's is 0) is for erl_send_in_reset. */
int erl_inbound_message(const char *buf, int len, const char *from, uint32_t *acked);

/* At every turn of the C-node thread: holes waited too long are given
 * up, what the loop applied is acknowledged (erl_seq.h). */
void erl_inbound_seq_tick(void);

/* A master (re)connected, or asked: the loop makes a presence snapshot. */
void erl_inbound_snapshot(void);

#endif
