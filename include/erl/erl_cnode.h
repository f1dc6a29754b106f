/* The Erlang C-node thread: takes the connections erl_setup.c makes (to
 * the master, from other nodes), decodes their messages and hands them to
 * the event loop. Once a connection is established, it is its only user. */
#ifndef HTTPDCNODE_ERL_CNODE_H
#define HTTPDCNODE_ERL_CNODE_H

#include "lib/handoff.h"
#include "options.h"

#include <ei.h>

int erl_cnode_start(const struct options *opts, struct handoff *inbox, struct handoff *outbox);
/* Closes the Erlang connections and joins the thread; -1 when the thread
 * did not end in time (then nothing it uses may be freed). */
int erl_cnode_stop(void);

/* Gives back x's memory when a message made it large (ei grows it to the
 * largest message received and never shrinks it). Exposed for tests. */
void erl_cnode_trim_xbuf(ei_x_buff *x);

#endif
