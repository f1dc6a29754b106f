/* SPDX-License-Identifier: Apache-2.0 */
/* Input copied so that its last byte ends a page and the next page is
 * unmapped: a read past the end faults at once, also inside libraries
 * built without the sanitizers (libei). */
#ifndef FUZZ_GUARDED_H
#define FUZZ_GUARDED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *guarded_base;
static size_t guarded_room;    /* usable bytes before the guard page */

static const char *guarded_copy(const uint8_t *data, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!guarded_base || size > guarded_room) {
        if (guarded_base)
            munmap(guarded_base, guarded_room + page);
        guarded_room = (size + page - 1) / page * page;
        if (guarded_room == 0)
            guarded_room = page;
        guarded_base = mmap(NULL, guarded_room + page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (guarded_base == MAP_FAILED || mprotect(guarded_base + guarded_room, page, PROT_NONE))
            abort();
    }
    char *p = guarded_base + guarded_room - size;
    if (size)
        memcpy(p, data, size);
    return p;
}

#endif
