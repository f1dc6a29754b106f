/* SPDX-License-Identifier: Apache-2.0 */
/* The token secret as an HMAC-SHA256 key. */
#include "auth/auth_key.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

/* One HMAC context keyed once and re-initialised per check: no fetch of the
 * algorithm and no key schedule per request. */
struct auth_key {
    EVP_MAC *mac;
    EVP_MAC_CTX *ctx;
};

struct auth_key *auth_key_new(const void *secret, size_t len)
{
    if (len == 0)
        return NULL;
    struct auth_key *k = OPENSSL_zalloc(sizeof *k);
    if (!k)
        return NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    k->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    k->ctx = k->mac ? EVP_MAC_CTX_new(k->mac) : NULL;
    if (!k->ctx || !EVP_MAC_init(k->ctx, secret, len, params)) {
        auth_key_free(k);
        return NULL;
    }
    return k;
}

void auth_key_free(struct auth_key *key)
{
    if (!key)
        return;
    EVP_MAC_CTX_free(key->ctx);
    EVP_MAC_free(key->mac);
    OPENSSL_free(key);
}

int auth_key_mac(struct auth_key *key, const void *msg, size_t len,
                 unsigned char out[AUTH_MAC_BYTES])
{
    size_t n = 0;
    return EVP_MAC_init(key->ctx, NULL, 0, NULL) &&
                   EVP_MAC_update(key->ctx, msg, len) &&
                   EVP_MAC_final(key->ctx, out, &n, AUTH_MAC_BYTES) && n == AUTH_MAC_BYTES
               ? 0
               : -1;
}
