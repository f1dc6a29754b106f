/* SPDX-License-Identifier: Apache-2.0 */
/* Setting up Erlang connections, off the C-node thread: a setup thread
 * accepts nodes' connections, keeps the name registered with epmd and
 * decides when to connect out to each master; ERL_SETUP_WORKERS handshake
 * threads run the handshakes of accepted connections (each bounded by
 * ERL_SOCKET_HANDSHAKE_MS), so a peer that connects and stays silent holds
 * one of them, never the C-node thread; one more thread per master
 * connects out to masters (each attempt bounded by EPMD_TIMEOUT_MS plus
 * ERL_SOCKET_HANDSHAKE_MS), so neither kind can starve the other and no
 * master waits for another's attempt. A
 * connection that comes while every handshake thread is
 * busy is closed at once and counted (erl_refused). Established
 * connections reach the C-node thread through one small locked queue and
 * an eventfd. */
#ifndef HTTPDCNODE_ERL_SETUP_H
#define HTTPDCNODE_ERL_SETUP_H

#include <ei.h>
#include <stdint.h>
#include <time.h>

#define ERL_SETUP_WORKERS 4         /* handshakes of accepted connections at most */
#define ERL_SETUP_MASTERS_MAX 8     /* --master: masters linked at once, at most */
#define ERL_SETUP_RECONNECT_MIN_MS 100
#define ERL_SETUP_RECONNECT_MAX_MS 3000

struct erl_new_link {
    int fd;
    int is_master;
    char node[MAXNODELEN + 1];
};

/* ec is copied (the C-node thread keeps using its own); listen_fd comes
 * from ei_xlisten on ec. masters: n node names (n may be 0), copied; a
 * connection from one of them, made or accepted, is a master link. */
int erl_setup_start(const ei_cnode *ec, int listen_fd, int listen_port,
                    const char *const *masters, int n);
/* Readable when an established connection waits (erl_setup_take clears it). */
int erl_setup_ready_fd(void);
/* Takes one established connection; 1 when one was taken. */
int erl_setup_take(struct erl_new_link *out);
/* The C-node thread has no link to master node (any more): connect to it
 * again soon. The other masters are not touched. */
void erl_setup_master_gone(const char *node);
/* Stops the threads and joins them by deadline; closes what they held
 * (the epmd registration, connections not taken). -1 when a thread was
 * still in a handshake at the deadline (then nothing may be freed). */
int erl_setup_stop(const struct timespec *deadline);

/* A hot upgrade (upgrade/). hold 1: the setup thread accepts no node,
 * connects to no master and does not register with epmd until hold 0;
 * returns once it holds (or goes on), -1 past deadline_ms (monotonic).
 * While it holds, erl_setup_epmd_fd is the socket of the name's epmd
 * registration (-1: none), which the hand-over passes on. */
int erl_setup_hold(int on, int64_t deadline_ms);
int erl_setup_epmd_fd(void);
/* The process taking over, before erl_setup_start: the registration it
 * took (kept, not made again), and each master it took a link to (not
 * connected to again while that link lasts). */
void erl_setup_epmd_adopt(int fd);
void erl_setup_adopt_master(const char *node);

#endif
