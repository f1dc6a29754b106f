/* SPDX-License-Identifier: Apache-2.0 */
/* A hot upgrade: a new process (possibly a new binary), started with
 * --takeover and the same options, takes over from the running one on the
 * same host, every stream kept open (docs/operations.md, "Upgrading
 * without dropping a client"). The running process listens on a control
 * socket named after the node (upgrade_wire.h); the new one connects,
 * says which state format and records it reads and with what options it
 * was started. The running one refuses (one line on both sides; it serves
 * on), or stops reading (HTTP and Erlang), empties its queues, and hands
 * over its state: each module's versioned record (lib/carry.h) and the
 * descriptors they name, the listening sockets, every stream's socket,
 * the history, the Erlang links and epmd registration. The new process
 * takes it all without a byte on any socket, says so, and is told to go
 * on only once the running one is leaving (it exits without closing a
 * socket's other end: the new process holds them). Any failure before
 * that leaves the running process serving.
 *
 * The running side, upgrade_give.c: */
#ifndef HTTPDCNODE_UPGRADE_H
#define HTTPDCNODE_UPGRADE_H


#include <event2/event.h>

/* The state format this build writes and reads (2: with topics). */
#define UPGRADE_FORMAT 2

/* Listens on the control socket (the one handed over, for a process that
 * took over). A socket another process holds is logged: no hot upgrade,
 * but the server runs. argv: as main had it (compared with the new
 * process's). -1 only when out of memory. */
int upgrade_serve(struct event_base *base, const char *node, int argc, char **argv);
/* The server is draining: a takeover is refused from now on. */
void upgrade_serve_draining(void);
void upgrade_serve_stop(void);
/* SIGUSR2 (systemctl reload): starts the binary at the path this process
 * was started from (a new one, if it was replaced; init reads the path,
 * at start) with the same arguments and --takeover. SIGCHLD: such a
 * process ended (logged: it did not take over). */
void upgrade_spawn_init(int argc, char **argv);
void upgrade_spawn(void);
void upgrade_reap(void);
/* Once a process that took over serves: under systemd (NotifyAccess=all)
 * it says it is the service's main process now, so that the old one's
 * exit does not stop the service. */
void upgrade_notify_main_pid(void);

/* The taking side, upgrade_take.c, in main's order: receive (before
 * anything starts: connects, is refused or given the state; -1 logged:
 * exit 1); early (before history_init, http_front_start, admin_start and
 * erl_cnode_prepare, which then take what was handed over); late (after
 * them: the streams and what goes with them); commit (the running process
 * lets go: 0, then serve; -1: exit 1 without touching a socket). */
int upgrade_take_receive(const char *node, int argc, char **argv);
int upgrade_take_early(void);
int upgrade_take_late(void);
int upgrade_take_commit(void);
/* Whether this process is taking over (upgrade_take_receive succeeded). */
int upgrade_taking(void);

#endif
