/* SPDX-License-Identifier: Apache-2.0 */
/* The token secret as an HMAC-SHA256 key, keyed once: both token formats
 * (auth_token.c, auth_jwt.c) sign with it. */
#ifndef HTTPDCNODE_AUTH_KEY_H
#define HTTPDCNODE_AUTH_KEY_H

#include <stddef.h>

#define AUTH_MAC_BYTES 32

/* The secret, ready to sign: one per thread that checks (the loop). */
struct auth_key;

/* NULL when libcrypto cannot set up HMAC-SHA256 (or len is 0). */
struct auth_key *auth_key_new(const void *secret, size_t len);
void auth_key_free(struct auth_key *key);

/* HMAC-SHA256(secret, msg) into out: 0, or -1 if libcrypto failed. */
int auth_key_mac(struct auth_key *key, const void *msg, size_t len,
                 unsigned char out[AUTH_MAC_BYTES]);

#endif
