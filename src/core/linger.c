/* SPDX-License-Identifier: Apache-2.0 */
#include "core/linger.h"

#include "lib/clock.h"
#include "obs/stats.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* ~150 B: the event (libevent's struct event, 128 B here) and what is left. */
struct lingering {
    struct event ev;
    int64_t deadline_ms;
    uint32_t bytes;                  /* thrown away so far */
    int next_free;                   /* the next in the free list, -1: none */
    int busy;                        /* holds a socket */
};

static struct event_base *base;
static struct lingering *slots;      /* LINGER_MAX, made at the first use */
static int free_head = -1;

void linger_configure(struct event_base *b) { base = b; }

static int take_slot(void)
{
    if (!slots) {
        slots = calloc(LINGER_MAX, sizeof *slots);
        if (!slots)
            return -1;
        for (int i = 0; i < LINGER_MAX; i++)
            slots[i].next_free = i + 1 < LINGER_MAX ? i + 1 : -1;
        free_head = 0;
    }
    int i = free_head;
    if (i >= 0) {
        free_head = slots[i].next_free;
        slots[i].busy = 1;
        loop_stats.lingering++;
    }
    return i;
}

static void give_slot(struct lingering *l)
{
    l->busy = 0;
    l->next_free = free_head;
    free_head = (int)(l - slots);
    loop_stats.lingering--;
}

static void finish(struct lingering *l)
{
    int fd = event_get_fd(&l->ev);
    event_del(&l->ev);
    close(fd);
    give_slot(l);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct lingering *l = arg;
    if (!(what & EV_TIMEOUT)) {
        char sink[4096];
        for (;;) {
            ssize_t n = recv(fd, sink, sizeof sink, 0);
            if (n > 0 && (l->bytes += (uint32_t)n) < LINGER_BYTES)
                continue;
            int64_t left = l->deadline_ms - clock_now_ms();
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && left > 0) {
                /* more may come: wait, until the deadline only */
                struct timeval tv = {.tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000};
                if (event_add(&l->ev, &tv) == 0)
                    return;
            }
            break;                               /* EOF, an error, or enough */
        }
    }
    finish(l);
}

void linger_close(int fd, int client_may_send)
{
    int unread = 0;
    if (!client_may_send && (ioctl(fd, FIONREAD, &unread) != 0 || unread == 0)) {
        close(fd);                   /* nothing unread: close sends FIN, not a reset */
        return;
    }
    int i = base ? take_slot() : -1;
    if (i < 0)
        loop_stats.linger_full++;
    if (i < 0 || shutdown(fd, SHUT_WR) != 0) {
        if (i >= 0)
            give_slot(&slots[i]);
        close(fd);
        return;
    }
    struct lingering *l = &slots[i];
    l->deadline_ms = clock_now_ms() + LINGER_MS;
    l->bytes = 0;
    struct timeval tv = {.tv_sec = LINGER_MS / 1000, .tv_usec = (LINGER_MS % 1000) * 1000};
    if (event_assign(&l->ev, base, fd, EV_READ | EV_PERSIST, on_readable, l) != 0 ||
        event_add(&l->ev, &tv) != 0) {
        give_slot(l);
        close(fd);
    }
}

void linger_close_all(void)
{
    for (int i = 0; slots && i < LINGER_MAX; i++)
        if (slots[i].busy)
            finish(&slots[i]);
    free(slots);
    slots = NULL;
    free_head = -1;
    loop_stats.lingering = 0;
}

