/* SPDX-License-Identifier: Apache-2.0 */
/* What a topic name may be: 1 to TOPIC_NAME_MAX bytes, each a letter,
 * a digit or one of _ - . : / (so "room:lobby", "news/eu.sport" are
 * names). None of them needs escaping in a query value, an SSE field, a
 * JSON string or an Erlang binary, and none is the ',' that separates
 * topics in a query nor the '@' that ends a topic's name in a message id
 * (msg_id.h). Pure and inline: the Erlang term checks (erl/erl_term.c)
 * and the HTTP and WebSocket paths take the same names; so does the JWT
 * check (auth/auth_jwt.c), below the core. */
#ifndef HTTPDCNODE_TOPIC_NAME_H
#define HTTPDCNODE_TOPIC_NAME_H

#include <stddef.h>

/* The longest name (core/history.h keeps a topic's name in this much). */
#define TOPIC_NAME_MAX 64

static inline int topic_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == ':' || c == '/';
}

static inline int topic_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > TOPIC_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!topic_name_char(name[i]))
            return 0;
    return 1;
}

#endif
