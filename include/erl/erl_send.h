/* C-node side of the outbox: encodes and sends to Erlang the replies and
 * presence messages. C-node thread only. */
#ifndef HTTPDCNODE_ERL_SEND_H
#define HTTPDCNODE_ERL_SEND_H

#include <ei.h>

#include "lib/handoff.h"
#include "options.h"

struct erl_link;

/* opts->presence: the registered name on each master, "" for none. */
void erl_send_init(ei_cnode *ec, struct handoff *outbox, const struct options *opts);
/* Master link l is new: sends it the hello; 1 when it now waits for a
 * snapshot (the caller asks the loop for one), 0 without --presence. */
int erl_send_master_up(struct erl_link *l);
/* 1 when master link l, that presence was dropped for, has room again
 * and now waits for a snapshot (the caller asks the loop for one). */
int erl_send_repair(struct erl_link *l);
/* Sends everything queued. */
void erl_send_drain(void);
void erl_send_free(void);

#endif
