/* SPDX-License-Identifier: Apache-2.0 */
/* C-node side of the outbox: encodes and sends to Erlang the replies and
 * presence messages. C-node thread only. */
#ifndef HTTPDCNODE_ERL_SEND_H
#define HTTPDCNODE_ERL_SEND_H

#include <ei.h>

#include "lib/handoff.h"
#include "erl/erl_config.h"

struct erl_link;

/* cfg->presence: the registered name on each master, "" for none (cfg
 * must outlive the C-node). */
void erl_send_init(ei_cnode *ec, struct handoff *outbox, const struct erl_config *cfg);
/* Master link l is new: sends it the hello; 1 when it now waits for a
 * snapshot (the caller asks the loop for one), 0 without --presence. */
int erl_send_master_up(struct erl_link *l);
/* 1 when master link l, that presence was dropped for, has room again
 * and now waits for a snapshot (the caller asks the loop for one). */
int erl_send_repair(struct erl_link *l);
/* Sends everything queued (client messages for a full window are
 * parked, below). */
void erl_send_drain(void);

/* Client messages go to the --inbox process of one linked master, by uid
 * (uid mod the masters linked, in the order of the link table), so that a
 * connection's messages go to one master in order while the links stay.
 * Each master may hold ERL_SEND_IN_WINDOW of them unacknowledged
 * ({httpdcnode_in_ack, N} from its inbox): past that they are parked on
 * its link (erl_park.h, ERL_PARK_MAX in all, then dropped and counted in
 * in_park_dropped), still counted in outbound_in_pending, so the loop
 * stops reading its WebSocket clients; the rest of the outbox goes on. */
#define ERL_SEND_IN_WINDOW 256
/* N more acknowledged by link l's inbox: its parked records go, oldest
 * first, while its window takes them. */
void erl_send_in_acked(struct erl_link *l, uint32_t n);
/* A new inbox process on link l's node announced itself
 * ({httpdcnode_in_reset, Name}): what the window held went with the old one
 * (counted in in_reset_unacked, maybe lost), the window is empty again and
 * what was parked goes. A message that reached the new inbox before the
 * announcement is acknowledged by it after: the window then holds that
 * many more than ERL_SEND_IN_WINDOW for a while, never fewer. */
void erl_send_in_reset(struct erl_link *l);
/* A window full for this long with no acknowledgement is stuck: counted
 * in the in_windows_stuck gauge and logged once. */
#define ERL_SEND_IN_STUCK_MS 5000
/* Sets in_windows_stuck: called at every turn of the C-node thread (at
 * least once a second); reads the clock only while a window is full. */
void erl_send_check_windows(void);
/* Link l is about to be removed: marks it broken and sends its parked
 * records again, to their uids' masters now (parked there if need be;
 * counted in in_no_master when none is linked). */
void erl_send_link_gone(struct erl_link *l);
/* {Ref, N} to the Pid of reply[0..reply_len) (encoded Pid then Ref). */
void erl_send_count_reply(const char *reply, int reply_len, uint32_t n);
/* erl_seq_ack_fn (erl_seq.h): {httpdcnode_ack, ...} to ack_to on the link
 * of via, the origin's, or any master's ({httpdcnode_ack_via, ...}: that
 * master passes it on), if it has room; 0 when sent. */
int erl_send_seq_ack(const char *via, const char *ack_to, const char *origin, uint64_t inc,
                     uint64_t seq);
void erl_send_free(void);

#endif
