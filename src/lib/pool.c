/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-size record pool: a free list, then the rest of the newest block. */
#include "lib/pool.h"

#include <stdlib.h>

/* Under ASan, records not handed out (freed or never used yet) are poisoned,
 * so a stream used after its free is reported like a freed malloc block.
 * A freed record's first word, the free-list link, stays readable: LeakSanitizer
 * skips poisoned words, and would call blocks reachable only through the
 * free list leaks. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_POISON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_POISON 1
#endif
#endif

#ifdef POOL_POISON
#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

void *pool_alloc(struct pool *p)
{
    if (p->free_list) {
        void *r = p->free_list;
        unpoison(r, p->size);
        p->free_list = *(void **)r;
        return r;
    }
    if (p->fresh_left == 0) {
        p->fresh = malloc(p->size * p->per_block);
        if (!p->fresh)
            return NULL;
        p->fresh_left = p->per_block;
        poison(p->fresh, p->size * p->per_block);
    }
    void *r = p->fresh;
    unpoison(r, p->size);
    p->fresh += p->size;
    p->fresh_left--;
    return r;
}

void pool_free(struct pool *p, void *record)
{
    *(void **)record = p->free_list;
    p->free_list = record;
    poison((char *)record + sizeof(void *), p->size - sizeof(void *));
}
