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

#endif
