/* SPDX-License-Identifier: Apache-2.0 */
/* The one hand-off from the C-node thread to the event loop: a bounded
 * byte ring of records under a mutex, with an eventfd to wake the loop
 * (memcached's thread.c pattern). Single producer, single consumer.
 * The producer blocks (with a timeout, so it can keep Erlang ticks going)
 * when the ring is full: that is the backpressure towards Erlang. */
#ifndef HTTPDCNODE_HANDOFF_H
#define HTTPDCNODE_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

struct handoff;

/* capacity in bytes; records may be up to capacity/2 bytes. */
struct handoff *handoff_new(size_t capacity);
void handoff_free(struct handoff *h);

/* Largest record body handoff_reserve accepts. */
size_t handoff_max_record(const struct handoff *h);

/* Producer: room for a record body of size bytes, waiting up to timeout_ms
 * while the ring is full. NULL on timeout or after handoff_close. */
void *handoff_reserve(struct handoff *h, size_t size, int timeout_ms);
/* Producer: publishes the record reserved last and wakes the loop if idle. */
void handoff_commit(struct handoff *h);

/* Producer: how many records were committed so far (the last one's number). */
uint64_t handoff_committed(const struct handoff *h);
/* Any thread: how many records the consumer has applied so far (its drain
 * returned past them): record number n is applied once this is >= n. */
uint64_t handoff_consumed(const struct handoff *h);

/* Consumer: the eventfd to watch for EV_READ. */
int handoff_wakeup_fd(const struct handoff *h);
/* Consumer: resets the eventfd; call first when it is readable. */
void handoff_clear_wakeup(struct handoff *h);
/* Consumer: calls apply(body, size, ctx) for up to max records in order
 * (fewer when apply returns nonzero: stop after this one), then finish(ctx)
 * (may be NULL) while the records are still valid; returns how many. Call it until it returns 0 (then the ring was empty and
 * the next commit writes the eventfd) or until your budget is spent (then
 * schedule yourself again: no wakeup will come for what is left). */
size_t handoff_drain(struct handoff *h, size_t max,
                     int (*apply)(void *body, size_t size, void *ctx),
                     void (*finish)(void *ctx), void *ctx);

/* Wakes a producer blocked in handoff_reserve; later reserves return NULL. */
void handoff_close(struct handoff *h);
/* Whether handoff_close was called (a NULL reserve then means: stop). */
int handoff_is_closed(struct handoff *h);

#endif
