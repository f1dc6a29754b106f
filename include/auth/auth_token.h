/* SPDX-License-Identifier: Apache-2.0 */
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
#include "auth/auth_token-t.h"

/* May a request for uid open its stream at Unix time now? query is the raw
 * query string (NULL for none); authorization the Authorization header
 * (NULL for none; a scheme other than Bearer is ignored). */
struct auth_verdict auth_token_check(struct auth_key *key, uint32_t uid, const char *query,
                                     const char *authorization, int64_t now);

/* HMAC-SHA256(secret, "uid:exp") as 64 lowercase hex digits and a NUL.
 * 0, or -1 if libcrypto failed. */
int auth_token_sign(struct auth_key *key, uint32_t uid, int64_t exp, char hex[65]);

#endif
