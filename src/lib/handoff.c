/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded byte ring from the C-node thread (producer) to the event loop
 * (consumer). Records are written in place, so a message is copied once
 * from the Erlang buffer into the ring and read there by the loop.
 *
 * Layout: each record is an 8-byte header (body size) and the body,
 * padded to 8 bytes. A header of 0 marks "wrapped: continue at offset 0".
 * `used` counts bytes in flight including the wasted tail of a wrap, so
 * head == tail is unambiguous. */
#include "lib/handoff.h"
#include "lib/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define HDR 8u

struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t room;       /* signalled when the consumer frees space */
    char *ring;
    size_t cap;
    size_t head;               /* consumer position */
    size_t tail;               /* producer position */
    size_t used;
    size_t reserved_at;        /* where the pending reservation starts */
    size_t reserved_len;
    int consumer_idle;         /* the consumer found the ring empty: wake it */
    int producer_waiting;
    int closed;
    int efd;
    uint64_t committed;        /* records committed: the producer's alone */
    _Atomic uint64_t consumed; /* records applied: the consumer writes it */
};

static size_t pad8(size_t n) { return (n + 7u) & ~(size_t)7u; }

struct handoff *handoff_new(size_t capacity)
{
    struct handoff *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->cap = pad8(capacity);
    h->ring = malloc(h->cap);
    h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!h->ring || h->efd < 0) {
        free(h->ring);
        if (h->efd >= 0)
            close(h->efd);
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->room, NULL);
    h->consumer_idle = 1;
    return h;
}

void handoff_free(struct handoff *h)
{
    if (!h)
        return;
    close(h->efd);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->room);
    free(h->ring);
    free(h);
}

size_t handoff_max_record(const struct handoff *h) { return h->cap / 2 - HDR; }

int handoff_wakeup_fd(const struct handoff *h) { return h->efd; }

/* Where a record of n bytes (header included) fits, or -1. Lock held. */
static long find_room(struct handoff *h, size_t n)
{
    if (h->used == 0)
        h->head = h->tail = 0;
    if (h->tail >= h->head && !(h->used > 0 && h->tail == h->head)) {
        if (h->cap - h->tail >= n)
            return (long)h->tail;
        if (h->head >= n) {                 /* wrap: waste the tail end */
            size_t waste = h->cap - h->tail;
            if (waste >= HDR)
                memset(h->ring + h->tail, 0, HDR);
            h->used += waste;
            h->tail = 0;
            return 0;
        }
        return -1;
    }
    return h->head - h->tail >= n ? (long)h->tail : -1;
}

void *handoff_reserve(struct handoff *h, size_t size, int timeout_ms)
{
    size_t n = HDR + pad8(size);
    struct timespec deadline;
    long at;

    if (size > handoff_max_record(h))
        return NULL;
    deadline = clock_realtime_in_ms(timeout_ms);
    pthread_mutex_lock(&h->lock);
    while (!h->closed && (at = find_room(h, n)) < 0) {
        h->producer_waiting = 1;
        if (pthread_cond_timedwait(&h->room, &h->lock, &deadline) == ETIMEDOUT)
            break;
    }
    h->producer_waiting = 0;
    if (h->closed || (at = find_room(h, n)) < 0) {
        pthread_mutex_unlock(&h->lock);
        return NULL;
    }
    pthread_mutex_unlock(&h->lock);
    h->reserved_at = (size_t)at;
    h->reserved_len = n;
    uint64_t hdr = size;
    memcpy(h->ring + at, &hdr, HDR);
    return h->ring + at + HDR;
}

void handoff_commit(struct handoff *h)
{
    int wake;
    pthread_mutex_lock(&h->lock);
    h->tail = h->reserved_at + h->reserved_len;
    h->used += h->reserved_len;
    h->committed++;
    wake = h->consumer_idle;
    h->consumer_idle = 0;
    pthread_mutex_unlock(&h->lock);
    if (wake) {
        uint64_t one = 1;
        /* Cannot fail short of a bug: the counter never nears overflow. */
        (void)!write(h->efd, &one, sizeof one);
    }
}

size_t handoff_drain(struct handoff *h, size_t max,
                     int (*apply)(void *body, size_t size, void *ctx),
                     void (*finish)(void *ctx), void *ctx)
{
    size_t done = 0;

again:
    pthread_mutex_lock(&h->lock);
    size_t pos = h->head, avail = h->used;
    if (avail == 0) {
        h->consumer_idle = 1;       /* the only way to return 0: see handoff.h */
        pthread_mutex_unlock(&h->lock);
        return 0;
    }
    pthread_mutex_unlock(&h->lock);

    size_t consumed = 0;
    while (consumed < avail && done < max) {
        if (pos == h->cap) {
            pos = 0;
            continue;
        }
        uint64_t size;
        memcpy(&size, h->ring + pos, HDR);
        if (size == 0) {                  /* wrap marker */
            consumed += h->cap - pos;
            pos = 0;
            continue;
        }
        int stop = apply(h->ring + pos + HDR, (size_t)size, ctx);
        size_t n = HDR + pad8((size_t)size);
        pos += n;
        consumed += n;
        done++;
        if (stop)
            break;
    }

    if (finish)
        finish(ctx);            /* last use of the records' memory */
    /* Only now: what a record asked is done (written, kept) once finish ran. */
    atomic_store_explicit(&h->consumed, atomic_load_explicit(&h->consumed, memory_order_relaxed)
                          + done, memory_order_release);
    pthread_mutex_lock(&h->lock);
    h->head = pos;
    h->used -= consumed;
    if (h->used == 0)
        h->consumer_idle = 1;
    if (h->producer_waiting)
        pthread_cond_signal(&h->room);
    pthread_mutex_unlock(&h->lock);
    /* Only a wrap's wasted tail was passed: a record committed meanwhile
     * sent no wakeup (the consumer was not idle), so look again. */
    if (done == 0)
        goto again;
    return done;
}

uint64_t handoff_committed(const struct handoff *h) { return h->committed; }

uint64_t handoff_consumed(const struct handoff *h)
{
    return atomic_load_explicit(&h->consumed, memory_order_acquire);
}

void handoff_clear_wakeup(struct handoff *h)
{
    uint64_t count;
    (void)!read(h->efd, &count, sizeof count);   /* EAGAIN when already clear */
}

void handoff_close(struct handoff *h)
{
    pthread_mutex_lock(&h->lock);
    h->closed = 1;
    pthread_cond_broadcast(&h->room);
    pthread_mutex_unlock(&h->lock);
}

int handoff_is_closed(struct handoff *h)
{
    pthread_mutex_lock(&h->lock);
    int closed = h->closed;
    pthread_mutex_unlock(&h->lock);
    return closed;
}
