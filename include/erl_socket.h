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

/* Longest any single socket operation waits, whatever ei asks for. */
#define ERL_SOCKET_MAX_WAIT_MS 5000
/* Longest a whole handshake (in or out) may take. */
#define ERL_SOCKET_HANDSHAKE_MS 3000

extern ei_socket_callbacks erl_socket_callbacks;

/* 1 when bytes already read from fd's socket wait in its buffer. */
int erl_socket_buffered(int fd);

#endif
