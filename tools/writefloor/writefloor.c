/* writefloor: what one small write to a loopback TCP socket costs on this
 * host, with a reader process watching all the sockets with epoll, as a
 * browser-side client does. No server can deliver messages to distinct
 * sockets faster than this from one thread; `make bench` reports it beside
 * httpdcnode's own figures.
 *
 *   writefloor [CONNS [ROUNDS [BYTES]]]     (default 10000 5 40)
 * prints one JSON line: conns, writes, us_per_write, writes_per_s. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

/* Connects conns sockets to addr, then reads until it got `expect` bytes
 * or nothing came for 5 s. Tells the writer through `ready` when all are up. */
static void run_reader(const struct sockaddr_in *addr, int conns, long expect, int ready)
{
    int ep = epoll_create1(0);
    for (int i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0)
            die("reader connect");
        struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    (void)!write(ready, "r", 1);
    char buf[4096];
    struct epoll_event ev[256];
    long got = 0;
    while (got < expect) {
        int k = epoll_wait(ep, ev, 256, 5000);
        if (k <= 0)
            break;
        for (int i = 0; i < k; i++) {
            ssize_t r = read(ev[i].data.fd, buf, sizeof buf);
            if (r > 0)
                got += r;
        }
    }
    _exit(got == expect ? 0 : 1);
}

int main(int argc, char **argv)
{
    int conns = argc > 1 ? atoi(argv[1]) : 10000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int bytes = argc > 3 ? atoi(argv[3]) : 40;
    if (conns < 1 || conns > 18000 || rounds < 1 || bytes < 1 || bytes > 4096) {
        fprintf(stderr, "usage: writefloor [CONNS (1..18000) [ROUNDS [BYTES (1..4096)]]]\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(lfd, 65535) != 0 || getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
        die("listen");
    int ready[2];
    if (pipe(ready) != 0)
        die("pipe");
    pid_t reader = fork();
    if (reader == 0)
        run_reader(&addr, conns, (long)conns * rounds * bytes, ready[1]);

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

    double t0 = now_s();
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < conns; i++)
            if (write(fds[i], msg, (size_t)bytes) != bytes)
                die("write");
    double t1 = now_s();
    int status;
    waitpid(reader, &status, 0);
    long writes = (long)conns * rounds;
    printf("{\"conns\":%d,\"writes\":%ld,\"bytes\":%d,\"us_per_write\":%.2f,"
           "\"writes_per_s\":%.0f,\"reader_ok\":%s}\n",
           conns, writes, bytes, (t1 - t0) * 1e6 / (double)writes, (double)writes / (t1 - t0),
           WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "true" : "false");
    return 0;
}
