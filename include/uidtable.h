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
void uidtable_add(struct stream *s);          /* s->uid set; becomes the newest */
void uidtable_remove(struct stream *s);
uint32_t uidtable_count(uint32_t uid);        /* walks the uid's list */
struct stream *uidtable_oldest(uint32_t uid);
/* No uid above this has ever had a stream: bounds broadcast and shutdown walks. */
uint32_t uidtable_high(void);
uint32_t uidtable_max_users(void);

#endif
