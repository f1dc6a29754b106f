/* SPDX-License-Identifier: Apache-2.0 */
/* A token check's verdict (auth_token.h makes it). Apart, so that the JWT
 * check (auth_jwt.c), which auth_token.c calls, gives the same verdict
 * without including its caller. */
#ifndef HTTPDCNODE_AUTH_TOKEN_T_H
#define HTTPDCNODE_AUTH_TOKEN_T_H

#include <stdint.h>

enum auth_outcome { AUTH_OK = 0, AUTH_MISSING, AUTH_EXPIRED, AUTH_BAD };

/* The longest "topics" claim, its patterns joined by commas. */
#define AUTH_TOPICS_MAX 1024

struct auth_verdict {
    enum auth_outcome outcome;
    const char *reason;         /* static, one line; NULL when AUTH_OK */
    int64_t exp;                /* AUTH_OK: the token's exp, Unix seconds */
    int has_topics;             /* AUTH_OK: the token (a JWT) has a "topics" claim: */
    char topics[AUTH_TOPICS_MAX + 1];   /* its topic names and prefixes ("room:*"),
                                           joined by commas (core/topic_join.h) */
};

/* The reasons both forms give. */
#define AUTH_REASON_OTHER_UID "Token is for another uid"
#define AUTH_REASON_FORGED "Token signature does not match"
#define AUTH_REASON_EXPIRED "Token expired: get a fresh one"
#define AUTH_REASON_MAC_FAILED "Token could not be checked (HMAC failed in the server)"

#endif
