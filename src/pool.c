/* Fixed-size record pool: a free list, then the rest of the newest block. */
#include "pool.h"

#include <stdlib.h>

void *pool_alloc(struct pool *p)
{
    if (p->free_list) {
        void *r = p->free_list;
        p->free_list = *(void **)r;
        return r;
    }
    if (p->fresh_left == 0) {
        p->fresh = malloc(p->size * p->per_block);
        if (!p->fresh)
            return NULL;
        p->fresh_left = p->per_block;
    }
    void *r = p->fresh;
    p->fresh += p->size;
    p->fresh_left--;
    return r;
}

void pool_free(struct pool *p, void *record)
{
    *(void **)record = p->free_list;
    p->free_list = record;
}
