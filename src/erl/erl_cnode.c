/* SPDX-License-Identifier: Apache-2.0 */
/* The C-node thread. One poll loop over: a stop eventfd, the queue of new
 * connections (erl_setup.c makes them on other threads), the replies from
 * the loop and every Erlang connection. Nothing here waits on a peer that
 * is not connected yet. Each master (--master a@h,b@h) is a link of its
 * own: one going or coming back touches none of the others. */
#include "erl/erl_cnode.h"
#include "lib/clock.h"
#include "core/cmd.h"
#include "core/history_origins.h"
#include "erl/erl_link.h"
#include "lib/carry.h"
#include "erl/erl_send.h"
#include "erl/erl_seq.h"
#include "erl/erl_setup.h"
#include "erl/erl_socket.h"
#include "erl/erl_inbound.h"
#include "lib/log.h"
#include "obs/stats.h"

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

#define RECEIVE_TMO_MS 2000
#define REPAIR_CHECK_MS 100
#define BATCH_PER_LINK 256     /* messages read from one link before polling the others */
#define CNODE_STACK_BYTES (256u << 20)
/* After a message larger than this, the receive buffer is given back: it
 * grows to the largest message ever received (ei reallocs it). */
#define XBUF_KEEP_BYTES (1u << 20)

static const struct erl_config *options;
static struct handoff *inbox;      /* Erlang's messages, for the event loop */
static struct handoff *outbox;     /* replies and presence, for Erlang */
static pthread_t thread;
static int stop_fd = -1;
static atomic_int stopping;

static ei_cnode ec;
static int listen_fd = -1, listen_port;
static ei_x_buff xbuf;

/* A hot upgrade (erl_cnode.h): the loop asks, the thread answers through
 * hold_state, each side waking the other with its eventfd. */
enum { RUNNING, HOLD_ASKED, HOLDING, EXPORT_ASKED, EXPORTED };
static atomic_int hold_state;
static int hold_wake_fd = -1;      /* the loop wakes the thread */
static int hold_ack_fd = -1;       /* the thread answers the loop */
static struct carry_out *export_to;
static int export_result;
/* What the process taking over was handed (erl_cnode_carry_take). */
static struct {
    int taken;
    uint32_t creation;
    int listen_fd;
    int publish_fd;
    struct carry_in links, seq;
    uint16_t links_version, seq_version;
    const int *fds;
    uint32_t nfds;
} handed = {.listen_fd = -1, .publish_fd = -1};


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
    short creation = handed.taken ? (short)handed.creation : (short)((time(NULL) & 0x7fff) | 1);
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
    if (handed.listen_fd >= 0) {
        listen_fd = erl_socket_adopt_listen(&ec, handed.listen_fd, &listen_port);
        handed.listen_fd = -1;
        if (listen_fd < 0) {
            log_msg(LOG_ERROR, "takeover: cannot take the Erlang listening socket");
            return -1;
        }
        return 0;
    }
    listen_fd = ei_xlisten(&ec, &addr, &listen_port, 128);
    if (listen_fd < 0) {
        log_msg(LOG_ERROR, "cannot listen for Erlang connections: %s", strerror(erl_errno));
        return -1;
    }
    return 0;
}

/* A connection the setup threads established becomes a link. A master
 * gets the hello, then (the loop makes it) a snapshot of its own. */
static void take_new_link(const struct erl_new_link *n)
{
    if (n->is_master && erl_link_find(n->node)) {
        log_msg(LOG_INFO, "master %s connected twice; keeping the first connection", n->node);
        ei_close_connection(n->fd);
        return;
    }
    int i = erl_link_add(n->fd, n->node, n->is_master);
    if (i < 0) {
        ei_close_connection(n->fd);
        if (n->is_master)
            erl_setup_master_gone(n->node);
        return;
    }
    log_msg(LOG_INFO, n->is_master ? "connected to master %s" : "node %s connected", n->node);
    if (n->is_master)
        erl_seq_master_linked(n->node, clock_now_ms());
    if (n->is_master && erl_send_master_up(erl_link_at(i)))
        erl_inbound_snapshot();
}

/* {Pid, Ref, snapshot} came on link i: the snapshot goes to that master,
 * or, asked by another node, to every master (the loop makes it), each
 * after a hello (its application may have started after the link). */
static void snapshot_asked(int i)
{
    struct erl_link *from = erl_link_at(i);
    for (int j = 0; j < erl_link_count(); j++) {
        struct erl_link *l = erl_link_at(j);
        if (l->is_master && (l == from || !from->is_master))
            erl_send_master_up(l);
    }
}

static void take_new_links(void)
{
    struct erl_new_link n;
    while (erl_setup_take(&n))
        take_new_link(&n);
}

static void drop_link(int i, const char *why)
{
    struct erl_link *l = erl_link_at(i);
    if (l->is_master) {
        log_msg(LOG_INFO, "lost master %s (%s); reconnecting", l->node, why);
        erl_setup_master_gone(l->node);
    } else {
        log_msg(LOG_INFO, "node %s disconnected (%s)", l->node, why);
    }
    erl_send_link_gone(l);      /* its parked client messages to their new masters */
    erl_link_remove(i);
}

/* A master presence was dropped for that has room again gets a snapshot. */
static void check_repairs(void)
{
    int ask = 0;
    for (int i = 0; i < erl_link_count(); i++)
        ask |= erl_send_repair(erl_link_at(i));
    if (ask)
        erl_inbound_snapshot();
}

static void drop_broken_links(void)
{
    for (int i = erl_link_count() - 1; i >= 0; i--)
        if (erl_link_at(i)->broken)
            drop_link(i, erl_link_at(i)->silent ? "silent past --erl-tick-seconds"
                                                : "a send failed");
}

/* The masters' links are judged every quarter of --erl-tick-seconds
 * (erl_link_judge_masters); returns the ms until the next judgement. */
static int64_t next_judgement_ms;

static int judge_links(int64_t now)
{
    int64_t every = (int64_t)options->tick_seconds * 1000 / ERL_LINK_QUIET_JUDGEMENTS;
    if (now >= next_judgement_ms) {
        next_judgement_ms = now + every;
        if (erl_link_judge_masters() > 0)
            drop_broken_links();
    }
    return next_judgement_ms - now;
}

void erl_cnode_trim_xbuf(ei_x_buff *x)
{
    if ((size_t)x->buffsz <= XBUF_KEEP_BYTES)
        return;
    ei_x_free(x);
    ei_x_new(x);
}

/* Reads messages from link i while it has some, up to a batch. */
static void read_link(int i)
{
    int fd = erl_link_at(i)->fd;
    const struct erl_socket *sock = erl_link_at(i)->sock;
    erlang_msg msg;

    for (int n = 0; n < BATCH_PER_LINK; n++) {
        uint32_t acked = 0;
        int r = ei_xreceive_msg_tmo(fd, &msg, &xbuf, RECEIVE_TMO_MS);
        if (r == ERL_ERROR) {
            drop_link(i, erl_errno == ETIMEDOUT ? "timed out mid-message" : "connection closed");
            return;
        }
        int kind = 0;
        if (r == ERL_MSG && (msg.msgtype == ERL_SEND || msg.msgtype == ERL_REG_SEND ||
                             msg.msgtype == ERL_SEND_TT || msg.msgtype == ERL_REG_SEND_TT))
            kind = erl_inbound_message(xbuf.buff, xbuf.index, erl_link_at(i)->node, &acked);
        if (kind == CMD_SNAPSHOT)
            snapshot_asked(i);
        else if (kind == CMD_IN_ACK)
            erl_send_in_acked(erl_link_at(i), acked);
        else if (kind == CMD_IN_RESET)
            erl_send_in_reset(erl_link_at(i));
        erl_cnode_trim_xbuf(&xbuf);
        if (!erl_socket_buffered(sock))
            return;             /* the next poll says when the socket has more */
    }
}

static void poll_once(void)
{
    struct pollfd fds[4 + ERL_LINK_MAX];
    int nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
    fds[nfds++] = (struct pollfd){.fd = hold_wake_fd, .events = POLLIN};
    fds[nfds++] = (struct pollfd){.fd = erl_setup_ready_fd(), .events = POLLIN};
    fds[nfds++] = (struct pollfd){.fd = handoff_wakeup_fd(outbox), .events = POLLIN};
    /* First: a judgement may drop links, which reorders them. */
    int64_t judge_in = judge_links(clock_now_ms());
    int first_link = nfds, nlinks = erl_link_count();
    /* A link whose bytes already sit in its read buffer is ready now,
     * whatever its socket says: do not sleep on it. */
    int buffered = 0, repair = 0;
    for (int i = 0; i < nlinks; i++) {
        fds[nfds++] = (struct pollfd){.fd = erl_link_at(i)->fd, .events = POLLIN};
        buffered |= erl_socket_buffered(erl_link_at(i)->sock);
        repair |= erl_link_at(i)->repair;
    }

    /* A master that presence was dropped for is looked at every
     * REPAIR_CHECK_MS (not by POLLOUT: its socket may take bytes while it
     * still holds too many unsent). */
    int wait = buffered ? 0 : repair ? REPAIR_CHECK_MS : 1000;
    if (judge_in < wait)
        wait = (int)judge_in;
    int seq_wait = erl_seq_active() ? erl_seq_wait_ms(clock_now_ms()) : -1;
    if (seq_wait >= 0 && seq_wait < wait)
        wait = seq_wait;
    int ready = poll(fds, (nfds_t)nfds, wait);
    if (repair)
        check_repairs();
    erl_send_check_windows();
    erl_inbound_seq_tick();
    if (ready < 0 || (ready == 0 && !buffered))
        return;
    if (fds[1].revents) {
        uint64_t n;
        (void)!read(hold_wake_fd, &n, sizeof n);
    }
    if (fds[0].revents || atomic_load(&hold_state) != RUNNING)
        return;                 /* stopping, or a hand-over: cnode_main sees it */

    /* Links from the highest index down: drop_link moves the last link into
     * the freed slot, which has already been served then. */
    for (int i = nlinks - 1; i >= 0; i--)
        if (fds[first_link + i].revents || erl_socket_buffered(erl_link_at(i)->sock))
            read_link(i);
    if (fds[2].revents)
        take_new_links();
    if (fds[3].revents)
        erl_send_drain();
    /* Last: dropping links reorders them, so nothing above may follow. */
    drop_broken_links();
}

/* ---------------------------------------------------------------- hand-over */

static void answer_loop(int state)
{
    uint64_t one = 1;
    atomic_store(&hold_state, state);
    (void)!write(hold_ack_fd, &one, sizeof one);
}

/* One turn while a hand-over holds the thread: no link is read (what
 * Erlang sends waits in the sockets, for this process or the next), the
 * outbox is still sent; asked, the links are exported. */
static void hold_turn(int state)
{
    if (state == HOLD_ASKED) {
        answer_loop(HOLDING);
        return;
    }
    if (state == EXPORT_ASKED) {
        erl_send_drain();            /* all the loop queued before it asked */
        size_t at = carry_begin(export_to, ERL_CNODE_CARRY_TAG, ERL_CNODE_CARRY_VERSION);
        carry_u32(export_to, ec.creation);
        carry_u32(export_to, carry_fd(export_to, listen_fd));
        int publish = erl_setup_epmd_fd();
        carry_u8(export_to, publish >= 0);
        carry_u32(export_to, publish >= 0 ? carry_fd(export_to, publish) : 0);
        carry_end(export_to, at);
        export_result = erl_link_carry_export(export_to) == 0 &&
                        erl_seq_carry_export(export_to) == 0 ? 0 : -1;
        answer_loop(EXPORTED);
        return;
    }
    struct pollfd fds[3] = {{.fd = stop_fd, .events = POLLIN},
                            {.fd = hold_wake_fd, .events = POLLIN},
                            {.fd = handoff_wakeup_fd(outbox), .events = POLLIN}};
    if (poll(fds, 3, 100) > 0 && fds[2].revents && state == HOLDING)
        erl_send_drain();
    if (fds[1].revents) {
        uint64_t n;
        (void)!read(hold_wake_fd, &n, sizeof n);
    }
}

/* Asks the thread to go to state and waits for its answer, up to
 * deadline_ms; wait is called meanwhile (the loop's own work). */
static int ask(int state, int answer, int64_t deadline_ms, void (*wait)(void))
{
    uint64_t one = 1, n;
    atomic_store(&hold_state, state);
    (void)!write(hold_wake_fd, &one, sizeof one);
    while (atomic_load(&hold_state) != answer) {
        if (clock_now_ms() >= deadline_ms)
            return -1;
        if (wait)
            wait();
        struct pollfd p = {.fd = hold_ack_fd, .events = POLLIN};
        if (poll(&p, 1, 5) > 0)
            (void)!read(hold_ack_fd, &n, sizeof n);
    }
    return 0;
}

int erl_cnode_hold(int64_t deadline_ms, void (*wait)(void))
{
    if (erl_setup_hold(1, deadline_ms) != 0 || ask(HOLD_ASKED, HOLDING, deadline_ms, wait) != 0) {
        log_msg(LOG_ERROR, "takeover: the C-node thread did not stop reading in time");
        return -1;
    }
    return 0;
}

int erl_cnode_carry_export(struct carry_out *o, int64_t deadline_ms)
{
    export_to = o;
    if (ask(EXPORT_ASKED, EXPORTED, deadline_ms, NULL) != 0) {
        log_msg(LOG_ERROR, "takeover: the C-node thread did not hand over its links in time");
        return -1;
    }
    return export_result;
}

void erl_cnode_release(void)
{
    uint64_t one = 1;
    export_to = NULL;
    atomic_store(&hold_state, RUNNING);
    (void)!write(hold_wake_fd, &one, sizeof one);
    erl_setup_hold(0, clock_now_ms() + 1000);
}

int erl_cnode_carry_take(const struct carry_in *state, const int *fds, uint32_t nfds)
{
    uint16_t version;
    struct carry_in rec;
    if (carry_find(state, ERL_CNODE_CARRY_TAG, &version, &rec) != 1)
        return -1;
    handed.creation = carry_get_u32(&rec);
    uint32_t lfd = carry_get_u32(&rec);
    int published = carry_get_u8(&rec);
    uint32_t pfd = carry_get_u32(&rec);
    if (rec.failed || lfd >= nfds || (published && pfd >= nfds) ||
        carry_find(state, ERL_LINK_CARRY_TAG, &handed.links_version, &handed.links) != 1 ||
        carry_find(state, ERL_SEQ_CARRY_TAG, &handed.seq_version, &handed.seq) != 1)
        return -1;
    handed.listen_fd = fds[lfd];
    handed.publish_fd = published ? fds[pfd] : -1;
    handed.fds = fds;
    handed.nfds = nfds;
    handed.taken = 1;
    return 0;
}

static int adopt_link(int fd, const char *node, const void *unread, size_t n)
{
    return erl_socket_adopt(&ec, fd, node, unread, n);
}

/* erl_cnode_prepare's part of a hand-over: the links, as they were. */
static int take_links(void)
{
    if (handed.publish_fd >= 0)
        erl_setup_epmd_adopt(handed.publish_fd);
    handed.publish_fd = -1;
    if (erl_link_carry_take(&handed.links, handed.links_version, handed.fds, handed.nfds,
                            adopt_link) != 0 ||
        erl_seq_carry_take(&handed.seq, handed.seq_version) != 0)
        return -1;
    for (int i = 0; i < erl_link_count(); i++)
        if (erl_link_at(i)->is_master)
            erl_setup_adopt_master(erl_link_at(i)->node);
    log_msg(LOG_INFO, "takeover: %d Erlang links and the epmd registration taken over",
            erl_link_count());
    return 0;
}

static void *cnode_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        int state = atomic_load(&hold_state);
        if (state != RUNNING)
            hold_turn(state);
        else
            poll_once();
    }
    erl_link_close_all();
    ei_x_free(&xbuf);
    erl_seq_free();
    erl_send_free();
    return NULL;
}

int erl_cnode_start(const struct erl_config *opts, struct handoff *in, struct handoff *out)
{
    return erl_cnode_prepare(opts, in, out) == 0 && erl_cnode_run() == 0 ? 0 : -1;
}

/* For erl_seq: whether a hole's own master is linked (not judged silent). */
static int master_linked(const char *node)
{
    const struct erl_link *l = erl_link_find(node);
    return l && l->is_master && !l->broken;
}

/* A restart with a --history-file: each master's numbered stream goes on
 * after the last number the file holds all of (erl_seq.h). */
static void restore_streams(void)
{
    int n = 0;
    for (uint32_t k = 0; k < ERL_SEQ_ORIGINS; k++) {
        uint64_t hash, inc, applied;
        if (history_origin_found(k, &hash, &inc, &applied)) {
            erl_seq_restore(k, hash, inc, applied);
            n++;
        }
    }
    if (n)
        log_msg(LOG_INFO, "history: where %d masters' numbered streams stood is in the file: "
                          "each hello tells its master, which sends again only what it lacks", n);
}

int erl_cnode_prepare(const struct erl_config *opts, struct handoff *in, struct handoff *out)
{
    options = opts;
    inbox = in;
    outbox = out;
    erl_inbound_init(inbox, opts->max_users, opts->max_message, opts->inbox);

    if (ei_init() != 0) {
        log_msg(LOG_ERROR, "ei_init failed");
        return -1;
    }
    if (init_cnode() != 0 || start_listening() != 0)
        return -1;
    ei_x_new(&xbuf);
    erl_send_init(&ec, outbox, opts);
    erl_seq_init(erl_send_seq_ack, master_linked);
    restore_streams();
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    hold_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    hold_ack_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0 || hold_wake_fd < 0 || hold_ack_fd < 0) {
        log_msg(LOG_ERROR, "eventfd: %m");
        return -1;
    }
    return handed.taken ? take_links() : 0;
}

int erl_cnode_run(void)
{
    const struct erl_config *opts = options;
    const char *masters[ERL_SETUP_MASTERS_MAX];
    for (uint32_t i = 0; i < opts->n_masters; i++)
        masters[i] = opts->masters[i];
    if (erl_setup_start(&ec, listen_fd, listen_port, masters, (int)opts->n_masters) != 0)
        return -1;
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

int erl_cnode_stop(void)
{
    uint64_t one = 1;
    atomic_store(&stopping, 1);
    handoff_close(inbox);
    (void)!write(stop_fd, &one, sizeof one);
    /* The thread notices within a poll; a read of a connected node that
     * stalls mid-message may hold it longer, and exit closes its sockets. */
    struct timespec deadline = clock_realtime_in_ms(700);
    if (pthread_timedjoin_np(thread, NULL, &deadline) != 0) {
        log_msg(LOG_INFO, "C-node thread busy in an Erlang call; exiting without it");
        return -1;
    }
    close(stop_fd);
    close(hold_wake_fd);
    close(hold_ack_fd);
    /* After the C-node thread: it tells the setup threads when the master goes. */
    if (erl_setup_stop(&deadline) != 0) {
        log_msg(LOG_INFO, "an Erlang handshake is still in progress; exiting without it");
        return -1;
    }
    ei_close_connection(listen_fd);
    return 0;
}
