/* SPDX-License-Identifier: Apache-2.0 */
/* The parking FIFOs of erl_park.h: a malloc per record parked, none while
 * nothing is (the usual case: inboxes that keep up). */
#include "erl/erl_park.h"
#include "core/client_rate.h"
#include "core/outbound.h"

#include <stdlib.h>
#include <string.h>

static size_t total;    /* bytes parked, all links: the C-node thread's */

static size_t cost(size_t size) { return sizeof(struct erl_parked) + size; }

/* The loop weighs client messages as they are parked here ... */
_Static_assert(sizeof(struct erl_parked) == OUTBOUND_PARKED_HEADER,
               "outbound_in_cost must weigh a message as the park does");
/* ... and stops taking them past CLIENT_IN_PENDING_MAX; what may come on
 * top: one more message (a POST, or a WebSocket's completed by a read)
 * and a 4 KB read's worth of empty ones (6 bytes each, 40 when parked). */
_Static_assert(CLIENT_IN_PENDING_MAX + OUTBOUND_IN_OVERHEAD + CLIENT_MESSAGE_LIMIT +
                   4096 / 6 * OUTBOUND_IN_OVERHEAD + 4096 <= ERL_PARK_MAX,
               "the park must hold all the loop may let wait");

int erl_park_push(struct erl_park *p, const void *rec, size_t size)
{
    if (size > ERL_PARK_MAX || total + cost(size) > ERL_PARK_MAX)
        return -1;
    struct erl_parked *r = malloc(cost(size));
    if (!r)
        return -1;
    r->next = NULL;
    r->size = (uint32_t)size;
    r->pad = 0;
    memcpy(r->rec, rec, size);
    if (p->tail)
        p->tail->next = r;
    else
        p->head = r;
    p->tail = r;
    total += cost(size);
    return 0;
}

struct erl_parked *erl_park_take(struct erl_park *p)
{
    struct erl_parked *r = p->head;
    if (!r)
        return NULL;
    p->head = r->next;
    if (!p->head)
        p->tail = NULL;
    r->next = NULL;
    total -= cost(r->size);
    return r;
}

void erl_park_free(struct erl_parked *r) { free(r); }

void erl_park_clear(struct erl_park *p)
{
    struct erl_parked *r;
    while ((r = erl_park_take(p)))
        erl_park_free(r);
}

size_t erl_park_total(void) { return total; }
