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
#include <time.h>

#define ERL_SETUP_WORKERS 4         /* handshakes of accepted connections at most */
#define ERL_SETUP_MASTERS_MAX 8     /* options.h's MASTERS_MAX */
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

#endif
