/* SPDX-License-Identifier: Apache-2.0 */
/* A peer's address (IPv4 or IPv6, with its port when known), read from a
 * socket address or from text (an X-Forwarded-For entry, an option), and
 * networks (ADDR/BITS) to test it against. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is taken as the IPv4 address it maps. No allocation. */
#ifndef HTTPDCNODE_PEER_ADDR_H
#define HTTPDCNODE_PEER_ADDR_H

#include <stddef.h>
#include <stdint.h>

struct sockaddr;

struct peer_addr {          /* 20 bytes */
    uint8_t family;         /* 4, 6, or 0: not known */
    uint8_t pad;
    uint16_t port;          /* host order; 0 when not known (an address from text) */
    uint8_t addr[16];       /* network order; the first 4 bytes for IPv4 */
};

/* A network: the addresses whose first bits bits are those of addr. */
struct peer_net {
    struct peer_addr addr;
    uint8_t bits;           /* 0..32 (IPv4), 0..128 (IPv6) */
};

/* From a socket address: 0, or -1 (family 0) for another family or NULL. */
int peer_addr_from_sockaddr(const struct sockaddr *sa, struct peer_addr *out);

/* From text[0..len): an address, IPv6 maybe in brackets, maybe followed
 * by a port (a.b.c.d:port, [v6]:port), surrounding blanks ignored. 0 when
 * it is one, else -1. */
int peer_addr_parse(const char *text, size_t len, struct peer_addr *out);

/* ADDR or ADDR/BITS (no port); 0, or -1 when it is neither. */
int peer_net_parse(const char *text, struct peer_net *out);

/* Whether a is in n (never when the families differ). */
int peer_net_contains(const struct peer_net *n, const struct peer_addr *a);

#endif
