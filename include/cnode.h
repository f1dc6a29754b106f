/* The Erlang C-node thread: connects out to the master (and keeps doing
 * so), publishes itself to epmd, accepts other nodes, decodes their
 * messages and hands them to the event loop. It is the only user of the
 * Erlang sockets. */
#ifndef HTTPDCNODE_CNODE_H
#define HTTPDCNODE_CNODE_H

#include "handoff.h"
#include "options.h"

int cnode_start(const struct options *opts, struct handoff *to_loop,
                struct handoff *from_loop);
/* Closes the Erlang connections and joins the thread; -1 when the thread
 * did not end in time (then nothing it uses may be freed). */
int cnode_stop(void);

#endif
