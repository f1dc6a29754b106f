/* SPDX-License-Identifier: Apache-2.0 */
/* Pointer maps: see ptrmap.h. */
#include "lib/ptrmap.h"

#include <stdlib.h>

static uint32_t slot_of(const struct ptrmap *m, const void *key)
{
    uint64_t k = (uintptr_t)key >> 3;
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

uint64_t *ptrmap_get(const struct ptrmap *m, const void *key)
{
    if (!m->used)
        return NULL;
    for (uint32_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
        if (m->e[i].key == key)
            return &m->e[i].value;
        if (!m->e[i].key)
            return NULL;
    }
}

static void insert(struct ptrmap *m, const void *key, uint64_t value)
{
    uint32_t i = slot_of(m, key);
    while (m->e[i].key)
        i = (i + 1) & m->mask;
    m->e[i] = (struct ptrmap_entry){key, value};
}

static int grow(struct ptrmap *m)
{
    uint32_t size = m->e ? (m->mask + 1) * 2 : 64;
    struct ptrmap_entry *old = m->e;
    uint32_t old_size = m->e ? m->mask + 1 : 0;
    m->e = calloc(size, sizeof *m->e);
    if (!m->e) {
        m->e = old;
        return -1;
    }
    m->mask = size - 1;
    for (uint32_t i = 0; i < old_size; i++)
        if (old[i].key)
            insert(m, old[i].key, old[i].value);
    free(old);
    return 0;
}

int ptrmap_put(struct ptrmap *m, const void *key, uint64_t value)
{
    uint64_t *v = ptrmap_get(m, key);
    if (v) {
        *v = value;
        return 0;
    }
    if ((!m->e || (uint64_t)(m->used + 1) * 4 > (uint64_t)(m->mask + 1) * 3) && grow(m) != 0)
        return -1;
    insert(m, key, value);
    m->used++;
    return 0;
}

int ptrmap_remove(struct ptrmap *m, const void *key, uint64_t *value)
{
    uint64_t *v = ptrmap_get(m, key);
    if (!v)
        return 0;
    if (value)
        *value = *v;
    uint32_t i = (uint32_t)((struct ptrmap_entry *)((char *)v - offsetof(struct ptrmap_entry, value)) - m->e);
    /* Backward shift: each entry after the hole that would be found from
     * its home slot through the hole moves into it. */
    for (uint32_t j = (i + 1) & m->mask; m->e[j].key; j = (j + 1) & m->mask) {
        uint32_t home = slot_of(m, m->e[j].key);
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i] = (struct ptrmap_entry){NULL, 0};
    m->used--;
    return 1;
}

size_t ptrmap_bytes(const struct ptrmap *m)
{
    return m->e ? (size_t)(m->mask + 1) * sizeof *m->e : 0;
}

void ptrmap_free(struct ptrmap *m)
{
    free(m->e);
    *m = (struct ptrmap)PTRMAP_INIT;
}
