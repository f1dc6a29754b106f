/* SPDX-License-Identifier: Apache-2.0 */
/* The socket layer under ei (its "user supplied socket implementation").
 *
 * ei's own layer waits with select(), whose fd_set cannot hold a descriptor
 * above 1023: with thousands of HTTP streams open, an Erlang socket gets a
 * higher number and select() writes past the fd_set. This layer waits with
 * poll() instead (ei then never calls select on these sockets), caps every
 * wait and every handshake so a stalled peer cannot hold the C-node thread
 * for long, and reads in large
 * blocks so that a burst of small messages costs one recv, not two each. */
#ifndef HTTPDCNODE_ERL_SOCKET_H
#define HTTPDCNODE_ERL_SOCKET_H

#include <ei.h>
#include <stddef.h>
#include <stdint.h>

/* Longest any single socket operation waits, whatever ei asks for. */
#define ERL_SOCKET_MAX_WAIT_MS 5000
/* Longest a whole handshake (in or out) may take. */
#define ERL_SOCKET_HANDSHAKE_MS 3000

extern ei_socket_callbacks erl_socket_callbacks;

struct erl_socket;

/* The socket of an established connection's fd (NULL if not one of ours). */
const struct erl_socket *erl_socket_find(int fd);
/* 1 when bytes already read from s wait in its buffer (0 for NULL). Only
 * the thread that owns the connection may ask. */
int erl_socket_buffered(const struct erl_socket *s);
/* Bytes read from s's peer since it was made (0 for NULL); the owner's. */
uint64_t erl_socket_rx_bytes(const struct erl_socket *s);
/* The next ei_accept_tmo on this thread takes fd, a connection accepted
 * already (non-blocking), instead of accepting one itself. It owns fd
 * from then on, failed or not. */
void erl_socket_hand_accepted(int fd);

/* A hot upgrade (upgrade/): the process taking over makes the previous
 * one's established connection fd (to node peer) its own: ei is told of
 * it as if its handshake had just been made, nothing is sent, and the n
 * unread bytes (the previous process had read them from fd, ei had not
 * yet taken them; at most a read buffer) are read first. The descriptor
 * for ei's calls (fd), or -1 (then fd is closed). */
int erl_socket_adopt(ei_cnode *ec, int fd, const char *peer, const void *unread, size_t n);
/* The same for the listening socket fd: ei_xlisten's descriptor (fd), its
 * port in *port, or -1. */
int erl_socket_adopt_listen(ei_cnode *ec, int fd, int *port);
/* The bytes read from s and not yet taken by ei (*p, the count): what a
 * hand-over passes with the connection. Its owner's. */
size_t erl_socket_unread(const struct erl_socket *s, const char **p);

#endif
