/* SPDX-License-Identifier: Apache-2.0 */
/* The loop side of the hand-off: applies each message to the streams. */
#ifndef HTTPDCNODE_DISPATCH_H
#define HTTPDCNODE_DISPATCH_H

#include <event2/event.h>

#include "lib/handoff.h"

int dispatch_start(struct event_base *base, struct handoff *inbox, uint32_t max_users);
void dispatch_stop(void);
/* Applies every record the inbox holds now, whatever the budgets (a hot
 * upgrade empties it before handing over: upgrade/). */
void dispatch_drain_all(void);

#endif
