/* SPDX-License-Identifier: Apache-2.0 */
/* What the HTTP door is configured with: server.c makes it from the
 * options once; http_front.c hands each of its files its part. Apart (a
 * header with no source) so that those files share it without including
 * each other. Strings and lists point into the options, which outlive the
 * server. */
#ifndef HTTPDCNODE_HTTP_CONFIG_H
#define HTTPDCNODE_HTTP_CONFIG_H

#include "core/client_rate.h"
#include "lib/peer_addr.h"

#include <stdint.h>

#define HTTP_ORIGIN_MAX 16          /* --allow-origin, at most */
#define HTTP_ORIGIN_BYTES 256       /* one origin, its NUL included */
#define HTTP_TRUSTED_MAX 16         /* --trusted-proxy networks, at most */

struct http_origins {
    const char (*list)[HTTP_ORIGIN_BYTES];
    uint32_t n;                 /* 0: none; an entry "*": any */
};

struct http_config {
    const char *listen_host;    /* --listen */
    uint16_t listen_port;
    const char *node;           /* --name, for the built-in page */
    uint32_t max_users;         /* uids 1..max_users */
    uint32_t header_timeout;    /* seconds from a request's first byte to its end */
    uint32_t keepalive;         /* TCP keepalive idle seconds, 0 off */
    struct http_origins origins;            /* --allow-origin */
    const struct peer_net *trusted;         /* --trusted-proxy */
    uint32_t n_trusted;
    struct client_msg_config client;        /* POST /send/N */
};

/* The admin listener (--admin-listen). */
struct admin_config {
    const char *host;
    uint16_t port;              /* 0: none */
    int given;                  /* on the command line: a port in use is an error */
    const char *listen_host;    /* --listen: the same address serves both */
    uint16_t listen_port;
};

#endif
