/* SPDX-License-Identifier: Apache-2.0 */
/* A listener that cannot accept (descriptors ran out) stops for a moment
 * rather than spin on the connection it cannot take. */
#ifndef HTTPDCNODE_LISTENER_PAUSE_H
#define HTTPDCNODE_LISTENER_PAUSE_H

#include <sys/time.h>

struct evconnlistener;

/* Stops accepting on l and starts again after pause. */
void listener_pause(struct evconnlistener *l, const struct timeval *pause);
/* Stops accepting on l (held 1) until held 0 (l NULL: nothing): a hot
 * upgrade holds the listeners while it hands over. */
void listener_hold(struct evconnlistener *l, int held);

#endif
