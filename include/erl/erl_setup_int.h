/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the connection setup (erl_setup.h): what its files share. Each
 * file has one job, and they use each other in one direction only:
 *   erl_setup_state.c   the lock, the eventfds, the cnode copy
 *   erl_setup_master.c  each master: name, link, backoff, the connect
 *   erl_setup_queue.c   the new-link queue to the C-node thread
 *   erl_setup_pool.c    the handshake and connect threads and their jobs
 *   erl_setup_accept.c  accepting nodes' connections (or refusing them)
 *   erl_setup_epmd.c    the name's registration with epmd
 *   erl_setup.c         the setup thread, start and stop
 * Not for the rest of the server. */
#ifndef HTTPDCNODE_ERL_SETUP_INT_H
#define HTTPDCNODE_ERL_SETUP_INT_H

#include "erl/erl_setup.h"

#include <ei.h>
#include <pthread.h>
#include <stdint.h>

/* ---- erl_setup_state.c ---- */
extern ei_cnode erl_setup_ec;        /* the threads' copy: ei reads it during handshakes */
extern int erl_setup_listen_fd, erl_setup_listen_port;
extern int erl_setup_stop_fd;        /* readable once stopping (never cleared) */
extern int erl_setup_wake_fd;        /* wakes the setup thread: a job ended, a master went */
extern int erl_setup_queue_fd;       /* the C-node thread has connections to take */
/* Everything marked "lock held" is under it, and so is erl_setup_stopping. */
extern pthread_mutex_t erl_setup_lock;
extern int erl_setup_stopping;
void erl_setup_poke(int efd);

/* ---- erl_setup_master.c ---- */
int erl_setup_master_add(const char *node);
int erl_setup_master_count(void);
/* The index of master node, or -1 (the names do not change once started). */
int erl_setup_master_index(const char *node);
/* Lock held: master i has a link now. */
void erl_setup_master_linked(int i);
/* Lock held: the most overdue master at now, marked connecting, or -1. */
int erl_setup_master_due(int64_t now);
/* Lock held: master i was due but no thread was free: not connecting. */
void erl_setup_master_undue(int i);
/* Lock held: ms until the next master is due (at most t). */
int64_t erl_setup_master_wait(int64_t now, int64_t t);
const char *erl_setup_master_node(int i);
/* On a connect thread: epmd's answer, then the handshake, both bounded.
 * The fd, or -1 and why. */
int erl_setup_master_dial(int i, const char **why);
/* The dial's outcome: the backoff starts again, or grows (logged once). */
void erl_setup_master_dialled(int i, int ok, const char *why);

/* ---- erl_setup_queue.c ---- */
/* A link established with node (master: its index, or -1): to the
 * C-node thread, or closed when it has too many waiting. */
void erl_setup_queue_push(int fd, const char *node, int master);
/* Closes the links not taken (at stop, once every thread is joined). */
void erl_setup_queue_close(void);

/* ---- erl_setup_pool.c ---- */
enum erl_setup_job { ERL_SETUP_JOB_ACCEPT, ERL_SETUP_JOB_CONNECT };
/* Lock held: 1 when a thread of the kind was free to take the job. */
int erl_setup_pool_give(enum erl_setup_job kind, int fd, int master);
int erl_setup_pool_start(int threads);
/* Wakes the threads to stop; joins them by deadline (-1 when one is still
 * in a handshake); then closes the accepted connections not taken. */
void erl_setup_pool_wake_all(void);
int erl_setup_pool_join(const struct timespec *deadline);
void erl_setup_pool_close(void);

/* ---- erl_setup_accept.c ---- */
/* The listen socket is readable: hands the connections to the pool. */
void erl_setup_accept_some(void);
/* The listen socket to poll now (-1: paused, out of descriptors), and the
 * ms until it is polled again (at most t). */
int erl_setup_accept_fd(int64_t now);
int64_t erl_setup_accept_wait(int64_t now, int64_t t);

/* ---- erl_setup_epmd.c ---- */
/* Registers the name when it is due; the epmd socket to poll (or -1). */
int erl_setup_epmd_step(int64_t now);
/* The epmd socket is readable. */
void erl_setup_epmd_readable(void);
int64_t erl_setup_epmd_wait(int64_t now, int64_t t);
/* Unregisters (at the setup thread's end). */
void erl_setup_epmd_close(void);

#endif
