/* SPDX-License-Identifier: Apache-2.0 */
/* wakefloor: how late a sleeping thread wakes on this host when another
 * thread signals it, as the server's C-node thread wakes its event loop (an
 * eventfd watched by epoll) and as a write wakes a client. Every PERIOD_US a
 * signaller thread stamps the time and writes an eventfd; a waiter blocked
 * in epoll_wait reads it and records now - stamp. Run it beside a load to
 * see the wake-up tail that load causes; `make bench` runs it during a paced
 * push run.
 *
 *   wakefloor [SECONDS [PERIOD_US]]     (default 5 1000)
 * prints one JSON line: wakeups, p50_us, p90_us, p99_us, max_us. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 1000000

static int efd;
static _Atomic uint64_t stamp_ns;
static uint32_t *lat_ns;
static _Atomic long nsamples, wanted;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "wakefloor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *waiter(void *arg)
{
    (void)arg;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) != 0)
        die("epoll");
    while (nsamples < wanted) {
        if (epoll_wait(ep, &ev, 1, 1000) <= 0)
            continue;
        uint64_t n;
        if (read(efd, &n, sizeof n) != sizeof n)
            continue;
        uint64_t d = now_ns() - stamp_ns;
        lat_ns[nsamples++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    long period_us = argc > 2 ? atol(argv[2]) : 1000;
    if (seconds <= 0 || seconds > 600 || period_us < 50 || period_us > 1000000) {
        fprintf(stderr, "usage: wakefloor [SECONDS (0..600] [PERIOD_US (50..1000000)]]\n");
        return 2;
    }
    wanted = (long)(seconds * 1e6 / (double)period_us);
    if (wanted < 1 || wanted > MAX_SAMPLES)
        wanted = wanted < 1 ? 1 : MAX_SAMPLES;
    lat_ns = malloc((size_t)wanted * sizeof *lat_ns);
    efd = eventfd(0, EFD_NONBLOCK);
    if (!lat_ns || efd < 0)
        die("setup");
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        die("pthread_create");

    /* Signal on an absolute schedule; the waiter is asleep each time. */
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < wanted; i++) {
        next.tv_nsec += period_us * 1000;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        stamp_ns = now_ns();
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) != sizeof one)
            die("write");
    }
    /* The last wake-up may still be on its way; then stop waiting. */
    struct timespec grace = {0, 200000000};
    nanosleep(&grace, NULL);
    wanted = nsamples;
    pthread_join(t, NULL);

    long n = nsamples;
    if (n == 0) {
        fprintf(stderr, "wakefloor: no wake-up recorded\n");
        return 1;
    }
    qsort(lat_ns, (size_t)n, sizeof *lat_ns, cmp);
    printf("{\"wakeups\":%ld,\"period_us\":%ld,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
           "\"max_us\":%.1f}\n",
           n, period_us, lat_ns[n / 2] / 1e3, lat_ns[n * 9 / 10] / 1e3, lat_ns[n * 99 / 100] / 1e3,
           lat_ns[n - 1] / 1e3);
    return 0;
}
