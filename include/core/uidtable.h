/* SPDX-License-Identifier: Apache-2.0 */
/* The table of streams by uid: preallocated, one pointer per uid. Each
 * slot heads a list of that uid's streams, newest first. */
#ifndef HTTPDCNODE_UIDTABLE_H
#define HTTPDCNODE_UIDTABLE_H

#include <stdint.h>

struct stream;

/* Called when a uid gets its first stream (online = 1) or loses its last. */
typedef void (*uidtable_presence_fn)(uint32_t uid, int online);

int uidtable_init(uint32_t max_users, uidtable_presence_fn presence);
void uidtable_free(void);

struct stream *uidtable_first(uint32_t uid);
uint32_t uidtable_max(void);                  /* the highest uid (max_users) */
void uidtable_add(struct stream *s);          /* s->uid set; becomes the newest */
void uidtable_remove(struct stream *s);
uint32_t uidtable_count(uint32_t uid);        /* walks the uid's list */
struct stream *uidtable_oldest(uint32_t uid);
/* The first uid above `after` with a stream, 0 when none: for walks over
 * every online uid (broadcast, snapshot, shutdown) that cost what is online. */
uint32_t uidtable_next_online(uint32_t after);

#endif
