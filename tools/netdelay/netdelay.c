/* SPDX-License-Identifier: Apache-2.0 */
/* netdelay: the latency of a network link for scripts/cluster-sim.sh on a
 * kernel without sch_netem (tc qdisc ... netem). Packets that iptables sends
 * to an NFQUEUE queue (-j NFQUEUE --queue-num N) are held DELAY ms, plus or
 * minus up to JITTER ms drawn uniformly for each, then accepted. Order is
 * kept: a packet never leaves before the one queued ahead of it (netem's
 * own jitter reorders; TCP then sees reordering, not only delay).
 *
 * Bounded: at most HOLD_MAX packets held (the kernel's queue is as long);
 * a packet past that is dropped and counted, as netem's limit does. Each
 * held packet costs 16 bytes here; the kernel keeps the packet itself.
 * Runs until SIGINT or SIGTERM, then accepts what it holds and prints one
 * line: "netdelay: N packets, D dropped, max held H".
 *
 *   netdelay --queue N --delay MS [--jitter MS]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOLD_MAX 65536u             /* a power of two: the ring's mask */
#define RCVBUF_BYTES (16u << 20)

struct held {
    uint32_t id;
    int64_t due_us;
};

static struct held ring[HOLD_MAX];
static uint32_t head, tail;         /* held: ring[head..tail) */
static int64_t delay_us, jitter_us, last_due_us;
static uint64_t packets, dropped, max_held;
static struct nfq_q_handle *qh;
static volatile sig_atomic_t stop;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data)
{
    (void)msg;
    (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    packets++;
    if (tail - head == HOLD_MAX) {
        dropped++;
        return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
    }
    int64_t j = jitter_us ? (int64_t)(random() % (2 * jitter_us + 1)) - jitter_us : 0;
    int64_t due = now_us() + delay_us + j;
    if (due < last_due_us)
        due = last_due_us;
    last_due_us = due;
    ring[tail++ & (HOLD_MAX - 1)] = (struct held){id, due};
    if (tail - head > max_held)
        max_held = tail - head;
    return 0;
}

/* Accepts what is due (all when everything is), in one verdict for all of
 * them (the packets are held in queue order, so the ids due are those up
 * to the last one due); the ms until the next is due, -1 when none is held. */
static int release(int everything)
{
    int64_t now = now_us();
    uint32_t last = 0;
    int any = 0, wait = -1;
    while (head != tail) {
        struct held *h = &ring[head & (HOLD_MAX - 1)];
        if (!everything && h->due_us > now) {
            wait = (int)((h->due_us - now + 999) / 1000);
            break;
        }
        last = h->id;
        any = 1;
        head++;
    }
    if (any)
        nfq_set_verdict_batch(qh, last, NF_ACCEPT);
    return wait;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: netdelay --queue N --delay MS [--jitter MS]\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"queue", required_argument, NULL, 'q'},
                                         {"delay", required_argument, NULL, 'd'},
                                         {"jitter", required_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    long queue = -1, delay = -1, jitter = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        long v = strtol(optarg ? optarg : "", &end, 10);
        if (*end || v < 0 || v > 65535)
            return usage();
        if (c == 'q')
            queue = v;
        else if (c == 'd')
            delay = v;
        else if (c == 'j')
            jitter = v;
        else
            return usage();
    }
    if (queue < 0 || delay < 0 || jitter > delay)
        return usage();
    delay_us = delay * 1000;
    jitter_us = jitter * 1000;
    srandom((unsigned)getpid());

    struct nfq_handle *h = nfq_open();
    if (!h) {
        fprintf(stderr, "netdelay: nfq_open: %s (root, and a kernel with NFQUEUE?)\n",
                strerror(errno));
        return 1;
    }
    qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (!qh || nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 ||
        nfq_set_queue_maxlen(qh, HOLD_MAX) < 0) {
        fprintf(stderr, "netdelay: cannot bind queue %ld: %s (another netdelay on it?)\n", queue,
                strerror(errno));
        return 1;
    }
    nfnl_rcvbufsiz(nfq_nfnlh(h), RCVBUF_BYTES);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int fd = nfq_fd(h);
    static char buf[65536];
    fprintf(stderr, "netdelay: queue %ld, %ld ms +- %ld ms\n", queue, delay, jitter);
    while (!stop) {
        int wait = release(0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, wait < 0 ? 1000 : wait);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        /* Everything waiting, then the verdicts: one wake-up per burst. */
        for (int k = 0; k < 256; k++) {
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                nfq_handle_packet(h, buf, (int)n);
                continue;
            }
            if (n < 0 && errno == ENOBUFS)
                fprintf(stderr, "netdelay: the kernel lost notifications (ENOBUFS): those "
                                "packets wait for the queue's end\n");
            break;
        }
    }
    release(1);
    fprintf(stderr, "netdelay: %llu packets, %llu dropped, max held %llu\n",
            (unsigned long long)packets, (unsigned long long)dropped,
            (unsigned long long)max_held);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
