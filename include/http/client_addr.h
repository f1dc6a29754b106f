/* SPDX-License-Identifier: Apache-2.0 */
/* The address of the client a request comes from: the socket's peer, or,
 * when that peer is a proxy listed with --trusted-proxy, the address the
 * proxy says it forwards for (X-Forwarded-For, else X-Real-IP). Nobody
 * else can name an address for themselves. Loop thread only. */
#ifndef HTTPDCNODE_CLIENT_ADDR_H
#define HTTPDCNODE_CLIENT_ADDR_H

#include "lib/peer_addr.h"

struct evhttp_request;

/* At startup: the --trusted-proxy networks, trusted[n] (kept: it must
 * outlive the server). */
void client_addr_configure(const struct peer_net *trusted, uint32_t n);

/* The client of req into *out (family 0 when not known). From a trusted
 * proxy: X-Forwarded-For read from its right end, past the entries that
 * are trusted proxies too (each appends the address it got the request
 * from), the first other one being the client (all trusted: the
 * leftmost); without it, X-Real-IP; without either, the proxy itself.
 * A forwarded address has the port its entry names, else 0. An entry that is not an address stops
 * the walk at the address before it (the proxy's when it is the last),
 * counted in proxy_bad_forwarded. */
void client_addr_of(struct evhttp_request *req, struct peer_addr *out);

#endif
