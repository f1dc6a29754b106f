/* SPDX-License-Identifier: Apache-2.0 */
/* A map from a pointer to a 64-bit value: open addressing, linear
 * probing, deletion by backward shift (no tombstones), grown to twice its
 * size past three quarters full. 16 bytes an entry, so 21 to 43 bytes a
 * key. For
 * side tables keyed by a record that has no room for a field of its own
 * (core/topic.c's, keyed by stream). One thread. */
#ifndef HTTPDCNODE_PTRMAP_H
#define HTTPDCNODE_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

struct ptrmap_entry {
    const void *key;             /* NULL: free */
    uint64_t value;
};

struct ptrmap {
    struct ptrmap_entry *e;
    uint32_t mask;               /* e has mask + 1 entries */
    uint32_t used;
};

#define PTRMAP_INIT {NULL, 0, 0}

/* The value of key, NULL when absent. The pointer holds until the next
 * put or remove. */
uint64_t *ptrmap_get(const struct ptrmap *m, const void *key);
/* key's value set (added when absent); -1 when out of memory. */
int ptrmap_put(struct ptrmap *m, const void *key, uint64_t value);
/* key gone; its value in *value (when not NULL): 1, or 0 when absent. */
int ptrmap_remove(struct ptrmap *m, const void *key, uint64_t *value);
/* Bytes the table takes. */
size_t ptrmap_bytes(const struct ptrmap *m);
void ptrmap_free(struct ptrmap *m);

#endif
