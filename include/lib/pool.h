/* SPDX-License-Identifier: Apache-2.0 */
/* A pool of fixed-size records carved from large blocks. Stream records
 * come from here: no malloc header per record, and records sit together
 * instead of between the short-lived blocks evhttp allocates and frees for
 * every connection, which would leave the heap fragmented. Blocks are kept
 * for reuse, never returned. Loop thread only. */
#ifndef HTTPDCNODE_POOL_H
#define HTTPDCNODE_POOL_H

#include <stddef.h>

struct pool {
    size_t size;            /* bytes per record, at least a pointer */
    size_t per_block;
    void *free_list;        /* freed records, linked through their first bytes */
    char *fresh;            /* next never-used record of the newest block */
    size_t fresh_left;
};

#define POOL_INIT(record_size, records_per_block) \
    {.size = (record_size), .per_block = (records_per_block)}

void *pool_alloc(struct pool *p);      /* NULL when out of memory */
void pool_free(struct pool *p, void *record);

#endif
