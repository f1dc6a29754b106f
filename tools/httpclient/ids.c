/* SPDX-License-Identifier: Apache-2.0 */
/* Id order per connection: see ids.h. */
#include "ids.h"

#include <stdio.h>

void ids_init(struct id_track *t)
{
    t->epoch = t->seq = 0;
    t->have = t->gap = 0;
}

void ids_gap(struct id_track *t)
{
    t->gap = 1;
}

void ids_resume(struct id_track *t, uint32_t epoch, uint32_t seq)
{
    t->epoch = epoch;
    t->seq = seq;
    t->have = 1;
}

enum id_verdict ids_next(struct id_track *t, uint32_t epoch, uint32_t seq)
{
    enum id_verdict v = ID_OK;
    if (t->have && !t->gap) {
        if (epoch != t->epoch)
            v = ID_EPOCH;
        else if (seq <= t->seq)
            return ID_DUP;
        else if (seq != t->seq + 1)
            v = ID_SKIPPED;
    }
    t->epoch = epoch;
    t->seq = seq;
    t->have = 1;
    t->gap = 0;
    return v;
}

int ids_format(const struct id_track *t, char *buf, unsigned size)
{
    /* "ffffffff:4294967295" and its NUL at most */
    if (!t->have || size < 20)
        return 0;
    return sprintf(buf, "%08x:%u", t->epoch, t->seq);
}
