/* Presence: which uids came online or went offline, batched on the loop
 * thread and sent to the master's --presence process. */
#ifndef HTTPDCNODE_PRESENCE_H
#define HTTPDCNODE_PRESENCE_H

#include <event2/event.h>
#include <stdint.h>

/* enabled = 0 makes every call below a no-op (no --presence). */
int presence_init(struct event_base *base, int enabled);
void presence_free(void);

/* uidtable callback: uid got its first stream (online) or lost its last. */
void presence_changed(uint32_t uid, int online);

/* Sends everything online now as a snapshot (after pending changes);
 * returns how many uids are online. */
uint32_t presence_snapshot(void);

#endif
