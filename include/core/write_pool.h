/* SPDX-License-Identifier: Apache-2.0 */
/* Writer threads for large batches (--writers): the event loop hands each
 * helper a slice of a batch's writes, writes the first slice itself and
 * waits for all of them (fork and join). A helper only calls writev on the
 * descriptors and iovecs the loop gives it: it touches no stream and no
 * libevent object, and the loop reads the results only after the join. One
 * write costs ~10 us of kernel time here, so a broadcast to many streams
 * goes as many times faster as there are idle cores for the helpers. */
#ifndef HTTPDCNODE_WRITE_POOL_H
#define HTTPDCNODE_WRITE_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct write_job {
    const struct iovec *iov;   /* in: whole framed messages for one socket */
    int iovcnt;
    int fd;
    size_t total;              /* bytes in iov */
    ssize_t result;            /* out: writev's return */
    int error;                 /* out: its errno when result < 0 */
    uint64_t done_ns;          /* out, with --probe-latency: when it returned */
};

/* Starts helper threads (0: the loop writes alone). -1 on failure. */
int write_pool_start(unsigned helpers);
/* Ends and joins the helpers. */
void write_pool_stop(void);
unsigned write_pool_helpers(void);

/* Fewer jobs than this are written by the caller alone: waking a helper
 * costs tens of microseconds here, a few writes' worth. */
#define WRITE_POOL_MIN_JOBS 8

/* Loop thread: makes every job's writev, spread over the loop and the
 * helpers; returns when all are done. */
void write_pool_run(struct write_job *jobs, uint32_t n);

#endif
