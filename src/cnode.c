/* The C-node thread. One poll loop over: a stop eventfd, the listen
 * socket, the epmd registration socket and every Erlang connection. */
#include "cnode.h"
#include "cmd.h"
#include "erl_link.h"
#include "erl_send.h"
#include "erl_socket.h"
#include "latency_probe.h"
#include "log.h"
#include "stats.h"
#include "term.h"

#include <arpa/inet.h>
#include <ei.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 3000
#define ACCEPT_TMO_MS 2000
#define RECEIVE_TMO_MS 2000
#define BATCH_PER_LINK 256     /* messages read from one link before polling the others */
#define RESERVE_TMO_MS 1000    /* while the loop is behind, tick the links this often */
#define CNODE_STACK_BYTES (256u << 20)

static const struct options *options;
static struct handoff *to_loop_q;     /* messages for the event loop */
static struct handoff *from_loop_q;   /* replies and presence for Erlang */
static pthread_t thread;
static int stop_fd = -1;
static atomic_int stopping;

static ei_cnode ec;
static int listen_fd = -1, listen_port;
static int publish_fd = -1;
static struct term_limits limits;
static ei_x_buff xbuf;

/* Reconnection state of the master link, for logging once per change. */
enum master_state { MASTER_UNKNOWN, MASTER_UP, MASTER_DOWN };
static enum master_state master_state = MASTER_UNKNOWN;
static int64_t next_connect_ms, connect_backoff_ms = RECONNECT_MIN_MS;
static int64_t next_publish_ms;
static int publish_failed_logged;

static struct log_ratelimit bad_term_rl;
static struct log_ratelimit accept_rl;
static int64_t listen_paused_until_ms;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int init_cnode(void)
{
    char alive[256], host[256];
    const char *at = strchr(options->name, '@');
    size_t alen = (size_t)(at - options->name);
    memcpy(alive, options->name, alen);
    alive[alen] = '\0';
    strcpy(host, at + 1);

    struct in_addr addr;
    addr.s_addr = htonl(INADDR_LOOPBACK);
    /* xinit, not init: the node must be alive@host as given, whatever the
     * machine's host name is. */
    short creation = (short)((time(NULL) & 0x7fff) | 1);
    if (ei_connect_xinit_ussi(&ec, host, alive, options->name, &addr, options->cookie,
                              (unsigned)creation, &erl_socket_callbacks,
                              sizeof erl_socket_callbacks, NULL) < 0) {
        log_msg(LOG_ERROR, "ei_connect_xinit failed for node %s", options->name);
        return -1;
    }
    return 0;
}

/* Loopback only when the node is named @localhost (nothing else could
 * reach it by that name); otherwise every address, for nodes on other hosts. */
static int start_listening(void)
{
    const char *host = strchr(options->name, '@') + 1;
    struct in_addr addr;
    addr.s_addr = htonl(strcmp(host, "localhost") == 0 || strcmp(host, "127.0.0.1") == 0
                            ? INADDR_LOOPBACK
                            : INADDR_ANY);
    listen_port = 0;
    listen_fd = ei_xlisten(&ec, &addr, &listen_port, 128);
    if (listen_fd < 0) {
        log_msg(LOG_ERROR, "cannot listen for Erlang connections: %s", strerror(erl_errno));
        return -1;
    }
    return 0;
}

/* Registers our name and port with epmd; retried while epmd is not up. */
static void try_publish(void)
{
    publish_fd = ei_publish(&ec, listen_port);
    if (publish_fd >= 0) {
        log_msg(LOG_INFO, "published %s to epmd (port %d)", options->name, listen_port);
        publish_failed_logged = 0;
        return;
    }
    if (!publish_failed_logged)
        log_msg(LOG_ERROR, "cannot register %s with epmd (%s): is epmd running "
                           "(epmd -daemon), or does another node use this name? retrying",
                options->name, strerror(erl_errno));
    publish_failed_logged = 1;
    next_publish_ms = now_ms() + 1000;
}

/* The epmd socket is readable: EOF means epmd went away and forgot us;
 * bytes (epmd's reply tail) are read and ignored. */
static void check_registration(void)
{
    char buf[64];
    ssize_t n = recv(publish_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return;
    log_msg(LOG_INFO, "epmd registration lost; registering again");
    close(publish_fd);
    publish_fd = -1;
    next_publish_ms = now_ms();
}

static void *reserve_record(size_t size);

/* The master is (again) connected: ask the loop for a presence snapshot. */
static void master_came_up(void)
{
    master_state = MASTER_UP;
    connect_backoff_ms = RECONNECT_MIN_MS;
    if (!options->presence[0])
        return;
    struct cmd *c = reserve_record(cmd_size(0, 0, 0));
    if (!c)
        return;
    *c = (struct cmd){.kind = CMD_SNAPSHOT};
    handoff_commit(to_loop_q);
}

static void try_connect_master(void)
{
    /* No _tmo: a timeout would make ei wait on epmd's socket with select().
     * epmd is local; the node connection itself is bounded by erl_socket. */
    int fd = ei_connect(&ec, (char *)options->master);
    if (fd >= 0) {
        if (erl_link_add(fd, options->master, 1) < 0) {
            ei_close_connection(fd);
            return;
        }
        log_msg(LOG_INFO, "connected to master %s", options->master);
        master_came_up();
        return;
    }
    if (master_state != MASTER_DOWN)
        log_msg(LOG_INFO, "master %s not reachable; retrying every %d s at most "
                          "(HTTP clients are served meanwhile)",
                options->master, RECONNECT_MAX_MS / 1000);
    master_state = MASTER_DOWN;
    next_connect_ms = now_ms() + connect_backoff_ms;
    connect_backoff_ms *= 2;
    if (connect_backoff_ms > RECONNECT_MAX_MS)
        connect_backoff_ms = RECONNECT_MAX_MS;
}

static void accept_link(void)
{
    ErlConnect conn;
    int fd = ei_accept_tmo(&ec, listen_fd, &conn, ACCEPT_TMO_MS);
    if (fd < 0) {
        if (erl_errno == EMFILE || erl_errno == ENFILE) {
            /* The connection stays queued; listening again at once would spin. */
            listen_paused_until_ms = now_ms() + 1000;
            log_limited(&accept_rl, LOG_ERROR, "cannot accept an Erlang node: out of file "
                        "descriptors (raise ulimit -n, or hold fewer streams)");
        } else {
            log_limited(&accept_rl, LOG_DEBUG, "Erlang connection attempt failed (%s): "
                        "wrong cookie?", strerror(erl_errno));
        }
        return;
    }
    int is_master = options->master[0] && strcmp(conn.nodename, options->master) == 0;
    if (erl_link_add(fd, conn.nodename, is_master) < 0) {
        ei_close_connection(fd);
        return;
    }
    log_msg(LOG_INFO, "node %s connected", conn.nodename);
    if (is_master)
        master_came_up();
}

static void drop_link(int i, const char *why)
{
    struct erl_link *l = erl_link_at(i);
    if (l->is_master) {
        log_msg(LOG_INFO, "lost master %s (%s); reconnecting", l->node, why);
        master_state = MASTER_DOWN;
        next_connect_ms = now_ms() + RECONNECT_MIN_MS;
        connect_backoff_ms = RECONNECT_MIN_MS;
    } else {
        log_msg(LOG_INFO, "node %s disconnected (%s)", l->node, why);
    }
    erl_link_remove(i);
}

static void drop_broken_links(void)
{
    for (int i = erl_link_count() - 1; i >= 0; i--)
        if (erl_link_at(i)->broken)
            drop_link(i, "a send failed");
}

static void count_bad_term(enum term_error e)
{
    switch (e) {
    case TERM_BAD_UID: atomic_fetch_add(&cnode_stats.bad_uid, 1); break;
    case TERM_TOO_BIG: atomic_fetch_add(&cnode_stats.too_big, 1); break;
    case TERM_EMPTY: atomic_fetch_add(&cnode_stats.empty, 1); break;
    default: atomic_fetch_add(&cnode_stats.bad_terms, 1); break;
    }
    log_limited(&bad_term_rl, LOG_INFO, "dropped a message: %s", term_error_str(e));
}

/* Room in the hand-off; while the loop is behind, keep the links ticking
 * so that no peer drops us for silence. NULL when stopping. */
static void *reserve_record(size_t size)
{
    void *rec;
    while (!(rec = handoff_reserve(to_loop_q, size, RESERVE_TMO_MS))) {
        if (atomic_load(&stopping))
            return NULL;
        atomic_fetch_add(&cnode_stats.backpressure, 1);
        erl_link_tick_all();
    }
    return rec;
}

/* buf[0..len) is one message, as ei_xreceive_msg leaves it in xbuf. */
static void handle_message(const char *buf, int len)
{
    int index = 0, version;
    struct term_view v;
    enum term_error e;

    atomic_fetch_add(&cnode_stats.msgs_in, 1);
    if (len < 1 || ei_decode_version(buf, &index, &version) != 0)
        e = TERM_BAD_SHAPE;
    else
        e = term_parse(buf, index, len, &limits, &v);
    if (e != TERM_OK) {
        count_bad_term(e);
        return;
    }
    uint32_t reply_len = v.has_reply ? (uint32_t)v.reply_len : 0;
    struct cmd *c = reserve_record(cmd_size(v.nuids, v.payload_len, reply_len));
    if (!c)
        return;
    static const uint8_t kinds[] = {
        [TERM_UNICAST] = CMD_UNICAST, [TERM_MULTICAST] = CMD_MULTICAST,
        [TERM_BROADCAST] = CMD_BROADCAST, [TERM_KICK] = CMD_KICK, [TERM_STATS] = CMD_STATS,
        [TERM_SNAPSHOT] = CMD_SNAPSHOT,
    };
    c->kind = kinds[v.kind];
    c->reply_len = (uint16_t)reply_len;
    c->uid = v.uid;
    c->nuids = v.nuids;
    c->payload_len = v.payload_len;
    c->received_ns = probe_enabled ? probe_now_ns() : 0;
    if (v.nuids)
        term_copy_uids(buf, &v, cmd_uids(c));
    if (v.payload_len)
        term_copy_payload(buf, &v, cmd_payload(c));
    if (reply_len)
        memcpy(cmd_reply(c), buf + v.reply_index, reply_len);
    handoff_commit(to_loop_q);
}


/* Reads messages from link i while it has some, up to a batch. */
static void read_link(int i)
{
    int fd = erl_link_at(i)->fd;
    erlang_msg msg;

    for (int n = 0; n < BATCH_PER_LINK; n++) {
        int r = ei_xreceive_msg_tmo(fd, &msg, &xbuf, RECEIVE_TMO_MS);
        if (r == ERL_ERROR) {
            drop_link(i, erl_errno == ETIMEDOUT ? "timed out mid-message" : "connection closed");
            return;
        }
        if (r == ERL_MSG && (msg.msgtype == ERL_SEND || msg.msgtype == ERL_REG_SEND ||
                             msg.msgtype == ERL_SEND_TT || msg.msgtype == ERL_REG_SEND_TT))
            handle_message(xbuf.buff, xbuf.index);   /* index: the message length */
        if (!erl_socket_buffered(fd))
            return;             /* the next poll says when the socket has more */
    }
}

static int64_t next_timeout_ms(void)
{
    int64_t now = now_ms(), t = 1000;
    if (listen_paused_until_ms > now && listen_paused_until_ms - now < t)
        t = listen_paused_until_ms - now;
    if (options->master[0] && master_state != MASTER_UP && next_connect_ms - now < t)
        t = next_connect_ms - now;
    if (publish_fd < 0 && next_publish_ms - now < t)
        t = next_publish_ms - now;
    return t < 0 ? 0 : t;
}

static void run_timers(void)
{
    int64_t now = now_ms();
    if (options->master[0] && !erl_link_find(options->master) && now >= next_connect_ms)
        try_connect_master();
    if (publish_fd < 0 && now >= next_publish_ms)
        try_publish();
}

static void poll_once(void)
{
    struct pollfd fds[4 + ERL_LINK_MAX];
    int nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
    int listening = now_ms() >= listen_paused_until_ms;
    fds[nfds++] = (struct pollfd){.fd = listening ? listen_fd : -1, .events = POLLIN};
    fds[nfds++] = (struct pollfd){.fd = publish_fd, .events = POLLIN};  /* -1 is ignored */
    fds[nfds++] = (struct pollfd){.fd = handoff_wakeup_fd(from_loop_q), .events = POLLIN};
    int first_link = nfds, nlinks = erl_link_count();
    /* A link whose bytes already sit in its read buffer is ready now,
     * whatever its socket says: do not sleep on it. */
    int buffered = 0;
    for (int i = 0; i < nlinks; i++) {
        int fd = erl_link_at(i)->fd;
        fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
        buffered |= erl_socket_buffered(fd);
    }

    int ready = poll(fds, (nfds_t)nfds, buffered ? 0 : (int)next_timeout_ms());
    if (ready < 0 || (ready == 0 && !buffered))
        return;
    if (fds[0].revents)
        return;
    if (fds[2].revents)
        check_registration();

    /* Links from the highest index down: drop_link moves the last link into
     * the freed slot, which has already been served then. */
    for (int i = nlinks - 1; i >= 0; i--)
        if (fds[first_link + i].revents || erl_socket_buffered(fds[first_link + i].fd))
            read_link(i);
    if (fds[1].revents & POLLIN)
        accept_link();
    /* Last: dropping links reorders them, so nothing above may follow. */
    if (fds[3].revents) {
        erl_send_drain();
        drop_broken_links();
    }
}

static void *cnode_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        run_timers();
        poll_once();
    }
    erl_link_close_all();
    if (publish_fd >= 0)
        close(publish_fd);        /* unregisters from epmd */
    ei_close_connection(listen_fd);
    ei_x_free(&xbuf);
    erl_send_free();
    return NULL;
}

int cnode_start(const struct options *opts, struct handoff *to_loop, struct handoff *from_loop)
{
    options = opts;
    to_loop_q = to_loop;
    from_loop_q = from_loop;
    limits.max_users = opts->max_users;
    limits.max_message = opts->max_message;
    /* Room left in the largest record once the payload is in it; options
     * keep --max-message well below the record size. */
    limits.max_uids = (uint32_t)((handoff_max_record(to_loop) - sizeof(struct cmd) -
                                  opts->max_message - 1024) / 4);

    if (ei_init() != 0) {
        log_msg(LOG_ERROR, "ei_init failed");
        return -1;
    }
    if (init_cnode() != 0 || start_listening() != 0)
        return -1;
    ei_x_new(&xbuf);
    erl_send_init(&ec, from_loop, opts->master, opts->presence);
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0) {
        log_msg(LOG_ERROR, "eventfd: %m");
        return -1;
    }
    /* ei decodes nested terms recursively: room for TERM_MAX_DEPTH levels
     * (only the pages a deep term touches are ever used). */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, CNODE_STACK_BYTES);
    int err = pthread_create(&thread, &attr, cnode_main, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        log_msg(LOG_ERROR, "cannot start the C-node thread: %s", strerror(err));
        return -1;
    }
    return 0;
}

int cnode_stop(void)
{
    uint64_t one = 1;
    atomic_store(&stopping, 1);
    handoff_close(to_loop_q);
    (void)!write(stop_fd, &one, sizeof one);
    /* The thread notices within a poll; a blocking ei call (a handshake
     * with a dying peer) may hold it longer, and exit closes its sockets. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 700 * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(thread, NULL, &deadline) != 0) {
        log_msg(LOG_INFO, "C-node thread busy in an Erlang call; exiting without it");
        return -1;
    }
    close(stop_fd);
    return 0;
}
