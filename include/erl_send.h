/* C-node side of the outbox: encodes and sends to Erlang the replies and
 * presence messages. C-node thread only. */
#ifndef HTTPDCNODE_ERL_SEND_H
#define HTTPDCNODE_ERL_SEND_H

#include <ei.h>

#include "handoff.h"

/* presence_name: registered name on the master, "" for none. */
void erl_send_init(ei_cnode *ec, struct handoff *outbox, const char *master,
                   const char *presence_name);
/* Sends everything queued. */
void erl_send_drain(void);
void erl_send_free(void);

#endif
