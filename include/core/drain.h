/* SPDX-License-Identifier: Apache-2.0 */
/* Draining: every stream ended, spread over some seconds, so that their
 * clients do not all come back in the same instant (docs/operations.md, "Draining").
 * SIGTERM drains, then the server exits; {drain, Seconds} from Erlang
 * drains and the node stays up, refusing new streams (503, Retry-After)
 * until {drain, cancel} or a restart. Loop thread only. */
#ifndef HTTPDCNODE_DRAIN_H
#define HTTPDCNODE_DRAIN_H

#include <event2/event.h>
#include <stdint.h>

/* Streams ended per tick (10 a second) at least, however long the drain:
 * a server holding S streams drains in min(seconds, S / 100) seconds. */
#define DRAIN_MIN_PER_TICK 10

int drain_init(struct event_base *base);
void drain_free(void);

/* Starts ending every stream over seconds (0: all now, before it
 * returns), and refuses new ones from now on. A drain under way goes on,
 * faster if it would not be over within seconds (the shortest drain asked
 * for wins; 0 ends the rest now). done (may be NULL) is called once the
 * last stream is ended; given to a drain under way, it is called when
 * that one ends. */
void drain_start(uint32_t seconds, void (*done)(void));

/* Ends what the drain has left at once (a second SIGTERM). */
void drain_now(void);

/* {drain, cancel}: the drain stops where it is and new streams are taken
 * again; 0, or -1 (nothing done) when the server is exiting (SIGTERM). */
int drain_cancel(void);

/* New streams are refused: a drain started. */
int drain_refusing(void);

#endif
