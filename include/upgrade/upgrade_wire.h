/* SPDX-License-Identifier: Apache-2.0 */
/* The control socket of a hot upgrade: a Unix SOCK_SEQPACKET socket in the
 * abstract namespace, named after the node (two nodes on a host never
 * share a name: epmd sees to it), which the running process listens on
 * and a process started with --takeover connects to. Only a peer of the
 * same user, or root, is talked to (SO_PEERCRED, checked at both ends).
 * Messages are whole (a packet each); descriptors travel with SCM_RIGHTS,
 * at most UPGRADE_FDS_MAX a message. Every wait has a deadline. */
#ifndef HTTPDCNODE_UPGRADE_WIRE_H
#define HTTPDCNODE_UPGRADE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UPGRADE_FDS_MAX 253          /* SCM_MAX_FD */
#define UPGRADE_MSG_MAX 65536        /* bytes of a message at most */

/* Listening, non-blocking: the descriptor, or -1 (errno; EADDRINUSE:
 * another process holds the name). */
int upgrade_wire_listen(const char *node);
/* Connected to the process listening for node, or -1 (errno; ECONNREFUSED
 * or ENOENT: none is). */
int upgrade_wire_connect(const char *node);
/* Accepts one connection of a peer of our user (or root): its descriptor
 * and pid, or -1 (nothing to accept, or a stranger, closed and logged). */
int upgrade_wire_accept(int listen_fd, int *pid);
/* Whether the peer of a connected socket is of our user (or root): 0. */
int upgrade_wire_peer_ok(int fd, int *pid);

/* Sends one message (n bytes, with nfds descriptors). 0, or -1 (errno). */
int upgrade_wire_send(int fd, const void *p, size_t n, const int *fds, uint32_t nfds,
                      int64_t deadline_ms);
/* Receives one message into buf (room size): its length, with up to
 * fds_room descriptors into fds (count in *nfds, close-on-exec). -1
 * (errno: ETIMEDOUT past deadline_ms, ECONNRESET when the peer closed,
 * EMSGSIZE when descriptors were cut). */
ssize_t upgrade_wire_recv(int fd, void *buf, size_t size, int *fds, uint32_t fds_room,
                          uint32_t *nfds, int64_t deadline_ms);

#endif
