/* SPDX-License-Identifier: Apache-2.0 */
/* Taking a connection's socket away from evhttp, which keeps ~2 KB per
 * connection, once the reply's head is out (h2o's h2o_socket_export is
 * the model: afterwards the old owner holds no descriptor of the socket). */
#ifndef HTTPDCNODE_SOCKET_EXPORT_H
#define HTTPDCNODE_SOCKET_EXPORT_H

struct evhttp_connection;

/* Opens /dev/null once: its descriptor is put over evhttp's number. */
int socket_export_init(void);
void socket_export_free(void);

/* Our own descriptor of the connection's socket, taken before anything is
 * promised to the client; -1 when no descriptor is left. */
int socket_export_reserve(struct evhttp_connection *evcon);

/* evhttp lets go of the socket: its bufferevent stops watching it, its
 * descriptor number is made to name /dev/null, and the connection (and
 * its request) is freed without its close callback. Afterwards only the
 * reserved descriptor names the socket. -1 when that could not be done:
 * the connection is freed all the same and the caller closes its own. */
int socket_export(struct evhttp_connection *evcon);

#endif
