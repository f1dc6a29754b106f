/* SPDX-License-Identifier: Apache-2.0 */
/* writefloor: what one small write to a loopback TCP socket costs on this
 * host, with a reader process watching all the sockets with epoll, as a
 * browser-side client does. No server can deliver messages to distinct
 * sockets faster than this from one thread; `make bench` reports it beside
 * httpdcnode's own figures.
 *
 *   writefloor [CONNS [ROUNDS [BYTES [WRITERS [BURST]]]]]   (default 10000 5 40 1 0)
 * WRITERS > 1 runs that many writer processes at once, each with its own
 * reader and CONNS / WRITERS sockets (at most 19,000: the per-process cap
 * on open files), reader w connecting from 127.60.w.1-4: what the whole
 * machine can write, to as many sockets as a server farm holds.
 * BURST > 0 writes BURST sockets, then sleeps 1 ms, as a publisher paced by
 * a 1 ms timer makes a server do; only the time inside write() is counted.
 * Prints one JSON line: conns, writes, us_per_write (writer time per write),
 * writes_per_s (all writers together), all_read_s (from the start of the
 * writes until the last reader had every byte: the writes and the reads
 * on the same cores). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "writefloor: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Connects conns sockets to addr from src (and the 3 addresses after it:
 * a port search over fewer sockets each), then reads until it got
 * `expect` bytes or nothing came for 5 s (120 s for the first). Tells the
 * writer through `ready` when all are up, and through `done` when it had
 * the last byte (the monotonic clock, which every process here shares). */
static void run_reader(const struct sockaddr_in *addr, const struct sockaddr_in *src, int conns,
                       long expect, int ready, int done)
{
    int ep = epoll_create1(0);
    for (int i = 0; i < conns; i++) {
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in from = *src;
        from.sin_addr.s_addr = htonl(ntohl(src->sin_addr.s_addr) + (uint32_t)(i % 4));
        /* the port is chosen at connect, by the whole 4-tuple */
        if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one) != 0 ||
            bind(fd, (const struct sockaddr *)&from, sizeof from) != 0 ||
            connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0)
            die("reader connect");
        struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    (void)!write(ready, "r", 1);
    char buf[4096];
    struct epoll_event ev[256];
    long got = 0;
    while (got < expect) {
        /* the writes start once every writer has its sockets: wait long for the first */
        int k = epoll_wait(ep, ev, 256, got ? 5000 : 120000);
        if (k <= 0)
            break;
        for (int i = 0; i < k; i++) {
            ssize_t r = read(ev[i].data.fd, buf, sizeof buf);
            if (r > 0)
                got += r;
        }
    }
    double at = now_s();
    (void)!write(done, &at, sizeof at);
    if (got != expect)
        fprintf(stderr, "writefloor: a reader got %ld of %ld bytes (then nothing for 5 s)\n", got,
                expect);
    _exit(got == expect ? 0 : 1);
}

/* Writers set up their sockets, then wait here until all are ready. */
static int barrier_ready[2], barrier_go[2];

/* One writer (the w-th) with its own reader over conns sockets; returns
 * the seconds spent writing (inside write() only when burst > 0), or -1 if
 * the reader lost bytes; *read_at: when the reader had the last byte. */
static double run_writer(int w, int conns, int rounds, int bytes, int burst, double *read_at)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(lfd, 65535) != 0 || getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
        die("listen");
    struct sockaddr_in src = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl((127u << 24) | (60u << 16) | ((uint32_t)w << 8) | 1u)};
    int ready[2], done[2];
    if (pipe(ready) != 0 || pipe(done) != 0)
        die("pipe");
    pid_t reader = fork();
    if (reader == 0)
        run_reader(&addr, &src, conns, (long)conns * rounds * bytes, ready[1], done[1]);

    int *fds = malloc((size_t)conns * sizeof *fds);
    for (int i = 0; i < conns; i++) {
        int one = 1;
        if ((fds[i] = accept(lfd, NULL, NULL)) < 0)
            die("accept");
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char c, msg[4096];
    memset(msg, 'x', sizeof msg);
    if (read(ready[0], &c, 1) != 1)
        die("reader did not start");
    if (write(barrier_ready[1], "r", 1) != 1 || read(barrier_go[0], &c, 1) != 1)
        die("barrier");

    double busy = 0, t0 = now_s();
    long n = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < conns; i++) {
            double a = burst ? now_s() : 0;
            if (write(fds[i], msg, (size_t)bytes) != bytes)
                die("write");
            if (burst) {
                busy += now_s() - a;
                if (++n % burst == 0)
                    usleep(1000);
            }
        }
    if (!burst)
        busy = now_s() - t0;
    int status;
    waitpid(reader, &status, 0);
    if (read(done[0], read_at, sizeof *read_at) != sizeof *read_at)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? busy : -1;
}

int main(int argc, char **argv)
{
    int conns = argc > 1 ? atoi(argv[1]) : 10000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int bytes = argc > 3 ? atoi(argv[3]) : 40;
    int writers = argc > 4 ? atoi(argv[4]) : 1;
    int burst = argc > 5 ? atoi(argv[5]) : 0;
    if (conns < 1 || rounds < 1 || bytes < 1 || bytes > 4096 || writers < 1 || writers > 250 ||
        conns < writers || conns / writers > 19000 || burst < 0) {
        fprintf(stderr, "usage: writefloor [CONNS (at most 19,000 a writer) [ROUNDS [BYTES (1..4096) "
                        "[WRITERS (1..250) [BURST (0: flat out)]]]]]\n");
        return 2;
    }
    /* Writers start together: each reports its busy seconds through a pipe. */
    int results[2];
    if (pipe(results) != 0 || pipe(barrier_ready) != 0 || pipe(barrier_go) != 0)
        die("pipe");
    for (int w = 0; w < writers; w++)
        if (fork() == 0) {
            double r[2];
            r[0] = run_writer(w, conns / writers, rounds, bytes, burst, &r[1]);
            _exit(write(results[1], r, sizeof r) == sizeof r ? 0 : 1);
        }
    char c;
    int ok = 1;
    for (int w = 0; w < writers; w++)
        ok &= read(barrier_ready[0], &c, 1) == 1;
    double go = now_s(), last_read = go;
    for (int w = 0; w < writers; w++)
        ok &= write(barrier_go[1], "g", 1) == 1;
    double sum_busy = 0, max_busy = 0;
    for (int w = 0; w < writers; w++) {
        double r[2];
        if (read(results[0], r, sizeof r) != sizeof r || r[0] < 0) {
            ok = 0;
            continue;
        }
        sum_busy += r[0];
        if (r[0] > max_busy)
            max_busy = r[0];
        if (r[1] > last_read)
            last_read = r[1];
    }
    while (wait(NULL) > 0)
        ;
    long writes = (long)(conns / writers) * writers * rounds;
    if (!ok || max_busy <= 0) {
        fprintf(stderr, "writefloor: a writer or its reader failed\n");
        return 1;
    }
    /* All writers ran at once: the slowest one bounds the total rate. */
    printf("{\"conns\":%d,\"writers\":%d,\"burst\":%d,\"writes\":%ld,\"bytes\":%d,"
           "\"us_per_write\":%.2f,\"writes_per_s\":%.0f,\"all_read_s\":%.3f,\"reader_ok\":true}\n",
           conns, writers, burst, writes, bytes, sum_busy * 1e6 / (double)writes,
           (double)writes / max_busy, last_read - go);
    return 0;
}
