/* Connection setup for the C-node (see erl_setup.h). One setup thread
 * polls the listen socket, the epmd registration and its timers; it never
 * waits on a peer. Handshakes and master connects run on the worker
 * threads; what they establish goes to the C-node thread's queue. Each
 * master has its own state, backoff and connect thread: one that is down
 * costs the others nothing. */
#include "erl/erl_setup.h"
#include "lib/clock.h"
#include "erl/erl_epmd.h"
#include "erl/erl_socket.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define NEW_LINKS_MAX 16          /* established, not yet taken by the C-node thread */
#define PUBLISH_RETRY_MS 1000
#define ACCEPT_PAUSE_MS 1000      /* out of descriptors: listening again at once would spin */
#define ACCEPTS_PER_WAKE 16

enum job_kind { JOB_ACCEPT, JOB_CONNECT };

struct job {
    enum job_kind kind;
    int fd;                       /* JOB_ACCEPT: the accepted connection */
    int master;                   /* JOB_CONNECT: index in masters[] */
};

/* One master: its name (read-only once started), then its state under lock.
 * About 800 bytes each, ERL_SETUP_MASTERS_MAX of them. */
struct master {
    char node[MAXNODELEN + 1], alive[MAXNODELEN + 1], host[MAXNODELEN + 1];
    int linked, connecting, down_logged;
    int64_t next_connect_ms, backoff_ms;
};

/* Threads: the handshake workers, and one connector per master (started). */
#define NWORKERS (ERL_SETUP_WORKERS + ERL_SETUP_MASTERS_MAX)

static ei_cnode setup_ec;         /* the workers' copy: ei reads it during handshakes */
static int listen_fd = -1, listen_port;
static struct master masters[ERL_SETUP_MASTERS_MAX];
static int nmasters;

static pthread_t setup_thread, workers[NWORKERS];
static int setup_started, workers_started;
static int stop_fd = -1;          /* readable once stopping (never cleared) */
static int wake_fd = -1;          /* wakes the setup thread: a job ended, the master went */
static int ready_fd = -1;         /* the C-node thread has connections to take */

/* Everything below is under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_ready = PTHREAD_COND_INITIALIZER;
static int stopping;
static struct job jobs[NWORKERS];
static int njobs;                 /* given, not yet taken by a worker */
/* Given, not yet finished: handshakes of accepted connections (at most
 * ERL_SETUP_WORKERS) and connects (one per master at most, as many as
 * there are threads for them), counted apart so that masters being
 * dialled never starve nodes dialling in, nor the other way round, and
 * no master waits for another's attempt. */
static int busy_accepts, busy_connects;
static struct erl_new_link queue[NEW_LINKS_MAX];
static int nqueued;

/* Setup thread only. */
static int publish_fd = -1;
static int64_t next_publish_ms, listen_paused_until_ms;
static int publish_failed_logged;
static struct log_ratelimit refused_rl, accept_rl;
static struct log_ratelimit worker_rl[NWORKERS];

static void poke(int efd)
{
    uint64_t one = 1;
    (void)!write(efd, &one, sizeof one);    /* a counter far from overflow: cannot fail */
}

/* ---- the queue to the C-node thread ---- */

/* The index of master node, or -1. The names do not change once started. */
static int master_index(const char *node)
{
    for (int i = 0; i < nmasters; i++)
        if (strcmp(masters[i].node, node) == 0)
            return i;
    return -1;
}

static void push_link(int fd, const char *node, int master)
{
    pthread_mutex_lock(&lock);
    if (nqueued == NEW_LINKS_MAX) {
        pthread_mutex_unlock(&lock);
        log_msg(LOG_ERROR, "dropping the new connection of %s: the C-node thread has %d "
                           "waiting already (is it stuck?)", node, NEW_LINKS_MAX);
        ei_close_connection(fd);
        return;
    }
    struct erl_new_link *l = &queue[nqueued++];
    l->fd = fd;
    l->is_master = master >= 0;
    strncpy(l->node, node, sizeof l->node - 1);
    l->node[sizeof l->node - 1] = '\0';
    if (master >= 0)
        masters[master].linked = 1;
    poke(ready_fd);
    pthread_mutex_unlock(&lock);
}

int erl_setup_ready_fd(void) { return ready_fd; }

int erl_setup_take(struct erl_new_link *out)
{
    int took = 0;
    pthread_mutex_lock(&lock);
    if (nqueued > 0) {
        *out = queue[0];
        memmove(queue, queue + 1, (size_t)--nqueued * sizeof queue[0]);
        took = 1;
    } else {
        uint64_t n;
        (void)!read(ready_fd, &n, sizeof n);  /* empty: clear; a push writes it again */
    }
    pthread_mutex_unlock(&lock);
    return took;
}

void erl_setup_master_gone(const char *node)
{
    int i = master_index(node);
    if (i < 0)
        return;
    pthread_mutex_lock(&lock);
    masters[i].linked = 0;
    masters[i].next_connect_ms = clock_now_ms() + ERL_SETUP_RECONNECT_MIN_MS;
    masters[i].backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
    pthread_mutex_unlock(&lock);
    poke(wake_fd);
}

/* ---- workers ---- */

static int resolve_master(const struct master *m, struct in_addr *addr)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(m->host, NULL, &hints, &res) != 0)
        return -1;
    *addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

/* epmd's answer, then the handshake: both bounded. The fd, or -1 and why. */
static int connect_master(const struct master *m, const char **why)
{
    struct in_addr addr;
    if (resolve_master(m, &addr) != 0) {
        *why = "its host name does not resolve";
        return -1;
    }
    int port = erl_epmd_port_please(addr, m->alive, EPMD_TIMEOUT_MS, stop_fd);
    if (port < 0) {
        *why = errno == ENOENT ? "not registered with epmd" : strerror(errno);
        return -1;
    }
    int fd = ei_xconnect_host_port_tmo(&setup_ec, &addr, port, ERL_SOCKET_HANDSHAKE_MS);
    if (fd < 0)
        *why = "the handshake failed (wrong cookie?)";
    return fd;
}

static void master_connect_done(struct master *m, int ok, const char *why)
{
    pthread_mutex_lock(&lock);
    m->connecting = 0;
    if (ok) {
        m->backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
        m->down_logged = 0;
    } else {
        if (!m->down_logged)
            log_msg(LOG_INFO, "master %s not reachable (%s); retrying every %d s at most "
                              "(HTTP clients are served meanwhile)",
                    m->node, why, ERL_SETUP_RECONNECT_MAX_MS / 1000);
        m->down_logged = 1;
        m->next_connect_ms = clock_now_ms() + m->backoff_ms;
        m->backoff_ms *= 2;
        if (m->backoff_ms > ERL_SETUP_RECONNECT_MAX_MS)
            m->backoff_ms = ERL_SETUP_RECONNECT_MAX_MS;
    }
    pthread_mutex_unlock(&lock);
}

static void run_connect(int i)
{
    const char *why = "";
    int fd = connect_master(&masters[i], &why);
    if (fd >= 0)
        push_link(fd, masters[i].node, i);
    master_connect_done(&masters[i], fd >= 0, why);
}

static void run_accept(int fd, struct log_ratelimit *rl)
{
    ErlConnect conn;
    erl_socket_hand_accepted(fd);
    int cfd = ei_accept_tmo(&setup_ec, listen_fd, &conn, ERL_SOCKET_HANDSHAKE_MS);
    if (cfd < 0) {
        log_limited(rl, LOG_DEBUG, "Erlang connection attempt failed (%s): wrong cookie, "
                    "or a peer that did not finish its handshake in %d ms?",
                    strerror(erl_errno), ERL_SOCKET_HANDSHAKE_MS);
        return;
    }
    push_link(cfd, conn.nodename, master_index(conn.nodename));
}

static void *worker_main(void *arg)
{
    struct log_ratelimit *rl = arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (!stopping && njobs == 0)
            pthread_cond_wait(&job_ready, &lock);
        if (stopping) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        struct job j = jobs[--njobs];
        pthread_mutex_unlock(&lock);

        if (j.kind == JOB_ACCEPT)
            run_accept(j.fd, rl);
        else
            run_connect(j.master);

        pthread_mutex_lock(&lock);
        if (j.kind == JOB_ACCEPT)
            busy_accepts--;
        else
            busy_connects--;
        pthread_mutex_unlock(&lock);
        poke(wake_fd);
    }
}

/* 1 when a worker of the kind was free to take the job. Lock held. */
static int give_job(enum job_kind kind, int fd, int master)
{
    int *busy = kind == JOB_ACCEPT ? &busy_accepts : &busy_connects;
    if (*busy == (kind == JOB_ACCEPT ? ERL_SETUP_WORKERS : nmasters))
        return 0;
    (*busy)++;
    jobs[njobs++] = (struct job){.kind = kind, .fd = fd, .master = master};
    pthread_cond_signal(&job_ready);
    return 1;
}

/* ---- the setup thread ---- */

static void try_publish(void)
{
    publish_fd = erl_epmd_register(setup_ec.thisalivename, listen_port, EPMD_TIMEOUT_MS, stop_fd);
    if (publish_fd >= 0) {
        log_msg(LOG_INFO, "published %s to epmd (port %d)", setup_ec.thisnodename,
                listen_port);
        publish_failed_logged = 0;
        return;
    }
    if (!publish_failed_logged)
        log_msg(LOG_ERROR, "cannot register %s with epmd (%s): is epmd running "
                           "(epmd -daemon), or does another node use this name? retrying",
                setup_ec.thisnodename,
                errno == EADDRINUSE ? "name in use" : strerror(errno));
    publish_failed_logged = 1;
    next_publish_ms = clock_now_ms() + PUBLISH_RETRY_MS;
}

/* The epmd socket is readable: EOF means epmd went away and forgot us;
 * bytes are read and ignored. */
static void check_registration(void)
{
    char buf[64];
    ssize_t n = recv(publish_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;
    log_msg(LOG_INFO, "epmd registration lost; registering again");
    close(publish_fd);
    publish_fd = -1;
    next_publish_ms = clock_now_ms();
}

/* Every master that is due gets a connect, while connect workers are
 * free; the most overdue first, so a master never waits behind the others
 * for more than their attempts. */
static void maybe_connect_masters(int64_t now)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        struct master *due = NULL;
        for (int i = 0; i < nmasters; i++) {
            struct master *m = &masters[i];
            if (!m->linked && !m->connecting && now >= m->next_connect_ms &&
                (!due || m->next_connect_ms < due->next_connect_ms))
                due = m;
        }
        if (!due || !give_job(JOB_CONNECT, -1, (int)(due - masters)))
            break;
        due->connecting = 1;
    }
    pthread_mutex_unlock(&lock);
}

static void refuse(int fd)
{
    close(fd);
    atomic_fetch_add(&cnode_stats.erl_refused, 1);
    log_limited(&refused_rl, LOG_INFO, "refused an Erlang connection: %d handshakes in "
                "progress already (a peer that connects and says nothing holds one for "
                "up to %d ms)", ERL_SETUP_WORKERS, ERL_SOCKET_HANDSHAKE_MS);
}

static void accept_some(void)
{
    for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                listen_paused_until_ms = clock_now_ms() + ACCEPT_PAUSE_MS;
                log_limited(&accept_rl, LOG_ERROR, "cannot accept an Erlang node: out of "
                            "file descriptors (raise ulimit -n, or hold fewer streams)");
            }
            return;                      /* EAGAIN: none left; others: that one is gone */
        }
        pthread_mutex_lock(&lock);
        int given = give_job(JOB_ACCEPT, fd, -1);
        pthread_mutex_unlock(&lock);
        if (!given)
            refuse(fd);
    }
}

static int next_timeout_ms(int64_t now)
{
    int64_t t = 1000;
    if (listen_paused_until_ms > now && listen_paused_until_ms - now < t)
        t = listen_paused_until_ms - now;
    if (publish_fd < 0 && next_publish_ms - now < t)
        t = next_publish_ms - now;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nmasters; i++) {
        const struct master *m = &masters[i];
        if (!m->linked && !m->connecting && m->next_connect_ms - now < t)
            t = m->next_connect_ms - now;
    }
    pthread_mutex_unlock(&lock);
    return t < 0 ? 0 : (int)t;
}

static void *setup_main(void *arg)
{
    (void)arg;
    for (;;) {
        int64_t now = clock_now_ms();
        if (publish_fd < 0 && now >= next_publish_ms)
            try_publish();
        maybe_connect_masters(clock_now_ms());

        now = clock_now_ms();
        struct pollfd fds[4] = {
            {.fd = stop_fd, .events = POLLIN},
            {.fd = now >= listen_paused_until_ms ? listen_fd : -1, .events = POLLIN},
            {.fd = publish_fd, .events = POLLIN},     /* -1 is ignored */
            {.fd = wake_fd, .events = POLLIN},
        };
        if (poll(fds, 4, next_timeout_ms(now)) < 0 && errno != EINTR)
            log_msg(LOG_ERROR, "poll in the Erlang setup thread: %s", strerror(errno));
        if (fds[0].revents)
            break;
        if (fds[3].revents) {
            uint64_t n;
            (void)!read(wake_fd, &n, sizeof n);
        }
        if (fds[2].revents)
            check_registration();
        if (fds[1].revents)
            accept_some();
    }
    if (publish_fd >= 0)
        close(publish_fd);        /* unregisters from epmd */
    return NULL;
}

/* ---- start and stop ---- */

static int add_master(const char *node)
{
    const char *at = strchr(node, '@');
    if (!at || strlen(node) > MAXNODELEN || nmasters == ERL_SETUP_MASTERS_MAX)
        return -1;                /* options.c checks the form first */
    struct master *m = &masters[nmasters++];
    memcpy(m->alive, node, (size_t)(at - node));
    m->alive[at - node] = '\0';
    strcpy(m->host, at + 1);
    strcpy(m->node, node);
    m->backoff_ms = ERL_SETUP_RECONNECT_MIN_MS;
    return 0;
}

int erl_setup_start(const ei_cnode *ec, int lfd, int lport, const char *const *master_nodes,
                    int n_masters)
{
    setup_ec = *ec;
    listen_fd = lfd;
    listen_port = lport;
    for (int i = 0; i < n_masters; i++)
        if (add_master(master_nodes[i]) != 0) {
            log_msg(LOG_ERROR, "bad master node name %s (or more than %d masters)",
                    master_nodes[i], ERL_SETUP_MASTERS_MAX);
            return -1;
        }
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0 || wake_fd < 0 || ready_fd < 0) {
        log_msg(LOG_ERROR, "eventfd: %s", strerror(errno));
        return -1;
    }
    for (; workers_started < ERL_SETUP_WORKERS + nmasters; workers_started++) {
        int err = pthread_create(&workers[workers_started], NULL, worker_main,
                                 &worker_rl[workers_started]);
        if (err != 0) {
            log_msg(LOG_ERROR, "cannot start an Erlang handshake thread: %s", strerror(err));
            return -1;
        }
    }
    int err = pthread_create(&setup_thread, NULL, setup_main, NULL);
    if (err != 0) {
        log_msg(LOG_ERROR, "cannot start the Erlang setup thread: %s", strerror(err));
        return -1;
    }
    setup_started = 1;
    return 0;
}

static int join_by(pthread_t t, const struct timespec *deadline)
{
    return pthread_timedjoin_np(t, NULL, deadline) == 0 ? 0 : -1;
}

int erl_setup_stop(const struct timespec *deadline)
{
    int r = 0;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_broadcast(&job_ready);
    pthread_mutex_unlock(&lock);
    if (stop_fd >= 0)
        poke(stop_fd);
    if (setup_started && join_by(setup_thread, deadline) != 0)
        r = -1;
    for (int i = 0; i < workers_started; i++)
        if (join_by(workers[i], deadline) != 0)
            r = -1;                 /* in a handshake: bounded, but past our deadline */
    if (r != 0)
        return -1;
    for (int i = 0; i < njobs; i++)
        if (jobs[i].kind == JOB_ACCEPT)
            close(jobs[i].fd);
    for (int i = 0; i < nqueued; i++)
        ei_close_connection(queue[i].fd);
    njobs = nqueued = 0;
    close(stop_fd);
    close(wake_fd);
    close(ready_fd);
    return 0;
}
