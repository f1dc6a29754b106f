/* SPDX-License-Identifier: Apache-2.0 */
/* Peer addresses: see peer_addr.h. */
#include "lib/peer_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void set_v6(struct peer_addr *out, const uint8_t a[16])
{
    if (memcmp(a, v4_mapped, sizeof v4_mapped) == 0) {
        out->family = 4;
        memcpy(out->addr, a + 12, 4);
    } else {
        out->family = 6;
        memcpy(out->addr, a, 16);
    }
}

int peer_addr_from_sockaddr(const struct sockaddr *sa, struct peer_addr *out)
{
    memset(out, 0, sizeof *out);
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
        out->family = 4;
        out->port = ntohs(a->sin_port);
        memcpy(out->addr, &a->sin_addr, 4);
        return 0;
    }
    if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
        set_v6(out, a->sin6_addr.s6_addr);
        out->port = ntohs(a->sin6_port);
        return 0;
    }
    return -1;
}

/* ":PORT" digits only, 1..65535. */
static int parse_port(const char *p, size_t n, uint16_t *port)
{
    if (n < 2 || n > 6 || p[0] != ':')
        return -1;
    uint32_t v = 0;
    for (size_t i = 1; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint32_t)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int peer_addr_parse(const char *text, size_t len, struct peer_addr *out)
{
    char buf[INET6_ADDRSTRLEN];
    uint8_t a[16];
    uint16_t port = 0;
    memset(out, 0, sizeof *out);
    while (len && (*text == ' ' || *text == '\t')) {
        text++;
        len--;
    }
    while (len && (text[len - 1] == ' ' || text[len - 1] == '\t'))
        len--;
    if (len == 0)
        return -1;
    const char *host = text;
    size_t n = len;
    if (text[0] == '[') {                       /* [v6] or [v6]:port */
        const char *close = memchr(text, ']', len);
        if (!close)
            return -1;
        host = text + 1;
        n = (size_t)(close - host);
        size_t rest = len - (size_t)(close + 1 - text);
        if (rest && parse_port(close + 1, rest, &port) != 0)
            return -1;
    } else {
        const char *colon = memchr(text, ':', len);
        /* one colon: a.b.c.d:port; more: a bare IPv6 address */
        if (colon && !memchr(colon + 1, ':', len - (size_t)(colon + 1 - text))) {
            n = (size_t)(colon - text);
            if (parse_port(colon, len - n, &port) != 0)
                return -1;
        }
    }
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, host, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, a) == 1) {
        if (host != text)                       /* [a.b.c.d] is not an address */
            return -1;
        out->family = 4;
        memcpy(out->addr, a, 4);
    } else if (inet_pton(AF_INET6, buf, a) == 1) {
        if (host == text && port)               /* v6:port needs brackets */
            return -1;
        set_v6(out, a);
    } else {
        return -1;
    }
    out->port = port;
    return 0;
}

int peer_net_parse(const char *text, struct peer_net *out)
{
    const char *slash = strchr(text, '/');
    size_t n = slash ? (size_t)(slash - text) : strlen(text);
    memset(out, 0, sizeof *out);
    if (peer_addr_parse(text, n, &out->addr) != 0 || out->addr.port ||
        (n && (text[0] == '[' || text[0] == ' ' || text[n - 1] == ' ')))
        return -1;
    unsigned max = out->addr.family == 4 ? 32 : 128;
    if (!slash) {
        out->bits = (uint8_t)max;
        return 0;
    }
    char *end;
    if (slash[1] < '0' || slash[1] > '9')
        return -1;
    unsigned long bits = strtoul(slash + 1, &end, 10);
    if (*end || bits > max)
        return -1;
    out->bits = (uint8_t)bits;
    return 0;
}

int peer_net_contains(const struct peer_net *n, const struct peer_addr *a)
{
    if (n->addr.family != a->family || a->family == 0)
        return 0;
    unsigned whole = n->bits / 8u, rest = n->bits % 8u;
    if (memcmp(n->addr.addr, a->addr, whole) != 0)
        return 0;
    if (!rest)
        return 1;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (n->addr.addr[whole] & mask) == (a->addr[whole] & mask);
}
