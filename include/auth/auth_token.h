/* Signed subscriber tokens. A request for uid N carries either a JWT
 * (auth_jwt.h) as token=JWT in its query or "Authorization: Bearer JWT",
 * or the older form: exp=EXP&sig=HEX in its query, or "Authorization:
 * Bearer N.EXP.HEX", HEX being HMAC-SHA256(secret, "N:EXP") in hex, EXP
 * Unix seconds. The header wins when both are there. The check is a pure
 * function of its inputs: no evhttp, no clock. */
#ifndef HTTPDCNODE_AUTH_TOKEN_H
#define HTTPDCNODE_AUTH_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "auth/auth_key.h"

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

/* May a request for uid open its stream at Unix time now? query is the raw
 * query string (NULL for none); authorization the Authorization header
 * (NULL for none; a scheme other than Bearer is ignored). */
struct auth_verdict auth_token_check(struct auth_key *key, uint32_t uid, const char *query,
                                     const char *authorization, int64_t now);

/* HMAC-SHA256(secret, "uid:exp") as 64 lowercase hex digits and a NUL.
 * 0, or -1 if libcrypto failed. */
int auth_token_sign(struct auth_key *key, uint32_t uid, int64_t exp, char hex[65]);

#endif
