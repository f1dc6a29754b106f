/* The bytes a stream could not write yet. A stream that keeps up has none
 * (NULL): a backlog exists only while the kernel would not take a write.
 * All backlogs are listed, for --max-backlog-total to find the largest,
 * and their sum is loop_stats.backlog_bytes. Loop thread only. */
#ifndef HTTPDCNODE_BACKLOG_H
#define HTTPDCNODE_BACKLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct backlog;

/* Appends the bytes of iov after the first skip, copied, to *b (made if
 * NULL, remembering owner). -1 when *b would pass max bytes, or out of
 * memory: nothing is appended then. */
int backlog_append(struct backlog **b, void *owner, const struct iovec *iov, int iovcnt,
                   size_t skip, size_t max);
/* Sends *b to fd: 1 when all went (and *b is freed), 0 when the socket is
 * full, -1 on an error (errno says which). */
int backlog_send(struct backlog **b, int fd);
/* Drops *b, unsent bytes and all. */
void backlog_free(struct backlog **b);
/* Every backlog's owner, the one holding the most first, in an array the
 * caller frees; NULL (and *n = 0) when there is none or no memory. */
void **backlog_owners_largest_first(size_t *n);

#endif
