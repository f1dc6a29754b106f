/* SPDX-License-Identifier: Apache-2.0 */
/* The bytes a stream could not write yet. A stream that keeps up has none
 * (NULL): a backlog exists only while the kernel would not take a write.
 * All backlogs are listed, for --max-backlog-total to find the largest,
 * and their sum is loop_stats.backlog_bytes. Loop thread only. */
#ifndef HTTPDCNODE_BACKLOG_H
#define HTTPDCNODE_BACKLOG_H

#include "lib/carry.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct backlog;

/* Appends the bytes of iov after the first skip, copied, to *b (made if
 * NULL, remembering owner). -1 when *b would pass max bytes, or out of
 * memory: nothing is appended then. */
int backlog_append(struct backlog **b, void *owner, const struct iovec *iov, int iovcnt,
                   size_t skip, size_t max);
/* The bytes of iov before those of *b (made if NULL): -1 when that would
 * pass max bytes, or out of memory (*b is unchanged then). */
int backlog_prepend(struct backlog **b, void *owner, const struct iovec *iov, int iovcnt,
                    size_t max);
/* Room for n more bytes at the end of *b (made if NULL): where to write
 * them, then backlog_commit. NULL when *b would pass max, or out of memory. */
char *backlog_room(struct backlog **b, void *owner, size_t n, size_t max);
void backlog_commit(struct backlog *b, size_t n);
/* Unsent bytes (0 for NULL). */
size_t backlog_pending(const struct backlog *b);

/* A replay (replay.h) rides on a backlog: its bytes are made as the socket
 * takes the ones before them. backlog_start_replay makes *b if needed (-1:
 * out of memory); backlog_replay is the one under way, NULL when none. */
struct replay;
int backlog_start_replay(struct backlog **b, void *owner, const struct replay *r);
struct replay *backlog_replay(struct backlog *b);

/* Sends *b to fd: 1 when all went (and *b is freed, unless a replay rides
 * on it: then it is kept, empty), 0 when the socket is full, -1 on an
 * error (errno says which). */
int backlog_send(struct backlog **b, int fd);
/* Drops *b, unsent bytes and all. */
void backlog_free(struct backlog **b);
/* How many backlogs there are (a walk: for logs). */
size_t backlog_count(void);
/* Every backlog's owner, the one holding the most first, in an array the
 * caller frees; NULL (and *n = 0) when there is none or no memory. */
void **backlog_owners_largest_first(size_t *n);

/* A hot upgrade (upgrade/): every backlog of a stream handed over goes
 * with it, bytes not yet written and the replay riding on it (a cursor
 * into the history, which goes too), named by its owner's index
 * (index_of: UINT32_MAX for one not carried). take puts each back through
 * slot_of (the owner's backlog pointer, NULL when not one, and the owner
 * in *owner). -1 when out of memory or malformed. */
#define BACKLOG_CARRY_TAG CARRY_TAG('B', 'K', 'L', 'G')
#define BACKLOG_CARRY_VERSION 2       /* 2: a replay's topic, its epoch and the uid's next id */
struct carry_out;
struct carry_in;
int backlog_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *owner));
int backlog_carry_take(struct carry_in *rec, uint16_t version,
                       struct backlog **(*slot_of)(uint32_t i, void **owner));

#endif
