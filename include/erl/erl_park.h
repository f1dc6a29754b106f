/* SPDX-License-Identifier: Apache-2.0 */
/* Records of the outbox parked on one master link while its --inbox's
 * window is full (erl_send.c): copies, in a FIFO per link, so that the
 * rest of the outbox (presence, replies, the other masters' client
 * messages) goes on. C-node thread only. */
#ifndef HTTPDCNODE_ERL_PARK_H
#define HTTPDCNODE_ERL_PARK_H

#include <stddef.h>
#include <stdint.h>

/* Bytes parked on all links together at most, headers included: a stuck
 * inbox holds this much of our memory, no more. The loop stops taking
 * client messages well before (CLIENT_IN_PENDING_MAX, on the same
 * measure): past it only what the loop could not pause is dropped. */
#define ERL_PARK_MAX (4u << 20)

/* One parked record: 16 bytes of header, then the record's bytes. */
struct erl_parked {
    struct erl_parked *next;
    uint32_t size;                   /* of the record */
    uint32_t pad;
    unsigned char rec[];   /* struct out_rec, then its body: offset 16, aligned */
};

/* A link's FIFO: 16 bytes, empty when zeroed. */
struct erl_park {
    struct erl_parked *head, *tail;
};

static inline int erl_park_empty(const struct erl_park *p) { return p->head == NULL; }
/* The oldest record, or NULL. */
static inline struct erl_parked *erl_park_head(const struct erl_park *p) { return p->head; }

/* Appends a copy of rec; -1 (nothing kept) when it would take the total
 * past ERL_PARK_MAX, or memory ran out. */
int erl_park_push(struct erl_park *p, const void *rec, size_t size);
/* Takes the oldest record off (NULL when empty); the caller frees it. */
struct erl_parked *erl_park_take(struct erl_park *p);
void erl_park_free(struct erl_parked *r);
/* Frees every record of p (nothing sent). */
void erl_park_clear(struct erl_park *p);
/* Bytes parked now on every link, headers included. */
size_t erl_park_total(void);

#endif
