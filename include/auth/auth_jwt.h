/* SPDX-License-Identifier: Apache-2.0 */
/* JSON Web Tokens (RFC 7519) for subscribers: HS256 only, signed with the
 * --auth-secret-file secret. The claims: "sub" the uid as a decimal string
 * (as in the path, no leading zero), "exp" Unix seconds (required, an
 * integer), "nbf" (optional, an integer); others are ignored. A pure check
 * of its inputs, as auth_token.c's: no evhttp, no clock. */
#ifndef HTTPDCNODE_AUTH_JWT_H
#define HTTPDCNODE_AUTH_JWT_H

#include <stddef.h>
#include <stdint.h>

#include "auth/auth_token-t.h"
#include "auth/auth_key.h"

/* The longest JWT looked at; a longer one is refused before it is decoded. */
#define AUTH_JWT_MAX 4096
#define AUTH_JWT_MAX_TEXT "4096"

/* May the JWT token[0..len) open uid's stream at Unix time now? The
 * outcomes and reasons are auth_token.h's: AUTH_BAD for a malformed,
 * forged or other uid's token and any algorithm but HS256, AUTH_EXPIRED
 * past exp or before nbf. */
struct auth_verdict auth_jwt_check(struct auth_key *key, uint32_t uid, const char *token,
                                   size_t len, int64_t now);

#endif
